"""TaskEpisodeStore: episodes/<yyyy>/<id>/ folders plus episodes/index.yaml."""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import (
    DEFAULT_LOCK_TIMEOUT,
    Clock,
    DatedLayout,
    FileProblemError,
    GcReport,
    ItemCollection,
    ItemRead,
    JsonlRead,
    ParseError,
    Retention,
    UnsafePathError,
    VerifyReport,
    atomic_write,
    atomic_write_many,
    dump_yaml,
    field_problems,
    format_ts,
    fsync_file,
    guarded_makedirs,
    guarded_unlink,
    index_writes,
    load_yaml,
    order_bytes,
    parse_ts,
    read_bytes_nofollow,
    read_item_text,
    read_jsonl,
    remove_tree,
    stat_key,
    system_clock,
    validate_record,
)

from ._causes import outcome_unfinished
from ._model import FAILURE_PHASES, TaskEpisode, episode_year
from ._steps import device_steps, pair_steps
from ._summary import episode_summary

log = logging.getLogger("memory_plane")
OnClosed = Callable[[TaskEpisode], None]
"""Called with an episode verify just closed (interrupted, or completed from its finish event)."""

EPISODE_FILE = "episode.yaml"
EVENTS_FILE = "events.jsonl"
EXCERPT_FILE = "excerpt.jsonl"
"""What an evidence episode keeps of its events past the full-trace TTL: the steps the memories cite."""
STAGING_DIR = ".staging"  # temp files of commits (skipped by scans; crash debris is GC'd)
ITEM_FOLDERS = ("artifacts", "transcript", "transcript/chunks", "transcript/envelopes")
"""The folders an episode's folder holds besides its files (screenshots, a long task's transcript)."""
RECORDING_LOCK = ".recording.lock"
ORPHAN_GRACE_S = 600.0  # an episode folder without episode.yaml younger than this is a recording starting


def _sort_ts(entry: Mapping[str, Any]) -> datetime:
    try:
        return parse_ts(entry.get("started_at"))
    except (ValueError, TypeError):
        return datetime.min.replace(tzinfo=parse_ts("2000-01-01T00:00:00Z").tzinfo)


class OrphanFolder(FileProblemError):
    """An episode folder without episode.yaml (a process died before writing it)."""


