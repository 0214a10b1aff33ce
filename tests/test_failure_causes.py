"""Failure modes by cause: a failure memory is its cause (app, page, the symptom the events show and what
identifies it there), whatever goal met it and whatever phase or words the runtime used; the goals, phases and
words are kept beside it. One failed run is one cause: the symptom at its failing step.
A failure memory shown to another task is confirmed only by the same cause met by the same kind of goal."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.device_memory import Failure
from memory_plane.episodes import CauseKey

EN = CurrentEnvironmentHints(language="en-US", screen_width=1080, screen_height=2400)


def run(plane: MemoryPlane, goal: str, steps: list[tuple[Any, ...]], *, success: bool = True,
        **finish: Any) -> tuple[Any, Any]:
    """One task as a runtime records it, (tool, input, label, observed_state[, error]) per step; returns the
    committed episode and what retrieve showed it."""
    req = MemoryRetrieveRequest(input=goal, current_hints=EN)
    ctx = plane.retrieve(req)
    rec = plane.new_episode_recorder(req, ctx)
    for tool, ti, label, obs, *err in steps:
        rec.tool_call(tool, ti, target_label=label)
        rec.tool_result(tool, is_error=bool(err), error=err[0] if err else None, observed_state=obs)
    ep = rec.finish(success=success, **finish)
    plane.commit_episode(ep)
    assert plane.flush(20)
    return ep, ctx


def failures(plane: MemoryPlane) -> list[Failure]:
    found = [plane.device.get(e["id"]) for e in plane.device.entries("failure")]
    return [f for f in found if isinstance(f, Failure)]


def notes(page: str, **extra: Any) -> dict[str, Any]:
    return {"app": "Keep Notes", "page": page, "package": "com.google.android.keep", **extra}


LIST = notes("List", visible_text=["Sync", "Notes"])
# The Sync button of the list does nothing: the page and the screen stay as they were.
DEAD_SYNC = [("launch_app", {"app": "Keep Notes"}, None, LIST), ("tap", {"x": 980, "y": 150}, "Sync", LIST)]


def test_one_cause_met_by_three_goals_is_one_failure_mode(tmp_path: Path) -> None:
    met = [("Sync my notes in Keep Notes", "sync did nothing"),
           ("Back up all notes in Keep Notes to the cloud", "the backup never started"),
           ("Refresh the note list in Keep Notes", "list is stale after tapping sync")]
    with MemoryPlane.open(tmp_path / "m") as plane:
        for goal, reason in met:
            run(plane, goal, DEAD_SYNC, success=False, failure_phase="state_mismatch", failure_reason=reason)
        (mode,) = failures(plane)
        assert mode.occurrences == 3
        assert mode.goals == [g for g, _ in met] and mode.reasons == [r for _, r in met]
        key = CauseKey("keep_notes", "List", "page_unchanged", "tap Sync")
        assert mode.cause == key.as_dict() and mode.id == key.failure_id("default")
        assert not any(r in (mode.title or "") + mode.failure_mode for _, r in met)  # the words are examples only


def test_another_goal_typing_on_the_same_page_does_not_confirm_a_failure(tmp_path: Path) -> None:
    editor = notes("Editor", visible_text=[])
    lost = [("launch_app", {"app": "Keep Notes"}, None, notes("List")),
            ("tap", {"x": 950, "y": 2200}, "New note", editor),
            ("keyboard_text", {"text": "Spanish verbs"}, None, editor)]  # the text never arrived
    typed = notes("Editor", visible_text=["Groceries"])
    checklist = [*lost[:2], ("keyboard_text", {"text": "Groceries"}, None, typed),
                 ("tap", {"x": 100, "y": 2300}, "Checklist", typed)]
    with MemoryPlane.open(tmp_path / "m") as plane:
        b, _ = run(plane, "Write a note 'Spanish verbs' in Keep Notes", lost, success=False, failure_phase="input",
                   failure_reason="the title stayed empty")
        (input_mode,) = [f for f in failures(plane) if f.cause.get("symptom") == "input_not_accepted"]
        a, ctx = run(plane, "Add a checklist to a new note in Keep Notes", checklist, success=False,
                     failure_phase="input", failure_reason="no checklist appeared")
        assert input_mode.id in ctx.refs()  # shown to the other goal, which typed on the same page
        cur = plane.device.get(input_mode.id)
        assert isinstance(cur, Failure) and cur.occurrences == 1 and cur.goals == [b.user_goal]
        assert not any(r.id == a.id for r in cur.evidence_refs)
        # The same cause met again by the same goal is the failure met again.
        run(plane, "Write a note 'Spanish verbs' in Keep Notes", lost, success=False, failure_phase="input",
            failure_reason="typing did nothing")
        cur = plane.device.get(input_mode.id)
        assert isinstance(cur, Failure) and cur.occurrences == 2 and cur.reasons[-1] == "typing did nothing"


@pytest.fixture(scope="module")
def shared() -> Iterator[MemoryPlane]:
    with tempfile.TemporaryDirectory() as d, MemoryPlane.open(Path(d) / "m") as plane:
        yield plane


words = st.text(alphabet=st.characters(whitelist_categories=("L", "N", "P", "Zs")), min_size=1, max_size=60)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reason=words.filter(str.strip), goal=words.filter(str.strip),
       phase=st.sampled_from(["state_mismatch", "navigation", "max_iterations"]),
       page=st.sampled_from(["List", "Archive", "设置"]))
def test_a_failure_id_depends_on_its_cause_alone(shared: MemoryPlane, reason: str, goal: str, phase: str,
                                                 page: str) -> None:
    shown = notes(page, visible_text=["Sync"])
    steps = [("launch_app", {"app": "Keep Notes"}, None, shown), ("tap", {"x": 980, "y": 150}, "Sync", shown)]
    ep, _ = run(shared, f"Keep Notes {goal}", steps, success=False, failure_phase=phase, failure_reason=reason)
    key = CauseKey("keep_notes", page, "page_unchanged", "tap Sync")  # the runtime's phase is no part of it
    got = shared.episodes.get(ep.id)
    assert got is not None and got.reusable_lessons.count(key.failure_id("default")) == 1
    assert [i for i in got.reusable_lessons if i.startswith("fail_")] == [key.failure_id("default")]


def test_a_failure_on_the_home_screen_is_the_app_the_run_reached_or_none(tmp_path: Path) -> None:
    """A tap that does nothing on the launcher belongs to no launcher and to no app the goal merely names; it
    is the task's app when the run reached one, and the outcome update keys it the same way."""
    home = {"app": "Launcher", "page": "Home", "package": "com.android.launcher3"}
    dead_icon = [("tap", {"x": 120, "y": 900}, "Keep Notes", home), ("tap", {"x": 120, "y": 900}, "Keep Notes", home)]
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "Open Keep Notes and add a note", dead_icon, success=False, failure_phase="navigation",
            failure_reason="the icon did nothing")
        (mode,) = failures(plane)
        assert mode.app_id is None and mode.cause.get("app") is None
        reached = [("launch_app", {"app": "Keep Notes"}, None, LIST), *dead_icon]
        run(plane, "Open Keep Notes then go home and reopen it", reached, success=False,
            failure_phase="navigation", failure_reason="the icon did nothing")
        apps = sorted(str(f.app_id) for f in failures(plane))
        assert apps == ["None", "keep_notes"]
        # Shown to the same goal again, the same cause is met again (the update and the lesson agree on its key).
        _, ctx = run(plane, "Open Keep Notes then go home and reopen it", reached, success=False,
                     failure_phase="navigation", failure_reason="again")
        (kept,) = [f for f in failures(plane) if f.app_id == "keep_notes"]
        assert kept.id in ctx.refs() and kept.occurrences == 2
