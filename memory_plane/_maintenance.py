"""Verify and GC over the whole tree: what cron runs (`memplane lifecycle verify|gc`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from device_memory import DeviceMemory
from episodes import EPISODE_FILE, EVENTS_FILE, TaskEpisodeStore
from lifecycle import (
    QUARANTINE_DIR,
    Collection,
    ConfigError,
    FileProblemError,
    GcReport,
    Retention,
    TombstoneLog,
    UsageError,
    VerifyReport,
    atomic_write,
    collection_lock,
    dumps_compact,
    find_quarantined,
    format_ts,
    key_line,
    load_retention,
    load_yaml_file,
    parse_ts,
    quarantine_name,
    read_jsonl,
    remove_path,
    restore_quarantined,
    safe_join,
    stale_temp_files,
    tree_size,
    verify_collections,
)

from ._long_term import LongTermStore
from ._session import SessionStore

log = logging.getLogger("memory_plane")
TRACE_PARTS = (EVENTS_FILE, "artifacts", "transcript")
CONFLICT_LOG_MAX = 20_000


def _jsonl_files(root: Path, episode_dirs: Iterable[Path]) -> list[Path]:
    files = [root / "lifecycle" / "tombstones.jsonl", root / "lifecycle" / "conflicts.jsonl",
             root / "session" / "events.jsonl"]
    files += [d / EVENTS_FILE for d in episode_dirs]
    return [f for f in files if f.is_file() and not f.is_symlink()]


def _repair_jsonl(path: Path) -> int:
    """Rewrite a jsonl file without its unreadable lines; return how many went."""
    read = read_jsonl(path)
    if not read.problems:
        return 0
    atomic_write(path, "".join(dumps_compact(r) + "\n" for r in read.records))
    return len(read.problems)


def verify_tree(root: Path, device: DeviceMemory, episodes: TaskEpisodeStore, long_term: LongTermStore,
                *, fix: bool = False, now: datetime | None = None,
                extra: Iterable[Collection] = ()) -> VerifyReport:
    """Rebuild indexes, report bad files, mark expired, check evidence, close crashed episodes."""
    now = now or device.clock()
    report = VerifyReport()
    try:
        load_retention(root / "lifecycle" / "retention.yaml")
    except ConfigError as exc:
        report.add("config", "lifecycle/retention.yaml", exc.line, exc.message)
    _check_config(root, report)
    interrupted: list[str] = []
    traced: set[str] = set()

    episode_dirs: list[Path] = []

    def check_episode(item: Any) -> None:
        ep = item.record
        d = item.path.parent
        episode_dirs.append(d)
        if (d / EVENTS_FILE).exists():
            traced.add(ep.id)
        # Closing a dead recording is safe without --fix: it only adds what the crash lost; the
        # index rebuild that follows sees the rewritten file (its stat changed) and indexes it.
        dead = ep.status == "recording" and not episodes.is_recording_live(ep.id)
        try:
            if dead and episodes.mark_interrupted(ep, now) is not None:
                interrupted.append(ep.id)
                report.fixed.append(f"marked {ep.id} interrupted")
        except OSError as exc:
            report.add("io", episodes.rel(item.path), None, f"cannot mark interrupted: {exc.strerror or exc}")
        if ep.traceability in ("summary_only", "excerpt_only"):
            return
        for ev in read_jsonl(d / EVENTS_FILE).records:
            ref = ev.get("screenshot_ref")
            if not isinstance(ref, str) or not ref:
                continue
            try:
                target = safe_join(d, ref)
            except ValueError:
                report.add("unsafe_ref", episodes.rel(d / EVENTS_FILE), None,
                           f"screenshot_ref {ref!r} leaves the episode")
                continue
            if not target.exists():
                report.add("missing_artifact", episodes.rel(d), None, f"{ref} referenced by {ev.get('event_id')}")
                if fix:
                    ep.traceability = "excerpt_only"
                    try:
                        episodes.write(ep)
                    except OSError as exc:
                        report.add("io", episodes.rel(item.path), None, f"cannot write: {exc.strerror or exc}")
                        break
                    report.fixed.append(f"{ep.id}: traceability excerpt_only (artifacts missing)")
                break

    # Lifecycle transitions, decided from the records verify parses anyway (one pass over the files).
    expired: list[str] = []
    excerpt: list[str] = []
    refresh: list[dict[str, Any]] = []
    pending: dict[int, tuple[Any, dict[str, Any]]] = {}
    transition_colls = {id(c) for c in [*device.collections.values(), long_term, device.profiles]}

    def decide(coll: Any, item: Any) -> None:
        rec = item.record
        if coll is episodes:
            check_episode(item)
            return
        if id(coll) not in transition_colls or rec is None:
            return
        changes: dict[str, Any] = {}
        if rec.status == "active" and rec.is_expired(now):
            changes["status"] = "expired"
            expired.append(rec.id)
        if rec.is_expired(now) and rec.status in ("active", "expired") and getattr(rec, "success_count", 0) > 0:
            # Expired, yet it helped tasks succeed: worth re-validating in a background refresh.
            refresh.append({"id": rec.id, "type": rec.type, "success_count": rec.success_count,
                            "expires_at": rec.expires_at if isinstance(rec.expires_at, str) or rec.expires_at is None
                            else format_ts(rec.expires_at)})
        refs = [r for r in getattr(rec, "evidence_refs", []) if r.type == "episode"]
        # A long-term memory names where it came from in source_refs; an episode among them is evidence too.
        refs += [_EpisodeRef(x) for x in getattr(rec, "source_refs", []) or [] if str(x).startswith("ep_")]
        trace = getattr(rec, "traceability", None) or (rec.model_extra or {}).get("traceability")
        if refs and trace != "excerpt_only" and all(r.id not in traced for r in refs):
            changes["traceability"] = "excerpt_only"  # every episode it came from is gone or trimmed
            excerpt.append(rec.id)
        if changes:
            pending.setdefault(id(coll), (coll, {}))[1][rec.id] = changes

    # Episodes first: what they hold decides which memories lost their evidence.
    collections: list[Any] = [episodes, *device.all_collections(), long_term, *extra]
    verify_collections(root, collections, fix=fix, report=report, on_item=decide)
    report.stats["interrupted"] = interrupted
    for coll, changes in pending.values():
        try:
            if coll is device.profiles:
                # Device profiles expire like every other memory (one file per device, no index).
                for prof_id, ch in changes.items():
                    dev_id = next((p.device_id or "default" for p in device.profiles.all() if p.id == prof_id), None)
                    if dev_id:
                        device.profiles.update(dev_id, lambda cur, ch=ch: _setter(ch)(cur) if cur else None)
                continue
            coll.update_many({item_id: _setter(ch) for item_id, ch in changes.items()})
        except OSError as exc:  # a read-only or full tree: reported, the rest of verify still runs
            report.add("io", str(Path(coll.dir).relative_to(root)), None,
                       f"cannot mark {len(changes)} items expired/excerpt_only: {exc.strerror or exc}")
    report.stats["expired_marked"] = expired
    report.stats["excerpt_only"] = excerpt
    report.stats["refresh_candidates"] = sorted(refresh, key=lambda r: -r["success_count"])

    for f in _jsonl_files(root, episode_dirs):
        read = read_jsonl(f)
        if read.problems:
            rel = str(f.relative_to(root))
            for p in read.problems:
                report.add("torn_jsonl" if read.torn_tail else "jsonl", rel, p.line, p.message)
            if fix:
                try:
                    n = _repair_jsonl(f)
                except OSError as exc:
                    report.add("io", rel, None, f"cannot repair: {exc.strerror or exc}")
                    continue
                report.fixed.append(f"{rel}: dropped {n} unreadable lines")
    if fix:
        # The second verify after --fix must be clean: drop the findings that were repaired.
        repaired = {"parse", "validation", "yamlbomb", "index", "jsonl", "torn_jsonl", "missing_artifact",
                    "orphanfolder"}
        report.problems = [p for p in report.problems if p.category not in repaired]
    return report


class _EpisodeRef:
    """An episode named in a long-term memory's source_refs, seen as evidence like an evidence_ref."""

    type = "episode"

    def __init__(self, episode_id: str) -> None:
        self.id = episode_id


