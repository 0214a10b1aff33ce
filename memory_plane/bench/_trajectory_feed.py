"""`bench lessons`: the generated trajectory set fed through the runtime's public path, and asked.

Feeding is what a runtime does per task: ``retrieve`` for the goal, ``new_episode_recorder(req, memory)``
(so the episode keeps the ids it was shown), the screen it starts on, one ``tool_call``/``tool_result``
pair per action with the observed state, then ``finish`` (or a dropped recorder that ``verify`` closes, as
after a crash) and ``commit_episode``. Time is a step clock the feeder alone moves, so two feeds of the
same trajectories differ only in how far behind the background worker is allowed to fall.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from memory_plane.device_memory import Procedure, type_of_id

from ._blame import demotions
from ._lesson_classes import EpisodeTruth, claimed_verified, evidence, items, taught_by_unfinished, truth_token
from ._lesson_paths import lcs_closeness, shown_steps, steps_tokens
from ._trajectory_apps import HEIGHT, WIDTH
from ._trajectory_set import Trajectory
from ._util import r


class StepClock:
    """A clock that moves only when the feeder says (the worker reads the same time as the task)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2025, 3, 1, 8, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float) -> None:
        """Move time forward."""
        self.now += timedelta(seconds=seconds)


def truth_of(t: Trajectory) -> EpisodeTruth:
    """A generated trajectory's ground truth, in the counters' terms."""
    def tok(kind: str, value: str) -> Any:
        return truth_token(kind, None if value == "[secret]" else value)

    last = next((a for a in reversed(t.acts) if a.label), None)
    page = last.after.page if last is not None else t.start.page
    targets = [str(a.input.get("app") or a.input.get("text") or a.label or "") for a in t.acts if not a.sensitive]
    return EpisodeTruth(
        goal=t.goal, task=t.truth.task, apps=t.truth.apps_shown, success=t.truth.success,
        reported_success=t.truth.reported_success, finished=t.truth.finished,
        path=[tok(k, v) for k, v in t.path()], work=[tok(k, v) for k, v in t.work()],
        cause=f"{t.truth.app}/{page}/{t.truth.cause}" if t.truth.cause else None,
        values=list(t.truth.values.values()), quoted=t.truth.quoted, targets=[x for x in targets if x])


def _request(t: Trajectory) -> Any:
    from .._retrieve_types import CurrentEnvironmentHints, MemoryRetrieveRequest

    return MemoryRetrieveRequest(input=t.goal, current_hints=CurrentEnvironmentHints(
        language=t.language, app=t.start.app, page=t.start.page, screen_width=WIDTH, screen_height=HEIGHT))


@dataclass
class Fed:
    """What a feed recorded: each episode's truth by id, and the procedures another goal's failure demoted."""

    truths: dict[str, EpisodeTruth] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    cross_goal_demoted: set[str] = field(default_factory=set)
    demoted_by_failures: set[str] = field(default_factory=set)
    claimed_taught: set[str] = field(default_factory=set)  # verified procedures a claimed success taught


def _procedures(plane: Any) -> dict[str, tuple[str, str, float]]:
    return {p.id: ("procedure", p.status, float(p.confidence)) for p in items(plane, "procedure")}


def feed(plane: Any, trajectories: list[Trajectory], clock: StepClock, *, settle_each: bool = True) -> Fed:
    """Record the trajectories (not the held-out ones) in order. With ``settle_each`` the background work of
    each episode is flushed before the next task starts, and the procedures a failure demotes are tracked;
    without, the tasks follow one another as fast as the runtime can go (the worker may lag)."""
    out = Fed()
    for n, t in enumerate(x for x in trajectories if not x.held_out):
        clock.tick(600)
        failed = not t.truth.reported_success
        before = _procedures(plane) if settle_each and failed else None
        lines = len(plane.device.conflicts.records()) if before is not None else 0
        eid = _record(plane, t, clock, verify_it=n % 3 != 2)
        out.truths[eid] = truth_of(t)
        out.order.append(eid)
        if settle_each:
            plane.flush(60)
            if t.truth.reported_success and not t.truth.success:
                # As taught, before any later episode could change it (a demotion would hide it).
                taught = [p for p in items(plane, "procedure") if any(ref.id == eid for ref in p.evidence_refs)]
                out.claimed_taught |= set(claimed_verified(taught, out.truths)["all"])
        if before is not None:
            after = _procedures(plane)
            decided = plane.device.conflicts.records()[lines:]
            # A change of the UI language or screen sets aside what was learned under the other one (and
            # brings it back): that is the environment, not the failure, and is not counted here.
            env = {str(i) for line in decided if str(line.get("rule", "")).startswith("environment_")
                   for i in line.get("ids") or []}
            blamed = [x for x in decided if not str(x.get("rule", "")).startswith("environment_")]
            named = {str(i) for line in blamed for i in line.get("ids") or []}
            hit = {i for i in demotions(before, after, blamed)
                   if type_of_id(i) == "procedure" and before[i][1] == "active"
                   and (i not in env or i in named or (i in after and after[i][2] < before[i][2] - 1e-9))}
            out.demoted_by_failures |= hit
            for pid in hit:
                proc = plane.device.get(pid)
                tasks = {e.task for e in evidence(proc, out.truths)} if proc is not None else set()
                if t.truth.task not in tasks:
                    out.cross_goal_demoted.add(pid)
    plane.flush(120)
    return out


