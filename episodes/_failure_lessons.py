"""Failure lessons: typed failure memories, the procedures followed into them, and failures that retire."""

from __future__ import annotations

import logging
from typing import Any

from memory_plane.device_memory import Failure, Procedure
from memory_plane.lifecycle import FileProblemError, UnsafePathError, content_hash

from ._blame import blamed_procedure
from ._causes import CauseKey, classify, failure_cause
from ._lesson_conflicts import negation
from ._lesson_context import LessonContext
from ._lesson_writer import ExtractionResult, LessonWriter, goal_pattern
from ._outcomes import apply_contradiction
from ._steps import TEXT_TOOLS, Step

log = logging.getLogger("memory_plane")

EXAMPLE_PHASES = 5  # the runtime's phases a failure mode keeps as examples
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
            fid = f"fail_{content_hash(lesson.device_id, None, None, NON_ASCII_MODE)}"
            _failure(writer, lesson, res, fid, NON_ASCII_MODE, {k: v for k, v in trig.items() if v is not None},
                     NON_ASCII_LESSON, [s])
            break
    _contradictions(writer, lesson)
    if ep.outcome.success:
        return
    # What the events show at the failing step (a dialog in the way, typed text refused, a tap without effect,
    # ...) is the failure's one cause: one failure memory, keyed by the cause alone. The other symptoms the
    # run showed are listed in the episode's failure_causes only. A run that did not finish (interrupted,
    # raised, cut off mid-call, stopped without a word) has none: it did not fail.
    cause = failure_cause(lesson.steps, ep.outcome)
    if cause is not None:
        key = cause.key(lesson.app_at(cause.step), ep.normalized_goal.target)
        _failure(writer, lesson, res, key.failure_id(lesson.device_id), key.label(), cause.trigger(key),
                 cause.lesson, cause.steps, key=key)
        others = [c.key(lesson.app_at(c.step), ep.normalized_goal.target).label() for c in classify(lesson.steps)]
        ep.failure_causes = list(dict.fromkeys([*ep.failure_causes, key.label(), *others]))
    # The phase and reason the runtime gave, as the episode's own record of why.
    ep.failure_causes = list(dict.fromkeys([*ep.failure_causes, phase_cause(lesson)]))


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


def _failure(writer: LessonWriter, lesson: LessonContext, res: ExtractionResult, fid: str, mode: str,
             trigger: dict[str, Any], lesson_text: str, evidence: list[Step], *, key: CauseKey | None = None) -> None:
    """One failure memory, created or met again: a cause's (``key``: of its app, followed by the goal's
    procedures) or a device-wide one. The goal, its group and the runtime's reason are kept beside it."""
    ep = lesson.ep
    app_id = key.app if key else None
    group = goal_pattern(ep)
    reason = lesson.failure_text()
    # The procedures this episode followed into the failure: only they are weighed against it.
    led = _followed_into_failure(writer, lesson, app_id, group) if key else []

    def note_led(f: Failure) -> None:
        extra = f.model_extra if f.model_extra is not None else {}
        prev = extra.get("led_by")
        old: list[str] = [str(x) for x in prev] if isinstance(prev, list) else []
        if led or old:
            extra["led_by"] = list(dict.fromkeys([*old, *led]))[-10:]
        if key is not None and ep.outcome.failure_phase:
            # The runtime's phase for it is an example, like its words: the same cause is phased differently.
            seen = extra.get("phases")
            phases = [str(x) for x in seen] if isinstance(seen, list) else []
            extra["phases"] = list(dict.fromkeys([*phases, ep.outcome.failure_phase]))[-EXAMPLE_PHASES:]

    def merge(f: Failure) -> None:
        note_led(f)
        extra = f.model_extra if f.model_extra is not None else {}
        if lesson.language:
            # Met again under the UI language of now: it holds there (a failure demoted when the language
            # changed is brought back by meeting it under the new one).
            f.applicability = {**f.applicability, "language": lesson.language}
            if extra.get("stale_key") == "language":
                extra.pop("stale_key", None)
                extra.pop("stale_reason", None)
                if f.status == "conflicted":
                    f.status = "active"
                    lesson.decide([f.id], "failure_reconfirmed", "active", f"met again under {lesson.language}")
        same_group = group in f.goal_groups
        # The outcome update counted this episode when it was shown this failure and met it again.
        if not any(r.type == "outcome" and r.id == ep.id for r in f.evidence_refs):
            f.occurrences += 1
            f.confidence = min(0.98, f.confidence + 0.05)
        f.met_in(ep.user_goal, group, reason)
        if f.status == "conflicted" and (same_group or key is None):
            # It happened again (a cause: to the same kind of goal): the doubt is resolved in its favour.
            f.status = "active"
            lesson.decide([f.id], "failure_reconfirmed", "active")
        f.refresh_summary()

    def create() -> Failure:
        where = evidence[-1]
        f = writer.device.new_item(
            Failure, fid, device_id=lesson.device_id, app_id=app_id, app_name=lesson.display(app_id),
            page_name=key.page if key else None, failure_mode=mode, failure_phase=ep.outcome.failure_phase,
            trigger=trigger, cause=key.as_dict() if key else {}, lesson=lesson_text,
            goal_pattern=group if key else None,
            title=(f"{lesson.display(app_id) or 'Device'}: {mode}" if key else mode)[:120], confidence=0.8,
            priority=80, occurrences=1,
            # The UI language it was met under: the dialogs, labels and fields it names are that language's, so a
            # language change demotes it as it does the other lessons.
            applicability={k: v for k, v in {"device_id": lesson.device_id, "app": app_id,
                                             "language": lesson.language}.items() if v},
            entities=[p for p in (where.page_before, where.page_after) if p][:2] if key else [],
        )
        f.met_in(ep.user_goal, group, reason)
        note_led(f)
        f.refresh_summary()
        return f

    fail = writer.upsert(lesson, res, "failure", fid, create, merge, content_hash("failure", fid), evidence=evidence)
    if isinstance(fail, Failure) and key and app_id:
        negation(writer.device, lesson, app_id, group)


def _followed_into_failure(writer: LessonWriter, lesson: LessonContext, app_id: str | None,
                           pattern: str | None) -> list[str]:
    """Ids of this goal's procedures that the failed episode followed into its failure."""
    if not app_id or not pattern:
        return []
    key = f"{app_id}\n{pattern}"
    if key in lesson.blamed:
        return lesson.blamed[key]  # decided once, before this episode's own lessons changed any status
    procs: list[Procedure] = []
    declared = lesson.declared
    for e in writer.device.entries_where("procedure", app=app_id, goal=pattern):
        if (e.get("status") != "active" and e.get("id") not in declared
                and writer.device.line_is_current("procedure", e)):
            continue  # only an active procedure is blamed (one the agent said it followed is weighed as it is)
        try:
            p = writer.device.collection("procedure").peek(str(e["id"]))
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
