"""Collections: a folder of item files plus its derived index.yaml, behind a small protocol."""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import pydantic

from ._atomic import atomic_write, read_bytes_nofollow
from ._errors import FileProblemError, ParseError, UnsafePathError
from ._index import INDEX_NAME, IndexFile, IndexRead, field_str, rebuild_entries
from ._locks import DEFAULT_LOCK_TIMEOUT, LOCK_NAME, collection_lock
from ._paths import check_id, has_symlink, is_safe_id, safe_join
from ._validate import validate_record
from ._yaml import dump_yaml, load_yaml, read_item_text

log = logging.getLogger("memory_plane")

R = TypeVar("R", bound=pydantic.BaseModel)


@dataclass
class Problem:
    """A finding about one file: category, path relative to the root, line, message."""

    category: str
    path: str
    line: int | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form used by `--json` reports."""
        return {"category": self.category, "path": self.path, "line": self.line, "message": self.message}

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"[{self.category}] {where}: {self.message}"


@dataclass
class ItemRead(Generic[R]):
    """One item file as read: the record, or the problem that kept it from loading."""

    path: Path
    record: R | None
    problem: FileProblemError | None = None
    stat_key: tuple[int, int, int] | None = None


def read_item(path: Path, load: Callable[[Path], R]) -> ItemRead[R]:
    """One item file as read: its record, or the problem (parse, validation, I/O) that kept it out."""
    try:
        key = stat_key(path)
        return ItemRead(path, load(path), None, key)
    except FileProblemError as exc:
        return ItemRead(path, None, exc)
    except OSError as exc:
        return ItemRead(path, None, ParseError(path, None, f"unreadable: {exc.strerror or exc}"))


def stat_key(path: Path) -> tuple[int, int, int] | None:
    """(mtime_ns, size, inode) of a file, or None if it is gone."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def fresh_items(items: list[ItemRead[Any]] | None, current: list[Path],
                load: Callable[[Path], Any]) -> list[ItemRead[Any]]:
    """The readable item files present now: reuse a parse whose file is unchanged, load the rest.

    Called again under the collection lock with its own result, so an item written between a first,
    lock-free pass and the index rewrite is never left out, and nothing unchanged is parsed twice.
    """
    known = {str(i.path): i for i in items or [] if i.record is not None}
    out: list[ItemRead[Any]] = []
    for p in current:
        prev = known.get(str(p))
        key = stat_key(p)  # taken before the load: a change during it shows as a new key next time
        if prev is not None and prev.stat_key is not None and prev.stat_key == key:
            out.append(prev)
            continue
        try:
            out.append(ItemRead(p, load(p), None, key))
        except (FileProblemError, OSError):
            continue
    return out


def same_path(a: Path | str, b: Path | str) -> bool:
    """Whether two paths name the same place (string compare first: both usually come from one folder)."""
    sa, sb = str(a), str(b)
    return sa == sb or os.path.normpath(sa) == os.path.normpath(sb)


def entries_by_file(pairs: list[tuple[Path, Any]], entry_for: Callable[[Any], dict[str, Any]],
                    expected: Callable[[Any], Path], rel: Callable[[Path], str]) -> list[dict[str, Any]]:
    """One index entry per id, with the real path of its file.

    A file whose name is not its id (a copy, a rename) is indexed under its own name; when two files
    hold the same id, the one named after it is offered and the other is left to verify to report,
    so an item never shows twice in the prompt or a listing.
    """
    chosen: dict[str, tuple[bool, Path, Any]] = {}
    for path, rec in pairs:
        try:
            canonical = same_path(expected(rec), path)
        except ValueError:
            canonical = False
        prev = chosen.get(rec.id)
        if prev is None or (canonical and not prev[0]):
            chosen[rec.id] = (canonical, path, rec)
    out = []
    for _, path, rec in chosen.values():
        entry = dict(entry_for(rec))
        entry["path"] = rel(path)
        out.append(entry)
    return out