def _record(plane: Any, t: Trajectory, clock: StepClock, verify_it: bool) -> str:
    """One task as the runtime records it; returns the episode id."""
    req = _request(t)
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    eid = str(rec.id)
    # The screen the task starts on, as the runtime reads it before its first action.
    rec.tool_result("observe_screen", observed_state=t.start.observed())
    for a in t.acts:
        clock.tick(3)
        rec.tool_call(a.tool, dict(a.input), content=a.narration, target_label=a.label)
        rec.tool_result(a.tool, is_error=a.is_error, output=a.error or "ok", error=a.error,
                        observed_state=a.after.observed())
    clock.tick(3)
    ending = t.truth.ending
    if ending == "dropped":
        # The runtime died: nothing finishes the recorder; its lock goes with it and verify (the next
        # start's upkeep) closes the episode as interrupted.
        del rec
        gc.collect()
        plane.verify()
        return eid
    if ending == "interrupted":
        ep = rec.finish(success=False, failure_phase="interrupted")
    elif ending == "truncated":
        ep = rec.finish(success=False)  # the record stops mid-task, with no word on why
    elif t.truth.reported_success:
        if verify_it and t.truth.success:  # most real successes carry the runtime's verifier check
            rec.verifier(can_finish=True, reason="the goal is on the screen", observed_state=t.acts[-1].after.observed()
                         if t.acts else t.start.observed())
        ep = rec.finish(success=True, completion_reason="done" if verify_it and t.truth.success else None)
    else:
        ep = rec.finish(success=False, failure_phase=t.failure_phase, failure_reason=t.failure_reason)
    plane.commit_episode(ep)
    return eid


# -- asking the held-out goals ----------------------------------------------------------------------


def ask_held_out(plane: Any, trajectories: list[Trajectory], fed: Fed) -> dict[str, Any]:
    """Each held-out goal asked through ``retrieve``: closeness of the top procedure's (goal-filled) steps to the
    real path, beside the real path of the nearest past goal (FTS5 trigram over the recorded successes); and
    how many goals were shown a caution or failure mode that comes from an unfinished run."""
    from ._lessons import nearest_goals  # the AndroidControl side's baseline, the same function

    asked = [t for t in trajectories if t.held_out]
    past = [(eid, tr) for eid, tr in fed.truths.items() if tr.reported_success]
    near = nearest_goals([tr.goal for _, tr in past], [t.goal for t in asked])
    ours: list[float] = []
    base: list[float] = []
    shown = unfinished = 0
    for t, n in zip(asked, near):
        real = truth_of(t).path
        memory = plane.retrieve(_request(t))
        hits = memory.hits()
        if any(h.caution or type_of_id(h.id) == "failure" for h in hits if taught_by_unfinished(plane, h.id,
                                                                                              fed.truths)):
            unfinished += 1
        top = next((h for h in memory.common.procedures if type_of_id(h.id) == "procedure"), None)
        proc = plane.device.get(top.id) if top is not None else None
        if isinstance(proc, Procedure):
            shown += 1
            ours.append(lcs_closeness(steps_tokens(shown_steps(proc, t.goal)), real) or 0.0)
        else:
            ours.append(0.0)
        base.append((lcs_closeness(past[n][1].path, real) or 0.0) if n is not None else 0.0)
    k = len(asked)
    return {"held_out_goals": k, "shown_procedure": shown,
            "closeness_ours": r(sum(ours) / k) if k else None,
            "closeness_nearest_goal": r(sum(base) / k) if k else None,
            "unfinished_cautions": {"count": unfinished, "of": k}}
