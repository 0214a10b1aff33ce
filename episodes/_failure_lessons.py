"""Failure lessons: typed failure memories, the procedures followed into them, and failures that retire."""

from __future__ import annotations

import logging
from typing import Any

from memory_plane.device_memory import Failure, Procedure
from memory_plane.lifecycle import FileProblemError, UnsafePathError, content_hash

from ._blame import blamed_procedure
from ._causes import classify
from ._lesson_conflicts import negation
from ._lesson_context import LessonContext
from ._lesson_writer import ExtractionResult, LessonWriter, goal_pattern
from ._outcomes import apply_contradiction
from ._steps import TEXT_TOOLS, Step

log = logging.getLogger("memory_plane")

NON_ASCII_MODE = "keyboard_text_cannot_input_non_ascii"
NON_ASCII_LESSON = ("keyboard_text cannot type non-ASCII text on this device: type pinyin or an English alias, "
                    "then select the candidate or search result.")


def learn_failures(writer: LessonWriter, lesson: LessonContext, res: ExtractionResult) -> None:
    """The typed failure memories a failed episode teaches, and the ones a success contradicts."""
    ep = lesson.ep
    raised = ep.outcome.failure_phase == "exception"
    for s in lesson.steps:
        # A runtime exception says nothing about the keyboard: only the tool's own error does then.
        if s.tool in TEXT_TOOLS and s.text and not s.text.isascii() and (
                s.is_error or (not ep.outcome.success and not raised and not s.changed_page)):
            trig = {"tool": s.tool, "input_contains_non_ascii": True, "input_method": lesson.input_method}
            _failure(writer, lesson, res, NON_ASCII_MODE, {k: v for k, v in trig.items() if v is not None},
                          NON_ASCII_LESSON, s, scope_app=False)
            break
    _contradictions(writer, lesson)
    if ep.outcome.success or raised:
        return
    # What the events show (the screen did not change, a dialog was open, typed text did not arrive,
    # taps without effect): each a typed failure memory, and the episode's failure_causes.
    for cause in classify(lesson.steps):
        _failure(writer, lesson, res, cause.label(), cause.trigger(), cause.lesson, cause.steps[-1], scope_app=True,
                      evidence=cause.steps)
        ep.failure_causes = list(dict.fromkeys([*ep.failure_causes, cause.label()]))
    last = lesson.steps[-1]
    phase = ep.outcome.failure_phase or "unknown"
    reason = lesson.failure_text() or phase
    mode = phase_cause(lesson)
    # The phase and reason the runtime gave are a cause too (a tool error names no screen change).
    ep.failure_causes = list(dict.fromkeys([*ep.failure_causes, mode]))
    app = lesson.display(lesson.goal_app or lesson.canon(last.app_after))
    trigger = {k: v for k, v in {"tool": last.tool, "app": app,
                                 "page": last.page_before or last.page_after}.items() if v}
    lesson_text = (f"Goal {ep.user_goal[:80]!r} failed at {phase}: {reason[:160]}. "
              "Check the current observation before repeating this path; completion needs fresh evidence.")
    _failure(writer, lesson, res, mode, trigger, lesson_text, last, scope_app=True)


def _contradictions(writer: LessonWriter, lesson: LessonContext) -> None:
    """Failures retire: a failure memory about an action (the keyboard cannot type non-ASCII) is
    contradicted by a step that did that action under its conditions and worked, shown or not."""
    if not lesson.ep.outcome.success:
        return
    fid = f"fail_{content_hash(lesson.device_id, None, None, NON_ASCII_MODE)}"
    if fid in lesson.ep.retrieved_memory_refs:
        return  # the outcome update weighs a failure memory the episode was shown
    rule: dict[str, str] = {}

    def change(cur: Any) -> Any:
        if not isinstance(cur, Failure):
            return None
        counted, decision = apply_contradiction(cur, lesson.ep, lesson.steps, writer.device.clock())
        if decision:
            rule["decision"] = decision
        return cur if counted else None

    try:
        if writer.device.collection("failure").get(fid) is None:
            return
        writer.device.collection("failure").update(fid, change)
    except (FileProblemError, UnsafePathError, KeyError) as exc:
        log.error("memory: failure %s not weighed against %s: %s", fid, lesson.ep.id, exc)
        return
    if rule:
        lesson.decide([fid],
                      "success_contradicts_failure" if rule["decision"] == "conflicted" else "failure_retired",
                      rule["decision"], "the same action worked under the same conditions")


