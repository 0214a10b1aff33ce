"""TranscriptLedger: the append-only transcript of one task with four zones and a scrub edge.

S (stable prefix) is byte-identical for the session; F (frozen history) changes only at compaction
events; A (active turns) is append-only, except for the scrub edge at constant depth: at depth
``xml_scrub_depth`` a turn loses its UI list and plan recitation, at depth K its screenshot is
replaced by the ready visual summary (a pending one keeps the image for a grace of a few more
steps, then gets a placeholder; a failed one gets the placeholder at once). A decided turn never
changes again, so there is no late back-fill. T (this turn's tail) is rebuilt every turn.
Everything is persisted in transcript/ so a crashed agent gets the same ledger back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import (
    Clock,
    UsageError,
    append_line,
    atomic_write,
    dumps_compact,
    elapsed_label,
    format_ts,
    guarded_makedirs,
    parse_ts,
    read_bytes_nofollow,
    read_jsonl,
    safe_join,
    system_clock,
)

from .._transcript_config import TranscriptConfig
from ._capsules import CapsuleLens
from ._compaction import LayeredCompaction
from ._inputs import InputCleaner
from ._lens import OfflineVisualLens, VisualJob, VisualLens
from ._messages import Message, Part, image, text
from ._perception import TokenMeter, envelope, estimate_text_tokens, image_dhash, label_action, ui_diff
from ._recall import RecallResult, recall
from ._records import StepRecord, SummaryBook, SummaryRecord, action_points
from ._same_turn import SameTurnBudget
from ._service import StepMemoryService
from ._steps_log import STEPS_FILE, StepsLog
from ._turns import (
    Staged,
    Turn,
    message_tokens,
    scrub_decision,
    similar_step,
    stable_prefix_len,
    turn_messages,
)

log = logging.getLogger("memory_plane")
GUARD_MIN_TOKENS = 500  # outputs below this are kept as they are: an envelope would not be smaller

USAGE_FILE = "usage.jsonl"
SYSTEM_FILE = "system.md"
class TranscriptLedger:
    """The transcript of one episode, kept in ``<episode>/transcript/``.

    Its ``compaction`` (a ``LayeredCompaction``) owns the frozen zone F: segments, chunks, eras, the snapshot,
    the compaction events, the capsule lens and the goal; the ledger holds the turns, the summaries and the
    prompt's size, and hands compaction what it reads. ``log`` is the steps log both write through."""

    def __init__(self, directory: Path, *, config: TranscriptConfig | None = None,
                 lens: VisualLens | None = None, clock: Clock = system_clock, system_prompt: str = "",
                 session_start: datetime | None = None, capsule_lens: CapsuleLens | None = None,
                 goal: str | None = None, session_id: str | None = None, _load: bool = False,
                 root: Path | None = None) -> None:
        self.dir = Path(directory)
        self.root = root  # the memory root: no write below it follows a link (None: a ledger on its own)
        guarded_makedirs(root, self.dir)
        self.episode_dir = self.dir.parent
        self.config = config or TranscriptConfig()
        self.clock = clock
        self.start = session_start or clock()
        self.lens = lens or OfflineVisualLens()
        self.turns: list[Turn] = []
        self.frozen: list[Message] = []
        self.staged = Staged()
        self.summaries = SummaryBook()
        self.meter = TokenMeter()
        cfg0 = self.config.transcript
        self.same_turn = SameTurnBudget(cfg0.same_turn_soft_tokens, cfg0.same_turn_hard_tokens)
        self._lock = threading.RLock()
        self._envelopes = 0
        self._clean = InputCleaner(str(self.dir))
        self.log = StepsLog(self.dir, root)
        self.session_id = session_id or self.episode_dir.name  # the episode when the runtime gives none
        cfg = self.config.transcript
        self.service = StepMemoryService(self.lens, self._publish, concurrency=cfg.summary_concurrency,
                                         retries=cfg.summary_retries, timeout_s=cfg.summary_timeout_s,
                                         max_queued=cfg.summary_queue, clock_text=lambda: format_ts(self.clock()),
                                         backoff_s=cfg.summary_backoff_s)
        # Capsule jobs share the summary pool; compaction is handed what it reads, never the ledger itself.
        self.compaction = LayeredCompaction(self.turns, self.summaries, self.log, self.service.submit_call,
                                            self.config, clock, self.session_id, self._lock,
                                            capsule_lens=capsule_lens, goal=goal)
        if _load:
            self._load()
        else:
            self.system = system_prompt
            atomic_write(self.dir / SYSTEM_FILE, system_prompt, root=self.root)
            self.append_record({"kind": "session", "start": format_ts(self.start)})

    # -- persistence ------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path, *, config: TranscriptConfig | None = None, lens: VisualLens | None = None,
             clock: Clock = system_clock, root: Path | None = None) -> TranscriptLedger:
        """Rebuild a ledger from its files after a crash or restart (cold start)."""
        return cls(directory, config=config, lens=lens, clock=clock, _load=True, root=root)

    def append_record(self, record: Mapping[str, Any]) -> None:
        """Append one line to steps.jsonl (what a cold start replays)."""
        self.log.append(record)

    def _publish(self, rec: SummaryRecord) -> None:
        with self._lock:
            if self.summaries.offer(rec):
                self.append_record(rec.model_dump(mode="json", exclude_none=True))

    def _load(self) -> None:
        try:
            self.system = read_bytes_nofollow(self.dir / SYSTEM_FILE).decode("utf-8")
        except FileNotFoundError:
            self.system = ""
        for r in read_jsonl(self.dir / STEPS_FILE).records:
            kind = r.get("kind")
            if kind == "session" and r.get("start"):
                self.start = parse_ts(r["start"])
            elif kind == "step":
                rec = StepRecord.model_validate(r)
                self.turns.append(Turn(rec, (r.get("width"), r.get("height"))))
            elif kind == "summary":
                self.summaries.offer(SummaryRecord.model_validate(r))
            elif kind == "scrub":
                turn = self._turn(int(r["step"]))
                if turn is not None and turn.decision is None:
                    turn.decision, turn.decided_at = str(r["text"]), r.get("at")
            else:
                self.compaction.replay(r)
        # Summaries still pending when the process died will not arrive: let the edge place placeholders.
        self._scrub()
        # Capsules lost with the process are asked for again; their raw turns stay until then.
        self.compaction.resume()

    # -- the turn cycle -----------------------------------------------------------------

    def stage(self, *, screenshot: str | None = None, width: int | None = None, height: int | None = None,
              elements: Iterable[Mapping[str, Any]] = (), ui_text: Iterable[str] | None = None,
              plan: str | None = None, user_instructions: Iterable[str] = (), package: str | None = None,
              activity: str | None = None, dhash: str | None = None) -> None:
        """Set this turn's tail: the current screenshot (a file of the episode), UI list, plan, instructions.

        Odd input (elements that are not mappings, a dhash that is not hex, a width that is not a number) is
        sanitised or dropped, logged once: nothing given here makes a later ``render()`` fail."""
        c = self._clean
        els = c.mappings("elements", elements)
        texts = c.texts("ui_text", ui_text) if ui_text is not None else [
            t for t in (c.text("element label", e.get("label") or e.get("text"), 500) for e in els
                        if e.get("label") or e.get("text")) if t]
        shot = c.text("screenshot", screenshot, 500)
        given = c.dhash(dhash)
        self.staged = Staged(shot, c.size("width", width),
                             c.size("height", height), els, texts, c.text("plan", plan),
                             c.texts("user_instructions", user_instructions), c.text("package", package, 300),
                             c.text("activity", activity, 300), given or self._screen_hash(shot))

    def _screen_hash(self, ref: str | None) -> str | None:
        """The dHash of a screenshot of the episode, computed here when the runtime passed none (so the
        similarity hint and a recall by screen work without it); None when off, missing or undecodable."""
        if not ref or not (self.config.transcript.similarity_hints or self.config.recall.enabled):
            return None
        return image_dhash(self.episode_dir, ref, self._clean)

    def commit(self, *, action: str, args: Mapping[str, Any] | None = None, thought: str | None = None,
               result: str | None = None, validator: Mapping[str, Any] | None = None,
               failure_recovery: Iterable[Mapping[str, Any]] = (), post_image: str | None = None,
               post_ui_text: Iterable[str] | None = None, subgoal_hash: str | None = None,
               notes_written: Iterable[str | Mapping[str, Any]] = (), envelope_patterns: Iterable[str] = (),
               boundary: str | None = None, thought_signature: str | bytes | None = None,
               plan_revision: int | str | None = None, thinking_ref: str | None = None,
               ui_dump_ref: str | None = None, native_thinking_ref: str | None = None,
               post_ui_ref: str | None = None) -> StepRecord:
        """Turn the staged tail plus the model's action and the tool's result into a committed step.

        ``notes_written`` names the notes the step wrote: a key each, or ``{"key": …, "content": …}`` so that the
        chunk's synopsis is given an excerpt of what the note says."""
        c = self._clean
        action = c.text("action", action, 200) or "?"
        redact = self.log.redact
        args = redact(c.mapping("args", args))
        thought, result = redact(c.text("thought", thought)), redact(c.output("result", result))
        validator = c.mapping("validator", validator)
        failure_recovery = c.mappings("failure_recovery", failure_recovery)
        post_image = c.text("post_image", post_image, 500)
        post_ui_text = c.texts("post_ui_text", post_ui_text) if post_ui_text is not None else None
        subgoal_hash, boundary = c.text("subgoal_hash", subgoal_hash, 200), c.text("boundary", boundary, 200)
        notes_written, note_excerpts = c.notes(notes_written, args)
        note_excerpts = redact(note_excerpts)
        envelope_patterns = c.texts("envelope_patterns", envelope_patterns)
        signature = c.signature(thought_signature)
        revision = c.revision(plan_revision)
        thinking_ref, ui_dump_ref = c.text("thinking_ref", thinking_ref, 300), c.text("ui_dump_ref", ui_dump_ref, 300)
        native_thinking_ref = c.text("native_thinking_ref", native_thinking_ref, 300)
        post_ui_ref = c.text("post_ui_ref", post_ui_ref, 300)
        with self._lock:
            st, now = self.staged, self.clock()
            n = len(self.turns) + 1
            a = dict(args or {})
            label, source = label_action(a, st.elements)
            pts = action_points(a)
            labelled = [label_action({"x": x, "y": y}, st.elements) for x, y in pts] if len(pts) >= 2 else []
            point_labels = [lb for lb, _src in labelled] or None
            if label is None and labelled and labelled[0][0]:
                label, source = labelled[0]  # a swipe or gesture is named by where it starts
            res_text, env_ref = self._maybe_envelope(n, result, envelope_patterns)
            rec = StepRecord(
                step_id=f"step_{n:04d}", step=n, ts=format_ts(now), t=elapsed_label(self.start, now),
                action={"name": action, "args": a}, target_label=label, target_label_source=source,  # type: ignore[arg-type]
                result=res_text, validator=dict(validator) if validator else None,
                failure_recovery=[dict(x) for x in failure_recovery], thought=(thought or "")[:8000] or None,
                pre_image=st.screenshot, post_image=post_image, ui_text=st.ui_text[:200],
                ui_diff=ui_diff(st.ui_text, post_ui_text), package=st.package, activity=st.activity,
                subgoal_hash=subgoal_hash, plan=st.plan, user_instructions=st.user_instructions,
                notes_written=list(notes_written), note_excerpts=note_excerpts or None, envelope_ref=env_ref,
                dhash=st.dhash,
                session_id=self.session_id, plan_revision=revision,
                thought_signature=signature, thinking_ref=thinking_ref, ui_dump_ref=ui_dump_ref,
                native_thinking_ref=native_thinking_ref, post_ui_ref=post_ui_ref,
                point_labels=point_labels if point_labels and any(point_labels) else None,
                same_turn=[o.summary() for o in self.same_turn.outputs] or None,
            )
            self.append_record({**rec.model_dump(mode="json", exclude_none=True), "width": st.width,
                                "height": st.height})
            turn = Turn(rec, (st.width, st.height))
            self.turns.append(turn)
            self.meter.add(sum(self.tokens_of(m) for m in turn_messages(turn, 1, self.config.transcript)))
            self.staged = Staged()
            self.same_turn.outputs = []  # the next turn starts with its whole same-turn budget
            cfg = self.config.transcript
            if cfg.visual_summaries and rec.pre_image:
                job = VisualJob(rec, self._path(rec.pre_image), self._path(post_image) if post_image else None,
                                rec.ui_diff, [s.text or "" for s in self._recent_summaries(3)])
                self.service.submit(job, self.summaries.next_version(n))
            self._scrub()
            if self.config.chunking.enabled:
                self.compaction.compact(rec, boundary, self)
            return rec

    def tool_output(self, tool: str, output: str, *, patterns: Iterable[str] = ()) -> str:
        """A tool that does not end the turn answered (a note read, a shell command, a recall): its output joins
        this turn's tail under the same-turn budgets; returns the text the model is shown for it.

        Past ``same_turn_soft_tokens`` older outputs of the turn give way to excerpts and the tail says the
        budget is spent; at ``same_turn_hard_tokens`` nothing more is shown and the tail asks for a decision
        (``decision_forced``). Full outputs that are not shown whole stay under ``transcript/envelopes/``."""
        c = self._clean
        tool = c.text("tool", tool, 200) or "?"
        output = self.log.redact(c.output("output", output)) or ""
        pats = c.texts("patterns", patterns)
        with self._lock:
            n = len(self.turns) + 1

            def save(textv: str) -> str:
                self._envelopes += 1
                ref = f"transcript/envelopes/step_{n:04d}_{self._envelopes}.txt"
                atomic_write(self.episode_dir / ref, textv, root=self.root)
                return ref

            tail = self._tail_tokens()
            entry = self.same_turn.add(tool, output, tail, save, pats)
            self.append_record({"kind": "same_turn", "step": n, "tool": tool, "tokens": entry.original_tokens,
                                "shown_tokens": entry.tokens, "ref": entry.ref,
                                "used": self.same_turn.used(tail), "forced": self.same_turn.forced(tail)})
            return entry.text

    @property
    def decision_forced(self) -> bool:
        """Whether this turn reached its same-turn hard limit: only a turn-ending action should follow."""
        with self._lock:
            return self.same_turn.forced(self._tail_tokens())

    def _tail_tokens(self) -> int:
        return self.tokens_of(Message("user", tuple(self._tail_parts()), None, "T"))

    def _maybe_envelope(self, n: int, result: str | None, patterns: Iterable[str]) -> tuple[str | None, str | None]:
        cfg = self.config.transcript
        if result is None or not cfg.envelopes:
            return result, None
        self._envelopes += 1
        ref = f"transcript/envelopes/step_{n:04d}_{self._envelopes}.txt"
        # The same-turn guard: an output that would carry the prompt past the hard ratio is enveloped whatever
        # its size, so repeated large outputs cannot overflow the context before a compaction runs.
        cc = self.config.chunking
        room = cc.hard_ratio * cc.context_budget_tokens - self.prompt_tokens()
        size = estimate_text_tokens(result)
        # (An output smaller than an envelope itself is never replaced by one.)
        force = cc.enabled and size > GUARD_MIN_TOKENS and size > max(0.0, room)
        env = envelope(result, limit_chars=cfg.envelope_chars, limit_lines=cfg.envelope_lines,
                       limit_tokens=0 if force else cfg.envelope_tokens, patterns=patterns, full_ref=ref)
        if env is None:
            return result, None
        if force:
            env["reason"] = "context near its hard limit: the full output is on disk (recall_history)"
            self.append_record({"kind": "turn_guard", "step": n, "room_tokens": int(room), "output_tokens": size})
        atomic_write(self.episode_dir / ref, result, root=self.root)  # the full output stays, recall brings it back
        return dumps_compact(env), ref

    def _path(self, ref: str) -> Path | None:
        try:
            p = safe_join(self.episode_dir, ref)
        except ValueError:
            return None
        return p if p.exists() else None

    def all_records(self) -> list[StepRecord]:
        """Every step, folded or raw (the ledger never loses one)."""
        return [t.record for t in self.turns]

    def _turn(self, step: int) -> Turn | None:
        return self.turns[step - 1] if 0 < step <= len(self.turns) else None

    def _recent_summaries(self, n: int) -> list[SummaryRecord]:
        out = []
        for t in reversed(self.turns[:-1]):
            s = self.summaries.get(t.record.step)
            if s is not None and s.status == "ready":
                out.append(s)
            if len(out) >= n:
                break
        return out

    def observe_usage(self, prompt_tokens: int | None, cached_tokens: int | None = None,
                      output_tokens: int | None = None, source: str = "agent", **extra: Any) -> None:
        """Record a model call's usage (``extra``: thoughts tokens, requests, the model version that answered);
        only the agent's own calls set the measured context size."""
        line = {"ts": format_ts(self.clock()), "source": source, "step": len(self.turns),
                "prompt_tokens": prompt_tokens, "cached_tokens": cached_tokens, "output_tokens": output_tokens,
                **{k: v for k, v in extra.items() if v is not None}}
        append_line(self.dir / USAGE_FILE, dumps_compact(line), fsync=False, root=self.root)
        if source == "agent":
            self.meter.observe_usage(prompt_tokens)

    def recall_history(self, query: str | None = None, step_range: list[int] | tuple[int, int] | None = None,
                       include_details: bool = False, include_images: bool = False,
                       max_results: int = 5, screen_hash: str | None = None,
                       image: str | None = None) -> RecallResult:
        """Bring any earlier step back (bounded: at most 5 results, 2K tokens, one step's images).

        ``screen_hash`` (a dHash in hex) or ``image`` (a screenshot of the episode, hashed here) finds the steps
        whose screen looks like it, within ``similarity_max_distance`` bits, the closest first."""
        rc = self.config.recall
        if not rc.enabled:
            return RecallResult(results=[{"kind": "disabled", "text": "recall_history is disabled on this device "
                                          "(config.yaml recall.enabled: false)"}])
        screen = self._clean.dhash(screen_hash) if screen_hash else None
        if image and screen is None:
            screen = image_dhash(self.episode_dir, image, self._clean)
            if screen is None:
                raise UsageError(f"recall_history: no screenshot of this task could be read at {image!r}")
        with self._lock:
            records = [t.record for t in self.turns]
            summaries = {t.record.step: s.text for t in self.turns
                         if (s := self.summaries.get(t.record.step)) is not None and s.status == "ready" and s.text}
            f = self.compaction
            chunk_texts = [(c.start, c.end, c.render()) for e in f.eras for c in e.chunks] + [
                (c.start, c.end, c.render()) for c in f.chunks]
            notes = [(r.step, "note", f"note written: {k}" + (f": {x}" if (x := (r.note_excerpts or {}).get(k)) else
                                                              "")) for r in records for k in r.notes_written]
            instr = [(r.step, "user", f'User @ Step {r.step}: "{u}"') for r in records for u in r.user_instructions]
        return recall(records, summaries, chunk_texts, self.episode_dir, query=query, step_range=step_range,
                      include_details=include_details, include_images=include_images and rc.max_image_steps > 0,
                      max_results=min(max_results, rc.max_results), max_tokens=rc.max_text_tokens,
                      extra=notes + instr, screen=screen,
                      max_distance=self.config.transcript.similarity_max_distance)

    def similarity_hint(self) -> str | None:
        """One line naming the older step whose screen is closest to the current one (within
        ``similarity_max_distance`` dHash bits); silent when one of the last 3 steps already matches."""
        cfg = self.config.transcript
        if not self.staged.dhash or not cfg.similarity_hints:
            return None
        step = similar_step(self.turns, self.staged.dhash, cfg.similarity_max_distance)
        if step is None:
            return None
        return (f"The current screen closely resembles the screen of Step {step}. "
                "Use recall_history only if its details are needed.")

    # -- the scrub edge -------------------------------------------------------------------

    def _scrub(self) -> None:
        cfg = self.config.transcript
        if not cfg.scrub_edge:
            return
        total = len(self.turns)
        for turn in self.turns:
            decided = scrub_decision(turn, total, self.summaries.get(turn.record.step), cfg)
            if decided is None:
                continue
            turn.decision, turn.decided_at = decided, total
            turn._cache.clear()
            self.append_record({"kind": "scrub", "step": turn.record.step, "text": decided, "at": total})

    # -- rendering -------------------------------------------------------------------------

    def render(self) -> list[Message]:
        """The transcript to send now: S + F + A + T."""
        with self._lock:
            out: list[Message] = []
            if self.system:
                out.append(Message("system", (text(self.system),), None, "S"))
            out.extend(self.frozen)
            out.extend(self.compaction.frozen_messages())
            total = len(self.turns)
            for turn in self.turns[self.compaction.folded_until:]:
                out.extend(turn_messages(turn, total - turn.record.step + 1, self.config.transcript))
            tail = self._tail_parts()
            if self.same_turn.outputs:
                tail.extend(text(line) for line in self.same_turn.notes(self._tail_tokens()))
            out.append(Message("user", tuple(tail), None, "T"))
            return out

    def _tail_parts(self) -> list[Part]:
        """This turn's observation (T without the same-turn tool outputs)."""
        st = self.staged
        tail: list[Part] = [text(f"Now ({elapsed_label(self.start, self.clock())}): "
                                 f"{'/'.join(x for x in (st.package, st.activity) if x) or 'screen'}")]
        hint = self.similarity_hint()
        if hint:
            tail.append(text(hint))
        for instr in st.user_instructions:
            tail.append(text(f"User: {instr}"))
        if st.ui_text:
            tail.append(text("--- UI Element List ---\n" + "\n".join(st.ui_text)))
        if st.plan:
            tail.append(text("--- Plan ---\n" + st.plan))
        if st.screenshot:
            tail.append(image(st.screenshot))
        return tail

    def stable_prefix_len(self, messages: list[Message]) -> int:
        """How many leading messages can no longer change (S, F and decided turns past the edge)."""
        return stable_prefix_len(messages, self.turns, self.config.transcript)

    def raw_images_in(self, messages: list[Message]) -> int:
        """Screenshots sent as images (not summaries)."""
        return sum(len(m.images()) for m in messages)

    def estimated_tokens(self, messages: list[Message] | None = None) -> int:
        """Heuristic size of the rendered transcript."""
        msgs = messages if messages is not None else self.render()
        return sum(self.tokens_of(m) for m in msgs)

    def prompt_tokens(self) -> int:
        """The size thresholds read: the last measured prompt plus what was added since (or the heuristic)."""
        return self.meter.estimate(fallback=self.estimated_tokens())

    def tokens_of(self, m: Message) -> int:
        """Heuristic size of one message (an image by its turn's screen size)."""
        turn = self._turn(m.step) if m.step else None
        return message_tokens(m, turn.image_size if turn else (self.staged.width, self.staged.height))

    def prompt_changed(self) -> None:
        """F was rewritten: the last measurement described the prompt before it."""
        self.meter = TokenMeter()

    def plan_event(self, subgoal_hash: str) -> None:
        """A plan write announced a new subgoal: only a hint until an executed step carries it."""
        self.compaction.plan_event(subgoal_hash)

    def annotate_from_checkpoint(self, checkpoint_id: str, verdicts: Iterable[Mapping[str, Any]]) -> list[str]:
        """Add a checkpoint's post-hoc verdicts to the chunks they judge; return the chunk ids."""
        return self.compaction.annotate_from_checkpoint(checkpoint_id, verdicts)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for background summaries (default: the configured runtime.flush_timeout_s)."""
        ok = self.service.flush(self.config.transcript.flush_timeout_s if timeout is None else timeout)
        return ok

    def close(self, timeout: float | None = None) -> bool:
        """Stop the summary pool within ``runtime.flush_timeout_s`` (what has not started is cancelled and its
        step stays pending); False when work was cancelled or left running."""
        done = self.service.close(self.config.transcript.flush_timeout_s if timeout is None else timeout)
        if not done:
            self.append_record({"kind": "close", "pending": True, "ts": format_ts(self.clock())})
        return done


def load_image_bytes(episode_dir: Path) -> Callable[[str], bytes]:
    """A loader for to_genai: reads an image of the episode by its relative ref."""

    def load(ref: str) -> bytes:
        return read_bytes_nofollow(safe_join(episode_dir, ref))

    return load
