"""EpisodeRecorder: writes a task's events to disk as they happen, never failing the task."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from types import TracebackType
from typing import Any

from memory_plane.lifecycle import Clock, append_line, dumps_compact, format_ts, guarded_makedirs, system_clock

from ._artifacts import MAX_ARTIFACT_BYTES, MAX_ARTIFACTS, ImageInfo, encode_image, store_image
from ._causes import outcome_unfinished
from ._config_file import read_config
from ._model import (
    FAILURE_PHASES,
    DeviceScope,
    InitialState,
    NormalizedGoal,
    Outcome,
    TaskEpisode,
    new_episode_id,
    normalize_phase,
)
from ._recording_lock import RecordingLock
from ._sanitize import excerpt, normalize_observation, redact_text_fields, sanitize
from ._secrets import TypingGuard, marks_password, typed_values
from ._steps import device_steps, is_system_screen, pair_steps
from ._store import EVENTS_FILE, TaskEpisodeStore
from ._summary import episode_summary
from ._tool_inputs import stored_event
from ._transcript_config import TranscriptConfig

log = logging.getLogger("memory_plane")

MAX_EVENTS = 20_000  # per episode; a runaway task stops growing its log here (counted in metrics)
OUTPUT_LIMIT = 2000
TRANSCRIPT_STEPS = "transcript/steps.jsonl"


class EpisodeRecorder:
    """Records one task: tool calls and results, screenshots, planner and verifier events.

    Every method is thread-safe and swallows I/O failures (logged and counted in
    ``errors``): a memory problem never fails the task. Text typed into a sensitive field
    (``tool_input["sensitive"]``, or a password field as the observed state reports it before the call or
    in the call's own result: ``field_type: "password"``, ``is_password``, ``secure``, ...) is stored as
    ``[redacted]``, and scrubbed from every later event and from the outcome.
    """

    def __init__(
        self,
        store: TaskEpisodeStore,
        goal: str,
        *,
        device_id: str = "default",
        language: str | None = None,
        screen: str | None = None,
        app: str | None = None,
        page: str | None = None,
        normalized_goal: Mapping[str, Any] | None = None,
        retrieved_refs: Iterable[str] = (),
        tags: Iterable[str] = (),
        entities: Iterable[str] = (),
        clock: Clock = system_clock,
        on_exit_commit: Callable[[TaskEpisode], Any] | None = None,
        episode_id: str | None = None,
        input_method: str | None = None,
        transcript_opener: Callable[..., Any] | None = None,
    ) -> None:
        self._lock = threading.RLock()
        self._store = store
        self._clock = clock
        self._on_exit_commit = on_exit_commit
        self._transcript_opener = transcript_opener
        self._t0 = time.monotonic()
        now = clock()
        self.errors = 0
        self.dropped_events = 0
        self._seq = 0
        self._tool_steps = 0
        self._screens = 0
        self._names: set[str] = set()
        self._last_obs: dict[str, Any] | None = None
        self._apps_seen: dict[str, int] = {}  # observed app name -> tool results that showed it
        self._last_image: tuple[str, ImageInfo] | None = None
        # A call that types text waits for its result before it is written: the result may be the first to say
        # the field was a password one, and then the text must never reach the disk.
        self._typing = TypingGuard()
        self._secrets = self._typing.secrets
        self._ledgers: list[Any] = []  # the transcripts opened for this task (their files are scrubbed too)
        self._finished: TaskEpisode | None = None
        self._recording: RecordingLock | None = None
        self.episode = TaskEpisode(
            id=episode_id or new_episode_id(now),  # importers give a stable id: a re-import is the same episode
            status="recording",
            started_at=now,
            user_goal=sanitize(goal or "", limit=2000),
            normalized_goal=NormalizedGoal(**{k: v for k, v in (normalized_goal or {}).items() if v is not None}),
            device_scope=DeviceScope(device_id=device_id or "default", language=language, screen=screen,
                                     input_method=input_method),
            initial_state=InitialState(app=app, page=page),
            retrieved_memory_refs=list(retrieved_refs),
            tags=list(tags),
            entities=list(entities),
        )
        self.dir = None
        try:
            self.dir = store.episode_dir(self.episode.id)
            # Made by folder descriptors: a year folder swapped for a symlink is refused, never written through.
            guarded_makedirs(store.root, self.dir / "artifacts")
            # Lock first, header second: verify must never see a recording episode nobody holds.
            self._recording = RecordingLock(self.dir, store.root)
            self._recording.hold()
            store.write_header(self.episode)
        except Exception as exc:  # never fail the task because memory is broken
            self._fail("cannot start episode", exc)

    # -- plumbing ------------------------------------------------------------

    @property
    def id(self) -> str:
        """The episode id."""
        return self.episode.id

    def _fail(self, what: str, exc: BaseException) -> None:
        self.errors += 1
        log.warning("episode %s: %s: %s", self.episode.id, what, exc)

    def _release_recording_lock(self) -> None:
        if self._recording is not None:
            self._recording.release()

    def _image_sink(self, raw: bytes) -> str | None:
        info = self._store_screenshot(raw)
        return info.ref if info else None

    def _store_screenshot(self, image: Any) -> ImageInfo | None:
        import hashlib

        raw, fmt = encode_image(image)
        sha = hashlib.sha256(raw).hexdigest()
        if self._last_image and self._last_image[0] == sha:
            return self._last_image[1]  # identical consecutive screenshot: stored once
        if self.dir is None or self._screens >= MAX_ARTIFACTS or len(raw) > MAX_ARTIFACT_BYTES:
            return None
        name = f"step_{self._tool_steps:03d}"
        k = 1
        while name in self._names:
            k += 1
            name = f"step_{self._tool_steps:03d}_{k}"
        info = store_image(self.dir / "artifacts", name, raw, fmt, root=self._store.root)
        self._names.add(name)
        self._screens += 1
        self._last_image = (sha, info)
        return info

    def _emit(self, event: dict[str, Any], hold: Any = None) -> str:
        """Append one event; with ``hold`` (the raw tool input of a typing call) it waits for the next event."""
        with self._lock:
            self._seq += 1
            event_id = f"evt_{self._seq:04d}"
            if self._seq > MAX_EVENTS and event.get("type") != "finish":  # the last word is always kept
                self.dropped_events += 1
                return event_id
            record = {"event_id": event_id, "ts": format_ts(self._clock()), **event}
            record = {k: v for k, v in record.items() if v is not None}
            held = self._typing.release()
            if held is not None:
                self._write(held)
            if hold is not None:
                self._typing.hold(record, hold)
            else:
                self._write(record)
            return event_id

    def _write(self, record: dict[str, Any]) -> None:
        if self.dir is None:
            return
        if self._finished is not None:
            self._finished.take_events()  # an event after finish: the jobs read the file as it now is
        try:
            # One whole line per event, appended as it happens: a crash loses at most this line (and a
            # typing call still waiting for its result).
            append_line(self.dir / EVENTS_FILE, dumps_compact(stored_event(self._secrets.scrub(record))),
                        fsync=False, root=self._store.root)
        except Exception as exc:
            self._fail("cannot append event", exc)

    # -- events --------------------------------------------------------------

    def tool_call(self, tool_name: str, tool_input: Any = None, *, content: str | None = None,
                  call_id: str | None = None, target_label: str | None = None) -> str:
        """Record that the agent called a tool; return the event id.

        ``content`` is the runtime's narration of the step; ``target_label`` is the label of the element the
        action targets as the screen shows it (what procedures and UI anchors name)."""
        try:
            with self._lock:
                self._tool_steps += 1
                data = tool_input
                if isinstance(data, str) and data.strip().startswith("{"):
                    try:
                        data = json.loads(data)
                    except ValueError:
                        pass
                sensitive = (isinstance(data, Mapping) and bool(data.get("sensitive"))) or marks_password(
                    self._last_obs)
                raw = data
                if sensitive:
                    self._secrets.remember(data)
                    data = redact_text_fields(data)
                clean = sanitize(data, self._image_sink)
                obs = self._last_obs or {}
                return self._emit({
                    "type": "tool_call", "role": "agent", "step": self._tool_steps, "tool_name": str(tool_name),
                    "tool_input": clean, "content": sanitize(content, limit=500) if content else None,
                    "call_id": call_id, "app": obs.get("app"), "page": obs.get("page"),
                    "sensitive": True if sensitive else None,
                    "target_label": sanitize(str(target_label), limit=200) if target_label and not sensitive else None,
                }, hold=raw if typed_values(raw) and not sensitive else None)
        except Exception as exc:
            self._fail("tool_call", exc)
            return ""

    def tool_result(self, tool_name: str, *, is_error: bool = False, output: Any = None, screenshot: Any = None,
                    observed_state: Any = None, error: str | None = None, call_id: str | None = None) -> str:
        """Record a tool's result, its screenshot (stored as a file) and the observed state.

        A memory tool's result (an object with ``text``, ``is_error`` and ``refs``) is stored as its text,
        and the memory ids it showed join the episode's ``retrieved_memory_refs``: a memory the model
        recalled is credited or blamed with the task like one the block showed."""
        try:
            with self._lock:
                refs = getattr(output, "refs", None)
                if hasattr(output, "text") and hasattr(output, "is_error") and isinstance(refs, list):
                    is_error = is_error or bool(output.is_error)
                    new = [r for r in refs if isinstance(r, str) and r not in self.episode.retrieved_memory_refs]
                    self.episode.retrieved_memory_refs.extend(new)
                    output = output.text
                shot: dict[str, Any] | None = None
                if screenshot is not None:
                    try:
                        info = self._store_screenshot(screenshot)
                        shot = info.to_dict() if info else {"screenshot_ref": None, "omitted": True}
                    except Exception as exc:
                        self._fail("cannot store screenshot", exc)
                        shot = {"screenshot_ref": None, "error": excerpt(str(exc), 200)}
                obs = normalize_observation(observed_state)
                if (marks_password(obs) or marks_password(output)) and self.dir is not None:
                    with ExitStack() as held:  # a transcript's own appends (its summary worker) wait meanwhile
                        for led in self._ledgers:
                            held.enter_context(led._lock)
                        self._typing.reveal([self.dir / EVENTS_FILE, self.dir / TRANSCRIPT_STEPS], self._fail,
                                           root=self._store.root)
                if obs is not None:
                    self._last_obs = obs
                    seen = obs.get("app")
                    if isinstance(seen, str) and seen.strip() and not is_system_screen(seen, obs.get("package")):
                        # The launcher or the status bar is where a task passes through, not what it is about.
                        self._apps_seen[seen] = self._apps_seen.get(seen, 0) + 1
                    ime = obs.get("input_method")
                    if isinstance(ime, str) and ime.strip():
                        self.episode.device_scope.input_method = ime  # what the phone reports wins over a hint
                    if self.episode.initial_state.app is None and obs.get("app"):
                        self.episode.initial_state.app = obs.get("app")
                        self.episode.initial_state.page = obs.get("page")
                        seen = obs.get("visible_text")
                        words = ", ".join(str(x) for x in seen[:6]) if isinstance(seen, list) else None
                        self.episode.initial_state.summary = excerpt(
                            f"{obs.get('app')} / {obs.get('page') or '?'}" + (f": {words}" if words else ""), 300)
                if shot and shot.get("screenshot_ref") and self.episode.initial_state.screenshot_ref is None:
                    self.episode.initial_state.screenshot_ref = shot["screenshot_ref"]
                event_id = self._emit({
                    "type": "tool_result", "role": "tool", "step": self._tool_steps, "tool_name": str(tool_name),
                    "is_error": bool(is_error), "output": sanitize(output, self._image_sink, limit=OUTPUT_LIMIT),
                    "error": sanitize(error, limit=500) if error else None, "call_id": call_id,
                    "observed_state": obs, **(shot or {}),
                })
                self._typing.result_written()
                return event_id
        except Exception as exc:
            self._fail("tool_result", exc)
            return ""

    def planner(self, *, objective: str | None = None, plan: Iterable[str] | None = None,
                next_step: str | None = None, completion_criteria: Iterable[str] | None = None,
                content: str | None = None) -> str:
        """Record a planner decision."""
        return self.event("planner_decision", role="planner", objective=objective,
                          plan=list(plan) if plan else None, next_step=next_step,
                          completion_criteria=list(completion_criteria) if completion_criteria else None,
                          content=content)

    def verifier(self, *, can_finish: bool, needs_replan: bool = False, reason: str | None = None,
                 observed_state: Any = None) -> str:
        """Record a verifier decision (whether the current observation proves completion)."""
        return self.event("verifier_decision", role="verifier", can_finish=bool(can_finish),
                          needs_replan=bool(needs_replan), reason=reason,
                          observed_state=normalize_observation(observed_state))

    def memory_used(self, memory_id: str, *, note: str | None = None) -> str:
        """Record that the agent is following a memory (a procedure it replays, a rule it applies): when the
        task fails, blame goes to what the agent said it followed and the events fit, not to what it was shown."""
        return self.event("memory_used", role="agent", memory_id=str(memory_id), content=note)

    def note(self, text: str, **fields: Any) -> str:
        """Record a free-form note."""
        return self.event("note", role="agent", content=text, **fields)

    def event(self, type: str, **fields: Any) -> str:
        """Record an event of any type; values are sanitised like tool inputs."""
        try:
            return self._emit({"type": str(type), **{k: sanitize(v, self._image_sink) for k, v in fields.items()}})
        except Exception as exc:
            self._fail(f"event {type}", exc)
            return ""

    def open_transcript(self, *, config: Any = None, lens: Any = None, system_prompt: str = "",
                        capsule_lens: Any = None, goal: str | None = None) -> Any:
        """The TranscriptLedger of this episode (``transcript/`` beside events.jsonl), for long tasks; its
        compaction writes capsules with ``capsule_lens`` (offline when None) and names ``goal`` in a snapshot.

        Without arguments it is opened as ``MemoryPlane.open_transcript`` does (config.yaml, the configured
        lenses, usage metering) when the plane made this recorder; otherwise config.yaml under the memory
        root still applies, with the offline lenses."""
        from .transcript import TranscriptLedger  # only long tasks pay for it

        if self.dir is None:
            raise RuntimeError("the episode folder could not be created; no transcript")
        if config is None and lens is None and self._transcript_opener is not None:
            return self._transcript_opener(self, system_prompt=system_prompt)
        if config is None:
            config = TranscriptConfig.from_mapping(read_config(self._store.root))
        ledger = TranscriptLedger(self.dir / "transcript", config=config, lens=lens, clock=self._clock,
                                  system_prompt=system_prompt, session_start=self.episode.started_at
                                  if isinstance(self.episode.started_at, type(self._clock())) else None,
                                  root=self._store.root, capsule_lens=capsule_lens, goal=goal)
        ledger.log.redact = self._secrets.scrub  # a password typed in this task never reaches a transcript file
        self._ledgers.append(ledger)
        return ledger

    # -- the end -------------------------------------------------------------

    def finish(self, *, output: str | None = None, error: str | BaseException | None = None,
               success: bool | None = None, final_state: str | None = None, completion_reason: str | None = None,
               failure_phase: str | None = None, failure_reason: str | None = None, final_answer: str | None = None,
               tags: Iterable[str] = (), entities: Iterable[str] = (), tokens: int | None = None,
               prompt_tokens: int | None = None, completion_tokens: int | None = None) -> TaskEpisode:
        """Close the episode and return it (commit it with ``MemoryPlane.commit_episode``).

        ``success`` defaults to true unless an ``error`` or a ``failure_phase`` is given. On a failure, the
        reason is ``failure_reason``, or else ``completion_reason`` (the runtime's last word on why it stopped);
        it reaches ``outcome.failure_reason``, the episode's summary and the failure lesson."""
        with self._lock:
            if self._finished is not None:
                log.warning("episode %s: finish() called twice; keeping the first outcome", self.episode.id)
                return self._finished
            ep = self.episode
            err_text = None
            if isinstance(error, BaseException):
                err_text = f"{type(error).__name__}: {error}"
            elif error:
                err_text = str(error)
            if success is None:
                success = err_text is None and failure_phase is None
            if err_text is not None:
                success = False
            if not success and failure_phase is None:
                failure_phase = "tool_error" if err_text else "unknown"
            if failure_phase is not None:
                # Kept as given (normalised to a word); a phase outside the documented ones is still named.
                given, failure_phase = failure_phase, normalize_phase(str(failure_phase)) or "unknown"
                if failure_phase not in FAILURE_PHASES:
                    log.info("episode %s: failure_phase %r is not one of the documented phases", ep.id, given)
            if not success and not (failure_reason and str(failure_reason).strip()):
                failure_reason = completion_reason  # the reason the runtime gave is the failure's reason
            now = self._clock()
            ep.ended_at = now
            ep.outcome = Outcome(
                success=bool(success), final_state=_txt(final_state), final_answer=_txt(final_answer or output),
                completion_reason=_txt(completion_reason), failure_phase=None if success else failure_phase,
                failure_reason=_txt(failure_reason) if not success else None, error=_txt(err_text),
            )
            ep.outcome = Outcome.model_validate(self._secrets.scrub(ep.outcome.model_dump()))
            if self._apps_seen:
                # The app the task worked in is the one the phone showed most often (the first on a tie),
                # not an app name the goal's words happen to contain.
                ep.observed_app = _most_shown(self._apps_seen, ep.normalized_goal)
            ep.tags = list(dict.fromkeys([*ep.tags, *tags]))
            ep.entities = list(dict.fromkeys([*ep.entities, *entities]))
            ep.metrics.tool_steps = self._tool_steps
            ep.metrics.events = min(self._seq, MAX_EVENTS)
            ep.metrics.screenshots = self._screens
            ep.metrics.duration_ms = int((time.monotonic() - self._t0) * 1000)
            ep.metrics.tokens = tokens
            ep.metrics.prompt_tokens = prompt_tokens
            ep.metrics.completion_tokens = completion_tokens
            if self.dropped_events:
                ep.metrics.dropped_events = self.dropped_events  # type: ignore[attr-defined]
            # The outcome goes into the events too: a commit that fails (a full disk) must not turn a
            # finished task into an interrupted one; verify completes the episode from this event.
            o = ep.outcome
            self._emit({"type": "finish", "role": "runtime", "success": o.success,
                        "failure_phase": o.failure_phase,
                        **{k: v[:500] for k, v in (("final_state", o.final_state), ("completion_reason",
                           o.completion_reason), ("failure_reason", o.failure_reason), ("error", o.error))
                           if isinstance(v, str) and v}})
            if self.dir is not None:
                try:
                    events = self._store.events(ep.id).records
                    ep.keep_events(events)  # the writer's jobs use this read instead of their own
                except Exception:
                    events = []
                ep.summary = episode_summary(ep, events)
                mark_unfinished(ep, events)
            # The recording lock stays held until the episode is committed (or this recorder is
            # collected): verify must not close an episode whose commit is just about to happen.
            ep._release = self._release_recording_lock
            self._finished = ep
            return ep

    def __enter__(self) -> EpisodeRecorder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._finished is not None:
            return
        ep = self.finish(error=exc, failure_phase="exception") if exc is not None else self.finish()
        if self._on_exit_commit is not None:
            try:
                self._on_exit_commit(ep)
            except Exception as commit_exc:
                self._fail("commit on exit", commit_exc)

def mark_unfinished(ep: TaskEpisode, events: list[dict[str, Any]]) -> None:
    """Mark a failed episode whose run stopped rather than failed (``outcome.unfinished``, on its index line
    too): retrieval sees only the index line, and must never show such a run as a caution."""
    if not ep.outcome.success and outcome_unfinished(ep.outcome, device_steps(pair_steps(events))):
        ep.outcome.unfinished = True  # type: ignore[attr-defined]  # an open model's field


def _txt(v: Any) -> str | None:
    if v is None:
        return None
    return sanitize(str(v), limit=1000)


def _most_shown(apps_seen: dict[str, int], goal: NormalizedGoal) -> str:
    """The app a task worked in: the one the phone showed most often; a tie goes to the app the goal names (by
    any name the catalog knows it by, which the normalized goal carries: 美团 for meituan), else to the first seen."""
    top = max(apps_seen.values())
    tied = [a for a, n in apps_seen.items() if n == top]
    extra = goal.model_extra or {}
    names = [goal.app, *(extra.get("app_names") or [])]
    goal_names = {n.strip().lower() for n in names if isinstance(n, str) and n.strip()}
    return next((a for a in tied if a.strip().lower() in goal_names), tied[0])

