"""Outcome updates: the memories an episode used gain trust from a success, and the ones that led it
into a failure lose it; a memory that was merely shown is left alone (see ``_blame``). A failure memory
shown to a failed episode is confirmed again only by the same cause met by the same kind of goal; a run
that did not finish (interrupted, raised, cut off mid-call) neither credits nor blames anything."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from memory_plane.device_memory import (
    AppProfile,
    DeviceItem,
    DeviceMemory,
    Failure,
    Procedure,
    led_by_line,
    type_of_id,
)
from memory_plane.lifecycle import EvidenceRef, FileProblemError

from ._blame import (
    RETIRE_AFTER,
    blamed_procedure,
    contradicting_steps,
    declared_memories,
    led_to_failure,
    note_demotion,
    on_trigger,
    procedure_failure_point,
    restore_if_earned,
    used_steps,
)
from ._causes import CauseKey, failure_cause, outcome_unfinished
from ._lesson_context import LessonContext
from ._lesson_writer import goal_pattern
from ._model import TaskEpisode
from ._steps import Step, device_steps, pair_steps
from ._store import TaskEpisodeStore

log = logging.getLogger("memory_plane")

SUCCESS_BOOST = 0.05
FAILURE_DROP = 0.15
CONTRADICTION_DROP = 0.25
DEMOTE_AFTER = 2
"""Failures a memory led into (and more than its successes) before it is demoted to ``conflicted``."""


def trigger_passed(trigger: dict[str, Any], steps: list[Step]) -> bool:
    """Tell whether an episode did what a failure memory's trigger warns about."""
    return bool(trigger) and any(on_trigger(trigger, s) for s in steps)


@dataclass
class OutcomeResult:
    """What the outcome update changed."""

    updated: list[str] = field(default_factory=list)
    conflicted: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    decisions: list[tuple[str, str, str]] = field(default_factory=list)  # (id, rule, decision)


def apply_contradiction(cur: Failure, ep: TaskEpisode, steps: list[Step], now: Any) -> tuple[bool, str | None]:
    """Count one success that contradicts a failure memory (once per episode); return whether it counted
    and the decision made (``conflicted`` on the first, ``replaced`` once ``RETIRE_AFTER`` successes
    retired it)."""
    if cur.status not in ("active", "conflicted"):
        return False, None
    if any(r.type == "contradiction" and r.id == ep.id for r in cur.evidence_refs):
        return False, None  # this episode was counted already
    shown = contradicting_steps(cur, steps, ep.device_scope.input_method)
    if not shown:
        return False, None
    cur.success_count += 1  # counts only the successes that contradict it
    cur.confidence = max(0.0, cur.confidence - CONTRADICTION_DROP)
    cur.updated_at = now
    cur.add_evidence(EvidenceRef(type="contradiction", id=ep.id, event_ids=[i for s in shown for i in s.event_ids]))
    if cur.success_count >= RETIRE_AFTER:
        cur.status = "replaced"
        cur.refresh_summary()
        return True, "replaced"
    decided = None
    if cur.status == "active":
        cur.status = "conflicted"
        decided = "conflicted"
    cur.refresh_summary()
    return True, decided


def clear_blame(device: DeviceMemory, proc: Procedure) -> None:
    """A success followed this procedure to its end: the failure memories that named it as the path they
    were met on (``led_by``) no longer hold that against it."""
    coll = device.collection("failure")
    # A failure mode is met by any goal of the app (of any app, for a procedure of none): led_by says by which path.
    lines = device.entries_where("failure", app=proc.app_id) if proc.app_id else device.entries("failure")
    for e in lines:
        led_by = led_by_line(e)
        if led_by is not None and proc.id not in led_by and device.line_is_current("failure", e):
            continue  # its line says it names other paths: its file is not opened

        def drop(cur: Any) -> Any:
            extra = (cur.model_extra or {}) if cur is not None else {}
            led = extra.get("led_by")
            if not isinstance(led, list) or proc.id not in led:
                return None
            extra["led_by"] = [x for x in led if x != proc.id]
            return cur

        try:
            coll.update(str(e["id"]), drop)
        except (FileProblemError, KeyError) as exc:
            log.error("memory: %s not cleared of %s: %s", e.get("id"), proc.id, exc)


