"""index.yaml files: one JSON-syntax flow mapping per line, derived from item files.

A reader parses each line as JSON (fast), falls back to YAML for a line a person edited,
and to a full YAML parse when entries span several lines. Appends add one line; a forget
blanks its entries' lines in place (``blank_out``: each becomes a comment line of spaces as
long as it was, so no other line moves); any other change rewrites the file atomically,
which leaves the blank lines out.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._atomic import append_line, atomic_write, overwrite_in_place, read_bytes_nofollow
from ._collector import collector_paused
from ._errors import ABSENT, FileProblemError, ParseError
from ._index_lines import (
    blank_line,
    entry_cuts,
    find_lines,
    header_end,
    hinted_line,
    leading_id,
    valid_entry,
    without_comment_lines,
)
from ._jsonl import dumps_compact
from ._yaml import decode_utf8, load_yaml

INDEX_NAME = "index.yaml"
INDEX_HEADER = (
    "# Derived from the item files in this folder: `memplane lifecycle verify` rebuilds it.\n"
    "# One entry per line, so `grep` shows whole entries.\n"
)
_LIST_KEYS = ("entries", "items", "episodes", "memories", "chunks")


def format_entry(entry: Mapping[str, Any]) -> str:
    """Render one index entry as a single YAML line in JSON syntax."""
    return "- " + dumps_compact(dict(entry), separators=(", ", ": "))


@dataclass
class IndexRead:
    """Entries of an index file plus the problems met while reading it."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    problems: list[FileProblemError] = field(default_factory=list)
    exists: bool = True
    _positions: dict[str, int] | None = field(default=None, repr=False, compare=False)

    def position(self, item_id: str) -> int | None:
        """Index of the (last) entry with this id, via a map built once and kept in step with appends."""
        if self._positions is None or len(self._positions) > len(self.entries):
            self._positions = {e["id"]: i for i, e in enumerate(self.entries)}
        elif self.entries and len(self._positions) < len(self.entries):
            # Entries appended since the map was built: add only those (twins keep the last position).
            known = max(self._positions.values(), default=-1)
            for i in range(known + 1, len(self.entries)):
                self._positions[self.entries[i]["id"]] = i
        return self._positions.get(item_id)


# Index lines are hand-editable, so any field may hold any JSON/YAML value. Readers of entries
# use these to get the type they need; a value of the wrong shape counts as absent instead of
# failing the caller (a retrieve, a listing) for every other entry.

def field_str(value: Any) -> str | None:
    """A scalar entry field as text; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    return None


def field_text(value: Any) -> str:
    """A text entry field (or a list of words) as one string; "" when it holds neither."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return " ".join(t for t in map(field_str, value) if t)
    return field_str(value) or ""


def field_words(value: Any) -> list[str]:
    """A list-of-words entry field (tags, entities) as strings; a single word becomes a list."""
    if isinstance(value, (list, tuple)):
        return [t for t in map(field_str, value) if t]
    word = field_str(value)
    return [word] if word else []


def field_num(value: Any, default: float) -> float:
    """A finite number from an entry field, else the default."""
    if value is None or isinstance(value, bool):
        return default  # (an absent field is the common case: no exception raised and caught for it)
    try:
        x = float(value)
    except (TypeError, ValueError):
        return default
    return x if math.isfinite(x) else default


