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
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from task_runs import record_task as run

from memory_plane import MemoryPlane
from memory_plane.device_memory import Failure
from memory_plane.episodes import CauseKey


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


RATE = "Rate Keep Notes"
HOME_DIALOG = notes("Home", visible_text=["Not now", "Rate now", "Search notes"], dialogs=[RATE])


def test_a_dialog_in_the_way_is_one_mode_whatever_the_action_and_phase(tmp_path: Path) -> None:
    """The same dialog in the way of a tap in one task and of a swipe in another, phased differently by the
    runtime, is one failure mode named by the dialog; the phases are kept as examples."""
    opened = ("launch_app", {"app": "Keep Notes"}, None, HOME_DIALOG)
    tapped = [opened, ("tap", {"x": 540, "y": 700}, "Search notes", HOME_DIALOG)]
    swiped = [opened, ("swipe", {"x1": 540, "y1": 1800, "x2": 540, "y2": 600}, None, HOME_DIALOG)]
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "Search my notes for the recipe in Keep Notes", tapped, success=False, failure_phase="planning",
            failure_reason="a popup blocks the screen")
        run(plane, "Scroll to my oldest note in Keep Notes", swiped, success=False, failure_phase="state_mismatch",
            failure_reason="cannot reach the list")
        (mode,) = failures(plane)
        assert mode.cause == CauseKey("keep_notes", "Home", "dialog_blocking", RATE).as_dict()
        assert mode.occurrences == 2 and (mode.model_extra or {}).get("phases") == ["planning", "state_mismatch"]


def test_typed_text_refused_is_one_cause_named_by_its_field(tmp_path: Path) -> None:
    """A field that refuses the name (the tool's error, in a name dialog) is one failure, input not accepted
    into that field, met by a create and a rename task alike; the dialog it is typed in is no second mode."""
    named = notes("New label", visible_text=["Label name", "OK", "Cancel"], dialogs=["New label"])
    labels = notes("Labels", visible_text=["New label", "Work", "Home"])
    create = [("launch_app", {"app": "Keep Notes"}, None, labels),
              ("tap", {"x": 540, "y": 300}, "New label", named), ("tap", {"x": 540, "y": 500}, "Label name", named),
              ("keyboard_text", {"text": "Work"}, None, named, "A label named Work already exists")]
    rename = [("launch_app", {"app": "Keep Notes"}, None, labels),
              ("tap", {"x": 540, "y": 450}, "Home", named), ("tap", {"x": 540, "y": 500}, "Label name", named),
              ("keyboard_text", {"text": "Work"}, None, named, "A label with this name already exists")]
    with MemoryPlane.open(tmp_path / "m") as plane:
        a, _ = run(plane, "Create a label called Work in Keep Notes", create, success=False,
                   failure_phase="tool_error", failure_reason="name already taken")
        run(plane, "Rename the label Home to Work in Keep Notes", rename, success=False,
            failure_phase="planning", failure_reason="input refused")
        (mode,) = failures(plane)
        assert mode.cause == CauseKey("keep_notes", "New label", "input_not_accepted", "Label name").as_dict()
        assert mode.occurrences == 2
        ep = plane.episodes.get(a.id)
        assert ep is not None and ep.failure_causes[0] == CauseKey.of(mode.cause).label()  # type: ignore[union-attr]


CHECKOUT = notes("Checkout", visible_text=["Dates", "Pay now"])


def test_a_tap_without_effect_is_one_mode_however_often_it_was_repeated(tmp_path: Path) -> None:
    pay = ("tap", {"x": 540, "y": 2200}, "Pay now", CHECKOUT)
    thrice = [("launch_app", {"app": "Keep Notes"}, None, notes("Cart")),
              ("tap", {"x": 540, "y": 2000}, "Checkout", CHECKOUT), pay, pay, pay]
    twice = [("launch_app", {"app": "Keep Notes"}, None, notes("Shop")),
             ("tap", {"x": 300, "y": 900}, "Buy", CHECKOUT), pay, pay]
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "Pay for the cart in Keep Notes", thrice, success=False, failure_phase="state_mismatch",
            failure_reason="Pay now does not respond")
        run(plane, "Buy the sticker pack in Keep Notes", twice, success=False, failure_phase="planning",
            failure_reason="still on the same page")
        (mode,) = failures(plane)
        assert mode.cause == CauseKey("keep_notes", "Checkout", "page_unchanged", "tap Pay now").as_dict()
        assert len(mode.evidence_refs[0].event_ids) == 6  # the three taps that show it
        assert mode.occurrences == 2 and "3 times" in (mode.lesson or "")


