"""Whether GC and verify may believe the clock: the newest write the tree already holds bounds it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import BUILD_DATE, CheckedStore, clock_doubt, parse_ts, read_jsonl

WRITE_KEYS = ("updated_at", "last_validated_at", "created_at", "started_at", "ended_at")
"""The fields of an index line that say when its item was written."""


def _time(value: Any) -> datetime | None:
    """A trusted write time (after the build date), else None."""
    if not value:
        return None
    try:
        when = parse_ts(value)
    except (ValueError, TypeError, OverflowError):
        return None
    return when if when >= BUILD_DATE else None


_PLAIN_UTC = (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z"),
              re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\Z"))
"""The forms the tree's own writers give a time: within one form, text order is time order."""


class _Newest:
    """The newest trusted time among values offered one by one, and where it was (the first place, on a tie).

    A value in one of the ``_PLAIN_UTC`` forms is compared as text with the newest of its form so far, and only
    those newest are parsed at the end (a verify or GC of a large tree offers tens of thousands of them); any
    other value is parsed as it comes. ``newest`` is None when the plain values' text order cannot be trusted
    (the newest of a form does not parse): the caller then parses them all."""

    def __init__(self) -> None:
        self._seq = 0
        self._tops: list[tuple[str, int, str] | None] = [None] * len(_PLAIN_UTC)
        self._parsed: tuple[datetime, int, str] | None = None

    def offer(self, value: Any, where: str) -> None:
        """Take one value (a time, or anything an index line holds there) and where it was."""
        self._seq += 1
        if isinstance(value, str):
            for i, form in enumerate(_PLAIN_UTC):
                if form.match(value):
                    top = self._tops[i]
                    if top is None or value > top[0]:
                        self._tops[i] = (value, self._seq, where)
                    return
        self._keep(_time(value), self._seq, where)

    def _keep(self, when: datetime | None, seq: int, where: str) -> None:
        best = self._parsed
        if when is not None and (best is None or when > best[0] or (when == best[0] and seq < best[1])):
            self._parsed = (when, seq, where)

    def newest(self) -> tuple[datetime, str] | bool | None:
        """(time, where), None when no value is trusted, False when the text order failed (see the class)."""
        for top in self._tops:
            if top is None:
                continue
            try:
                parse_ts(top[0])
            except (ValueError, TypeError, OverflowError):
                return False  # the newest text of its form is no time: the next one down may be
            self._keep(_time(top[0]), top[1], top[2])  # before the build date: so is every other of its form
        return None if self._parsed is None else (self._parsed[0], self._parsed[2])


def newest_write(root: Path, collections: Iterable[CheckedStore]) -> tuple[datetime, str] | None:
    """The newest write time the tree holds and where (index lines and the tombstone journal: no item file is
    read); times from an unset clock, before the build date, say nothing and are skipped. The index files are
    only read as they are, line by line (a cron job holds no whole index): a broken one is verify's to report and
    rebuild, not this look's."""
    collections = list(collections)
    found = _newest_write(root, collections, _Newest())
    if found is False:
        return _newest_write(root, collections, None)  # type: ignore[return-value]
    return found  # type: ignore[return-value]


def _newest_write(root: Path, collections: list[CheckedStore], fast: _Newest | None
                  ) -> tuple[datetime, str] | bool | None:
    """``newest_write`` by ``fast`` (see _Newest), or, without it, by parsing every value."""
    best: tuple[datetime, str] | None = None

    def offer(value: Any, where: str) -> None:
        nonlocal best
        if fast is not None:
            fast.offer(value, where)
            return
        when = _time(value)
        if when is not None and (best is None or when > best[0]):
            best = (when, where)

    for coll in collections:
        for e in coll.index.iter_entries():
            for key in WRITE_KEYS:
                value = e.get(key)
                if value:
                    offer(value, f"{key} of {e.get('id')}")
    tombs = root / "lifecycle" / "tombstones.jsonl"
    if tombs.is_file() and not tombs.is_symlink():
        for r in read_jsonl(tombs).records:
            value = r.get("ts")
            if value:
                offer(value, "lifecycle/tombstones.jsonl")
    return fast.newest() if fast is not None else best


def doubt(root: Path, collections: Iterable[CheckedStore], now: datetime) -> str | None:
    """Why ``now`` cannot be believed for removing or expiring anything by age in this tree, or None."""
    newest = newest_write(root, collections)
    return clock_doubt(now, newest[0] if newest else None, newest[1] if newest else "")


__all__ = ["doubt", "newest_write"]
