"""Verify and GC of the episode store: close crashed recordings, check artifacts, drop traces past their TTL."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_plane.lifecycle import (
    GcReport,
    ItemRead,
    Repair,
    Retention,
    TombstoneLog,
    VerifyReport,
    apply_plan,
    check_collection,
    dumps_compact,
    not_yet_tombstoned,
    older,
    quarantined,
    read_bytes_nofollow,
    read_jsonl,
    safe_join,
)

from ._model import TaskEpisode
from ._store import EPISODE_FILE, EVENTS_FILE, EXCERPT_FILE, OnClosed

if TYPE_CHECKING:
    from ._store import TaskEpisodeStore

log = logging.getLogger("memory_plane")
TRACE_PARTS = (EVENTS_FILE, "artifacts", "transcript")
TRIM_BATCH = 128
"""Episodes GC trims written under one hold of the episodes lock (a commit waits for at most one batch)."""



def verify_episodes(store: TaskEpisodeStore, report: VerifyReport, now: datetime,
                    on_closed: OnClosed | None) -> None:
    """Every episode file checked, crashed recordings closed, missing artifacts named; the index rebuilt."""
    if report.traced is None:
        report.traced = set()
    interrupted = report.stats.setdefault("interrupted", [])
    dirs: list[Path] = []

    def on_item(_coll: Any, item: ItemRead[TaskEpisode]) -> None:
        dirs.append(item.path.parent)
        _verify_episode(store, item, report, now, on_closed, interrupted)

    check_collection(store.root, store, report=report, on_item=on_item)
    # Their events files go to the tree-wide torn-line check, with the other jsonl files of the tree.
    report.jsonl_files += [d / EVENTS_FILE for d in dirs]
    # Transcripts closed with visual summaries still pending (a bounded close on a degraded API).
    pending = report.stats.setdefault("transcripts_pending", [])
    for d in dirs:
        steps_file = d / "transcript" / "steps.jsonl"
        if steps_file.is_file() and any(r.get("kind") == "close" and r.get("pending")
                                         for r in read_jsonl(steps_file).records):
            pending.append(d.name)


def _verify_episode(store: TaskEpisodeStore, item: ItemRead[TaskEpisode], report: VerifyReport, now: datetime,
                    on_closed: OnClosed | None, interrupted: list[str]) -> None:
    ep = item.record
    assert ep is not None
    d = item.path.parent
    if (d / EVENTS_FILE).exists():
        report.traced.add(ep.id)  # type: ignore[union-attr]
    # Closing a dead recording is safe without --fix: it only adds what the crash lost; the
    # index rebuild that follows sees the rewritten file (its stat changed) and indexes it.
    dead = ep.status == "recording" and not store.is_recording_live(ep.id)
    try:
        closed = store.mark_interrupted(ep, now) if dead else None
        if closed is not None and closed.status == "interrupted":
            interrupted.append(ep.id)
            report.fixed.append(f"marked {ep.id} interrupted")
        elif closed is not None:  # its events end with finish: the task ended, only the commit did not
            report.fixed.append(f"completed {ep.id} from its finish event (its commit never happened)")
        if closed is not None and on_closed is not None:
            on_closed(closed)
    except OSError as exc:
        report.add_not_written(store.rel(item.path), f"{ep.id} is a crashed recording (to be marked interrupted)",
                               exc)
    if ep.traceability not in ("summary_only", "excerpt_only"):
        _check_artifacts(store, ep, d, item.path, report)


def _check_artifacts(store: TaskEpisodeStore, ep: TaskEpisode, d: Path, path: Path, report: VerifyReport) -> None:
    """Screenshots the events point at: one missing is a finding, whose repair makes the episode excerpt_only."""
    for ev in read_jsonl(d / EVENTS_FILE).records:
        ref = ev.get("screenshot_ref")
        if not isinstance(ref, str) or not ref:
            continue
        try:
            target = safe_join(d, ref)
        except ValueError:
            report.add("unsafe_ref", store.rel(d / EVENTS_FILE), None, f"screenshot_ref {ref!r} leaves the episode")
            continue
        if not target.exists():
            report.add("missing_artifact", store.rel(d), None, f"{ref} referenced by {ev.get('event_id')}",
                       Repair("excerpt_only", _excerpt_only(store, ep.id, path)))
            break


def _excerpt_only(store: TaskEpisodeStore, episode_id: str, path: Path) -> Callable[[VerifyReport], bool]:
    """The repair of an episode missing a screenshot: it says it holds an excerpt only."""

    def mark(report: VerifyReport) -> bool:
        # Read again: the episode may have been closed and taught from since it was checked, and that write wins.
        ep = store.get(episode_id)
        if ep is None:
            return False
        ep.traceability = "excerpt_only"
        try:
            store.write(ep)
        except OSError as exc:
            report.add("io", store.rel(path), None, f"cannot write: {exc.strerror or exc}")
            return False
        report.fixed.append(f"{ep.id}: traceability excerpt_only (artifacts missing)")
        return True

    return mark


def collect_episodes(store: TaskEpisodeStore, retention: Retention, report: GcReport, now: datetime,
                     dry_run: bool, items: list[ItemRead[TaskEpisode]] | None) -> list[str]:
    """Drop full traces past their TTL and summaries past theirs, unless evidence for a memory
    (``report.evidence``); orphan folders and unreferenced screenshots go too. The ids removed."""
    try:
        return _drop_episodes(store, retention, report, now, dry_run, items)
    finally:
        apply_plan(store.root, report)  # what was planned goes, even when the drops below could not be made


class _Trims:
    """The episodes GC trims, written in batches (``TaskEpisodeStore.write_trimmed``); each one's removals are
    planned only once what it keeps (its excerpt, its traceability) is durable. A dry run writes nothing and plans
    at once."""

    def __init__(self, store: TaskEpisodeStore, dry_run: bool) -> None:
        self._store, self._dry_run = store, dry_run
        self._pending: list[tuple[TaskEpisode, bool, bytes | None]] = []
        self._plans: list[Callable[[], None]] = []

    def add(self, ep: TaskEpisode, mark: bool, excerpt: bytes | None, plan: Callable[[], None]) -> None:
        """Trim one episode: its episode.yaml written when ``mark``, its excerpt when given, then ``plan`` run (it
        plans the removals)."""
        if self._dry_run or (not mark and excerpt is None):
            plan()
            return
        self._pending.append((ep, mark, excerpt))
        self._plans.append(plan)
        if len(self._pending) >= TRIM_BATCH:
            self.flush()

    def flush(self) -> None:
        """Write the trims waiting, then plan their removals."""
        if not self._pending:
            return
        pending, plans = self._pending, self._plans
        self._pending, self._plans = [], []
        # A failed write raises before any removal of these episodes is planned: nothing they need goes.
        self._store.write_trimmed(pending)
        for plan in plans:
            plan()


def _drop_episodes(store: TaskEpisodeStore, retention: Retention, report: GcReport, now: datetime,
                   dry_run: bool, items: list[ItemRead[TaskEpisode]] | None) -> list[str]:
    """Plan each episode's removals; those past their summary TTL after their tombstones and index lines."""
    # What a removal needs of each episode (its id, start and folder), never its record: past the summary TTL may
    # be most of a large store.
    drop: list[tuple[str, Any, Path]] = []
    trims = _Trims(store, dry_run)
    for item in store.iter_items() if items is None else items:
        found = _collect_one(store, item, retention, report, now, dry_run, trims)
        if found is not None:
            drop.append((found[0].id, found[0].started_ts(), found[1]))  # planned below, after their tombstones
    trims.flush()
    if not drop:
        return []
    # The order makes a killed GC resumable: tombstones first (fsynced; one per removal,
    # never twice), then the index lines, then the folders. A rerun finds what is left and finishes it.
    if not dry_run:
        tombs = TombstoneLog(store.root, clock=store.clock)
        if not report.write_tombstones(
                tombs, "episode", not_yet_tombstoned(tombs, "episode", {ep_id: ts for ep_id, ts, _ in drop})):
            return []
        with store.lock():
            store.index.remove([ep_id for ep_id, _, _ in drop])
    for _, _, d in drop:
        # episode.yaml goes last: a GC killed inside the folder leaves an episode the next run drops again (a
        # folder without it would wait as young debris), and never a header without its folder.
        report.discard(store.root, d, "episode_summary_ttl", last=EPISODE_FILE)
    return [ep_id for ep_id, _, _ in drop]