def _failure(writer: LessonWriter, lesson: LessonContext, res: ExtractionResult, mode: str, trigger: dict[str, Any],
             lesson_text: str, step: Step, *, scope_app: bool, evidence: list[Step] | None = None) -> None:
    """One failure memory of this mode (of the goal's app and pattern when ``scope_app``), created or renewed."""
    app_id = ((lesson.goal_app or lesson.canon(step.app_after) or lesson.canon(step.app_before))
              if scope_app else None)
    pattern = goal_pattern(lesson.ep) if scope_app else None
    fid = f"fail_{content_hash(lesson.device_id, app_id, pattern, mode)}"
    # The procedures this episode followed into the failure: only they are weighed against it.
    led = _followed_into_failure(writer, lesson, app_id, pattern) if scope_app else []

    def note_led(f: Failure) -> None:
        extra = f.model_extra if f.model_extra is not None else {}
        prev = extra.get("led_by")
        old: list[str] = [str(x) for x in prev] if isinstance(prev, list) else []
        if led or old:
            extra["led_by"] = list(dict.fromkeys([*old, *led]))[-10:]

    def merge(f: Failure) -> None:
        note_led(f)
        f.occurrences += 1
        f.confidence = min(0.98, f.confidence + 0.05)
        if f.status == "conflicted":
            f.status = "active"  # the failure happened again: the doubt is resolved in its favour
            lesson.decide([f.id], "failure_reconfirmed", "active")
        f.summary = f.body()

    def create() -> Failure:
        f = writer.device.new_item(
            Failure, fid, device_id=lesson.device_id, app_id=app_id, app_name=lesson.display(app_id),
            page_name=trigger.get("page"), failure_mode=mode, failure_phase=lesson.ep.outcome.failure_phase,
            trigger=trigger, lesson=lesson_text, goal_pattern=pattern, title=mode[:120], confidence=0.8,
            priority=80, occurrences=1,
            applicability={k: v for k, v in {"device_id": lesson.device_id, "app": app_id}.items() if v},
        )
        note_led(f)
        f.summary = f.body()
        return f

    fail = writer.upsert(lesson, res, "failure", fid, create, merge, content_hash("failure", fid),
                        evidence=evidence or [step])
    if isinstance(fail, Failure) and scope_app and app_id and pattern:
        negation(writer.device, lesson, app_id, pattern)


def _followed_into_failure(writer: LessonWriter, lesson: LessonContext, app_id: str | None,
                           pattern: str | None) -> list[str]:
    """Ids of this goal's procedures that the failed episode followed into its failure."""
    if not app_id or not pattern:
        return []
    key = f"{app_id}\n{pattern}"
    if key in lesson.blamed:
        return lesson.blamed[key]  # decided once, before this episode's own lessons changed any status
    procs: list[Procedure] = []
    for e in writer.device.entries("procedure", app_id):
        if e.get("goal") != pattern:
            continue
        try:
            p = writer.device.collection("procedure").get(str(e["id"]))
        except (FileProblemError, UnsafePathError, KeyError):
            continue
        if isinstance(p, Procedure):
            procs.append(p)
    refs = lesson.ep.retrieved_memory_refs
    procs.sort(key=lambda p: refs.index(p.id) if p.id in refs else len(refs))  # shown first wins a tie
    blamed = blamed_procedure(procs, lesson.steps, lesson.ep.normalized_goal.target, lesson.declared)
    lesson.blamed[key] = [blamed] if blamed else []
    return lesson.blamed[key]


def phase_cause(lesson: LessonContext) -> str:
    """``phase: reason``: the failure as the runtime named it."""
    phase = lesson.ep.outcome.failure_phase or "unknown"
    reason = lesson.failure_text() or phase
    return f"{phase}: {' '.join(reason.split())[:80]}"