def recording_is_live(folder: Path) -> bool:
    """Tell whether a process still records the episode in this folder: a live recorder holds the flock on its
    lock file, and the kernel drops it when the recorder dies (a crashed one's lock file is free)."""
    try:
        fd = os.open(folder / RECORDING_LOCK, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the flock taken here
    return False


class TaskEpisodeStore(ItemCollection[TaskEpisode]):
    """Reads and writes episodes; the index holds one line per committed episode."""

    layout: DatedLayout
    clock: Clock

    def __init__(self, root: Path, *, clock: Clock = system_clock, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
        layout = DatedLayout(Path(root), "episodes", EPISODE_FILE, episode_year, inner=ITEM_FOLDERS,
                             beside=(STAGING_DIR,))
        super().__init__(layout, name="episodes",
                         lock_timeout=lock_timeout, clock=clock)

    # -- paths ------------------------------------------------------------

    def episode_dir(self, episode_id: str) -> Path:
        """Folder of an episode: episodes/<yyyy>/<id>."""
        return self.layout.item_dir(episode_id)

    # -- writing ----------------------------------------------------------

    def write_header(self, ep: TaskEpisode) -> None:
        """Write episode.yaml of an episode being recorded (no index line yet)."""
        d = self.episode_dir(ep.id)
        with index_writes(self):  # a recording episode has no index line yet: the index still matches
            guarded_makedirs(self.root, d / "artifacts")
            atomic_write(d / EPISODE_FILE, dump_yaml(self._checked(ep, d / EPISODE_FILE)), root=self.root)

    def entry_for(self, ep: TaskEpisode) -> dict[str, Any]:
        """The index line of an episode."""
        o = ep.outcome
        entry: dict[str, Any] = {
            "id": ep.id,
            "status": ep.status,
            "success": o.success,
            "app": ep.app(),
            "intent": ep.normalized_goal.intent,
            "goal": " ".join(ep.user_goal.split())[:300],
            "summary": ep.summary or episode_summary(ep, []),
            "failure_phase": o.failure_phase,
            # A run that stopped rather than failed (interrupted, cut off mid-call, ended with no word right
            # after a step that worked): retrieval reads only this line, and shows no such run as a caution.
            "unfinished": True if (o.model_extra or {}).get("unfinished") is True else None,
            "device_id": ep.device_scope.device_id,
            "language": ep.device_scope.language,
            "screen": ep.device_scope.screen,
            "steps": ep.metrics.tool_steps,
            "started_at": ep.started_ts() or None,
            "path": self.layout.name_for(ep.id),
        }
        return {k: v for k, v in entry.items() if v is not None}

    def order_entries(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Oldest first (by parsed start time), then id."""
        return sorted(entries, key=lambda e: (_sort_ts(e), e["id"]))

    def sort_bytes(self, entry: dict[str, Any]) -> bytes:
        """An entry's place in ``order_entries`` as bytes (the index is compared and written streamed)."""
        return order_bytes(_sort_ts(entry), entry["id"])

    def indexable(self, record: TaskEpisode) -> bool:
        """An episode being recorded has no index line yet."""
        return record.status != "recording"

    def dump(self, record: TaskEpisode, old_text: str | None) -> str:
        """The YAML of an episode, read back through the schema first."""
        return dump_yaml(self._checked(record, self.layout.expected_path(record.id)), old_text)

    def _checked(self, ep: TaskEpisode, path: Path) -> dict[str, Any]:
        """The YAML form of an episode, read back through the schema: what is written always loads."""
        data = ep.to_yaml_dict()
        try:
            TaskEpisode.model_validate(data)
        except Exception:
            # A field was set to something the schema refuses (a caller's value, not a person's edit):
            # it is set aside, named in the log, and the rest of the episode is kept.
            fixed = validate_record(TaskEpisode, data, path, "")
            for fp in field_problems(fixed):
                log.warning("episode %s: %s", ep.id, fp.message)
            data = fixed.to_yaml_dict()
        return data

    def write(self, ep: TaskEpisode) -> Path:
        """Write episode.yaml (keeping comments) then its index line, under the episodes lock."""
        d = self.episode_dir(ep.id)
        path = d / EPISODE_FILE
        with self.lock(), index_writes(self):
            guarded_makedirs(self.root, d)
            try:
                old = read_bytes_nofollow(path).decode("utf-8", "replace")
            except FileNotFoundError:
                old = None
            # The recorder appends events without fsync (one per event would cost the task); the
            # commit is the moment they must be durable, before episode.yaml says "committed".
            try:
                fsync_file(d / EVENTS_FILE)
            except OSError as exc:  # e.g. a link planted there: the episode itself is still committed
                log.warning("episode %s: cannot flush %s: %s", ep.id, EVENTS_FILE, exc)
            # Staged in a small folder: creating the temp beside the episode, in a year folder of
            # 10,000 episodes, cost ext4 0.3-0.7 ms more per commit (bench commit), growing with the store.
            atomic_write(path, dump_yaml(self._checked(ep, path), old), stage_in=self.dir / STAGING_DIR, root=self.root)
            self.index.upsert(self.entry_for(ep))
        return path

    def write_trimmed(self, trims: Iterable[tuple[TaskEpisode, bool, bytes | None]]) -> None:
        """Write what GC keeps of episodes it trims, under one hold of the episodes lock. Each trim is an episode,
        whether its episode.yaml is written (its traceability just said) and its excerpt (excerpt.jsonl), if any:
        the excerpt is written first, and both are durable when this returns, before GC removes any part of it.

        Their events files are not flushed as ``write`` flushes them: GC removes them next. The files of the whole
        batch go through ``atomic_write_many``: the folders on their way opened once, each episode's folder flushed
        once, each file staged beside itself (not in the staging folder all commits share)."""
        with self.lock(), index_writes(self):
            writes: list[tuple[Path, bytes]] = []
            marked: list[TaskEpisode] = []
            for ep, mark, excerpt in trims:
                d = self.episode_dir(ep.id)
                path = d / EPISODE_FILE
                if excerpt is not None:
                    writes.append((d / EXCERPT_FILE, excerpt))  # the excerpt before the mark that says it is one
                if not mark:
                    continue
                try:
                    old = read_bytes_nofollow(path).decode("utf-8", "replace")
                except FileNotFoundError:
                    old = None
                writes.append((path, dump_yaml(self._checked(ep, path), old).encode("utf-8")))
                marked.append(ep)
            atomic_write_many(self.root, writes)
            for ep in marked:
                self.index.upsert(self.entry_for(ep))

    # -- reading ----------------------------------------------------------

    def load_path(self, path: Path) -> TaskEpisode:
        """Load one episode.yaml; ParseError/ValidationError on bad content."""
        text = read_item_text(path)
        return validate_record(TaskEpisode, load_yaml(text, path), path, text)

    def events(self, episode_id: str) -> JsonlRead:
        """The events of an episode (a torn last line is skipped)."""
        return read_jsonl(self.episode_dir(episode_id) / EVENTS_FILE)

    def newest(self, limit: int | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """Index entries newest first (by parsed start time), optionally by status."""
        items = [e for e in self.entries() if status is None or e.get("status") == status]
        items.sort(key=_sort_ts, reverse=True)
        return items[:limit] if limit else items

    def symlinks(self) -> list[Path]:
        """The episodes folder itself when it is a symlink (never followed)."""
        return [self.dir] if self.linked() else []

    def iter_items(self) -> Iterator[ItemRead[TaskEpisode]]:
        """Every episode.yaml under episodes/<yyyy>/ (symlinks never followed)."""
        if self.linked():
            return
        for ep_dir in self.layout.item_dirs():
            path = ep_dir / EPISODE_FILE
            try:
                key = stat_key(path)
                yield ItemRead(path, self.load_path(path), None, key)
            except FileNotFoundError:
                if self.is_recording_live(ep_dir.name) or _younger_than(ep_dir, ORPHAN_GRACE_S):
                    # A recorder is starting right now: it makes the folder, then takes its lock,
                    # then writes the header. Only a folder left like this for a while is debris.
                    continue
                # A kill between creating the folder and writing its header: debris, not corruption.
                yield ItemRead(path, None, OrphanFolder(ep_dir, None, "episode folder without episode.yaml"))
            except FileProblemError as exc:
                yield ItemRead(path, None, exc)
            except OSError as exc:
                yield ItemRead(path, None, ParseError(path, None, f"unreadable: {exc.strerror or exc}"))

    def is_orphan(self, item: ItemRead[TaskEpisode]) -> bool:
        """Whether an item is an episode folder without its episode.yaml (debris of a kill)."""
        return isinstance(item.problem, OrphanFolder)

    def verify(self, report: VerifyReport, now: Any, *, on_closed: OnClosed | None = None) -> None:
        """Check every episode, close crashed recordings (``on_closed`` runs the jobs their commit would have),
        name missing artifacts (their repair: excerpt_only), rebuild the index."""
        from ._upkeep import verify_episodes

        verify_episodes(self, report, now, on_closed)

    def collect(self, retention: Retention, report: GcReport, now: Any, dry_run: bool, *,
                items: list[ItemRead[TaskEpisode]] | None = None) -> list[str]:
        """Drop traces and summaries past their TTL (not those evidence for a memory), and crash debris."""
        from ._upkeep import collect_episodes

        return collect_episodes(self, retention, report, now, dry_run, items)


    # -- crash recovery -----------------------------------------------------

    def discard_unwritten(self, ep: TaskEpisode) -> bool:
        """Remove the folder of an episode whose commit failed and whose episode.yaml was never written (a full
        disk from its start): it holds no episode, only debris (an empty or torn events.jsonl, the recording lock,
        empty folders), which nothing could ever read. A folder holding episode.yaml is kept: verify closes it.
        Returns whether the folder was removed."""
        d = self.episode_dir(ep.id)
        with self.lock():
            if os.path.lexists(d / EPISODE_FILE) or not d.is_dir() or d.is_symlink():
                return False
            ep.release_recording()  # ours: it is let go of (and its file removed) before the folder goes
            if self.is_recording_live(ep.id):
                return False  # held by another recorder of the same id: never taken from it
            remove_tree(self.root, d)
        return not os.path.lexists(d)

    def is_recording_live(self, episode_id: str) -> bool:
        """Tell whether a process still records this episode (it holds the recording lock)."""
        return recording_is_live(self.episode_dir(episode_id))

    def mark_interrupted(self, ep: TaskEpisode, now: datetime | None = None) -> TaskEpisode | None:
        """Close an episode its recorder never finished: failed, phase ``interrupted``.

        Checked and written under one hold of the lock: an episode that was committed, or whose
        recorder is alive, is left alone (returns None), so verify never overwrites a commit.
        """
        with self.lock():
            cur = self.get(ep.id)
            if cur is None or cur.status != "recording" or self.is_recording_live(ep.id):
                return None
            return self._interrupt(cur, now or self.clock())

    def _interrupt(self, ep: TaskEpisode, now: datetime) -> TaskEpisode:
        events = self.events(ep.id).records
        if events and events[-1].get("type") == "finish":
            return self._complete(ep, events)
        ep.status = "interrupted"
        ep.outcome.success = False
        ep.outcome.failure_phase = "interrupted"
        ep.outcome.failure_reason = ep.outcome.failure_reason or "restart: the recorder stopped before finish"
        if ep.ended_at is None:
            last = events[-1].get("ts") if events else None
            ep.ended_at = last or format_ts(now)
        ep.metrics.events = len(events)
        ep.metrics.tool_steps = sum(1 for e in events if e.get("type") == "tool_call")
        ep.summary = episode_summary(ep, events)
        self.write(ep)
        try:
            guarded_unlink(self.root, self.episode_dir(ep.id) / RECORDING_LOCK)  # nobody holds it: the recorder died
        except (OSError, UnsafePathError):
            pass
        return ep

    def _complete(self, ep: TaskEpisode, events: list[dict[str, Any]]) -> TaskEpisode:
        """Close a recording whose events end with its finish event: the task finished, only its commit
        did not happen (a full disk, a kill just after finish). Its outcome is the finish
        event's (the task's own last word)."""
        finish = events[-1]
        ok = finish.get("success") is True
        phase = _finish_text(finish, "failure_phase")
        ep.status = "active"
        ep.outcome.success = ok
        ep.outcome.failure_phase = None if ok else (phase if phase in FAILURE_PHASES else "unknown")
        for key in ("final_state", "completion_reason", "failure_reason", "error"):
            text = _finish_text(finish, key)
            if text is not None and not (ok and key in ("failure_reason", "error")):
                setattr(ep.outcome, key, text)
        if not ok and not ep.outcome.failure_reason:
            ep.outcome.failure_reason = ep.outcome.completion_reason  # a recorder that kept only this word
        if ep.ended_at is None:
            ep.ended_at = finish.get("ts") or ep.started_at
        ep.metrics.events = len(events)
        ep.metrics.tool_steps = sum(1 for e in events if e.get("type") == "tool_call")
        ep.summary = episode_summary(ep, events)
        if not ok and outcome_unfinished(ep.outcome, device_steps(pair_steps(events))):
            ep.outcome.unfinished = True  # type: ignore[attr-defined]  # as the recorder's finish marks it
        self.write(ep)
        try:
            guarded_unlink(self.root, self.episode_dir(ep.id) / RECORDING_LOCK)
        except (OSError, UnsafePathError):
            pass
        return ep


def _finish_text(finish: Mapping[str, Any], key: str) -> str | None:
    value = finish.get(key)
    return value if isinstance(value, str) and value else None


def _younger_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - os.lstat(path).st_mtime < seconds
    except OSError:
        return True  # gone meanwhile: nothing to report