def _collect_one(store: TaskEpisodeStore, item: ItemRead[TaskEpisode], ret: Retention, report: GcReport,
                 now: datetime, dry_run: bool, trims: _Trims) -> tuple[TaskEpisode, Path] | None:
    """GC of one episode folder; the episode and its folder when its summary is past its TTL."""
    ep = item.record
    d = item.path.parent
    if ep is None and store.is_orphan(item) and not d.is_symlink():
        if quarantined(store.root, item.path):
            # Its episode.yaml is in quarantine, waiting for a person: the events and screenshots
            # are the evidence that restoring it needs, so they stay.
            report.keep("quarantined_episode_evidence")
            return None
        age_ok = datetime.fromtimestamp(d.lstat().st_mtime, now.tzinfo) + (
            ret.grace_of("temp_files") or timedelta(hours=1)) <= now
        if age_ok:
            report.discard(store.root, d, "orphan_episode_folder")
        return None
    if ep is None or ep.status == "recording":
        return None
    if d.is_symlink() or d.parent.is_symlink():
        report.skipped_symlinks.append(store.rel(d))
        return None
    started = ep.started_ts()
    if ep.id in report.evidence:
        if older(started, ret.ttl_of("episode_trace"), now):
            # Evidence past its full-trace TTL keeps an excerpt: episode.yaml and the steps the memories cite.
            report.keep("referenced_episode_excerpt")
            _keep_excerpt(store, ep, d, report.cited_events.get(ep.id, set()), report, dry_run, trims)
        else:
            _orphan_artifacts(store.root, d, report)
        return None
    if older(started, ret.ttl_of("episode_summary"), now):
        return ep, d
    if older(started, ret.ttl_of("episode_trace"), now):
        parts = [d / name for name in TRACE_PARTS if (d / name).exists() or (d / name).is_symlink()]
        # Said before it is done: a GC killed between the two still finds the parts and removes them,
        # and the episode never claims a trace it no longer has.
        mark = bool(parts) and not dry_run and ep.traceability != "summary_only"
        if mark:
            ep.traceability = "summary_only"

        def plan() -> None:
            for part in parts:
                report.discard(store.root, part, "episode_trace_ttl")

        trims.add(ep, mark, None, plan)
    else:
        _orphan_artifacts(store.root, d, report)
    return None


