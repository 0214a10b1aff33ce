"""Where an entry's line is in an index file's bytes, and what it becomes when a forget blanks it out.

An index file is a header of comment lines, then one entry per line (``- {...}``, JSON in YAML). A blanked entry's
line is a comment of spaces as long as the line was, so no other line moves and every reader skips it. Its place
is found from a hint (where the line was last seen to start) checked against the line there, else by the id's
bytes; a file of another shape where an id appears is left to the caller (it reads the file whole).
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["blank_line", "entry_cuts", "entry_id", "find_lines", "header_end", "hinted_line", "leading_id",
           "valid_entry", "without_comment_lines"]

_LINE_HINT_READ = 4096  # bytes read at a line's hinted start before the rest of a longer line


def blank_line(length: int) -> bytes:
    """What a line of ``length`` bytes (its line break included) becomes when its entry is blanked out: a YAML
    comment of spaces, so every reader skips it and the text it held is gone from the file's bytes."""
    return b"#" + b" " * (length - 2) + b"\n"


def without_comment_lines(data: bytes, start: int) -> bytes:
    """The bytes with every comment line after ``start`` (a blanked entry) cut out; the same object when none."""
    at = data.find(b"\n#", start - 1 if start else 0)
    if at < 0:
        return data
    pieces, kept = [], 0
    while at >= 0:
        end = data.find(b"\n", at + 1)
        if end < 0:
            break  # a comment as the last line, without a break: left for the shape check to refuse
        pieces.append(data[kept:at + 1])
        kept = end + 1
        at = data.find(b"\n#", end)
    pieces.append(data[kept:])
    return b"".join(pieces)


def valid_entry(obj: Any) -> bool:
    """Whether a parsed line is an index entry: a mapping with a non-empty string ``id``."""
    return isinstance(obj, dict) and isinstance(obj.get("id"), str) and bool(obj["id"])


_BOM = b"\xef\xbb\xbf"


def header_end(data: bytes) -> int | None:
    """Where the first entry line starts, after the header of comments (and blank lines); None when a line of
    another kind comes first, or no entry does."""
    start = len(_BOM) if data.startswith(_BOM) else 0
    while not data.startswith(b"- {", start):
        end = data.find(b"\n", start)
        line = data[start:] if end < 0 else data[start:end]
        if end < 0 or (line.strip() and not line.lstrip().startswith(b"#")):
            return None
        start = end + 1
    return start


def leading_id(line: bytes) -> str | None:
    """The id an entry line starts with, when written as format_entry writes a plain id (else None)."""
    if not line.startswith(b'- {"id": "'):
        return None
    end = line.find(b'"', 10)
    item_id = line[10:end].decode("ascii", "replace") if end > 10 else ""
    return item_id if item_id and "\\" not in item_id and json.dumps(item_id) == f'"{item_id}"' else None


def entry_id(line: bytes) -> str | None:
    """The id of the entry a whole line (no line break) holds as JSON, None when it holds none or does not parse."""
    try:
        entry = json.loads(line[2:].decode("utf-8")) if line.startswith(b"- {") else None
    except ValueError:
        return None
    return str(entry["id"]) if entry is not None and valid_entry(entry) else None


def hinted_line(fd: int, item_id: str, at: int | None) -> tuple[int, int] | None:
    """(start, length) of the line at ``at`` when it is the whole line of this id's entry (None: look for it)."""
    if at is None or at <= 0:
        return None
    head = os.pread(fd, _LINE_HINT_READ + 1, at - 1)
    if not head.startswith(b"\n- {"):
        return None  # not where a line starts
    chunk, more = head[1:], len(head) == _LINE_HINT_READ + 1
    end = chunk.find(b"\n")
    while end < 0 and more:
        head = os.pread(fd, _LINE_HINT_READ, at + len(chunk))
        chunk, more = chunk + head, len(head) == _LINE_HINT_READ
        end = chunk.find(b"\n")
    if end < 0 or entry_id(chunk[:end]) != item_id:
        return None
    return at, end + 1