@runtime_checkable
class Collection(Protocol):
    """What lifecycle verify and GC need from any store of memory files.

    Implementations must make ``rebuild_index`` idempotent (two calls give the same file)
    and must never follow symlinks or yield paths outside ``root``.
    """

    name: str
    root: Path

    def iter_items(self) -> Iterator[ItemRead[Any]]:
        """Yield every item file with its parsed record or its problem."""
        ...

    def rebuild_index(self) -> bool:
        """Rewrite the derived index from the item files; return True if it changed.

        Implementations may accept ``items=`` (ItemReads just parsed) to avoid reading unchanged files
        twice; they must still include whatever appeared since, so the rebuild loses nothing.
        """
        ...

    def referenced_files(self) -> Iterator[Path]:
        """Yield files the items point at (evidence, artifacts) that must exist."""
        ...


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

    Indexes are derived and people and faults damage them (issue 27): random bytes, a torn line, a line
    removed by hand, a file renamed or added beside it. Lines that do not parse, lines naming files that
    are gone, and item files no line names (that a rebuild would index) all make it doubtful.
    """
    if not read.exists:
        return "missing"
    if read.problems:
        return f"{len(read.problems)} line(s) unreadable (first: line {read.problems[0].line})"
    key = str(coll.index.path)
    stamp = _stamp(coll)
    with _checked_guard:
        if _checked.get(key) == stamp:
            return None
    names = getattr(coll, "item_names", None)
    if names is not None:
        present = set(names())
        named = {field_str(e.get("path")) for e in read.entries}
        ids = {e.get("id") for e in read.entries}
        gone = [n for n in named if n and n not in present]
        if gone:
            return f"{len(gone)} line(s) name files that are not there (first: {sorted(gone)[0]})"
        fresh = False
        for rel_path in present - named:
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
            if rec is not None and getattr(rec, "id", None) not in ids and getattr(rec, "status", "") != "recording":
                return f"{rel_path} is not in it"
        if fresh:
            return None  # checked again on the next read, once the writer is done
    with _checked_guard:
        if len(_checked) > 1000:
            _checked.clear()
        _checked[key] = stamp
    return None


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


def indexed_entries(coll: _Indexed) -> list[dict[str, Any]]:
    """A collection's index entries, checked against the item files: an index that is missing, does not
    parse or disagrees with them is rebuilt (or, when it cannot be written, read around with a warning)."""
    if has_symlink(coll.root, coll.dir):
        return []  # a symlinked folder is never read
    read = coll.index.read()
    why = index_doubt(coll, read)
    if why is None:
        return read.entries
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


def is_item_file(entry: os.DirEntry[str]) -> bool:
    """Tell whether a directory entry is an item file (regular .yaml, not the index, not hidden)."""
    return (
        entry.name.endswith(".yaml")
        and entry.name != INDEX_NAME
        and not entry.name.startswith(".")
        and entry.is_file(follow_symlinks=False)
    )


class YamlCollection(Generic[R]):
    """A folder of ``<id>.yaml`` items with a one-line-per-item index.yaml and one lock."""

    def __init__(
        self,
        root: Path,
        rel_dir: str,
        model: type[R],
        *,
        index_entry: Callable[[R], dict[str, Any]] | None = None,
        sort_key: Callable[[Mapping[str, Any]], Any] | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        self.root = Path(root)
        self.name = rel_dir
        self.rel_dir = rel_dir
        self.model = model
        # The folder itself may have been replaced by a symlink: the collection then reads nothing and
        # refuses writes (item_path checks every component) instead of failing the whole plane.
        self.dir = safe_join(self.root, rel_dir, follow_symlinks=True)
        self.index = IndexFile(self.dir / INDEX_NAME)
        self._index_entry = index_entry
        self._sort_key = sort_key
        self.lock_timeout = lock_timeout

    # -- paths and locks --------------------------------------------------

    def lock(self):  # type: ignore[no-untyped-def]
        """Return the context manager holding this collection's lock (refused in a symlinked folder)."""
        if self.linked():
            raise UnsafePathError(self.rel_dir, "the collection folder is a symlink; nothing is written there")
        return collection_lock(self.dir, self.lock_timeout)

    @property
    def lock_path(self) -> Path:
        """Path of this collection's lock file."""
        return self.dir / LOCK_NAME

    def item_path(self, item_id: str) -> Path:
        """Path of an item file; refuses ids that are not safe."""
        return safe_join(self.root, self.rel_dir, f"{check_id(item_id)}.yaml")

    def rel(self, path: Path) -> str:
        """Path relative to the memory root, for reports and hits."""
        try:
            return str(Path(path).relative_to(self.root))
        except ValueError:
            return str(path)

    # -- reading ----------------------------------------------------------

    def load_path(self, path: Path) -> R:
        """Load and validate one item file; ParseError/ValidationError on bad content."""
        text = read_item_text(path)
        data = load_yaml(text, path)
        return validate_record(self.model, data, path, text)

    def expected_path(self, record: R) -> Path:
        """Where an item file named after its id lives (a record's id is already known to be safe)."""
        return self.dir / f"{record.id}.yaml"  # type: ignore[attr-defined]

    def path_of(self, item_id: str) -> Path:
        """The file of an item: ``<id>.yaml``, or the file the index names for it (renamed by a person)."""
        path = self.item_path(item_id)
        if os.path.lexists(path):
            return path
        current = self.index.read()
        i = current.position(item_id)  # O(1): this runs for every new item
        name = field_str(current.entries[i].get("path")) if i is not None else None
        if name and name != path.name:
            try:
                other = safe_join(self.root, self.rel_dir, name)
            except ValueError:
                return path
            if other.parent == path.parent and os.path.lexists(other):
                return other
        return path

    def get(self, item_id: str) -> R | None:
        """Return an item by id, or None when the file does not exist."""
        try:
            return self.load_path(self.path_of(item_id))
        except FileNotFoundError:
            return None

    def find(self, item_id: str) -> R | None:
        """An item by the id inside it: its own file, the file its index line names, or any file of the folder
        that holds that id (renamed by a person, not yet indexed). Slower than get on a miss: for people."""
        item = self.get(item_id)
        if item is not None:
            return item
        path = self.renamed_path(item_id)
        if path is None:
            return None
        try:
            return self.load_path(path)
        except FileNotFoundError:
            return None

    def renamed_path(self, item_id: str) -> Path | None:
        """The item file of the folder whose ``id:`` line is this id (a scan of the folder: a miss only)."""
        if self.linked() or not is_safe_id(item_id):
            return None
        pat = re.compile(rb"^id:\s*[\"']?" + re.escape(item_id.encode()) + rb"[\"']?\s*(?:#.*)?$", re.MULTILINE)
        try:
            with os.scandir(self.dir) as it:
                names = sorted(e.path for e in it if is_item_file(e))
        except FileNotFoundError:
            return None
        for name in names:
            try:
                head = read_bytes_nofollow(name, 4096)
            except OSError:
                continue
            if pat.search(head):
                return Path(name)
        return None

    def linked(self) -> bool:
        """Whether the collection folder is (under) a symlink: never read nor written then."""
        return has_symlink(self.root, self.dir)

    def entries(self) -> list[dict[str, Any]]:
        """Index entries (cached by file stat); rebuilt from items if the index is missing."""
        return indexed_entries(self)

    def iter_items(self) -> Iterator[ItemRead[R]]:
        """Yield every item file (symlinks skipped) with its record or problem."""
        if self.linked():
            return
        try:
            it = os.scandir(self.dir)
        except FileNotFoundError:
            return
        with it:
            names = sorted((e for e in it if is_item_file(e)), key=lambda e: e.name)
        for entry in names:
            yield read_item(Path(entry.path), self.load_path)

    def symlinks(self) -> list[Path]:
        """Symlinks found in the collection folder (never followed, reported by verify)."""
        if self.linked():
            return [self.dir]
        try:
            with os.scandir(self.dir) as it:
                return [Path(e.path) for e in it if stat.S_ISLNK(e.stat(follow_symlinks=False).st_mode)]
        except FileNotFoundError:
            return []

    def referenced_files(self) -> Iterator[Path]:
        """Item files in a plain collection reference nothing else on disk."""
        return iter(())

    # -- writing ----------------------------------------------------------

    def entry_for(self, record: R) -> dict[str, Any]:
        """The index line of a record."""
        if self._index_entry is not None:
            entry = self._index_entry(record)
        else:
            data = record.model_dump(mode="json", exclude_none=True)
            entry = {k: data[k] for k in ("id", "type", "status", "title", "expires_at") if k in data}
        entry.setdefault("path", f"{record.id}.yaml")  # type: ignore[attr-defined]
        return entry

    def _dump(self, record: R) -> dict[str, Any]:
        to_yaml = getattr(record, "to_yaml_dict", None)
        return to_yaml() if to_yaml else record.model_dump(mode="json", exclude_none=True)

    def save(self, record: R) -> Path:
        """Write an item file then its index line, under the collection lock."""
        with self.lock():
            return self._save_locked(record)

    def _save_locked(self, record: R) -> Path:
        path = self.path_of(record.id)  # type: ignore[attr-defined]
        try:
            old_text: str | None = read_bytes_nofollow(path).decode("utf-8", "replace")
        except FileNotFoundError:
            old_text = None
        with index_writes(self):
            # Item first, index after: a crash in between leaves an orphan the next verify indexes.
            atomic_write(path, dump_yaml(self._dump(record), old_text))
            entry = self.entry_for(record)
            entry["path"] = path.name
            self.index.upsert(entry)
        return path

    def update(self, item_id: str, change: Callable[[R | None], R | None]) -> R | None:
        """Read-modify-write one item under the lock; ``change`` gets None for a new item."""
        with self.lock():
            current = self.get(item_id)
            new = change(current)
            if new is not None:
                self._save_locked(new)
            return new

    def update_many(self, changes: dict[str, Callable[[R], R | None]]) -> int:
        """Apply changes to many items under one lock, then rewrite the index once; return items written."""
        written = 0
        changed: dict[str, dict[str, Any]] = {}
        with self.lock(), index_writes(self):
            for item_id, change in changes.items():
                cur = self.get(item_id)
                if cur is None:
                    continue
                new = change(cur)
                if new is None:
                    continue
                path = self.path_of(item_id)
                old_text = read_bytes_nofollow(path).decode("utf-8", "replace")
                atomic_write(path, dump_yaml(self._dump(new), old_text))
                changed[item_id] = {**self.entry_for(new), "path": path.name}
                written += 1
            if changed:
                # One index rewrite for the batch: the changed lines replaced, every other line kept.
                current = self.index.read()
                self.index.write([changed.pop(e["id"], e) if e["id"] in changed else e for e in current.entries]
                                 + list(changed.values()))
        return written

    def delete(self, item_id: str) -> bool:
        """Remove an item's index line, then its file; return True if it existed."""
        with self.lock(), index_writes(self):
            path = self.path_of(item_id)
            self.index.remove([item_id])
            try:
                os.unlink(path)
            except FileNotFoundError:
                return False
            return True

    def item_names(self) -> list[str]:
        """Names of the item files present now, relative to the folder (the index check: no Path objects)."""
        try:
            with os.scandir(self.dir) as it:
                return [e.name for e in it if is_item_file(e)]
        except FileNotFoundError:
            return []

    def item_paths(self) -> list[Path]:
        """Paths of the item files present now (symlinks excluded)."""
        try:
            with os.scandir(self.dir) as it:
                return sorted((Path(e.path) for e in it if is_item_file(e)), key=lambda p: p.name)
        except FileNotFoundError:
            return []

    def rebuild_index(self, items: list[ItemRead[R]] | None = None) -> bool:
        """Rewrite index.yaml from the item files (reusing unchanged parses in ``items``); True if it changed."""
        if self.linked():
            return False

        known = items

        def derive() -> list[dict[str, Any]]:
            nonlocal known
            known = fresh_items(known, self.item_paths(), self.load_path)
            pairs = [(i.path, i.record) for i in known]
            return rebuild_entries(entries_by_file(pairs, self.entry_for, self.expected_path, lambda p: p.name),
                                   self._sort_key)

        def same(entries: list[dict[str, Any]]) -> bool:
            # Same entries in another order (appends come in creation order) is not a change.
            current = self.index.read()
            return current.exists and not current.problems and rebuild_entries(
                current.entries, self._sort_key) == entries

        # Checked without the lock first: an index that is right is never rewritten, or even locked
        # (verify on a read-only tree answers instead of failing on the lock file).
        if same(derive()):
            return False
        with self.lock():
            entries = derive()
            if same(entries):
                return False
            self.index.write(entries)
            return True

    def write_raw(self, item_id: str, text: str) -> None:
        """Write an item file's text as given (tests, imports); the index is not touched."""
        atomic_write(self.item_path(item_id), text)
