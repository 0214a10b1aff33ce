"""Layered compaction of the transcript ledger: segments, capsules, chunks, folds, eras, the emergency.

A segment of turns closes at a subgoal or activity change (or a size), a capsule lens writes its
three-band chunk in the background, and at a compaction event the ready chunks replace their raw turns
in the frozen zone F (older chunks merge into eras); past the hard threshold an emergency snapshot
folds everything. TranscriptLedger holds one and hands it what it reads, explicitly: the turns and
the visual summaries (the ledger's lists, read here), the steps log both write through, the pool that
runs capsule jobs, and at each step the prompt's size (``PromptGauge``). Segments, chunks, eras, the
snapshot, the frozen zone F they render to, the capsule lens and the goal are its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from memory_plane.lifecycle import Clock, format_ts, read_bytes_nofollow

from .._transcript_config import TranscriptConfig
from ._capsules import Capsule, CapsuleLens, OfflineCapsuleLens, check_capsule
from ._chunks import Chunk, Era, Segment
from ._lens import RequestBudget, current_budget
from ._messages import Message
from ._perception import estimate_text_tokens
from ._records import StepRecord, SummaryBook
from ._snapshot import compose_snapshot
from ._step_rows import ledger_rows
from ._steps_log import StepsLog
from ._turns import Turn, frozen_key, frozen_messages, turn_messages

log = logging.getLogger("memory_plane")
CAPSULE_RETRY_ROUNDS = 3
FAILED_RUN = 2  # failed steps in a row after which another tool is a new strategy
EXTERNAL_MIN_TOKENS = 200  # an output of a tool off the screen this large is a result the segment ends on
_POSITION_KEYS = ("x", "y", "points", "start", "end", "coordinates", "coordinate", "start_x", "index", "element",
                  "text", "key", "keycode", "package", "app", "activity", "uri", "url")


def _failed(r: StepRecord) -> bool:
    v = r.validator or {}
    return v.get("executed") is False or v.get("status") in ("failed", "error") or v.get("ok") is False


def segment_shift(open_steps: list[StepRecord], rec: StepRecord, pause_s: float) -> str | None:
    """Why ``rec`` starts a new segment, from the records' structure alone (times, plan revisions, tool names and
    validator results; never their words), or None: a pause of at least ``pause_s`` seconds since the previous
    step ("pause"); the plan rewritten for the same subgoal, or another tool after ``FAILED_RUN`` failed steps in
    a row ("strategy_change")."""
    from memory_plane.lifecycle import parse_ts

    if not open_steps:
        return None
    prev = open_steps[-1]
    try:
        gap = (parse_ts(rec.ts) - parse_ts(prev.ts)).total_seconds()
    except (TypeError, ValueError):
        gap = 0.0
    if pause_s > 0 and gap >= pause_s:
        return "pause"
    if (rec.plan_revision is not None and prev.plan_revision is not None and rec.plan_revision != prev.plan_revision
            and rec.subgoal_hash == prev.subgoal_hash):
        return "strategy_change"  # a new plan for the same milestone: another way to reach it
    run = open_steps[-FAILED_RUN:]
    if len(run) == FAILED_RUN and all(map(_failed, run)) and rec.action.get("name") not in {
            r.action.get("name") for r in run}:
        return "strategy_change"  # the failing tool is given up for another one
    return None


def external_result(rec: StepRecord) -> bool:
    """Whether a step brought back an important result from outside the screen: a tool that touches no screen
    element (no position, element, text, key or app in its arguments, so neither a tap nor a back key) and
    returned a substantial output (``EXTERNAL_MIN_TOKENS`` or more, or one large enough to be enveloped)."""
    args = rec.action.get("args") or {}
    if not args or any(k in args for k in _POSITION_KEYS) or _failed(rec) or not rec.result:
        return False
    return rec.envelope_ref is not None or estimate_text_tokens(rec.result) >= EXTERNAL_MIN_TOKENS


class PromptGauge(Protocol):
    """The size of the prompt a compaction step weighs, as the ledger that renders it measures it."""

    def tokens_of(self, m: Message) -> int:
        """Heuristic size of one message."""

    def estimated_tokens(self) -> int:
        """Heuristic size of the rendered transcript."""

    def prompt_tokens(self) -> int:
        """The size the thresholds read."""

    def prompt_changed(self) -> None:
        """F was rewritten: the last measured prompt size no longer describes the prompt."""


class LayeredCompaction:
    """Segments, chunks, folds, eras and the emergency snapshot of one transcript, and the zone F they render."""

    def __init__(self, turns: list[Turn], summaries: SummaryBook, log: StepsLog,
                 submit: Callable[[Callable[[], None]], bool],
                 config: TranscriptConfig, clock: Clock, session_id: str, lock: threading.RLock, *,
                 capsule_lens: CapsuleLens | None = None, goal: str | None = None) -> None:
        self.turns = turns  # every committed turn, in order (the ledger appends; compaction only reads)
        self.summaries = summaries  # the visual summaries a capsule lens is given
        self.log = log
        self._submit = submit  # runs a capsule job in the background; False when it was refused
        self.dir = log.dir
        self.config = config
        self.clock = clock
        self.session_id = session_id
        self._lock = lock  # the ledger's: a capsule lands from a worker thread while a turn is committed
        self.capsule_lens: CapsuleLens = capsule_lens or OfflineCapsuleLens()  # writes a closed segment's capsule
        self.goal = goal  # the task's goal, as the snapshot names it
        self._frozen_cache: tuple[tuple[Any, ...], list[Message]] | None = None
        self.chunks: list[Chunk] = []
        self.eras: list[Era] = []
        self.snapshot: str | None = None
        self.snapshot_state: dict[str, Any] | None = None  # the snapshot's structured fields (the next one merges them)
        self.era_count = 0
        self.chunk_count = 0
        self.folded_until = 0
        self.seg_start = 1
        self.closed: list[Segment] = []
        self.plan_hint: str | None = None
        self.events: list[dict[str, Any]] = []  # compaction events (what the benchmark measures)

    def frozen_messages(self) -> list[Message]:
        """The frozen zone F as messages (snapshot, periods, eras, chunks), rebuilt only when one of them changed."""
        key = frozen_key(self.snapshot, self.eras, self.chunks)
        if self._frozen_cache is None or self._frozen_cache[0] != key:
            self._frozen_cache = (key, frozen_messages(self.snapshot, self.eras, self.chunks))
        return self._frozen_cache[1]

    def frozen_tokens(self) -> int:
        """Heuristic size of the frozen zone F (snapshot, periods, eras, chunks)."""
        return sum(estimate_text_tokens(m.text()) for m in self.frozen_messages())

    def replay(self, r: Mapping[str, Any]) -> bool:
        """Apply one steps.jsonl line of compaction (a cold start); False for a line that is not one."""
        kind = r.get("kind")
        if kind == "segment":
            self.closed.append(self._segment(int(r["start"]), int(r["end"]), str(r.get("reason", ""))))
            self.seg_start = max(self.seg_start, int(r["end"]) + 1)
        elif kind == "verdict":
            for seg in self.closed:
                if (seg.start, seg.end) == (r.get("start"), r.get("end")) and r.get("text"):
                    seg.extra.setdefault("verdicts", []).append(str(r["text"]))
        elif kind == "fold":
            self._apply_fold([self._read_chunk(c) for c in r.get("chunks", [])], int(r["until"]))
        elif kind == "era":
            self._apply_era(int(r["count"]), bool(r.get("paragraph")))
        elif kind == "era_narrow":
            self.eras[int(r["index"])].narrative = False
        elif kind == "period_merge":
            self._apply_period_merge(int(r["index"]))
        elif kind == "snapshot":
            self.snapshot = str(r["text"])
            self.snapshot_state = r.get("state") if isinstance(r.get("state"), dict) else None
            self.events.append({"at": int(r.get("at", 0)), "kind": "snapshot", "before": 0, "after": 0})
            self.folded_until = max(self.folded_until, int(r["until"]))
            self.chunks, self.eras = [], []
            # A segment across the snapshot's edge was re-recorded as its tail: keep only segments after it.
            self.closed = [seg for seg in self.closed if seg.start > self.folded_until]
        else:
            return False
        return True

    def resume(self) -> None:
        """After a cold start: capsules lost with the process are asked for again (their raw turns stay)."""
        for seg in self.closed:
            if seg.end > self.folded_until:
                self._dispatch_capsule(seg)

    def turns_records(self, first: int, last: int) -> list[StepRecord]:
        """The records of steps first..last."""
        return [t.record for t in self.turns[first - 1: last]]

    def plan_event(self, subgoal_hash: str) -> None:
        """A plan write announced a new subgoal: only a hint until an executed step carries it."""
        self.plan_hint = subgoal_hash

    def _close(self, end: int, reason: str) -> None:
        if end < self.seg_start:
            return
        seg = self._segment(self.seg_start, end, reason)
        self.closed.append(seg)
        self.seg_start = end + 1
        self.log.append({"kind": "segment", "start": seg.start, "end": seg.end, "reason": reason})
        self._dispatch_capsule(seg)

    def _segment(self, start: int, end: int, reason: str) -> Segment:
        """A closed segment with its ordinal (the number its chunk shows), in the order segments close."""
        self.chunk_count += 1
        return Segment(start, end, reason, extra={"number": self.chunk_count})

    def _dispatch_capsule(self, seg: Segment) -> None:
        def job() -> None:
            self._make_chunk(seg)

        if not self._submit(job):
            seg.failed = True
            seg.failed_at = len(self.turns)

    def _make_chunk(self, seg: Segment) -> None:
        records = [t.record for t in self.turns[seg.start - 1: seg.end]]
        summaries = {s: sr.text for s in range(seg.start, seg.end + 1)
                     if (sr := self.summaries.get(s)) is not None and sr.status == "ready" and sr.text}
        token = current_budget.set(RequestBudget())  # one request budget for every attempt of this capsule
        try:
            self._capsule_attempts(seg, records, summaries)
        finally:
            current_budget.reset(token)

    def _capsule_attempts(self, seg: Segment, records: list[StepRecord], summaries: dict[int, str]) -> None:
        problem = "no attempt"
        for _ in range(self.config.transcript.summary_retries + 1):
            seg.attempts += 1
            try:
                capsule = self.capsule_lens.capsule(records, summaries)
            except Exception as exc:
                problem = f"{type(exc).__name__}: {exc}"
                if getattr(exc, "retryable", True) is False:
                    break  # a refused request is not sent again
                continue
            problem = check_capsule(capsule, records) or ""
            if not problem:
                self._store_chunk(seg, records, capsule, getattr(self.capsule_lens, "name", "lens"),
                                  getattr(capsule, "model", None))
                return
        seg.failed = True  # raw turns stay until a retry succeeds (or the offline capsule replaces it)
        seg.failed_at = len(self.turns)
        log.warning("transcript: capsule of steps %d-%d rejected: %s", seg.start, seg.end, problem)

    def _store_chunk(self, seg: Segment, records: list[StepRecord], capsule: Capsule, lens: str,
                     model: str | None) -> None:
        # Validator facts outrank any summary: whatever the lens wrote, they stay in ①.
        for r in records:
            for fact in (r.validator or {}).get("facts", []) or []:
                if str(fact) not in capsule.verified_facts:
                    capsule.verified_facts.append(str(fact))
            if (r.validator or {}).get("executed") is False:
                path = f"{r.action_line()} on {r.activity or r.package or '?'}"
                if path not in capsule.failed_paths:
                    capsule.failed_paths.append(path)
        chunk = self._chunk_of(seg, records, capsule, lens, model)
        with self._lock:  # a checkpoint verdict arriving now lands either on the segment or on its chunk
            chunk.annotations.extend(seg.extra.pop("verdicts", []))
            self.log.write(self.dir / "chunks" / f"{chunk.chunk_id}.v{chunk.version}.md", chunk.to_markdown())
            seg.chunk = chunk
            seg.failed = False

    def _offline_fallback(self, seg: Segment) -> None:
        """A segment whose capsule lens kept failing gets the mechanical capsule, so later segments can swap."""
        records = [t.record for t in self.turns[seg.start - 1: seg.end]]
        capsule = OfflineCapsuleLens().capsule(records, {})
        self.log.append({"kind": "capsule_fallback", "start": seg.start, "end": seg.end, "rounds": seg.rounds})
        self._store_chunk(seg, records, capsule, "offline-fallback", None)

    def _chunk_of(self, seg: Segment, records: list[StepRecord], capsule: Capsule | None, lens: str = "lens",
                  model: str | None = None) -> Chunk:
        last = next((r for r in reversed(records) if r.subgoal_hash), None)
        title = None
        if last is not None:
            title = (last.plan or "").strip().splitlines()[0][:120] if (last.plan or "").strip() else None
        number = seg.extra.get("number")
        return Chunk(seg.start, seg.end, records[0].t, records[-1].t, seg.reason, capsule, ledger_rows(records),
                     [f'User @ Step {r.step}: "{u}"' for r in records for u in r.user_instructions],
                     lens=lens, status="ready" if capsule else "pending",
                     milestone=last.subgoal_hash if last else None, number=number,
                     milestone_title=title or (last.subgoal_hash if last else None), session_id=self.session_id,
                     source_step_ids=[r.step_id for r in records], model=model,
                     created_at=format_ts(self.clock()),
                     notes=list(dict.fromkeys(k for r in records for k in r.notes_written)))

    def annotate_from_checkpoint(self, checkpoint_id: str, verdicts: Iterable[Mapping[str, Any]]) -> list[str]:
        """Add a checkpoint's post-hoc verdicts to band ① of every chunk they judge; return the chunk ids.

        Each verdict names a ``subgoal`` (a subgoal hash) or ``steps`` ([first, last]) and says ``verdict``
        (and optionally ``note``). A chunk hit gets one line and a new version (its file is written again);
        the F zone shows it at the next compaction event, so the prompt prefix does not change before. A closed
        segment still waiting for its capsule keeps the line and its chunk is made with it (a cold start too)."""
        hit: list[str] = []
        with self._lock:
            chunks = [*self.chunks, *(c for e in self.eras for c in e.chunks)]
            for v in verdicts:
                if not isinstance(v, Mapping):
                    continue
                text = " ".join(str(x) for x in (v.get("verdict"), v.get("note")) if x)[:300]
                if not text:
                    continue
                line = f"{checkpoint_id}: {text}"
                steps, subgoal = v.get("steps"), v.get("subgoal")
                for c in chunks:
                    if self._judges(steps, subgoal, c.start, c.end, c.milestone):
                        self._annotate(c, line, hit)
                for seg in self.closed:
                    if not self._judges(steps, subgoal, seg.start, seg.end, None):
                        continue
                    # Kept on the segment too: a chunk made again after a cold start gets the line back.
                    self.log.append({"kind": "verdict", "start": seg.start, "end": seg.end, "text": line})
                    if seg.chunk is not None:
                        self._annotate(seg.chunk, line, hit)
                        continue
                    seg.extra.setdefault("verdicts", []).append(line)
                    cid = f"chunk_{seg.start:04d}_{seg.end:04d}"
                    if cid not in hit:
                        hit.append(cid)
            if hit:
                self.log.append({"kind": "annotation", "checkpoint": checkpoint_id, "chunks": hit})
        return hit

    def _judges(self, steps: Any, subgoal: Any, start: int, end: int, milestone: str | None) -> bool:
        """Whether a verdict naming ``steps`` [first, last] or ``subgoal`` judges the steps start..end."""
        if isinstance(steps, (list, tuple)) and len(steps) == 2 and all(isinstance(x, int) for x in steps) \
                and steps[0] <= end and steps[1] >= start:
            return True
        return subgoal is not None and (subgoal == milestone or any(
            t.record.subgoal_hash == subgoal for t in self.turns[start - 1: end]))

    def _annotate(self, c: Chunk, line: str, hit: list[str]) -> None:
        c.annotations.append(line)
        c.version += 1
        self.log.write(self.dir / "chunks" / f"{c.chunk_id}.v{c.version}.md", c.to_markdown())
        if c.chunk_id not in hit:
            hit.append(c.chunk_id)

    def _read_chunk(self, chunk_id: str) -> Chunk:
        files = sorted((self.dir / "chunks").glob(f"{chunk_id}.v*.md"))
        if not files:
            raise FileNotFoundError(chunk_id)
        # Never from a link or a pipe left in a chunk's place (a read would follow it or block).
        return Chunk.from_markdown(read_bytes_nofollow(files[-1]).decode("utf-8"), files[-1])

    def _apply_fold(self, chunks: list[Chunk], until: int) -> None:
        self.chunks.extend(chunks)
        self.folded_until = max(self.folded_until, until)
        self.closed = [seg for seg in self.closed if seg.end > self.folded_until]

    def _apply_era(self, count: int, paragraph: bool) -> None:
        if count:
            self.era_count += 1
            self.eras.append(Era(self.chunks[:count], number=self.era_count,
                                 max_facts=self.config.chunking.period_max_facts))
            self.chunks = self.chunks[count:]
        if paragraph:
            next(e for e in self.eras if not e.paragraph).paragraph = True

    def _apply_period_merge(self, index: int) -> None:
        a, b = self.eras[index], self.eras[index + 1]
        self.eras[index: index + 2] = [Era(a.chunks + b.chunks, paragraph=True, number=a.number,
                                           last_number=b.last_number or b.number, max_facts=a.max_facts)]

    def _era_op(self, n: int, count: int = 0, paragraph: bool = False, merge: int | None = None) -> None:
        if merge is not None:
            self._apply_period_merge(merge)
            self.log.append({"kind": "period_merge", "index": merge, "at": n})
        else:
            self._apply_era(count, paragraph)
            self.log.append({"kind": "era", "count": count, "paragraph": paragraph, "at": n})

    def _bound_frozen(self, n: int) -> None:
        """Keep every layer of F bounded: chunks past max_chunks merge into an era, eras past max_eras become
        period paragraphs, paragraphs past max_periods merge into wider periods (the adjacent pair spanning the
        fewest steps, so older periods are wider); and while F is over ``frozen_ratio`` of the budget the
        oldest layer steps down the same ladder. Only at a compaction event (the prefix changes anyway)."""
        cc = self.config.chunking
        if len(self.chunks) > cc.max_chunks:
            self._era_op(n, count=len(self.chunks) - cc.max_chunks // 2)
        while len([e for e in self.eras if not e.paragraph]) > (cc.max_eras or cc.max_chunks):
            self._era_op(n, paragraph=True)
        self._merge_periods(n, cc.max_periods)
        limit = cc.frozen_ratio * cc.context_budget_tokens
        while self.frozen_tokens() > limit:
            wide = next((i for i, e in enumerate(self.eras) if not e.paragraph and e.narrative), None)
            if wide is not None:
                self.eras[wide].narrative = False  # ② goes first: ① merged and ③ keep every step
                self.log.append({"kind": "era_narrow", "index": wide, "at": n})
            elif any(not e.paragraph for e in self.eras):
                self._era_op(n, paragraph=True)
                self._merge_periods(n, cc.max_periods)
            elif len(self.chunks) > 1:
                self._era_op(n, count=max(1, len(self.chunks) // 2))
            elif len([e for e in self.eras if e.paragraph]) > 1:
                self._merge_periods(n, len([e for e in self.eras if e.paragraph]) - 1)
            else:
                break

    def _merge_periods(self, n: int, cap: int) -> None:
        while True:
            idx = [i for i, e in enumerate(self.eras) if e.paragraph]
            if len(idx) <= max(1, cap):
                return
            pairs = [i for i in idx[:-1] if i + 1 in idx]
            if not pairs:
                return
            self._era_op(n, merge=min(pairs, key=lambda i: (self.eras[i + 1].end - self.eras[i].start, i)))

    def _retry_failed(self, n: int) -> None:
        """Segments whose capsule failed get new rounds, spaced 2, 4, 8 steps apart (at most 3), so their raw
        turns do not stay until the emergency snapshot because of one bad answer; after the last round they get
        the offline capsule instead. Token pressure below the hard threshold changes nothing: the raw turns stay
        (correctness before tokens); past it the emergency snapshot takes them."""
        for seg in list(self.closed):
            if not seg.failed or seg.chunk is not None:
                continue
            if seg.rounds >= CAPSULE_RETRY_ROUNDS:
                self._offline_fallback(seg)
            elif n - seg.failed_at >= 2 ** (seg.rounds + 1):
                seg.failed = False
                seg.rounds += 1
                self.log.append({"kind": "capsule_retry", "start": seg.start, "end": seg.end,
                                         "round": seg.rounds})
                self._dispatch_capsule(seg)

    def compact(self, rec: StepRecord, boundary: str | None, gauge: PromptGauge) -> None:
        """After a committed step: close segments, retry failed capsules, fold ready chunks, or the emergency
        (each weighed against the prompt's size as ``gauge`` measures it)."""
        cc = self.config.chunking
        n = rec.step
        budget = cc.context_budget_tokens
        self._retry_failed(n)
        prev = self.turns[n - 2].record if n >= 2 else None
        # Triggers that close the open segment before this step.
        if prev is not None and n - 1 >= self.seg_start:
            reason = None
            if rec.subgoal_hash and prev.subgoal_hash and rec.subgoal_hash != prev.subgoal_hash:
                reason = "milestone"  # the stamped step confirms it; a plan hint alone never does
            elif rec.package and prev.package and rec.package != prev.package:
                reason = "package_change"
            elif (cc.activity_boundaries and rec.activity and prev.activity and rec.activity != prev.activity
                  and n - self.seg_start >= cc.min_segment_steps):
                reason = "activity_change"  # a new screen of the same app (a segment of a few steps at least)
            elif prev.failure_recovery:
                reason = "recovery_boundary"
            elif boundary in ("goal_change", "strategy_change", "pause"):
                reason = boundary
            else:
                # The design's other early closes, read from the records' structure (never from their words):
                # a long pause in the clock, or a new strategy once the segment holds a few steps.
                shift = segment_shift(self.turns_records(self.seg_start, n - 1), rec, cc.pause_close_s)
                if shift == "pause" or (shift and n - self.seg_start >= cc.min_segment_steps):
                    reason = shift
            if reason:
                self._close(n - 1, reason)
        if rec.subgoal_hash and rec.subgoal_hash == self.plan_hint:
            self.plan_hint = None
        if boundary in ("irreversible", "external_result"):
            self._close(n, boundary)
        elif n - self.seg_start + 1 >= cc.min_segment_steps and external_result(rec):
            # What came back from outside the screen ends the segment (once it holds a few steps: a tool polled in
            # a loop must not cut one-step chunks).
            self._close(n, "external_result")
        open_steps = [t.record for t in self.turns[self.seg_start - 1: n]]
        if open_steps:
            source_tokens = sum(estimate_text_tokens(r.action_line() + (r.result or "") + (r.thought or ""))
                                for r in open_steps)
            if len(open_steps) >= cc.max_steps or source_tokens >= cc.target_source_tokens:
                self._close(n, "size")
        tokens = gauge.prompt_tokens()
        if tokens >= cc.close_ratio() * budget:
            self._close(n - cc.min_active_steps, "soft_threshold")
        self._swap(n, tokens, gauge)
        if gauge.prompt_tokens() >= cc.hard_ratio * budget:
            self._emergency(n, gauge)

    def _swap(self, n: int, tokens: int, gauge: PromptGauge) -> None:
        cc = self.config.chunking
        limit = n - cc.min_active_steps
        ready: list[Chunk] = []
        until = self.folded_until
        with self._lock:
            for seg in sorted(self.closed, key=lambda s: s.start):
                if seg.start != until + 1 or seg.end > limit or seg.chunk is None:
                    break  # in order, whole segments, never into the raw minimum, only when ①② are ready
                ready.append(seg.chunk)
                until = seg.end
        if not ready:
            return
        if self.events and n - self.events[-1]["at"] < 3 and tokens < cc.soft_ratio * cc.context_budget_tokens:
            return  # no back-to-back compactions below the soft threshold: each one costs a re-prefill
        before = gauge.estimated_tokens()
        folded = sum(gauge.tokens_of(m) for t in self.turns[self.folded_until: until]
                     for m in turn_messages(t, n - t.record.step + 1, self.config.transcript))
        added = sum(estimate_text_tokens(c.render()) for c in ready)
        if before <= 0 or (folded - added) / before < 0.10:
            return  # a compaction that does not shrink the prompt by a tenth is not worth a re-prefill
        self._apply_fold(ready, until)
        self.log.append({"kind": "fold", "until": until, "chunks": [c.chunk_id for c in ready], "at": n})
        self._bound_frozen(n)
        gauge.prompt_changed()  # the last measurement described the prompt before the swap
        after = gauge.estimated_tokens()
        self.events.append({"at": n, "kind": "fold", "before": before, "after": after})

    def _emergency(self, n: int, gauge: PromptGauge) -> None:
        cc = self.config.chunking
        before = gauge.estimated_tokens()
        end = n - cc.min_active_steps
        if end <= self.folded_until:
            return
        last_snap = next((e for e in reversed(self.events) if e["kind"] == "snapshot"), None)
        if last_snap is not None and n - last_snap["at"] < cc.min_active_steps:
            return  # a snapshot was just built: another one now would only rewrite F again (the raw minimum is full)
        if end >= self.seg_start:
            self._close(end, "hard_threshold")
        for seg in list(self.closed):
            if seg.start <= end < seg.end:
                # A segment across the snapshot's edge: its tail becomes a segment of its own.
                self.closed.remove(seg)
                tail = self._segment(end + 1, seg.end, seg.reason)
                if seg.chunk is None and seg.extra.get("verdicts"):
                    tail.extra["verdicts"] = list(seg.extra["verdicts"])  # the verdicts judged its steps too
                self.closed.append(tail)
                self.log.append({"kind": "segment", "start": tail.start, "end": tail.end,
                                         "reason": tail.reason})
                self._dispatch_capsule(tail)
        records = [t.record for t in self.turns[:end]]
        chunks = self.chunks + [seg.chunk for seg in self.closed if seg.chunk is not None and seg.end <= end]
        last = self.turns[end - 1].record
        # Composed from everything F held, the previous snapshot included: a second emergency never forgets
        # what the first one kept (old summaries fold into the new one).
        self.snapshot, self.snapshot_state = compose_snapshot(
            self.snapshot_state, self.goal, last.plan, self.eras, chunks, records,
            "/".join(x for x in (last.package, last.activity) if x),
            int(cc.snapshot_rows_ratio * cc.context_budget_tokens))
        self.folded_until = end
        self.chunks, self.eras = [], []
        self.closed = [seg for seg in self.closed if seg.end > end]
        self.log.append({"kind": "snapshot", "text": self.snapshot, "state": self.snapshot_state, "until": end,
                      "at": n})
        gauge.prompt_changed()
        self.events.append({"at": n, "kind": "snapshot", "before": before, "after": gauge.estimated_tokens()})
