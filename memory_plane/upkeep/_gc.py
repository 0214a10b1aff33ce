"""GC over the whole tree: what cron runs weekly (`memplane lifecycle gc`)."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memory_plane.device_memory import DeviceMemory
from memory_plane.episodes import TaskEpisodeStore
from memory_plane.lifecycle import (
    QUARANTINE_DIR,
    ClockError,
    GcReport,
    ItemRead,
    Retention,
    apply_plan,
    atomic_write,
    collection_lock,
    counted,
    dumps_compact,
    link_on_way,
    load_retention,
    older,
    read_jsonl,
    stale_temp_files,
)

from .._long_term import LongTermStore
from .._session import SessionStore
from ._clock import doubt

log = logging.getLogger("memory_plane")
CONFLICT_LOG_MAX = 20_000


def gc_tree(root: Path, device: DeviceMemory, episodes: TaskEpisodeStore, long_term: LongTermStore,
            session: SessionStore, *, dry_run: bool = False, now: datetime | None = None,
            retention: Retention | None = None, trust_clock: bool = False) -> GcReport:
    """Remove what retention says is done with; every step is idempotent, so a killed GC resumes.

    Raises ClockError, removing nothing, when ``now`` cannot be believed (before the build date, earlier than the
    newest write in the tree, or far past it) unless ``trust_clock`` (the operator gave the time: ``--now``).
    """
    now = now or device.clock()
    ret = retention or load_retention(root / "lifecycle" / "retention.yaml")  # a bad file stops GC: exit 1
    if not trust_clock:
        # A clock set ten years ahead would make every memory "past its TTL": one GC would empty the tree.
        why = doubt(root, [*device.collections.values(), device.profiles, long_term, episodes], now)
        if why is not None:
            raise ClockError(why)
    rep = GcReport(dry_run=dry_run)
    _remove_stale_temp_files(root, ret, now, rep)
    apply_plan(root, rep)
    # Every memory file is parsed once, in one streaming pass: it adds the episodes it cites to the evidence and
    # is kept only when its store may remove it, so GC holds the candidates, never the whole store. One marked
    # expired whose index line a verify of this process proved, unchanged since, is read from that line instead.
    memories: list[Any] = [*device.collections.values(), device.profiles, long_term]
    candidates: dict[int, list[ItemRead[Any]]] = {}
    for coll in memories:
        keep: list[ItemRead[Any]] = []
        for item in coll.gc_items(ret, now):
            if coll is not device.profiles:
                # A device's profile is renewed from the current screen for as long as the device lives: its
                # first evidence would pin that episode forever. It keeps its refs, and verify marks it
                # excerpt_only once those episodes are trimmed.
                add_references(rep, item, now)
            if coll.gc_candidate(item, ret, now):
                keep.append(item)
        candidates[id(coll)] = keep
    # Episodes first (what no memory points at), then each store by its own rules.
    episodes.collect(ret, rep, now, dry_run)
    for coll in memories:
        coll.collect(ret, rep, now, dry_run, items=candidates[id(coll)])
    _trim_tombstones(root, ret, now, rep, dry_run)
    _trim_quarantine(root, ret, now, rep)
    _trim_session_archive(root, ret, now, rep)
    apply_plan(root, rep)
    _trim_conflicts(root, rep, dry_run)
    return rep


def add_references(rep: GcReport, item: ItemRead[Any], now: datetime) -> None:
    """Add the episodes one memory is evidence from (and the events it cites in them), when it is live (active or
    conflicted, not past its expiry)."""
    rec = item.record
    if rec is None or rec.status not in ("active", "conflicted") or rec.is_expired(now):
        return
    for ref in getattr(rec, "evidence_refs", []):
        if ref.type in ("episode", "outcome"):
            rep.evidence.add(ref.id)
            rep.cited_events.setdefault(ref.id, set()).update(str(e) for e in ref.event_ids)
    rep.evidence.update(getattr(rec, "source_refs", []) or [])


def _remove_stale_temp_files(root: Path, ret: Retention, now: datetime, rep: GcReport) -> None:
    """Staging files left by crashes."""
    for p in stale_temp_files(root, ret.grace_of("temp_files") or timedelta(hours=1), now):
        rep.discard(root, p, "stale_temp_file")


def _trim_quarantine(root: Path, ret: Retention, now: datetime, rep: GcReport) -> None:
    """Quarantined files nobody restored within their grace."""
    qdir = root / QUARANTINE_DIR
    grace_q = ret.grace_of("quarantine")
    if not qdir.is_dir() or grace_q is None:
        return
    for p in sorted(qdir.iterdir()):
        if p.is_symlink():
            rep.skipped_symlinks.append(str(p.relative_to(root)))
            continue
        if datetime.fromtimestamp(p.lstat().st_mtime, now.tzinfo) + grace_q <= now:
            rep.discard(root, p, "quarantine_past_grace")


def _trim_session_archive(root: Path, ret: Retention, now: datetime, rep: GcReport) -> None:
    """Archived sessions past their grace."""
    arch = root / "session_archive"
    grace_s = ret.grace_of("session_archive")
    if not arch.is_dir() or grace_s is None:
        return
    for p in sorted(arch.iterdir()):
        if p.name.startswith(".") or p.is_symlink():
            if p.is_symlink():
                rep.skipped_symlinks.append(str(p.relative_to(root)))
            continue
        if datetime.fromtimestamp(p.lstat().st_mtime, now.tzinfo) + grace_s <= now:
            rep.discard(root, p, "session_archive_past_grace")


def _trim_tombstones(root: Path, ret: Retention, now: datetime, rep: GcReport, dry_run: bool) -> None:
    path = root / "lifecycle" / "tombstones.jsonl"
    grace = ret.grace_of("tombstone")
    if grace is None or _linked(root, path, rep) or not path.is_file():
        return
    with nullcontext() if dry_run else collection_lock(root / "lifecycle"):
        read = read_jsonl(path)
        keep = [r for r in read.records if not older(r.get("ts"), grace, now)]
        dropped = len(read.records) - len(keep)
        if dropped:
            rep.note("lifecycle/tombstones.jsonl", f"tombstones_past_grace ({counted(dropped, 'line')})")
            if not dry_run:
                atomic_write(path, "".join(dumps_compact(r) + "\n" for r in keep), root=root)


def _linked(root: Path, path: Path, rep: GcReport) -> bool:
    """Whether a journal or its folder is a symlink (reported as skipped: never read through nor rewritten)."""
    link = link_on_way(root, path)
    if link is not None:
        rep.skip_link(root, link)
    return link is not None


def _trim_conflicts(root: Path, rep: GcReport, dry_run: bool) -> None:
    path = root / "lifecycle" / "conflicts.jsonl"
    if _linked(root, path, rep) or not path.is_file():
        return
    with nullcontext() if dry_run else collection_lock(root / "lifecycle"):
        read = read_jsonl(path)
        if len(read.records) > CONFLICT_LOG_MAX:
            cut = counted(len(read.records) - CONFLICT_LOG_MAX, "line")
            rep.note("lifecycle/conflicts.jsonl", f"conflict_log_cap ({cut})")
            if not dry_run:
                atomic_write(path, "".join(dumps_compact(r) + "\n" for r in read.records[-CONFLICT_LOG_MAX:]),
                             root=root)


__all__ = ["gc_tree"]