class OutcomeUpdater:
    """The writer's background job that applies an episode's outcome to the memories it used."""

    def __init__(self, device: DeviceMemory, episodes: TaskEpisodeStore) -> None:
        self.device = device
        self.episodes = episodes

    def __call__(self, ep: TaskEpisode, events: list[dict[str, Any]] | None = None) -> OutcomeResult:
        """Apply the outcome of a committed episode (events read from disk unless given); the episode lists
        the conflicts it decided."""
        res = self.apply(ep, self.episodes.events(ep.id).records if events is None else events)
        ids = [i for i, _, _ in res.decisions]
        if ids and any(i not in ep.conflicts for i in ids):
            ep.conflicts = list(dict.fromkeys([*ep.conflicts, *ids]))[:50]
            self.episodes.write(ep)
        return res

    def apply(self, ep: TaskEpisode, events: list[dict[str, Any]]) -> OutcomeResult:
        """Update each referenced device memory once, by its type-qualified id."""
        res = OutcomeResult()
        steps = pair_steps(events)
        if not ep.outcome.success and outcome_unfinished(ep.outcome, device_steps(steps)):
            # The runtime raised, the recorder died, the record stops mid-call or right after a step that
            # worked with no word on why: the task did not fail, it stopped, and nothing the phone did is
            # known to have caused that.
            res.skipped.extend(dict.fromkeys(ep.retrieved_memory_refs))
            return res
        blamed: str | None = None
        causes = self._cause_keys(ep, steps) if not ep.outcome.success else set()
        if not ep.outcome.success:
            # Of the procedures shown, the one the events show was followed into the failure (one at most).
            procs = []
            for ref in dict.fromkeys(ep.retrieved_memory_refs):
                if type_of_id(ref) == "procedure":
                    try:  # by its id's file: a procedure gone since it was shown is not looked for in every file
                        p = self.device.collection("procedure").get(ref)
                    except (KeyError, FileProblemError):
                        continue
                    if isinstance(p, Procedure):
                        procs.append(p)
            blamed = blamed_procedure(procs, steps, ep.normalized_goal.target, declared_memories(events))
        for ref in dict.fromkeys(ep.retrieved_memory_refs):
            item_type = type_of_id(ref)
            if item_type is None or item_type == "device_profile":
                res.skipped.append(ref)
                continue
            if item_type == "procedure" and not ep.outcome.success and ref != blamed:
                res.skipped.append(ref)  # shown, not the path the episode followed into its failure
                continue
            try:
                self._one(ep, steps, item_type, ref, res, causes)
            except KeyError:
                res.skipped.append(ref)
        return res

    def _one(self, ep: TaskEpisode, steps: list[Step], item_type: str, ref: str, res: OutcomeResult,
             causes: set[CauseKey]) -> None:
        success = ep.outcome.success
        target = ep.normalized_goal.target
        canon = self.device.catalog.app_id_for
        decision: dict[str, Any] = {}

        def change(cur: DeviceItem | None) -> DeviceItem | None:
            if cur is None:
                return None
            if any(r.type == "outcome" and r.id == ep.id for r in cur.evidence_refs):
                return None  # applied already (a retried job)
            now = self.device.clock()
            if isinstance(cur, Failure):
                return self._weigh_failure(cur, ep, steps, causes, now, decision)
            if success:
                shown = used_steps(cur, steps, target, canon)
                if not shown:
                    return None  # merely shown: a success it had no part in is not its evidence
                cur.success_count += 1
                cur.confidence = min(0.95, cur.confidence + SUCCESS_BOOST)
                if cur.status == "expired":
                    cur.status = "active"
                if restore_if_earned(cur):
                    decision.update(rule="restored_by_success", decision="active")
                    restored.append(cur)
                cur.renew(now)
            elif isinstance(cur, AppProfile):
                # A failed task in the app is counted; what the phone showed of the app stays true.
                shown = used_steps(cur, steps, target, canon)
                if not shown:
                    return None
                cur.failure_count += 1
                cur.updated_at = now
            else:
                shown = led_to_failure(cur, steps, target)
                if not shown:
                    return None  # shown but not followed into the failure: no blame
                cur.failure_count += 1
                cur.confidence = max(0.0, cur.confidence - FAILURE_DROP)
                cur.updated_at = now
                if (cur.status == "active" and cur.failure_count >= DEMOTE_AFTER
                        and cur.failure_count > cur.success_count):
                    cur.status = "conflicted"
                    hit = procedure_failure_point(cur, steps, target) if isinstance(cur, Procedure) else None
                    note_demotion(cur, "repeated_failures", ep.id, [i for s in shown for i in s.event_ids], now,
                                  hit[1] if hit else None)
                    decision.update(rule="repeated_failures", decision="conflicted")
            cur.add_evidence(EvidenceRef(type="outcome", id=ep.id, event_ids=[i for s in shown for i in s.event_ids]))
            cur.refresh_summary()
            return cur

        restored: list[DeviceItem] = []
        out = self.device.upsert(item_type, ref, change)
        for item in restored:
            if isinstance(item, Procedure):
                clear_blame(self.device, item)
        if out is None:
            res.skipped.append(ref)
            return
        res.updated.append(ref)
        if decision:
            d = decision["decision"]
            (res.conflicted if d == "conflicted" else res.restored if d == "active" else res.retired).append(ref)
            res.decisions.append((ref, decision["rule"], d))
            self.device.conflicts.add([ref], rule=decision["rule"], decision=d,
                                      evidence={"episode": ep.id, "success": success})

    def _cause_keys(self, ep: TaskEpisode, steps: list[Step]) -> set[CauseKey]:
        """The cause a failed episode's events show, keyed exactly as its failure memory is (none or one)."""
        lesson = LessonContext(ep, device_steps(steps), self.device)
        cause = failure_cause(lesson.steps, ep.outcome)
        return {cause.key(lesson.app_at(cause.step), ep.normalized_goal.target)} if cause is not None else set()

    def _weigh_failure(self, cur: Failure, ep: TaskEpisode, steps: list[Step], causes: set[CauseKey], now: Any,
                       decision: dict[str, Any]) -> Failure | None:
        """A failure memory the episode was shown: contradicted by a success that did what it warns against,
        confirmed by a failure that met it again (None: left as it is)."""
        if ep.outcome.success:
            counted, d = apply_contradiction(cur, ep, steps, now)
            if d:
                decision.update(rule="success_contradicts_failure" if d == "conflicted" else "failure_retired",
                                decision=d)
            return cur if counted else None
        if not self._met_again(cur, ep, steps, causes):
            return None  # shown, not what went wrong here
        cur.occurrences += 1  # confirmed again
        cur.confidence = min(0.98, cur.confidence + SUCCESS_BOOST)
        cur.renew(now)
        cur.add_evidence(EvidenceRef(type="outcome", id=ep.id, event_ids=[i for s in steps if s.tool == cur.trigger.get(
            "tool") for i in s.event_ids][:20]))
        cur.refresh_summary()
        return cur

    @staticmethod
    def _met_again(fail: Failure, ep: TaskEpisode, steps: list[Step], causes: set[CauseKey]) -> bool:
        """Whether a failed episode met this failure again: the same cause (the events show it) in a goal of
        the same group; a failure about an action (typing non-ASCII text) when the episode did that action."""
        key = CauseKey.of(fail.cause)
        if key is None:
            return bool(fail.trigger.get("input_contains_non_ascii")) and trigger_passed(fail.trigger, steps)
        groups = fail.goal_groups or ([fail.goal_pattern] if fail.goal_pattern else [])
        return key in causes and goal_pattern(ep) in groups
