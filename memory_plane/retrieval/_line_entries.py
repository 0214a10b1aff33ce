"""An index file's lines as entries parsed on first use, and their texts made on first use.

A generation started from a snapshot (``_snapshot``) numbers its entries by the index file's lines: a line that
is no entry (the header's comments, a line a forget blanked) is an entry with no id that no posting, app or rule
names. A query parses only the lines it looks at.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

from memory_plane.lifecycle import valid_entry

NO_ENTRY: dict[str, Any] = {"id": ""}
"""What a line that holds no entry reads as (nothing points at it: no text, no app, never recalled)."""


def parse_line(line: bytes) -> dict[str, Any] | None:
    """The entry an index line holds (``- {...}``), None for a comment or blank line; ValueError for a line that
    is neither (the snapshot path takes only files of one JSON entry per line)."""
    s = line.strip()
    if not s or s.startswith(b"#"):
        return None
    if not s.startswith(b"- {"):
        raise ValueError("a line that is no one-line entry")
    entry = json.loads(s[2:])
    if not valid_entry(entry):
        raise ValueError("an entry with no id")
    return entry  # type: ignore[no-any-return]


class IndexLines(Sequence[dict[str, Any]]):
    """The lines of an index file's bytes as entries, each parsed when first asked for; lines appended later are
    added with ``extend`` (the bytes they came with)."""

    def __init__(self, raw: bytes, offsets: Sequence[int]) -> None:
        self._chunks = [raw]  # the file's bytes as read (maybe more than the lines cover), then each appended piece
        self._starts = [0]  # where each chunk starts in the file
        self._offsets = list(offsets)  # where each line starts, and where the last one ends
        self._parsed: list[dict[str, Any] | None] = [None] * (len(self._offsets) - 1)

    def __len__(self) -> int:
        return len(self._parsed)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        e = self._parsed[i]
        if e is None:
            try:
                e = parse_line(self.line(i)) or NO_ENTRY
            except ValueError:
                e = NO_ENTRY  # checked when the snapshot was written; a line that changed since is not served
            self._parsed[i] = e
        return e

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[k] for k in range(len(self)))

    @property
    def size(self) -> int:
        """Bytes of the file these lines cover."""
        return self._offsets[-1]

    def line(self, i: int) -> bytes:
        """Line i's bytes (its line break included)."""
        if i < 0:
            i += len(self)
        start, end = self._offsets[i], self._offsets[i + 1]
        k = bisect_right(self._starts, start) - 1
        base = self._starts[k]
        return self._chunks[k][start - base:end - base]

    def bytes_upto(self, count: int) -> bytes:
        """The file's bytes up to the end of line ``count - 1``."""
        # A chunk may run past where the next one starts (the first is the whole file as read): each is cut there.
        ends = [*self._starts[1:], self._offsets[-1]]
        whole = b"".join(c[:end - start] for c, start, end in zip(self._chunks, self._starts, ends))
        return whole[:self._offsets[count]]

    def tail(self, n: int) -> bytes:
        """The last ``n`` bytes the lines cover (an append is checked against them)."""
        last, start = self._chunks[-1], self._starts[-1]
        if self._offsets[-1] - start >= n:
            return last[self._offsets[-1] - start - n:self._offsets[-1] - start]
        return self.bytes_upto(len(self))[-n:]

    def extend(self, piece: bytes, offsets: Sequence[int]) -> None:
        """Add the lines of ``piece`` (the bytes appended to the file), which start at ``offsets`` (the first one at
        the old end, the last one its new end)."""
        assert offsets[0] == self._offsets[-1]
        self._chunks.append(piece)
        self._starts.append(self._offsets[-1])
        self._offsets += offsets[1:]
        self._parsed += [None] * (len(offsets) - 1)


class LazyTexts(Sequence[str]):
    """Each entry's text (what its postings are made from), made when first asked for; appended to as the entries
    grow."""

    def __init__(self, entries: Sequence[dict[str, Any]], text: Callable[[dict[str, Any]], str], count: int) -> None:
        self._entries = entries
        self._text = text
        self._made: list[str | None] = [None] * count  # the first ``count`` entries (``+=`` adds the others)

    def __len__(self) -> int:
        return len(self._made)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        t = self._made[i]
        if t is None:
            e = self._entries[i]
            t = self._made[i] = self._text(e) if e is not NO_ENTRY else ""
        return t

    def extend(self, more: Iterable[str]) -> None:
        """Add the texts of the entries appended since (made by the caller)."""
        self._made += list(more)