def _check_config(root: Path, report: VerifyReport) -> None:
    """config.yaml: readable YAML, a mapping, no unknown transcript keys, a valid lenses section."""
    import pydantic

    from episodes.transcript import TranscriptConfig

    from ._lenses import GeminiSettings

    path = root / "config.yaml"
    try:
        data = load_yaml_file(path)
    except FileNotFoundError:
        return
    except FileProblemError as exc:
        report.add("config", "config.yaml", exc.line, exc.message)
        return
    except OSError as exc:
        report.add("config", "config.yaml", None, f"unreadable: {exc.strerror or exc}")
        return
    if data is None:
        return
    if not isinstance(data, dict):
        report.add("config", "config.yaml", 1, "config.yaml must be a mapping of sections")
        return
    text = path.read_text("utf-8", "replace")
    try:
        cfg = TranscriptConfig.model_validate(TranscriptConfig.normalize(data))
        for key in cfg.unknown_keys():
            report.add("config", "config.yaml", key_line(text, key.split(".")[0]), f"unknown key {key} (ignored)")
    except pydantic.ValidationError as exc:
        for err in exc.errors():
            where = ".".join(map(str, err.get("loc") or ()))
            report.add("config", "config.yaml", key_line(text, where.split(".")[0]), f"{where}: {err.get('msg')}")
    lenses = data.get("lenses")
    if lenses is not None:
        try:
            GeminiSettings.model_validate(lenses)
        except pydantic.ValidationError as exc:
            for err in exc.errors():
                where = ".".join(map(str, err.get("loc") or ()))
                report.add("config", "config.yaml", key_line(text, "lenses"), f"lenses.{where}: {err.get('msg')}")


