"""TaskEpisodeWriter: the synchronous episode write plus one bounded background worker."""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from memory_plane.lifecycle import (
    UnsafePathError,
    atomic_write,
    dumps_compact,
    format_ts,
    guarded_touch,
    guarded_unlink,
    is_safe_id,
    read_bytes_nofollow,
)

from ._model import TaskEpisode
from ._store import TaskEpisodeStore

log = logging.getLogger("memory_plane")

@dataclass(frozen=True)
class EpisodeJob:
    """Background work run once for each committed episode (lesson extraction, outcome updates).

    ``name`` names its marker files (``.done-<name>``, ``.failed-<name>``), so it must stay the same across
    releases. A job with ``takes_events`` is called ``run(ep, events)`` with the events the writer read once for
    all of the episode's jobs; any other is called ``run(ep)`` and reads what it needs itself.
    """

    name: str
    run: Callable[..., Any]
    takes_events: bool = False

    def __call__(self, ep: TaskEpisode, events: _EpisodeEvents) -> Any:
        """Run the job for one episode (its events read from disk on first use)."""
        return self.run(ep, events.get()) if self.takes_events else self.run(ep)


@dataclass
class WriterStats:
    """Counters of what the writer did; exposed as ``MemoryPlane.stats()``."""

    committed: int = 0
    commit_errors: int = 0
    jobs_done: int = 0
    jobs_failed: int = 0
    jobs_retried: int = 0
    jobs_dropped: int = 0
    jobs_deferred: int = 0
    jobs_caught_up: int = 0
    jobs_slow: int = 0
    last_error: str | None = None
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form of the counters."""
        return {k: v for k, v in self.__dict__.items() if k != "errors"}


DONE_PREFIX = ".done-"  # episode folder marker of a background job that ran (empty)
FAILED_PREFIX = ".failed-"  # episode folder marker of a background job that failed (JSON: when, why)


class _Signal(Enum):
    """What the writer's queue carries besides work: a wake-up (drain the backlog) and the stop."""

    WAKE = "wake"
    STOP = "stop"


@dataclass(frozen=True)
class _Work:
    """One queued piece of background work and the name its errors and counters use."""

    name: str
    fn: Callable[[], Any]


class _EpisodeEvents:
    """The events of one episode, read from disk at most once for all of its jobs."""

    def __init__(self, store: TaskEpisodeStore, episode_id: str, records: list[dict[str, Any]] | None) -> None:
        self.store = store
        self.episode_id = episode_id
        self.records = records

    def get(self) -> list[dict[str, Any]]:
        """The episode's events (read on first use: a job whose marker exists never costs a read)."""
        if self.records is None:
            self.records = self.store.events(self.episode_id).records
        return self.records


