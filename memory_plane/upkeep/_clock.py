"""Whether GC and verify may believe the clock: the newest write the tree already holds bounds it."""

from __future__ import annotations

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


def newest_write(root: Path, collections: Iterable[CheckedStore]) -> tuple[datetime, str] | None:
    """The newest write time the tree holds and where (index lines and the tombstone journal: no item file is
    read); times from an unset clock, before the build date, say nothing and are skipped. The index files are
    only read as they are, line by line (a cron job holds no whole index): a broken one is verify's to report and
    rebuild, not this look's."""
    best: tuple[datetime, str] | None = None
    for coll in collections:
        for e in coll.index.iter_entries():
            for key in WRITE_KEYS:
                when = _time(e.get(key))
                if when is not None and (best is None or when > best[0]):
                    best = (when, f"{key} of {e.get('id')}")
    tombs = root / "lifecycle" / "tombstones.jsonl"
    if tombs.is_file() and not tombs.is_symlink():
        for r in read_jsonl(tombs).records:
            when = _time(r.get("ts"))
            if when is not None and (best is None or when > best[0]):
                best = (when, "lifecycle/tombstones.jsonl")
    return best


def doubt(root: Path, collections: Iterable[CheckedStore], now: datetime) -> str | None:
    """Why ``now`` cannot be believed for removing or expiring anything by age in this tree, or None."""
    newest = newest_write(root, collections)
    return clock_doubt(now, newest[0] if newest else None, newest[1] if newest else "")


__all__ = ["doubt", "newest_write"]