def _setter(changes: dict[str, Any]) -> Any:
    def change(cur: Any) -> Any:
        for k, v in changes.items():
            setattr(cur, k, v)
        return cur

    return change


# -- GC -----------------------------------------------------------------------------


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
    drop_ids: list[str] = []
    for item in episodes.iter_items():
        ep = item.record
        d = item.path.parent
        if ep is None and type(item.problem).__name__ == "OrphanFolder" and not d.is_symlink():
            if _quarantined(root, item.path):
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
            drop_ids.append(ep.id)
            remove(d, "episode_summary_ttl")
            continue
        if _older(started, ret.ttl_of("episode_trace"), now):
            parts = [d / name for name in TRACE_PARTS if (d / name).exists() or (d / name).is_symlink()]
            for part in parts:
                remove(part, "episode_trace_ttl")
            if parts and not dry_run:
                ep.traceability = "summary_only"
                episodes.write(ep)
        else:
            _orphan_artifacts(d, remove)
    if drop_ids and not dry_run:
        with episodes.lock():
            episodes.index.remove(drop_ids)
        rep.tombstones_written += tombs.add_many("episode", drop_ids, reason="gc")

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
        with coll.lock():
            # Re-read under the lock: the agent may have renewed an item since this pass parsed it.
            for item in candidates:
                try:
                    rec = coll.load_path(item.path)
                except (OSError, FileProblemError):
                    continue
                reason = reason_for(rec)
                if reason is None:
                    rep.keep("renewed_since_scan")
                    continue
                gone.append(rec.id)
                rep.note(rel(item.path), reason, tree_size(item.path))
            if gone and not dry_run:
                coll.index.remove(gone)  # index line first: a kill before the unlink leaves an orphan only
                for item in candidates:
                    if item.record is not None and item.record.id in gone:
                        remove_path(root, item.path)
        if gone and not dry_run:
            rep.tombstones_written += tombs.add_many(getattr(coll, "name", "memory"), gone, reason="gc")
            if isinstance(coll, LongTermStore):
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


def _owner(root: Path, device: DeviceMemory, episodes: TaskEpisodeStore, long_term: LongTermStore,
           rel: str) -> Any:
    """The store a path of the tree belongs to (None for files that are not memory items)."""
    parts = Path(rel).parts
    if parts[:1] == ("episodes",) and parts[-1] == EPISODE_FILE:
        return episodes
    if parts[:2] == ("long_term", "memories"):
        return long_term
    if rel == "device/profile.yaml" or parts[:2] == ("device", "profiles"):
        return device.profiles
    for coll in device.collections.values():
        if len(parts) == 3 and "/".join(parts[:2]) == coll.rel_dir:
            return coll
    return None


def restore_from_quarantine(root: Path, device: DeviceMemory, episodes: TaskEpisodeStore,
                            long_term: LongTermStore, name: str, *, force: bool = False) -> dict[str, Any]:
    """Put a quarantined file back after checking it loads (``force``: even if not), then re-index its store."""
    q = find_quarantined(root, name)
    owner = _owner(root, device, episodes, long_term, q.original)
    problem = None
    if owner is not None:
        try:
            owner.load_path(root / QUARANTINE_DIR / q.name)
        except (FileProblemError, OSError) as exc:
            problem = str(exc).replace(str(root / QUARANTINE_DIR / q.name), q.original)
    if problem and not force:
        raise UsageError(f"{q.name} still does not load ({problem}); fix it in {QUARANTINE_DIR}/ and "
                         "restore again, or restore --force")
    target = restore_quarantined(root, q)
    rebuilt = bool(owner is not None and owner.rebuild_index())
    return {"restored": q.original, "from": f"{QUARANTINE_DIR}/{q.name}", "path": str(target),
            "problem": problem, "reindexed": rebuilt}


def _quarantined(root: Path, path: Path) -> bool:
    """Tell whether a file of this path was moved to quarantine (and is still there)."""
    qdir = root / QUARANTINE_DIR
    prefix = quarantine_name(root, path) + "."
    try:
        with os.scandir(qdir) as it:
            return any(e.name.startswith(prefix) for e in it)
    except OSError:
        return False


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
    with collection_lock(root / "lifecycle"):
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
    with collection_lock(root / "lifecycle"):
        read = read_jsonl(path)
        if len(read.records) > CONFLICT_LOG_MAX:
            rep.note("lifecycle/conflicts.jsonl", f"conflict_log_cap ({len(read.records) - CONFLICT_LOG_MAX} lines)")
            if not dry_run:
                atomic_write(path, "".join(dumps_compact(r) + "\n" for r in read.records[-CONFLICT_LOG_MAX:]))


__all__ = ["gc_tree", "restore_from_quarantine", "verify_tree"]
