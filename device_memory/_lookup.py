"""Index lines grouped by the values of some of their fields: the lines of one app, or of one app and goal,
without a pass over every line of the index."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any


class EntryLookup:
    """One index's lines grouped by the values of ``fields`` (a missing field groups as None).

    Derived from the list of lines a collection's ``entries()`` returned: the same parse of the index is
    the same list object, which only grows (a line appended to the file is appended to it); a rewritten or
    re-read index is a new list, and the groups are made again from it. Nothing is kept that the index
    file's own stat check (in ``entries()``) does not vouch for."""

    def __init__(self, fields: Sequence[str]) -> None:
        self.fields = tuple(fields)
        self._source: list[dict[str, Any]] | None = None
        self._seen = 0
        self._last: dict[str, Any] | None = None
        self._groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        self._guard = threading.Lock()  # the writer's worker and a caller's thread may both ask

    def key(self, entry: dict[str, Any]) -> tuple[Any, ...]:
        """The group of one line."""
        return tuple(_hashable(entry.get(f)) for f in self.fields)

    def of(self, entries: list[dict[str, Any]], values: Sequence[Any]) -> list[dict[str, Any]]:
        """The lines of ``entries`` whose fields hold ``values``, in index order."""
        with self._guard:
            return self._of(entries, values)

    def _of(self, entries: list[dict[str, Any]], values: Sequence[Any]) -> list[dict[str, Any]]:
        same = (entries is self._source and len(entries) >= self._seen
                and (self._seen == 0 or entries[self._seen - 1] is self._last))
        if not same:
            self._source, self._seen, self._last, self._groups = entries, 0, None, {}
        for e in entries[self._seen:]:
            self._groups.setdefault(self.key(e), []).append(e)
        self._seen = len(entries)
        self._last = entries[-1] if entries else None
        return list(self._groups.get(tuple(_hashable(v) for v in values), ()))


def _hashable(value: Any) -> Any:
    """A field's value as a group key (a list or mapping a hand edit put there groups as its text)."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value
