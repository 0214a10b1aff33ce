"""GC over the whole tree: what cron runs weekly (`memplane lifecycle gc`)."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from device_memory import DeviceMemory
from episodes import EPISODE_FILE, EVENTS_FILE, TaskEpisodeStore
from lifecycle import (
    QUARANTINE_DIR,
    FileProblemError,
    GcReport,
    Retention,
    TombstoneLog,
    atomic_write,
    collection_lock,
    dumps_compact,
    load_retention,
    parse_ts,
    read_jsonl,
    remove_path,
    stale_temp_files,
    stat_key,
    tree_size,
)

from .._long_term import LongTermStore
from .._session import SessionStore
from ._restore import quarantined

log = logging.getLogger("memory_plane")
TRACE_PARTS = (EVENTS_FILE, "artifacts", "transcript")
CONFLICT_LOG_MAX = 20_000


def _referenced_episodes(parsed: dict[int, tuple[Any, list[Any]]], now: datetime) -> set[str]:
    """Episodes still evidence for a live memory (active or conflicted, and not past its expiry)."""
    refs: set[str] = set()
    for _, items in parsed.values():
        for item in items:
            rec = item.record
            if rec is None or rec.status not in ("active", "conflicted") or rec.is_expired(now):
                continue
            refs.update(r.id for r in getattr(rec, "evidence_refs", []) if r.type in ("episode", "outcome"))
            refs.update(getattr(rec, "source_refs", []) or [])
    return refs


def _older(ts: Any, delta: timedelta | None, now: datetime) -> bool:
    if delta is None or not ts:
        return False
    try:
        return parse_ts(ts) + delta <= now
    except ValueError:
        return False


def gc_tree(root: Path, device: DeviceMemory, episodes: TaskEpisodeStore, long_term: LongTermStore,
            session: SessionStore, *, dry_run: bool = False, now: datetime | None = None,
            retention: Retention | None = None) -> GcReport:
    """Remove what retention says is done with; every step is idempotent, so a killed GC resumes."""
    now = now or device.clock()
    ret = retention or load_retention(root / "lifecycle" / "retention.yaml")  # a bad file stops GC: exit 1
    rep = GcReport(dry_run=dry_run)
    tombs = TombstoneLog(root, clock=device.clock)

    def rel(p: Path) -> str:
        return str(p.relative_to(root))

    def remove(p: Path, reason: str) -> None:
        # remove_path unlinks a symlink as a link (its target is never touched) and refuses paths outside root.
        if p.is_symlink():
            rep.skipped_symlinks.append(rel(p))
            return
        size = tree_size(p)
        rep.note(rel(p), reason, size)
        if not dry_run:
            for link in remove_path(root, p):
                rep.skipped_symlinks.append(rel(link))

    # 1. staging files left by crashes
    for p in stale_temp_files(root, ret.grace_of("temp_files") or timedelta(hours=1), now):
        remove(p, "stale_temp_file")

    # Every memory file is parsed once; the same records decide references and removals.
    all_stores: list[Any] = [*device.collections.values(), device.profiles, long_term]
    parsed = {id(c): (c, list(c.iter_items())) for c in all_stores}

    # 2. episodes: drop full traces past their TTL, summaries past theirs, unless evidence for a memory
    referenced = _referenced_episodes(parsed, now)
    drop_eps: list[tuple[Any, Path]] = []
    for item in episodes.iter_items():
        ep = item.record
        d = item.path.parent
        if ep is None and type(item.problem).__name__ == "OrphanFolder" and not d.is_symlink():
            if quarantined(root, item.path):
                # Its episode.yaml is in quarantine, waiting for a person: the events and screenshots
                # are the evidence that restoring it needs, so they stay.
                rep.keep("quarantined_episode_evidence")
                continue
            age_ok = datetime.fromtimestamp(d.lstat().st_mtime, now.tzinfo) + (
                ret.grace_of("temp_files") or timedelta(hours=1)) <= now
            if age_ok:
                remove(d, "orphan_episode_folder")
            continue
        if ep is None or ep.status == "recording":
            continue
        if d.is_symlink() or d.parent.is_symlink():
            rep.skipped_symlinks.append(rel(d))
            continue
        started = ep.started_ts()
        if ep.id in referenced:
            if _older(started, ret.ttl_of("episode_trace"), now):
                rep.keep("referenced_episode_trace")
            continue
        if _older(started, ret.ttl_of("episode_summary"), now):
            drop_eps.append((ep, d))  # removed below, after their tombstones are on disk
            continue
        if _older(started, ret.ttl_of("episode_trace"), now):
            parts = [d / name for name in TRACE_PARTS if (d / name).exists() or (d / name).is_symlink()]
            if parts and not dry_run and ep.traceability != "summary_only":
                # Said before it is done: a GC killed between the two still finds the parts and removes them,
                # and the episode never claims a trace it no longer has.
                ep.traceability = "summary_only"
                episodes.write(ep)
            for part in parts:
                remove(part, "episode_trace_ttl")
        else:
            _orphan_artifacts(d, remove)
    if drop_eps:
        # The order makes a killed GC resumable (issue 27): tombstones first (fsynced; one per removal,
        # never twice), then the index lines, then the folders. A rerun finds what is left and finishes it.
        if not dry_run:
            rep.tombstones_written += tombs.add_many(
                "episode", _not_yet_tombstoned(tombs, "episode", {ep.id: ep.started_ts() for ep, _ in drop_eps}),
                reason="gc")
            with episodes.lock():
                episodes.index.remove([ep.id for ep, _ in drop_eps])
        for _, d in drop_eps:
            remove(d, "episode_summary_ttl")

    # 3. memories: expired past grace, replaced past grace, deleted
    def reason_for(rec: Any) -> str | None:
        if rec.status == "deleted":
            return "deleted"
        if rec.status == "replaced" and _older(rec.updated_at, ret.grace_of("replaced"), now):
            return "replaced_past_grace"
        if rec.is_expired(now):
            exp = rec.expires_at if not isinstance(rec.expires_at, str) else None
            if exp is None or exp + (ret.grace_of("expired") or timedelta(0)) <= now:
                return "expired_past_grace"
        return None

    stores: list[Any] = [*device.collections.values(), long_term]
    for coll in stores:
        candidates = []
        for item in parsed[id(coll)][1]:
            if item.record is None:
                continue
            if item.path.is_symlink():
                rep.skipped_symlinks.append(rel(item.path))
                continue
            if reason_for(item.record):
                candidates.append(item)
        if not candidates:
            continue
        gone: list[str] = []
        # A dry run only reads (every file is replaced whole, never written in place): no lock, so it
        # works on a read-only tree too (issue 27).
        with nullcontext() if dry_run else coll.lock():
            # Looked at again under the lock: the agent may have renewed an item since this pass parsed it.
            # A renewal is an atomic rewrite (a new inode), so an unchanged (mtime, size, inode) means the
            # record parsed above is the file's; anything else is parsed again.
            for item in candidates:
                try:
                    same = item.stat_key is not None and stat_key(item.path) == item.stat_key
                    rec = item.record if same else coll.load_path(item.path)
                except (OSError, FileProblemError):
                    continue
                reason = reason_for(rec)
                if reason is None:
                    rep.keep("renewed_since_scan")
                    continue
                gone.append(rec.id)
                rep.note(rel(item.path), reason, tree_size(item.path))
            if gone and not dry_run:
                # Tombstones first (a kill after them leaves files a rerun removes, and the rerun writes no
                # second tombstone), then the index line (a kill before the unlink leaves an orphan only).
                kind = getattr(coll, "name", "memory")
                since = {i.record.id: _record_time(i.record) for i in candidates
                         if i.record is not None and i.record.id in gone}
                rep.tombstones_written += tombs.add_many(kind, _not_yet_tombstoned(tombs, kind, since), reason="gc")
                coll.index.remove(gone)
                for item in candidates:
                    if item.record is not None and item.record.id in gone:
                        remove_path(root, item.path)
        if gone and not dry_run and isinstance(coll, LongTermStore):
            coll.rebuild_index()

    # 4. old tombstones, quarantine, session archives, conflict log size
    _trim_tombstones(root, ret, now, rep, dry_run)
    qdir = root / QUARANTINE_DIR
    grace_q = ret.grace_of("quarantine")
    if qdir.is_dir() and grace_q is not None:
        for p in sorted(qdir.iterdir()):
            if p.is_symlink():
                rep.skipped_symlinks.append(rel(p))
                continue
            if datetime.fromtimestamp(p.lstat().st_mtime, now.tzinfo) + grace_q <= now:
                remove(p, "quarantine_past_grace")
    arch = root / "session_archive"
    grace_s = ret.grace_of("session_archive")
    if arch.is_dir() and grace_s is not None:
        for p in sorted(arch.iterdir()):
            if p.name.startswith(".") or p.is_symlink():
                if p.is_symlink():
                    rep.skipped_symlinks.append(rel(p))
                continue
            if datetime.fromtimestamp(p.lstat().st_mtime, now.tzinfo) + grace_s <= now:
                remove(p, "session_archive_past_grace")
    _trim_conflicts(root, rep, dry_run)
    return rep


def _record_time(rec: Any) -> Any:
    """When a record was last written (its tombstone must be newer to count as this removal's)."""
    return rec.updated_at or rec.created_at


def _not_yet_tombstoned(tombs: TombstoneLog, kind: str, since: dict[str, Any]) -> list[str]:
    """Ids among ``since`` without a GC tombstone written after their record's time (a killed GC's rerun)."""
    done: dict[str, str] = {}
    for r in tombs.records():
        ref = r.get("ref")
        if r.get("reason") == "gc" and isinstance(ref, dict) and ref.get("type") == kind and ref.get("id") in since:
            done[str(ref["id"])] = max(done.get(str(ref["id"]), ""), str(r.get("ts") or ""))
    out = []
    for item_id, when in since.items():
        ts = done.get(item_id)
        made = _as_time(when)
        recorded = _as_time(ts)
        # No tombstone yet, or only one older than the record (the same id made again after a removal).
        if recorded is None or (made is not None and recorded < made):
            out.append(item_id)
    return out


def _as_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    try:
        return parse_ts(value) if value else None
    except ValueError:
        return None


def _orphan_artifacts(d: Path, remove: Any) -> None:
    """Screenshots no event points at (left by a crash between the file and its event)."""
    art = d / "artifacts"
    if not art.is_dir() or art.is_symlink():
        return
    events = read_jsonl(d / EVENTS_FILE)
    if events.problems and not events.records:
        return  # cannot tell what is referenced: keep everything
    used = {str(ev.get("screenshot_ref")) for ev in events.records if ev.get("screenshot_ref")}
    used |= {part.split("]")[0] for ev in events.records for part in str(ev).split("[image: ")[1:]}
    for p in sorted(art.iterdir()):
        if not p.is_file() or p.is_symlink():
            continue
        if f"artifacts/{p.name}" not in used and not (d / EPISODE_FILE).read_text("utf-8", "replace").count(p.name):
            remove(p, "unreferenced_artifact")


def _trim_tombstones(root: Path, ret: Retention, now: datetime, rep: GcReport, dry_run: bool) -> None:
    path = root / "lifecycle" / "tombstones.jsonl"
    grace = ret.grace_of("tombstone")
    if grace is None or not path.is_file() or path.is_symlink():
        return
    with nullcontext() if dry_run else collection_lock(root / "lifecycle"):
        read = read_jsonl(path)
        keep = [r for r in read.records if not _older(r.get("ts"), grace, now)]
        dropped = len(read.records) - len(keep)
        if dropped:
            rep.note("lifecycle/tombstones.jsonl", f"tombstones_past_grace ({dropped} lines)")
            if not dry_run:
                atomic_write(path, "".join(dumps_compact(r) + "\n" for r in keep))


def _trim_conflicts(root: Path, rep: GcReport, dry_run: bool) -> None:
    path = root / "lifecycle" / "conflicts.jsonl"
    if not path.is_file() or path.is_symlink():
        return
    with nullcontext() if dry_run else collection_lock(root / "lifecycle"):
        read = read_jsonl(path)
        if len(read.records) > CONFLICT_LOG_MAX:
            rep.note("lifecycle/conflicts.jsonl", f"conflict_log_cap ({len(read.records) - CONFLICT_LOG_MAX} lines)")
            if not dry_run:
                atomic_write(path, "".join(dumps_compact(r) + "\n" for r in read.records[-CONFLICT_LOG_MAX:]))


__all__ = ["gc_tree"]
