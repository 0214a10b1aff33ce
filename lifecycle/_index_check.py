"""Whether an index can be trusted as it is, and reading a collection's entries through that check."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from ._index import IndexFile, IndexRead, field_str
from ._item_read import ItemRead, stat_key
from ._paths import has_symlink

log = logging.getLogger("memory_plane")


class _Indexed(Protocol):
    """A collection with a one-line-per-item index (what indexed_entries needs)."""

    root: Path
    dir: Path
    index: IndexFile

    def rebuild_index(self) -> bool:
        """Rewrite the index from the item files."""
        ...

    def iter_items(self) -> Iterator[ItemRead[Any]]:
        """Yield every item file with its record or problem."""
        ...

    def entry_for(self, record: Any) -> dict[str, Any]:
        """The index entry of one record."""
        ...


# index path -> (index stat, folder mtimes) when its lines were last found to match the item files:
# the check costs a folder listing, so it runs again only when the index or a folder changed.
_checked: dict[str, tuple[Any, ...]] = {}
_checked_guard = threading.Lock()
WRITE_GRACE_S = 2.0


def _stamp(coll: _Indexed) -> tuple[Any, ...]:
    dirs = coll.stamp_dirs() if hasattr(coll, "stamp_dirs") else [coll.dir]
    return (stat_key(coll.index.path), *(stat_key(d) for d in dirs))


def index_doubt(coll: _Indexed, read: IndexRead) -> str | None:
    """Why an index cannot be trusted as it is (None when its lines match the item files).

    Indexes are derived and people and faults damage them: random bytes, a torn line, a line
    removed by hand, a file renamed or added beside it. Lines that do not parse, lines naming files that
    are gone, and item files no line names (that a rebuild would index) all make it doubtful.
    """
    if not read.exists:
        return "missing"
    if read.problems:
        return f"{len(read.problems)} line(s) unreadable (first: line {read.problems[0].line})"
    entries = read.entries
    return paths_doubt(coll, lambda: [e.get("path") for e in entries], lambda: {e.get("id") for e in entries})


def paths_doubt(coll: _Indexed, paths: Callable[[], list[Any]], ids: Callable[[], set[Any]]) -> str | None:
    """``index_doubt`` of an index that parses, given the ``path`` field of each of its lines and the set of their
    ids (each asked only when the folder must be listed: the index or a folder changed since it last matched)."""
    key = str(coll.index.path)
    stamp = _stamp(coll)
    with _checked_guard:
        if _checked.get(key) == stamp:
            return None
    names = getattr(coll, "item_names", None)
    if names is not None:
        present = set(names())
        # Set operations in C over the 10,000 lines of an episode index (a loop per line cost a fresh process
        # 10 ms); a path that is not a string counts as field_str reads it, as it always did.
        listed = paths()
        named: set[str | None] = set(listed) if not set(map(type, listed)) - {str} else {field_str(p) for p in listed}
        gone = [str(n) for n in named - present if n]
        if gone:
            return f"{len(gone)} line(s) name files that are not there (first: {sorted(gone)[0]})"
        fresh = False
        unnamed = present - named
        known_ids = ids() if unnamed else set()
        for rel_path in unnamed:
            path = coll.dir / rel_path
            try:
                if time.time() - os.stat(path).st_mtime < WRITE_GRACE_S:
                    # A writer puts the file first and its index line right after, under its lock: a file
                    # this new is that writer's, not a fault (and a rebuild now would parse the whole folder).
                    fresh = True
                    continue
                rec = coll.load_path(path) if hasattr(coll, "load_path") else None
            except Exception:  # an unreadable (or vanished) file is verify's finding, not the index's
                continue
            if (rec is not None and getattr(rec, "id", None) not in known_ids
                    and getattr(rec, "status", "") != "recording"):
                return f"{rel_path} is not in it"
        if fresh:
            return None  # checked again on the next read, once the writer is done
    with _checked_guard:
        if len(_checked) > 1000:
            _checked.clear()
        _checked[key] = stamp
    return None


def index_stamp(coll: Any) -> tuple[Any, ...]:
    """What changes when a collection's index or its item folders change (the index file's and each folder's
    stat): an index found to match its item files matches them as long as this stays."""
    return _stamp(coll)


@contextmanager
def index_writes(coll: Any) -> Iterator[None]:
    """Around a writer's own item-and-index change (under its lock): an index known to match its files
    before still matches after, so the next reader does not list the folder again to check it."""
    key, before = str(coll.index.path), _stamp(coll)
    yield
    with _checked_guard:
        if _checked.get(key) == before:
            _checked[key] = _stamp(coll)


def _mark_checked(coll: Any) -> None:
    with _checked_guard:
        _checked[str(coll.index.path)] = _stamp(coll)


def mark_matching(coll: Any) -> None:
    """Say that a collection's index was just found to match its item files (a rebuild compared them): readers
    trust it until the index or a folder changes."""
    _mark_checked(coll)


def known_matching(coll: Any) -> bool:
    """Whether a collection's index is known to match its item files, and neither changed since."""
    with _checked_guard:
        known = _checked.get(str(coll.index.path))
    return known is not None and known == _stamp(coll)


def indexed_entries(coll: _Indexed, folder_checked: bool = False) -> list[dict[str, Any]]:
    """A collection's index entries, checked against the item files: an index that is missing, does not
    parse or disagrees with them is rebuilt (or, when it cannot be written, read around with a warning).
    ``folder_checked``: the caller found no symlink on the way to the collection's folder just now."""
    if not folder_checked and has_symlink(coll.root, coll.dir):
        return []  # a symlinked folder is never read
    read = coll.index.read()
    why = index_doubt(coll, read)
    if why is None:
        return read.entries
    if getattr(coll, "read_only", False):
        # A reader that promised not to write (a read-only MCP server) answers from the item files instead.
        return _read_around(coll)
    try:
        if coll.rebuild_index() and read.exists:
            log.warning("%s: %s; rebuilt from the item files", coll.index.path, why)
    except OSError as exc:
        # A read-only tree still answers: the entries come straight from the item files.
        entries = [coll.entry_for(i.record) for i in coll.iter_items() if i.record is not None]
        log.warning("%s: %s; cannot rebuild it (%s): %d entries read from the item files instead of %d lines",
                    coll.index.path, why, exc.strerror or exc, len(entries), len(read.entries))
        return entries
    read = coll.index.read()
    if not read.problems:
        _mark_checked(coll)  # just rebuilt from the files
    return read.entries



# index path -> (stamp, entries) of a read-only reader's entries read from the item files: read again only when the
# index or a folder changed, as an index is.
_around: dict[str, tuple[tuple[Any, ...], list[dict[str, Any]]]] = {}


def _read_around(coll: _Indexed) -> list[dict[str, Any]]:
    """A stale index's entries from the item files, without writing anything (memoised while nothing changes)."""
    key, stamp = str(coll.index.path), _stamp(coll)
    with _checked_guard:
        hit = _around.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    entries = [coll.entry_for(i.record) for i in coll.iter_items() if i.record is not None]
    with _checked_guard:
        _around[key] = (stamp, entries)
    return entries