def find_lines(data: Any, ids: set[str]) -> list[tuple[int, int]] | None:
    """(start, length) of every line that holds an entry of these ids, found by their bytes (``data``: the file's
    bytes, or a map of them); None when the file is not entry lines after a header of comments where an id
    appears (a line naming it that is no JSON entry line, or a last line without its break)."""
    start = header_end(bytes(data[:1 << 16]))
    if start is None:
        return None  # not entry lines after a header of comments: the YAML reader decides what it holds
    spans = []
    for item_id in sorted(ids):
        needle = item_id.encode("ascii")
        pos = data.find(needle, start)
        while pos >= 0:
            begin = data.rfind(b"\n", 0, pos) + 1
            end = data.find(b"\n", pos)
            if end < 0:
                return None  # a last line without its break (torn?): rewritten, not blanked
            line = data[begin:end]
            if not line.startswith(b"#"):
                of = entry_id(line)
                if of is None:
                    return None  # a line naming the id that is no entry line (a hand edit): the YAML reader decides
                if of == item_id:
                    spans.append((begin, end + 1 - begin))
            pos = data.find(needle, end + 1)
    return spans


_SEARCHED_IDS = 16
"""Up to this many ids, ``remove`` finds each one's line by a search of the file's bytes (a forget); more (a GC of
thousands) walk the lines once: a search per id would read the file once per id."""


def _cut_of(data: bytes, begin: int, end: int, drop: set[str]) -> bool | None:
    """Whether the entry line ``data[begin:end]`` holds one of the ids in ``drop``; None when it is not JSON (a
    hand-edited line: the YAML reader decides what it holds)."""
    try:
        entry = json.loads(data[begin + 2:end].decode("utf-8"))
    except ValueError:
        return None
    return isinstance(entry, dict) and entry.get("id") in drop


def _cuts_by_search(data: bytes, start: int, drop: set[str]) -> list[tuple[int, int]] | None:
    """The (begin, end) of each entry line holding an id of ``drop``, each id's bytes searched for: only the lines
    where one appears are parsed. None when such a line does not parse."""
    cuts: list[tuple[int, int]] = []
    for mem_id in sorted(drop):
        needle = mem_id.encode("ascii")
        pos = data.find(needle, start)
        while pos >= 0:
            begin = data.rfind(b"\n", start, pos) + 1 or start
            end = data.find(b"\n", pos)
            end = len(data) if end < 0 else end + 1
            held = _cut_of(data, begin, end, drop)
            if held is None:
                return None
            if held:
                cuts.append((begin, end))
            pos = data.find(needle, end)
    return cuts


def _cuts_by_walk(data: bytes, start: int, body_end: int, drop: set[str]) -> list[tuple[int, int]] | None:
    """``_cuts_by_search`` in one pass over the entry lines, each parsed (the search decides when one does not)."""
    cuts: list[tuple[int, int]] = []
    begin = start
    while begin < body_end:
        end = data.find(b"\n", begin)
        end = len(data) if end < 0 else end + 1
        held = _cut_of(data, begin, end, drop)
        if held is None:
            # A hand-edited line: the search decides, parsing only the lines that hold an id (this one may not).
            return _cuts_by_search(data, start, drop)
        if held:
            cuts.append((begin, end))
        begin = end
    return cuts


def entry_cuts(data: bytes, start: int, body_end: int, drop: set[str]) -> list[tuple[int, int]] | None:
    """The (begin, end) of each entry line of a one-entry-per-line body (``data[start:body_end]``) whose entry's id
    is in ``drop``; None when such a line does not parse (the caller reads the file whole)."""
    if len(drop) <= _SEARCHED_IDS:
        return _cuts_by_search(data, start, drop)
    return _cuts_by_walk(data, start, body_end, drop)