class TaskEpisodeWriter:
    """Writes committed episodes and runs their background jobs; never raises into the caller."""

    def __init__(self, store: TaskEpisodeStore, *, jobs: list[EpisodeJob] | None = None, queue_size: int = 64,
                 slow_after_s: float = 30.0, retries: int = 2, retry_delay: float = 0.05) -> None:
        self.store = store
        self.jobs: list[EpisodeJob] = list(jobs or [])
        # A thread cannot be stopped from outside: a job slower than this is counted (jobs_slow) and logged,
        # never interrupted; a job that may block must bound its own waits (every lock takes a timeout).
        self.slow_after_s = slow_after_s
        self.retries = retries
        self.retry_delay = retry_delay
        self.stats = WriterStats()
        self._queue: queue.Queue[_Work | _Signal] = queue.Queue(maxsize=queue_size)
        self._pending = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._backlog: dict[str, TaskEpisode] = {}  # episodes whose jobs did not fit in the queue
        self.max_backlog = 10_000

    def _record_error(self, msg: str) -> None:
        self.stats.last_error = msg
        self.stats.errors.append(msg)
        del self.stats.errors[:-20]

    def commit(self, ep: TaskEpisode) -> bool:
        """Write the episode now, then queue its jobs; return False (and log) on failure."""
        try:
            ep.status = "active" if ep.status == "recording" else ep.status
            self.store.write(ep)
            ep.committed()
            self.stats.committed += 1
        except Exception as exc:
            self.stats.commit_errors += 1
            msg = f"commit {getattr(ep, 'id', '?')}: {type(exc).__name__}: {exc}"
            self._record_error(msg)
            log.error("memory: %s", msg)
            self._discard_debris(ep)
            return False
        self.run_jobs(ep)
        return True

    def _discard_debris(self, ep: TaskEpisode) -> None:
        """After a failed commit: an episode folder that never got its episode.yaml (a disk full from the task's
        start) is removed, not left with an empty events.jsonl and a recording lock for good."""
        try:
            if self.store.discard_unwritten(ep):
                log.error("memory: episode %s was never written; its folder is removed", ep.id)
        except Exception as exc:  # the commit already failed and said so: this is only the sweep after it
            log.warning("memory: cannot remove the folder of unwritten episode %s: %s", getattr(ep, "id", "?"), exc)

    def run_jobs(self, ep: TaskEpisode) -> None:
        """Queue an episode's jobs; when the queue is full they wait in a backlog instead of being lost.

        Jobs run in commit order: while older episodes wait in the backlog, a new one waits behind them
        (lessons depend on the order of the episodes, never on how far behind the worker is)."""
        with self._cond:
            if self._backlog and ep.id not in self._backlog:
                if len(self._backlog) < self.max_backlog:
                    self._backlog[ep.id] = ep
                    self.stats.jobs_deferred += 1
                else:
                    self.stats.jobs_dropped += 1
                return
        self._queue_jobs(ep)

    def _queue_jobs(self, ep: TaskEpisode, *, first: bool = False) -> None:
        """Put an episode's jobs that have not run on the queue (the rest of them into the backlog when it is full:
        at its head when ``first``, an episode taken from there, which is older than every one still there)."""
        # One read of events.jsonl for all the jobs (the recorder's, from finish, when it has them); a
        # backlogged episode keeps none in memory and reads them again when its jobs are queued.
        events = _EpisodeEvents(self.store, ep.id, ep.take_events())
        for job in self.jobs:
            if self.job_done(ep, job.name):
                continue
            if not self.submit(f"{job.name}({ep.id})", self._marked_call(job, ep, events), drop_ok=False):
                with self._cond:
                    if len(self._backlog) < self.max_backlog:
                        if first:  # back at the head: it is older than every episode still waiting
                            self._backlog = {ep.id: ep, **self._backlog}
                        else:
                            self._backlog[ep.id] = ep
                        self.stats.jobs_deferred += 1
                    else:
                        self.stats.jobs_dropped += 1  # verify's catch-up still finds it by its missing marker
                return

    def job_done(self, ep: TaskEpisode, name: str) -> bool:
        """Whether a job already ran to the end for this episode (its marker file exists)."""
        try:
            return (self.store.episode_dir(ep.id) / f"{DONE_PREFIX}{name}").exists()
        except ValueError:
            return False

    def _marked_call(self, job: EpisodeJob, ep: TaskEpisode, events: _EpisodeEvents) -> Callable[[], Any]:
        def call() -> Any:
            return self._run_marked(job, ep, events)

        return call

    def _run_marked(self, job: EpisodeJob, ep: TaskEpisode, events: _EpisodeEvents) -> Any:
        """The one runner of a job, wherever it is started from: run it, then leave its done-marker (or its
        failed-marker, and raise); returns what the job returned."""
        name = job.name
        d = self.store.episode_dir(ep.id)
        try:
            result = job(ep, events)
        except Exception as exc:
            # Left beside the episode so that `verify --json` (another process, from cron) can say which
            # job failed, when and why; its catch-up runs it again, and the marker goes once it succeeds.
            try:
                atomic_write(d / f"{FAILED_PREFIX}{name}", dumps_compact(
                    {"job": name, "episode": ep.id, "failed_at": format_ts(self.store.clock()),
                     "error": f"{type(exc).__name__}: {exc}"[:500]}) + "\n", root=self.store.root)
            except (OSError, UnsafePathError):
                pass
            raise
        try:
            # The marker says "applied": a catch-up after a crash or an overflow skips this job.
            guarded_touch(self.store.root, d / f"{DONE_PREFIX}{name}")
            guarded_unlink(self.store.root, d / f"{FAILED_PREFIX}{name}")
        except (OSError, UnsafePathError) as exc:
            log.warning("memory: cannot mark %s done for %s: %s", name, ep.id, exc)
        return result

    def run_now(self, ep: TaskEpisode, names: Collection[str] | None = None, *,
                strict: bool = False) -> dict[str, Any]:
        """Run an episode's jobs that lack their done-marker here and now (all, or those in ``names``), each
        through the same runner as the queue's; what each returned, by job name. A failure is marked and
        logged, and raised only when ``strict`` (an import stops; verify and the catch-up go on)."""
        events = _EpisodeEvents(self.store, ep.id, ep.take_events())
        results: dict[str, Any] = {}
        for job in self.jobs:
            if (names is not None and job.name not in names) or self.job_done(ep, job.name):
                continue
            try:
                results[job.name] = self._run_marked(job, ep, events)
            except Exception as exc:  # reported by its marker, never raised into cron
                if strict:
                    raise
                log.error("memory: %s(%s) failed: %s", job.name, ep.id, exc)
        return results

    # -- marker files: what verify reads and catches up (another process, from cron) -------------------

    def failed_jobs(self, min_age_s: float = 600.0) -> list[dict[str, Any]]:
        """Background jobs whose last run failed (job, episode, failed_at, error) and when verify retries them."""
        names = [j.name for j in self.jobs]
        out: list[dict[str, Any]] = []
        for e in self.store.iter_entries():  # line by line: a large store's index is not held
            if not is_safe_id(e["id"]):
                continue
            # A plain join (the id is checked): this looks at every episode of the store.
            item = self.store.layout.expected_path(e["id"])
            d = item.parent
            for name in names:
                try:
                    raw = read_bytes_nofollow(d / f"{FAILED_PREFIX}{name}")
                except OSError:
                    continue
                try:
                    info = json.loads(raw)
                except ValueError:
                    info = {}
                info = info if isinstance(info, dict) else {}
                try:
                    due = item.stat().st_mtime + min_age_s
                except OSError:
                    due = 0.0
                # verify's catch-up leaves recent episodes to the agent's own worker (see catch_up).
                retry = f"after {format_ts(datetime.fromtimestamp(due, timezone.utc))}" if due > time.time() \
                    else "by the next verify (lifecycle verify runs it again)"
                out.append({"episode": e["id"], "job": name, "failed_at": info.get("failed_at"),
                            "error": info.get("error"), "retry": retry})
        return out

    def catch_up(self, limit: int = 500, min_age_s: float = 600.0) -> list[str]:
        """Run the background jobs of committed episodes that lack their done-markers; return their ids.

        Episodes committed in the last ``min_age_s`` are left to the agent's own worker, which may still
        be running them: a job must be applied once, not once per process.
        """
        done: list[str] = []
        names = [j.name for j in self.jobs]
        cutoff = time.time() - min_age_s
        for e in self.store.iter_entries():  # line by line: a large store's index is not held
            if len(done) >= limit:
                break
            if e.get("status") not in ("active", "interrupted"):
                continue
            try:
                d = self.store.episode_dir(e["id"])
            except ValueError:
                continue
            try:
                done_all = all((d / f"{DONE_PREFIX}{n}").exists() for n in names)
                if done_all or (d / self.store.layout.file).stat().st_mtime > cutoff:
                    continue
            except OSError:
                continue
            ep = self.store.get(e["id"])
            if ep is None:
                continue
            self.run_now(ep)
            done.append(ep.id)
        return done

    # -- the worker -----------------------------------------------------------------------------------

    def submit(self, name: str, fn: Callable[[], Any], *, drop_ok: bool = True) -> bool:
        """Queue background work without waiting; a full queue refuses it (logged, counted when dropped)."""
        if self._closed:
            self.stats.jobs_dropped += 1
            return False
        self._ensure_worker()
        with self._cond:
            self._pending += 1
        try:
            self._queue.put_nowait(_Work(name, fn))
        except queue.Full:
            with self._cond:
                self._pending -= 1
                self._cond.notify_all()
            if drop_ok:
                self.stats.jobs_dropped += 1
                log.warning("memory: background queue full, dropped %s", name)
            return False
        return True

    def _ensure_worker(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="memplane-writer", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            if self._queue.empty():
                self._drain_backlog()
            item = self._queue.get()
            if item is _Signal.STOP:
                return
            try:
                if isinstance(item, _Work):  # a wake-up only brings the loop back to the backlog
                    self._run_one(item.name, item.fn)
            finally:
                with self._cond:
                    self._pending -= 1
                    self._cond.notify_all()

    def _drain_backlog(self) -> None:
        # The queue is empty: backlog episodes go back in (the worker, never the caller, pays for it).
        while True:
            with self._cond:
                if not self._backlog or self._queue.qsize() >= max(1, self._queue.maxsize // 2):
                    return
                eid, ep = next(iter(self._backlog.items()))
                del self._backlog[eid]
                self._pending += 1  # in transfer: flush must not see "nothing left" in between
            try:
                self.stats.jobs_caught_up += 1
                self._queue_jobs(ep, first=True)
            finally:
                with self._cond:
                    self._pending -= 1
                    self._cond.notify_all()

    def _run_one(self, name: str, fn: Callable[[], Any]) -> None:
        start = time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                fn()
                self.stats.jobs_done += 1
                break
            except (OSError, TimeoutError) as exc:  # transient: disk busy, lock timeout
                if attempt < self.retries:
                    self.stats.jobs_retried += 1
                    time.sleep(self.retry_delay * (2**attempt))
                    continue
                self.stats.jobs_failed += 1
                self._record_error(f"{name}: {type(exc).__name__}: {exc}")
                log.error("memory: background %s failed after %d tries: %s", name, attempt + 1, exc)
            except Exception as exc:
                self.stats.jobs_failed += 1
                self._record_error(f"{name}: {type(exc).__name__}: {exc}")
                log.exception("memory: background %s failed", name)
                break
        elapsed = time.monotonic() - start
        if elapsed > self.slow_after_s:
            self.stats.jobs_slow += 1
            log.warning("memory: background %s took %.1fs (slow after %.1fs)", name, elapsed, self.slow_after_s)

    def pending(self) -> int:
        """Pieces of background work queued or running, plus episodes waiting in the backlog."""
        with self._cond:
            return self._pending + len(self._backlog)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until queued and backlogged work is done; return False if the timeout passed first."""
        deadline = time.monotonic() + timeout
        if self._backlog:
            self._ensure_worker()
            with self._cond:
                self._pending += 1
            self._queue.put(_Signal.WAKE)  # wake the worker so it drains the backlog
        with self._cond:
            while self._pending > 0 or self._backlog:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float = 10.0) -> bool:
        """Finish queued work and stop the worker."""
        ok = self.flush(timeout)
        self._closed = True
        if self._thread is not None and self._thread.is_alive():
            try:
                self._queue.put_nowait(_Signal.STOP)
            except queue.Full:
                pass
            self._thread.join(timeout=max(0.1, timeout))
        return ok
