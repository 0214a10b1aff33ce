"""The default lifecycle rules of a collection: what verify marks (expired, excerpt_only) and what GC removes."""

from __future__ import annotations

from contextlib import nullcontext
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ._clock import BUILD_DATE, expiry_believed, format_ts, parse_ts, system_clock
from ._errors import FileProblemError
from ._gc import GcReport, Removal, apply_plan, tree_size
from ._item_read import ItemRead, stat_key
from ._journal import TombstoneLog

if TYPE_CHECKING:
    from ._retention import Retention
    from ._verify import VerifyReport


def older(ts: Any, delta: timedelta | None, now: datetime) -> bool:
    """Whether a timestamp is more than ``delta`` before now (never, for a missing or unreadable one, nor for one
    written under an unset clock, before the build date: its age is unknown, not ancient)."""
    if delta is None or not ts:
        return False
    try:
        when = parse_ts(ts)
    except (ValueError, TypeError, OverflowError):
        return False
    return when >= BUILD_DATE and when + delta <= now


def verify_marks(rec: Any, report: VerifyReport, now: datetime) -> dict[str, Any]:
    """The lifecycle marks verify writes on one record (field -> value): expired, and excerpt_only when every
    episode it came from is gone or trimmed; an expired record that helped tasks is a refresh candidate."""
    changes: dict[str, Any] = {}
    if report.clock_doubt is not None:
        return changes  # nothing is marked expired on a clock verify cannot believe (it reports why)
    if rec.status == "active" and rec.is_expired(now):
        changes["status"] = "expired"
        report.stats.setdefault("expired_marked", []).append(rec.id)
    if rec.is_expired(now) and rec.status in ("active", "expired") and getattr(rec, "success_count", 0) > 0:
        # Expired, yet it helped tasks succeed: worth re-validating in a background refresh.
        report.stats.setdefault("refresh_candidates", []).append(
            {"id": rec.id, "type": rec.type, "success_count": rec.success_count,
             "expires_at": rec.expires_at if isinstance(rec.expires_at, str) or rec.expires_at is None
             else format_ts(rec.expires_at)})
    if report.traced is None:
        return changes  # no episode store was verified before: nothing known about the evidence
    sources = [r.id for r in getattr(rec, "evidence_refs", []) if r.type == "episode"]
    # A long-term memory names where it came from in source_refs; an episode among them is evidence too.
    sources += [str(x) for x in getattr(rec, "source_refs", []) or [] if str(x).startswith("ep_")]
    trace = getattr(rec, "traceability", None) or (rec.model_extra or {}).get("traceability")
    if sources and trace != "excerpt_only" and all(x not in report.traced for x in sources):
        changes["traceability"] = "excerpt_only"  # every episode it came from is gone or trimmed
        report.stats.setdefault("excerpt_only", []).append(rec.id)
    return changes


def collect_reason(rec: Any, retention: Retention, now: datetime) -> str | None:
    """Why GC removes a record (deleted, replaced or expired past grace), or None when it stays."""
    if rec.status == "deleted":
        return "deleted"
    if rec.status == "replaced" and older(rec.updated_at, retention.grace_of("replaced"), now):
        return "replaced_past_grace"
    if rec.is_expired(now):
        exp = rec.expires_at if not isinstance(rec.expires_at, str) else None
        if exp is not None and not expiry_believed(exp, rec.created_at, rec.updated_at, rec.last_validated_at):
            return None  # marked expired from an expiry computed under an unset clock: its age is unknown
        if exp is None or exp + (retention.grace_of("expired") or timedelta(0)) <= now:
            return "expired_past_grace"
    return None


def _candidates(coll: Any, items: list[ItemRead[Any]], retention: Retention, report: GcReport,
                now: datetime) -> list[ItemRead[Any]]:
    out = []
    for item in items:
        if item.record is None:
            continue
        if item.path.is_symlink():
            report.skipped_symlinks.append(coll.rel(item.path))
            continue
        if collect_reason(item.record, retention, now):
            out.append(item)
    return out


def collect_expired(coll: Any, retention: Retention, report: GcReport, now: datetime, dry_run: bool,
                    items: list[ItemRead[Any]]) -> list[str]:
    """Remove a collection's records that ``collect_reason`` names: tombstones, then index lines, then files."""
    candidates = _candidates(coll, items, retention, report, now)
    if not candidates:
        return []
    gone: list[str] = []
    plan: list[Removal] = []
    mark = len(report.removed)
    # A dry run only reads (every file is replaced whole, never written in place): no lock, so it
    # works on a read-only tree too.
    with nullcontext() if dry_run else coll.lock():
        # Looked at again under the lock: the agent may have renewed an item since this pass parsed it.
        # A renewal is an atomic rewrite (a new inode), so an unchanged (mtime, size, inode) means the
        # record parsed above is the file's; anything else is parsed again.
        for item in candidates:
            try:
                same = item.stat_key is not None and stat_key(item.path) == item.stat_key
                rec: Any = item.record if same else coll.load_path(item.path)
            except (OSError, FileProblemError):
                continue
            reason = collect_reason(rec, retention, now)
            if reason is None:
                report.keep("renewed_since_scan")
                continue
            gone.append(rec.id)
            plan.append(Removal(item.path, reason))
            report.note(coll.rel(item.path), reason, tree_size(item.path))
        if gone and not dry_run:
            # Tombstones first (a kill after them leaves files a rerun removes, and the rerun writes no
            # second tombstone), then the index line (a kill before the unlink leaves an orphan only).
            tombs = TombstoneLog(coll.root, clock=coll.clock or system_clock)
            since = {i.record.id: record_time(i.record) for i in candidates
                     if i.record is not None and i.record.id in gone}
            if not report.write_tombstones(tombs, coll.name, not_yet_tombstoned(tombs, coll.name, since)):
                report.unnote(mark)
                return []
            coll.index.remove(gone)
            report.plan.extend(plan)
            apply_plan(coll.root, report)  # under the lock: an item the agent saves now is not one removed
    return gone


def record_time(rec: Any) -> Any:
    """When a record was last written (its tombstone must be newer to count as this removal's)."""
    return rec.updated_at or rec.created_at


def not_yet_tombstoned(tombs: TombstoneLog, kind: str, since: dict[str, Any]) -> list[str]:
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
