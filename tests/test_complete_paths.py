"""A procedure is the complete path: what a task entered or committed is kept though the screen comes back to
where it started; only loops that changed nothing are cut, and stored targets are whole."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from task_runs import procedures, run_task, screen

from memory_plane import MemoryPlane
from memory_plane.cli import main as cli
from memory_plane.episodes import Step, effective_path

APP = "Diary"
MAIN = screen(APP, "Main", "Add", "Settings", "Running")
SAVED = screen(APP, "Main", "Add", "Settings", "Running", "Gym Workout")


def _create_calls() -> list:
    return [
        ("launch_app", {"app": APP}, None, MAIN),
        ("tap", {"x": 600, "y": 1800}, "Add", screen(APP, "Editor", "Name", "Colour", "Save")),
        ("keyboard_text", {"text": "Gym Workout"}, "Name", screen(APP, "Editor", "Name", "Colour", "Save",
                                                                  name="Gym Workout")),
        ("tap", {"x": 200, "y": 900}, "Blue", screen(APP, "Editor", "Name", "Colour", "Save",
                                                     name="Gym Workout", colour="blue")),
        ("tap", {"x": 600, "y": 200}, "Save", SAVED),
        ("swipe", {"direction": "down"}, None, SAVED),
    ]


def test_a_create_task_that_returns_to_its_start_page_keeps_its_work(plane: MemoryPlane) -> None:
    run_task(plane, "Add a new activity named Gym Workout", _create_calls())
    [proc] = procedures(plane)
    kept = [(s.tool, s.text or s.target_label) for s in proc.steps]
    assert kept == [("launch_app", None), ("tap", "Add"), ("keyboard_text", "Gym Workout"), ("tap", "Blue"),
                    ("tap", "Save"), ("swipe", None)]


def test_a_sign_in_keeps_the_address_the_password_step_and_log_in(plane: MemoryPlane, root: Path) -> None:
    login = screen(APP, "Login", "E-mail", "Password", "LOG IN")
    run_task(plane, "Synchronize the account", [
        ("launch_app", {"app": APP}, None, screen(APP, "Main", "Sign in", "Sync")),
        ("tap", {"x": 500, "y": 300}, "Sign in", login),
        ("keyboard_text", {"text": "ann@example.org"}, "E-mail", {**login, "email": "ann@example.org"}),
        ("keyboard_text", {"text": "hunter2-secret", "sensitive": True}, "Password", {**login, "password": "•••"}),
        ("tap", {"x": 500, "y": 1500}, "LOG IN", screen(APP, "Main", "Signed in as ann", "Sync")),
        ("tap", {"x": 500, "y": 900}, "Sync", screen(APP, "Main", "Signed in as ann", "Synced just now")),
    ])
    [proc] = procedures(plane)
    tools = [(s.tool, s.text, s.target_label) for s in proc.steps]
    assert ("keyboard_text", "ann@example.org", "E-mail") in tools
    assert ("keyboard_text", None, None) in tools  # the password step: something was typed, what is not kept
    assert [s.target_label for s in proc.steps if s.tool == "tap"] == ["Sign in", "LOG IN", "Sync"]
    assert not [p for p in root.rglob("*") if p.is_file() and b"hunter2-secret" in p.read_bytes()]


def test_a_loop_that_changed_nothing_is_still_cut(plane: MemoryPlane) -> None:
    settings_page = screen(APP, "Settings", "Theme", "Navigate up")
    calls = _create_calls()
    run_task(plane, "Add a new activity named Gym Workout", [
        calls[0],
        ("tap", {"x": 900, "y": 100}, "Settings", settings_page),  # a look around that changed nothing
        ("tap", {"x": 50, "y": 100}, "Navigate up", MAIN),
        *calls[1:5],
    ])
    [proc] = procedures(plane)
    assert [s.target_label for s in proc.steps] == [None, "Add", "Name", "Blue", "Save"]


def test_a_long_launch_name_is_stored_whole_and_rendered_bounded(plane: MemoryPlane) -> None:
    name = "myTuner Radio, Podcasts, Music, Songs, News and Audiobooks"
    assert len(name) > 50
    run_task(plane, "Play the radio", [
        ("launch_app", {"app": name}, None, screen(name, "Home", "Play")),
        ("tap", {"x": 500, "y": 500}, "Play", screen(name, "Player", "Pause")),
    ])
    [proc] = procedures(plane)
    assert proc.steps[0].action == name
    line = proc.steps[0].render()
    assert line.startswith("launch_app(myTuner Radio, Podcasts, Music")
    huge = proc.steps[0].model_copy(update={"action": name * 20, "outcome_note": name * 20})
    assert len(huge.render()) <= 240  # only the rendered line is bounded


def test_an_imported_open_action_keeps_the_whole_app_name(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    name = "myTuner Radio, Podcasts, Music, Songs, News"
    src = tmp_path / "ac.jsonl"
    src.write_text(json.dumps({"goal": "Listen to the news on the radio", "is_successful": True, "steps": [
        {"action_content": {"action": "open", "app_name": name}, "step_instruction": "open the radio app"},
        {"action_content": {"action": "click", "coordinate": [500, 900]}, "step_instruction": "tap News"},
    ]}) + "\n")
    root = tmp_path / "m"
    assert cli(["--root", str(root), "init"]) == 0
    assert cli(["--root", str(root), "import", "androidcontrol", str(src), "--json"]) == 0
    capsys.readouterr()
    with MemoryPlane.open(root) as plane:
        [proc] = procedures(plane)
    assert proc.steps[0].tool == "launch_app" and proc.steps[0].action == name


# -- the rule, on any sequence of steps ------------------------------------------------------------------

PAGES = ["A", "B", "C", None]
TOOLS = ["tap", "keyboard_text", "swipe", "back", "launch_app"]


@st.composite
def step_sequences(draw: st.DrawFn) -> list[Step]:
    n = draw(st.integers(1, 14))
    page = draw(st.sampled_from(PAGES))
    out = []
    for i in range(n):
        tool = draw(st.sampled_from(TOOLS))
        after = draw(st.sampled_from(PAGES))
        typed = draw(st.sampled_from(["hi", None])) if tool == "keyboard_text" else None
        label = draw(st.sampled_from(["OK", "Item", None]))
        obs_before = draw(st.sampled_from(["s1", "s2", None]))
        obs_after = draw(st.sampled_from(["s1", "s2", "s3", None]))
        out.append(Step(index=i + 1, tool=tool, tool_input={}, text=typed, target_label=label,
                        app_before="X" if page else None, page_before=page, app_after="X" if after else None,
                        page_after=after, has_result=draw(st.booleans()), obs_before=obs_before,
                        obs_after=obs_after))
        page = after
    return out


def _is_subsequence(sub: list[Step], seq: list[Step]) -> bool:
    it = iter(seq)
    return all(any(x is y for y in it) for x in sub)


@settings(max_examples=300, deadline=None)
@given(step_sequences())
def test_effective_path_keeps_every_typing_and_the_last_step_in_order(steps: list[Step]) -> None:
    path = effective_path(steps)
    assert _is_subsequence(path, steps)
    assert path and path[-1] is steps[-1]
    for s in steps:
        if s.tool == "keyboard_text" or s.text is not None:
            assert any(s is p for p in path)


def test_a_tap_that_changed_nothing_to_see_is_kept_when_it_prepares_the_next_step(plane: MemoryPlane) -> None:
    """Focusing a field before typing and "Select all" before acting on the selection change nothing the
    record shows, yet the task needs them; the same tap made again at once (a retry) and a tap on nothing
    named are dropped."""
    results = screen(APP, "Results", "Select all", "Flag", "Gym notes")
    run_task(plane, "Find the entries about gym and flag them", [
        ("launch_app", {"app": APP}, None, MAIN),
        ("tap", {"x": 900, "y": 100}, "Search", screen(APP, "Search", "Search box")),
        ("tap", {"x": 500, "y": 200}, "Search box", screen(APP, "Search", "Search box")),
        ("tap", {"x": 500, "y": 200}, "Search box", screen(APP, "Search", "Search box")),
        ("keyboard_text", {"text": "gym"}, "Search box", results),
        ("tap", {"x": 50, "y": 1500}, None, results),
        ("tap", {"x": 100, "y": 300}, "Select all", results),
        ("tap", {"x": 900, "y": 300}, "Flag", screen(APP, "Results", "Select all", "Flag", "Gym notes", "Flagged")),
    ])
    [proc] = procedures(plane)
    assert [(s.tool, s.text or s.target_label) for s in proc.steps] == [
        ("launch_app", None), ("tap", "Search"), ("tap", "Search box"), ("keyboard_text", "gym"),
        ("tap", "Select all"), ("tap", "Flag")]