def test_a_run_that_ends_waiting_on_a_page_that_never_changes_timed_out_there(tmp_path: Path) -> None:
    loading = notes("Loading", visible_text=["Cancel"])
    wait = ("wait", {"seconds": 5}, None, loading)
    direct = [("launch_app", {"app": "Keep Notes"}, None, notes("Home")),
              ("tap", {"x": 540, "y": 300}, "Sync", loading), wait, wait, wait]
    via_menu = [("launch_app", {"app": "Keep Notes"}, None, notes("Home")),
                ("tap", {"x": 1000, "y": 150}, "More", notes("Menu")),
                ("tap", {"x": 540, "y": 600}, "Backup", loading), wait, wait]
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "Sync my notes in Keep Notes", direct, success=False, failure_phase="verification_timeout",
            failure_reason="page kept loading")
        run(plane, "Back up my notes in Keep Notes", via_menu, success=False, failure_phase="planning",
            failure_reason="never finished")
        (mode,) = failures(plane)
        assert mode.cause == CauseKey("keep_notes", "Loading", "timeout").as_dict() and mode.occurrences == 2


def test_a_failure_memory_of_an_older_key_expires_without_harm(tmp_path: Path) -> None:
    """A failure memory written with an older key (the runtime's phase and the tool in it) is still shown and
    weighed without error; no new failure meets it again: the new mode is written beside it."""
    goal = "Sync my notes in Keep Notes"
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, goal, DEAD_SYNC, success=False, failure_phase="state_mismatch", failure_reason="nothing")
        (mode,) = failures(plane)
        old = {"phase": "state_mismatch", "tool": "tap", "app": "keep_notes", "page": "List",
               "symptom": "page_unchanged"}

        def as_older(f: Any) -> Any:
            f.cause = dict(old)
            return f

        plane.device.collection("failure").update(mode.id, as_older)
        _, ctx = run(plane, goal, DEAD_SYNC, success=False, failure_phase="state_mismatch", failure_reason="again")
        kept = plane.device.get(mode.id)
        assert mode.id in ctx.refs() and isinstance(kept, Failure) and kept.cause == old
        assert CauseKey.of(kept.cause) is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(phase=st.sampled_from(["state_mismatch", "planning", "navigation", "verification_timeout"]),
       action=st.sampled_from([("tap", {"x": 540, "y": 700}, "Search notes"),
                               ("tap", {"x": 540, "y": 1200}, None),
                               ("swipe", {"x1": 540, "y1": 1800, "x2": 540, "y2": 600}, None),
                               ("system_button", {"button": "back"}, None)]),
       text=st.sampled_from(["Rate this app", "允许通知?", "¿Permitir notificaciones?"]), goal=words.filter(str.strip))
def test_a_dialog_mode_depends_on_the_dialog_and_where_alone(shared: MemoryPlane, phase: str,
                                                             action: tuple[Any, ...], text: str, goal: str) -> None:
    # (A goal whose target is in the dialog's text masks it there: one mode over any target; not this property.)
    assume(not any(w.lower() in text.lower() for w in goal.split()))
    shown = notes("Home", visible_text=["Search notes"], dialogs=[text])
    steps = [("launch_app", {"app": "Keep Notes"}, None, shown), (*action, shown)]
    ep, _ = run(shared, f"Keep Notes {goal}", steps, success=False, failure_phase=phase, failure_reason=goal)
    key = CauseKey("keep_notes", "Home", "dialog_blocking", text)
    got = shared.episodes.get(ep.id)
    assert got is not None and [i for i in got.reusable_lessons if i.startswith("fail_")] == [key.failure_id("default")]