def _orphan_artifacts(root: Path, d: Path, report: GcReport) -> None:
    """Screenshots no event points at (left by a crash between the file and its event)."""
    art = d / "artifacts"
    if not art.is_dir() or art.is_symlink():
        return
    events = read_jsonl(d / EVENTS_FILE)
    if events.problems and not events.records:
        return  # cannot tell what is referenced: keep everything
    _unneeded_artifacts(root, d, events.records, report, "unreferenced_artifact")


def _unneeded_artifacts(root: Path, d: Path, records: list[dict[str, Any]], report: GcReport, reason: str) -> None:
    """Screenshots neither these events nor episode.yaml name, planned for removal with ``reason``."""
    art = d / "artifacts"
    if not art.is_dir() or art.is_symlink():
        return
    used = {str(ev.get("screenshot_ref")) for ev in records if ev.get("screenshot_ref")}
    used |= {part.split("]")[0] for ev in records for part in str(ev).split("[image: ")[1:]}
    try:
        # Read once, never through a link or from a pipe left in its place (which would block GC).
        episode_text = read_bytes_nofollow(d / EPISODE_FILE).decode("utf-8", "replace")
    except OSError:
        return  # cannot tell what the episode refers to: keep everything
    for p in sorted(art.iterdir()):
        if not p.is_file() or p.is_symlink():
            continue
        if f"artifacts/{p.name}" not in used and p.name not in episode_text:
            report.discard(root, p, reason)


def _keep_excerpt(store: TaskEpisodeStore, ep: TaskEpisode, d: Path, cited: set[str], report: GcReport,
                  dry_run: bool, trims: _Trims) -> None:
    """Trim an evidence episode past its full-trace TTL to an excerpt: the cited events (and the other events of
    their steps) go to excerpt.jsonl, with the screenshots they and episode.yaml name; events.jsonl, the
    transcript and every other screenshot go."""
    events_file = d / EVENTS_FILE
    kept: list[dict[str, Any]] = []
    excerpt: bytes | None = None
    if events_file.is_file() and not events_file.is_symlink():
        events = read_jsonl(events_file)
        if events.problems and not events.records:
            report.keep("unreadable_evidence_events")
            return  # cannot tell what the memories cite: everything stays
        steps = {ev.get("step") for ev in events.records if str(ev.get("event_id")) in cited
                 and ev.get("step") is not None}
        kept = [ev for ev in events.records if str(ev.get("event_id")) in cited or
                (ev.get("step") is not None and ev.get("step") in steps)]
        if not dry_run and (kept or (d / EXCERPT_FILE).exists()):
            # Nothing cited in the events (a memory citing the episode as a whole) leaves no excerpt to write; one
            # written before is replaced, so it never names steps the memories no longer cite.
            excerpt = "".join(dumps_compact(ev) + "\n" for ev in kept).encode("utf-8")
    elif (d / EXCERPT_FILE).is_file():
        kept = read_jsonl(d / EXCERPT_FILE).records  # trimmed before: its excerpt says which screenshots stay
    # Excerpt and mark first: a GC killed after them still finds the parts and removes them, and the episode never
    # claims a trace it no longer has.
    mark = not dry_run and ep.traceability not in ("excerpt_only", "summary_only")
    if mark:
        ep.traceability = "excerpt_only"

    def plan() -> None:
        for name in (EVENTS_FILE, "transcript"):
            if (d / name).exists() or (d / name).is_symlink():
                report.discard(store.root, d / name, "episode_trace_ttl")
        _unneeded_artifacts(store.root, d, kept, report, "episode_trace_ttl")

    trims.add(ep, mark, excerpt, plan)
