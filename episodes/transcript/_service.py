"""StepMemoryService: visual summaries made in the background, bounded; the caller never waits."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ._lens import LensOutput, RequestBudget, VisualJob, VisualLens, current_budget, describe
from ._neutral import check_summary
from ._records import SummaryEvidence, SummaryRecord

log = logging.getLogger("memory_plane")


@dataclass
class ServiceStats:
    """Counters of the summary service."""

    submitted: int = 0
    ready: int = 0
    failed: int = 0
    retried: int = 0
    rejected_outputs: int = 0
    dropped: int = 0
    slow: int = 0  # answers that took longer than the service's timeout (used all the same: they were paid for)
    discarded: int = 0  # answers thrown away for any reason but their content: must stay 0
    caller_waits: int = 0  # submits that had to block the caller: must stay 0


class StepMemoryService:
    """Runs a lens per step on a small pool (default 2), with retries, a timeout and a bounded queue."""

    def __init__(self, lens: VisualLens, publish: Callable[[SummaryRecord], None], *, concurrency: int = 2,
                 retries: int = 2, timeout_s: float = 30.0, max_queued: int = 256,
                 clock_text: Callable[[], str] | None = None, markers: tuple[str, ...] = (),
                 backoff_s: float = 0.5) -> None:
        self.lens = lens
        self.backoff_s = backoff_s
        self.publish = publish
        self.retries = retries
        self.timeout_s = timeout_s
        self.max_queued = max_queued
        self.clock_text = clock_text or (lambda: "")
        self.markers = markers
        self.stats = ServiceStats()
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="memplane-summary")
        self._futures: list[Any] = []  # so that close() can cancel what has not started
        self._pending = 0
        self._cond = threading.Condition()

    def submit(self, job: VisualJob, version: int) -> bool:
        """Queue a summary without blocking; a full queue fails the summary at once (the ledger then
        places a placeholder) rather than making the agent wait."""
        t0 = time.monotonic()
        self.stats.submitted += 1
        # Evidence is what the lens really got: a missing post-action image stays null (never claimed as seen).
        r = job.record
        evidence = SummaryEvidence(decision_image=r.pre_image if job.decision_image else None,
                                   post_image=r.post_image if job.post_image else None,
                                   used_ui_diff=job.ui_diff is not None, lens=describe(self.lens))
        self.publish(SummaryRecord(step=job.record.step, version=version, status="pending", evidence=evidence,
                                   ts=self.clock_text()))
        with self._cond:
            if self._pending >= self.max_queued:
                self.stats.dropped += 1
                self.publish(SummaryRecord(step=job.record.step, version=version, status="failed",
                                           evidence=evidence, reason="summary queue full", ts=self.clock_text()))
                return False
            self._pending += 1
        self._track(self._pool.submit(self._run, job, version, evidence))
        if time.monotonic() - t0 > 0.05:
            self.stats.caller_waits += 1
        return True

    def _run(self, job: VisualJob, version: int, evidence: SummaryEvidence) -> None:
        token = current_budget.set(RequestBudget())  # one budget for every attempt of this step
        try:
            reason = "no attempt"
            backoffs = 0
            for attempt in range(self.retries + 1):
                start = time.monotonic()
                unavailable = False
                try:
                    out: LensOutput | None = self.lens.summarize(job)
                except Exception as exc:  # a lens failure is data, never the agent's problem
                    reason = f"{type(exc).__name__}: {exc}"
                    out = None
                    if not getattr(exc, "retryable", True):
                        break  # a refused request (400/401/403), or the step's requests are spent
                    unavailable = True
                if time.monotonic() - start > self.timeout_s:
                    # Counted, not thrown away: the lens kept its own deadline and the answer was paid for.
                    self.stats.slow += 1
                if out is not None:
                    bad = check_summary(out.text, self.markers)
                    if bad is None:
                        ev = evidence.model_copy(update={"model": out.model, "prompt_version": out.prompt_version})
                        self.publish(SummaryRecord(step=job.record.step, version=version, status="ready",
                                                   text=out.text.strip(), evidence=ev, ts=self.clock_text()))
                        self.stats.ready += 1
                        return
                    self.stats.rejected_outputs += 1
                    reason = f"rejected: {bad}"
                if attempt < self.retries:
                    self.stats.retried += 1
                    if unavailable and self.backoff_s > 0:
                        # The models were unavailable: wait longer before each new round (the lens also keeps
                        # every model's own retryDelay as a floor).
                        time.sleep(self.backoff_s * 2 ** backoffs)
                        backoffs += 1
            self.stats.failed += 1
            self.publish(SummaryRecord(step=job.record.step, version=version, status="failed", evidence=evidence,
                                       reason=reason[:300], ts=self.clock_text()))
        finally:
            current_budget.reset(token)
            with self._cond:
                self._pending -= 1
                self._cond.notify_all()

    def submit_call(self, fn: Callable[[], None]) -> bool:
        """Run other background work (a chunk capsule) on the same bounded pool, without waiting."""
        with self._cond:
            if self._pending >= self.max_queued:
                self.stats.dropped += 1
                return False
            self._pending += 1

        def wrapped() -> None:
            try:
                fn()
            except Exception:  # background work never reaches the agent
                log.exception("memory: background transcript job failed")
            finally:
                with self._cond:
                    self._pending -= 1
                    self._cond.notify_all()

        self._track(self._pool.submit(wrapped))
        return True

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait for queued summaries (tests and shutdown only)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def _track(self, fut: Any) -> None:
        with self._cond:
            self._futures = [f for f in self._futures if not f.done()]
            self._futures.append(fut)

    def close(self, timeout: float = 30.0) -> bool:
        """Stop the pool: work not started is cancelled, running work gets at most ``timeout`` seconds;
        False when some was cancelled or still running (a step without its summary stays pending)."""
        cancelled = 0
        with self._cond:
            for f in self._futures:
                if f.cancel():
                    cancelled += 1
            self._pending -= cancelled
            self._cond.notify_all()
        self._pool.shutdown(wait=False)
        done = self.flush(timeout) and cancelled == 0
        if not done:
            log.warning("memory: transcript summaries still running after %.0fs; left pending", timeout)
        return done