def _bulk(text: str) -> list[dict[str, Any]] | None:
    """Every entry line parsed in one json.loads (C speed); None if any line needs the slow path."""
    lines = [ln for ln in text.split("\n") if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines or not all(ln.startswith("- {") and ln.endswith("}") for ln in lines):
        return None
    try:
        data = json.loads("[" + ",".join(ln[2:] for ln in lines) + "]")
    except ValueError:
        return None
    return data if all(valid_entry(e) for e in data) else None


def _bulk_bytes(data: bytes) -> list[dict[str, Any]] | None:
    """The entries of a well-formed index file (every line after the header of comments is ``- {...}``) from its
    bytes, in one json.loads; None for any other shape, or bytes that are not UTF-8 (the text is parsed then)."""
    start = header_end(data)
    if start is None:
        return None
    data = without_comment_lines(data, start)  # entries blanked in place by a forget
    # The lines become one array by a replace in C over the bytes, instead of a split, a check and a join per
    # line over the decoded text: a fresh process spent a third of a 10,000-line index's read on those
    # copies. UTF-8 never has these ASCII bytes inside a character, so this is the array ``_bulk`` makes of
    # the text. A newline left before the trailing ones means another shape: ``_bulk`` and the line loop
    # decide. (A comment ending in "}" is joined to the first entry, which then does not start at ``start``.)
    joined = data.replace(b"}\n- {", b"},{")
    end = joined.find(b"\n", start)
    if end < 0:
        end = len(joined)
    if not (joined.startswith(b"- {", start) and joined.count(b"\n", end) == len(joined) - end
            and joined.endswith(b"}", start, end)):
        return None
    try:
        data[:start].decode("utf-8")  # the header is text too: not UTF-8, the whole file is refused (as before)
        entries = json.loads(b"".join((b"[", memoryview(joined)[start + 2:end], b"]")).decode("utf-8"))
    except ValueError:  # not UTF-8 (UnicodeDecodeError) or a line that is not JSON
        return None
    return entries if all(map(valid_entry, entries)) else None


def parse_index(text: str, path: str | Path | None = None) -> IndexRead:
    """Parse index text line by line, with a YAML fallback for hand-edited lines."""
    bulk = _bulk(text)
    if bulk is not None:
        return IndexRead(entries=bulk)
    out = IndexRead()
    needs_full_parse = False
    for lineno, line in enumerate(text.split("\n"), start=1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("- {"):
            try:
                obj = json.loads(s[2:])
            except ValueError:
                obj = None
            if valid_entry(obj):
                out.entries.append(obj)
                continue
        if s.startswith("- "):
            try:
                parsed = load_yaml(s, path)
            except ParseError as exc:
                out.problems.append(ParseError(path, lineno, exc.message))
                continue
            if isinstance(parsed, list) and len(parsed) == 1 and valid_entry(parsed[0]):
                out.entries.append(parsed[0])
                continue
            if isinstance(parsed, list) and len(parsed) == 1 and isinstance(parsed[0], dict):
                # A block-style entry whose further keys are on the following lines.
                needs_full_parse = True
                break
            out.problems.append(ParseError(path, lineno, "index entry needs an 'id'"))
            continue
        needs_full_parse = True
        break
    if needs_full_parse:
        return _parse_full(text, path)
    return out


def _parse_full(text: str, path: str | Path | None) -> IndexRead:
    out = IndexRead()
    try:
        data = load_yaml(text, path)
    except ParseError as exc:
        out.problems.append(exc)
        # Keep what the line reader can still take, so one bad edit loses nothing else.
        for line in text.split("\n"):
            s = line.strip()
            if s.startswith("- {"):
                try:
                    obj = json.loads(s[2:])
                except ValueError:
                    continue
                if valid_entry(obj):
                    out.entries.append(obj)
        return out
    if isinstance(data, dict):
        seq = next((data[k] for k in _LIST_KEYS if isinstance(data.get(k), list)), None)
        data = seq if seq is not None else []
    if data is None:
        return out
    if not isinstance(data, list):
        out.problems.append(ParseError(path, 1, "index must be a list of entries"))
        return out
    for i, obj in enumerate(data):
        if valid_entry(obj):
            out.entries.append(obj)
        else:
            out.problems.append(ParseError(path, None, f"entry {i + 1} is not a mapping with an 'id'"))
    return out


_cache: dict[str, tuple[tuple[int, int, int], IndexRead]] = {}
_cache_guard = threading.Lock()


def forget_loaded_indexes() -> None:
    """Drop the process's parsed copies of every index file, so the next read loads from disk (benchmarks)."""
    with _cache_guard:
        _cache.clear()


def _stat_key(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class IndexFile:
    """One collection's index.yaml: cached reads, one-line appends, atomic rewrites."""

    def __init__(self, path: str | Path, root: Path | None = None) -> None:
        self.path = Path(path)
        self.root = root
        """The memory root: writes open every folder below it without following a link (None: plain paths)."""
        self._key = os.path.normpath(self.path)
        self.appended: tuple[str, int] | None = None
        """(id, where its line starts) of the entry this object last appended, until the file is written otherwise."""

    def read(self) -> IndexRead:
        """Return the parsed entries (cached until the file's stat changes); treat as read-only."""
        try:
            st = os.stat(self.path)
        except ABSENT:
            return IndexRead(exists=False)
        key = _stat_key(st)
        with _cache_guard:
            hit = _cache.get(self._key)
        if hit and hit[0] == key:
            return hit[1]
        try:
            data = read_bytes_nofollow(self.path)
            with collector_paused():  # one json.loads: thousands of dicts, none in a cycle
                bulk = _bulk_bytes(data)
            text = decode_utf8(data, self.path) if bulk is None else ""
        except ParseError as exc:
            return IndexRead(problems=[exc])
        except FileNotFoundError:
            return IndexRead(exists=False)
        # The line-by-line path (a hand-edited line) runs with the collector on: its YAML parser leaves a
        # cycle per line parsed.
        result = IndexRead(entries=bulk) if bulk is not None else parse_index(text, self.path)
        with _cache_guard:
            _cache[self._key] = (key, result)
        return result

    def version_of(self, entries: list[dict[str, Any]]) -> tuple[int, int, int] | None:
        """The (mtime, size, inode) of the file version whose parse ``read`` returned as ``entries`` (None: that list
        is no longer this process's parse of the file)."""
        with _cache_guard:
            hit = _cache.get(self._key)
        return hit[0] if hit is not None and hit[1].entries is entries else None

    def append(self, entry: Mapping[str, Any]) -> None:
        """Append one entry line (caller holds the collection lock)."""
        try:
            before = _stat_key(os.stat(self.path))
        except ABSENT:
            before = None
            atomic_write(self.path, INDEX_HEADER, root=self.root)
        line = format_entry(entry)
        append_line(self.path, line, root=self.root)
        try:
            self.appended = (str(entry.get("id")), os.stat(self.path).st_size - len(line.encode("utf-8")) - 1)
        except ABSENT:
            self.appended = None
        # Keep the warm cache warm: a pure append extends the cached list instead of a re-parse.
        with _cache_guard:
            hit = _cache.get(self._key)
            if hit and before is not None and hit[0] == before and not hit[1].problems:
                try:
                    after = _stat_key(os.stat(self.path))
                except ABSENT:
                    return
                hit[1].entries.append(dict(entry))
                _cache[self._key] = (after, hit[1])

    def write(self, entries: Iterable[Mapping[str, Any]], *, kept: Mapping[int, str] | None = None) -> None:
        """Rewrite the whole index atomically (caller holds the collection lock). ``kept``: the line on disk of
        each entry object left as it was read (``_lines``), written again as it is instead of formatted."""
        kept = kept or {}
        self.appended = None
        body = "".join((kept.get(id(e)) or format_entry(e)) + "\n" for e in entries)
        atomic_write(self.path, INDEX_HEADER + body, root=self.root)
        # The stat key alone cannot tell two rewrites apart when the filesystem reuses the inode within one
        # mtime tick and the size is the same (a count going from 1 to 2): this process's own rewrite
        # always drops its cached parse.
        with _cache_guard:
            _cache.pop(self._key, None)

    def write_chunks(self, chunks: Iterable[bytes]) -> None:
        """Rewrite the whole index atomically from pieces of its bytes, header included (caller holds the lock): a
        rebuild streams a large index out instead of holding it whole."""
        self.appended = None
        atomic_write(self.path, chunks, root=self.root)
        with _cache_guard:
            _cache.pop(self._key, None)

    def _lines(self, current: IndexRead) -> dict[int, str]:
        """Each entry object of ``current`` (read in one piece) with its line as the file holds it, so a
        rewrite copies the lines it does not change instead of formatting every entry again; empty when the
        file is not line for line those entries (the caller formats them all)."""
        if current.problems or not current.entries:
            return {}
        try:
            text = read_bytes_nofollow(self.path).decode("utf-8")
        except (OSError, ValueError, FileProblemError):
            return {}
        lines = [ln for ln in text.split("\n") if ln.startswith("- {")]
        if len(lines) != len(current.entries):
            return {}
        out: dict[int, str] = {}
        for ln, e in zip(lines, current.entries):
            if not ln.startswith(f'- {{"id": "{e["id"]}"'):  # an id that needs escapes: formatted instead
                return {}  # not the line of this entry: the file changed since it was read
            out[id(e)] = ln
        return out

    def upsert(self, entry: Mapping[str, Any]) -> None:
        """Replace the entry with the same id, or append it (caller holds the lock)."""
        current = self.read()
        if not current.exists:
            self.append(entry)
            return
        new_line = format_entry(entry)
        # O(1) lookup: committing a new episode into a 10,000-line index must not scan it.
        i = current.position(str(entry.get("id")))
        if i is not None:
            if format_entry(current.entries[i]) == new_line and not current.problems:
                return
            entries = list(current.entries)
            entries[i] = dict(entry)
            # Drop twins a hand edit may have left, so there is one line per item.
            entries = [e for j, e in enumerate(entries) if j == i or e.get("id") != entry.get("id")]
            self.write(entries, kept=self._lines(current))
            return
        if current.problems:
            self.write([*current.entries, dict(entry)])
        else:
            self.append(entry)

    def remove(self, ids: Iterable[str]) -> int:
        """Remove entries by id; return how many went (caller holds the lock)."""
        drop = set(ids)
        spliced = self._splice_out(drop)
        if spliced is not None:
            return spliced
        current = self.read()
        kept = [e for e in current.entries if e.get("id") not in drop]
        removed = len(current.entries) - len(kept)
        if removed:
            self.write(kept, kept=self._lines(current))
        return removed

    def _splice_out(self, drop: set[str]) -> int | None:
        """``remove`` on the file's bytes: the lines of these ids cut out and the rest written as it is, parsing
        only the lines that hold one of the ids (a forget at 100,000 memories spent most of its time parsing
        and formatting lines it does not change). None when the file is not one entry per line after its
        header, or a line holding an id does not parse: the caller reads it whole."""
        try:
            data = read_bytes_nofollow(self.path)
        except FileNotFoundError:
            return 0
        start = header_end(data)
        if start is None or data.find(b"\n#", start - 1 if start else 0) >= 0:
            return None  # (a file with blanked lines is read whole and written without them)
        # One entry per line: once each line break between two entries is joined, none is left but the
        # trailing ones (what _bulk_bytes checks), so a line holding an id is that entry's whole line.
        joined_breaks = data.count(b"}\n- {", start)
        body_end = len(data)
        while body_end > start and data[body_end - 1] == 0x0A:  # the trailing line breaks (no copy of the file)
            body_end -= 1
        if data.count(b"\n", start, body_end) != joined_breaks or not data.endswith(b"}", start, body_end):
            return None
        if not all(i.isascii() and json.dumps(i) == f'"{i}"' for i in drop):
            return None  # an id written with escapes is not its own bytes in the file
        cuts = entry_cuts(data, start, body_end, drop)
        if cuts is None:
            return None
        if not cuts:
            return 0
        cuts = sorted(set(cuts))
        view = memoryview(data)
        pieces, at = [], 0
        for begin, end in cuts:
            pieces.append(view[at:begin])
            at = end
        pieces.append(view[at:])
        self.appended = None
        atomic_write(self.path, b"".join(pieces), root=self.root)
        with _cache_guard:
            _cache.pop(self._key, None)
        return len(cuts)

    def blank_out(self, ids: Iterable[str], hints: Mapping[str, int] | None = None, *,
                  before: Callable[[list[tuple[int, bytes]]], None] | None = None) -> int:
        """Remove entries by id without rewriting the file: each of their lines overwritten in place with a comment
        line of spaces as long as it was (``blank_line``), then the file fsynced; how many lines went (the caller
        holds the lock). ``hints``: where an id's line was last seen to start; a hint is used only when the line
        there is that entry's whole line, else the file is searched for it. A file that is not one entry per line
        where an id appears is rewritten without the entries instead (``remove``).

        Why in place: the file's other lines, and where each starts, stay as they are, so a forget costs the lines
        it removes and not the size of the index; readers key their parsed copies on the file's mtime, which the
        write moves on. A write torn by a crash leaves a line that does not parse: the index is then doubtful and
        rebuilt from the item files (the tombstone written first keeps the forgotten item out of that rebuild).
        ``before``: told (start, bytes) of each line just before the lines are blanked (what keeps a derived copy
        of them takes their text out first)."""
        drop = set(ids)
        hints = hints or {}
        try:
            spans = self._spans(drop, hints)
        except FileNotFoundError:
            return 0
        except OSError:
            spans = None  # a link or something else where the file belongs: ``remove`` says what is there
        if spans is None:
            return self.remove(drop)
        if spans:
            self.appended = None
            if before is not None:
                before(self._span_bytes(spans))
            overwrite_in_place(self.path, [(at, blank_line(n)) for at, n in spans], root=self.root)
            with _cache_guard:
                _cache.pop(self._key, None)
        return len(spans)

    def _span_bytes(self, spans: list[tuple[int, int]]) -> list[tuple[int, bytes]]:
        """(start, the bytes) of each line of ``spans`` as the file holds them now."""
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        try:
            return [(at, os.pread(fd, n, at)) for at, n in spans]
        finally:
            os.close(fd)

    def _spans(self, drop: set[str], hints: Mapping[str, int]) -> list[tuple[int, int]] | None:
        """(start, length with its line break) of each line holding an entry of these ids, sorted; None when a line
        naming one of them does not parse as one entry (or an id is not its own bytes in the file)."""
        if not all(i.isascii() and json.dumps(i) == f'"{i}"' for i in drop):
            return None  # an id written with escapes is not its own bytes in the file
        spans: set[tuple[int, int]] = set()
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise FileNotFoundError(self.path)  # no file of ours there (verify names what is)
            unfound = set()
            for item_id in drop:
                span = hinted_line(fd, item_id, hints.get(item_id))
                if span is None:
                    unfound.add(item_id)
                else:
                    spans.add(span)
            if unfound and st.st_size:
                with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
                    found = find_lines(data, unfound)
                if found is None:
                    return None
                spans.update(found)
        finally:
            os.close(fd)
        return sorted(spans)

    def line_starts(self) -> Iterator[tuple[str, int]]:
        """(id, where its line starts) of each entry line of a one-entry-per-line file, read line by line (nothing
        for a file of another shape, or none): the hints ``blank_out`` takes."""
        try:
            at = header_end(read_bytes_nofollow(self.path, 1 << 16))
            if at is None:
                return
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except (OSError, FileProblemError):
            return
        with os.fdopen(fd, "rb") as fh:
            fh.seek(at)
            for raw in fh:
                item_id = leading_id(raw)
                if item_id is not None:
                    yield item_id, at
                at += len(raw)

    def iter_entries(self) -> Iterator[dict[str, Any]]:
        """The entries one by one, read line by line and kept nowhere (a cron job's look at a large index); a file
        not in the one-entry-per-line shape is read whole (``read``), and an entry met before the line that showed
        it may then come twice."""
        with _cache_guard:
            hit = _cache.get(self._key)
        try:
            if hit is not None and hit[0] == _stat_key(os.stat(self.path)):
                yield from hit[1].entries  # parsed already: no second read
                return
        except ABSENT:
            return
        try:
            with entry_lines(self.path) as lines:
                for raw in lines or ():
                    entry = json.loads(raw[2:])
                    if not valid_entry(entry):
                        raise NotOneLinePerEntry()
                    yield entry
            return
        except (ValueError, NotOneLinePerEntry):
            pass
        yield from self.read().entries

    def by_id(self) -> dict[str, dict[str, Any]]:
        """Map id -> entry (the last line wins)."""
        return {e["id"]: e for e in self.read().entries}


class NotOneLinePerEntry(Exception):
    """An index file is not one JSON entry per line after its header (it is read whole then)."""


class _Lines:
    """The entry lines of an index file, read through a descriptor opened without following a link."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None
        self.blanks = 0
        """Comment lines met among the entries so far (entries a forget blanked out)."""

    def __enter__(self) -> Iterator[bytes] | None:
        try:
            head = read_bytes_nofollow(self.path, 1 << 16)  # the checks of a reader: a regular file, no link
        except ABSENT:
            return None
        except FileProblemError as exc:
            raise NotOneLinePerEntry() from exc
        start = header_end(head)
        if start is None:
            raise NotOneLinePerEntry()
        head[:start].decode("utf-8")  # a header that is not UTF-8: the whole file is refused (read whole)
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        self._fh = os.fdopen(fd, "rb")
        self._fh.seek(start)
        return self._iter()

    def _iter(self) -> Iterator[bytes]:
        trailing = False
        for raw in self._fh:
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if not line:
                trailing = True  # only line breaks may follow the last entry
                continue
            if line.startswith(b"#") and not trailing:
                self.blanks += 1  # an entry blanked out by a forget
                continue
            if trailing or not (line.startswith(b"- {") and line.endswith(b"}")):
                raise NotOneLinePerEntry()
            yield line

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()


def entry_lines(path: Path) -> _Lines:
    """``with entry_lines(path) as lines``: the entry lines of an index file (bytes, no line break) one by one, None
    when there is no file; NotOneLinePerEntry (on entering, or from the iterator) when it is not in that shape. Comment
    lines among the entries (entries a forget blanked out) are skipped and counted in ``blanks``."""
    return _Lines(path)


def rebuild_entries(
    items: Iterable[Mapping[str, Any]], sort_key: Callable[[Mapping[str, Any]], Any] | None = None
) -> list[dict[str, Any]]:
    """Order derived entries deterministically (by sort_key, then id)."""
    out = [dict(i) for i in items]
    out.sort(key=lambda e: (sort_key(e) if sort_key else "", e.get("id", "")))
    return out
