"""What a verify of this process proved of a store's item files: that its index is derived from them (what a proven
line says of an expired item), and what each live memory it parsed cites. GC decides on these, the file unparsed,
only while the file (and, for a line, the index) is as verify saw it.

A verify parses every item file of a store and compares (or rewrites) the index with the lines made from them: at
its end the index says what each file said when verify began. That proof holds for one item file as long as

- the index is the very file verify left (same inode, size, mtime and ctime: a hand edit, a save, a removal and a
  rebuild all change one of them), and
- the item file has not changed since before verify began: its ctime (which no program can set back; any write,
  rename or replacement moves it) and its mtime are older than verify's start, by a margin larger than the
  filesystem's coarse clock tick.

Anything else (a file written since, an index touched since, a line of another shape) is parsed as before. The proof
lives in this process only: a fresh process proves nothing until its own verify.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ._clock import BUILD_DATE, parse_ts

PROOF_MARGIN_NS = 2_000_000_000
"""A file changed this long before verify began or later does not count as seen by it (file times come from a clock
that lags the system's by up to a tick)."""
BOUNDARY_MARGIN = timedelta(days=1)
"""A line whose expiry ends its grace this close to now is parsed instead (index times are kept to the millisecond:
the file's own time decides a removal at the edge)."""

KEPT_PER_STORE = 10_000
"""At most this many memories of one store are taken from a proof (lines or live facts): what GC holds of a proof
stays bounded, a store larger than that has its others parsed."""

_proofs: dict[str, tuple[tuple[int, int, int, int], int]] = {}
_guard = threading.Lock()


def _key(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def prove_index(path: Path, since_ns: int) -> None:
    """Record that the index at ``path``, as it is now, was just made or found equal to the lines of its item files
    as they were read from ``since_ns`` (wall clock, ns) on."""
    key = _key(path)
    with _guard:
        if key is None:
            _proofs.pop(str(path), None)
        else:
            _proofs[str(path)] = (key, since_ns)


def proven_since(path: Path) -> int | None:
    """When the proof of the index at ``path`` began (ns), or None: never proved in this process, or changed since."""
    with _guard:
        held = _proofs.get(str(path))
    if held is None:
        return None
    return held[1] if _key(path) == held[0] else None


def unchanged_since(st: os.stat_result, since_ns: int) -> bool:
    """Whether an item file (its lstat) is a regular, non-empty file unchanged since before ``since_ns``."""
    bound = since_ns - PROOF_MARGIN_NS
    return stat.S_ISREG(st.st_mode) and st.st_size > 0 and st.st_ctime_ns < bound and st.st_mtime_ns < bound


@dataclass(frozen=True, slots=True)
class ExpiredLine:
    """What a proven index line says of an item marked expired: all GC asks of a record it may remove (its id,
    status, times), read from the line instead of the file."""

    id: str
    expires_at: datetime
    updated_at: datetime | None
    last_validated_at: datetime | None
    status: str = "expired"
    created_at: None = None

    def is_expired(self, now: datetime) -> bool:
        """Always: the item is marked expired."""
        return True


def expired_line(entry: dict[str, Any], expired_grace: timedelta | None, now: datetime) -> ExpiredLine | None:
    """The ``ExpiredLine`` of an index entry marked expired whose expiry GC can judge from the line alone, or None
    (another status, a time missing or unreadable, an expiry from before the build date, or one whose grace ends
    near now): then the file is parsed."""
    if entry.get("status") != "expired" or not isinstance(entry.get("id"), str):
        return None
    try:
        expires = parse_ts(entry["expires_at"])
        updated = parse_ts(entry["updated_at"])
        validated = parse_ts(entry["last_validated_at"]) if entry.get("last_validated_at") else None
    except (KeyError, ValueError, TypeError, OverflowError):
        return None
    if expires < BUILD_DATE or updated < BUILD_DATE:
        return None  # an unset clock's times: the file's own fields decide whether its expiry is believed
    ends = expires + (expired_grace or timedelta(0))
    if abs(ends - now) < BOUNDARY_MARGIN:
        return None
    return ExpiredLine(entry["id"], expires, updated, validated)


@dataclass(frozen=True, slots=True)
class Cited:
    """One evidence ref of a live memory, as GC's evidence needs it."""

    type: str
    id: str
    event_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LiveFacts:
    """What verify's parse of a live memory (active or conflicted, not expired) says GC needs of it: its id and
    status, until when it stays live, and the episodes it cites. GC takes it for the record while it is still live."""

    id: str
    status: str
    live_until: datetime | None
    """Its expiry, when it is believed; None: never by time."""
    evidence_refs: tuple[Cited, ...]
    source_refs: tuple[str, ...]

    def is_expired(self, now: datetime) -> bool:
        """Whether its expiry has come (``Envelope.is_expired`` of a live record)."""
        return self.live_until is not None and self.live_until <= now


def live_facts(rec: Any, now: datetime) -> LiveFacts | None:
    """The ``LiveFacts`` of a record live at ``now``, or None (not live, or of a shape GC must parse to judge)."""
    if rec.status not in ("active", "conflicted") or rec.is_expired(now):
        return None
    exp = rec.expires_at
    if exp is not None and (not isinstance(exp, datetime) or exp < BUILD_DATE):
        return None  # unreadable, or from an unset clock: whether it is believed is the record's to say
    # Not expired at ``now``: either no expiry, one computed under an unset clock (never believed), or a later one.
    until = exp if exp is not None and exp > now else None
    refs = tuple(Cited(str(r.type), str(r.id), tuple(str(e) for e in r.event_ids))
                 for r in getattr(rec, "evidence_refs", []) or [])
    sources = tuple(str(x) for x in getattr(rec, "source_refs", []) or [])
    return LiveFacts(str(rec.id), str(rec.status), until, refs, sources)


_live: dict[str, tuple[int, datetime, dict[str, LiveFacts]]] = {}


def prove_live(folder: Path, since_ns: int, now: datetime, facts: dict[str, LiveFacts]) -> None:
    """Record what a verify that began reading the files of ``folder`` at ``since_ns``, at time ``now``, found of
    its live memories (by file name)."""
    with _guard:
        _live[str(folder)] = (since_ns, now, facts)


def proven_live(folder: Path, now: datetime) -> tuple[int, dict[str, LiveFacts]] | None:
    """(when the proof began, the live memories by file name) of the last verify of ``folder`` in this process, or
    None: none, or GC's ``now`` is before that verify's (a memory live then may not be now, nor the reverse)."""
    with _guard:
        held = _live.get(str(folder))
    if held is None or now < held[1]:
        return None
    return held[0], held[2]
