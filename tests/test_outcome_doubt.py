"""A success the runtime claims without evidence of completion teaches an unverified procedure."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from freezegun import freeze_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.cli import main as cli

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
GOAL = 'Add a note "buy milk" in Notes'
PATH = [("launch_app", {"app": "Notes"}, {"app": "Notes", "page": "List", "visible_text": ["Notes", "Add"]}),
        ("tap", {"x": 500, "y": 1800, "target_label": "Add"}, {"app": "Notes", "page": "Editor"}),
        ("keyboard_text", {"text": "buy milk"}, {"app": "Notes", "page": "Editor"}),
        ("tap", {"x": 900, "y": 120, "target_label": "Save"}, {"app": "Notes", "page": "List",
                                                             "visible_text": ["Notes", "Add"]})]


def _episode(plane: MemoryPlane, *, goal: str = GOAL, path: list[Any] = PATH, verifier: bool = False,
             reason: str | None = None) -> None:
    req = MemoryRetrieveRequest(input=goal, current_hints={"language": "en-US"})
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    for tool, args, obs in path:
        rec.tool_call(tool, args)
        rec.tool_result(tool, observed_state=obs)
    if verifier:
        rec.verifier(can_finish=True, reason="the note is in the list", observed_state=path[-1][2])
    plane.commit_episode(rec.finish(success=True, completion_reason=reason))
    assert plane.flush(30)


def _procedures(plane: MemoryPlane) -> list[Any]:
    return [plane.device.get(e["id"]) for e in plane.device.entries("procedure")]


def test_a_claimed_success_teaches_an_unverified_procedure_shown_as_such(tmp_path: Path) -> None:
    with freeze_time(T0), MemoryPlane.open(tmp_path / "m") as plane:
        _episode(plane)
        (proc,) = _procedures(plane)
        extra = proc.model_extra or {}
        assert extra.get("verified") is False and "buy milk" in extra["unverified_reason"]
        assert proc.confidence < 0.5
        block = plane.retrieve(MemoryRetrieveRequest(input=GOAL, current_hints={"language": "en-US"})).render()
        assert proc.id in block and "UNVERIFIED" in block


def test_a_second_agreeing_episode_verifies_it(tmp_path: Path) -> None:
    with freeze_time(T0), MemoryPlane.open(tmp_path / "m") as plane:
        _episode(plane)
        _episode(plane)
        (proc,) = _procedures(plane)
        extra = proc.model_extra or {}
        assert "verified" not in extra and extra["verified_by"]["how"].startswith("a second episode")
        assert proc.confidence >= 0.75
        assert "UNVERIFIED" not in proc.body()


def test_a_verifier_a_completion_reason_or_the_target_on_screen_is_evidence(tmp_path: Path) -> None:
    shown = [*PATH[:-1], (PATH[-1][0], PATH[-1][1], {"app": "Notes", "page": "List",
                                                    "elements": [{"text": "Buy  milk", "bounds": [0, 0, 9, 9]}]})]
    for i, kwargs in enumerate([{"verifier": True}, {"reason": "the note is saved"}, {"path": shown}]):
        with freeze_time(T0), MemoryPlane.open(tmp_path / f"m{i}") as plane:
            _episode(plane, **kwargs)
            (proc,) = _procedures(plane)
            assert (proc.model_extra or {}).get("verified") is not False, kwargs
            assert proc.confidence >= 0.75


def test_imported_demonstrations_stay_verified(tmp_path: Path) -> None:
    src = tmp_path / "ac.jsonl"
    src.write_text(json.dumps({"episode_id": 7, "goal": "Open Notes and add a note called groceries",
                               "is_successful": True, "steps": [
                                   {"action_content": {"action": "open", "text": "Notes"}},
                                   {"action_content": {"action": "click", "coordinate": [10, 20]}},
                                   {"action_content": {"action": "type", "text": "groceries"}}]}) + "\n",
                   "utf-8")
    assert cli(["--root", str(tmp_path / "m"), "init"]) == 0
    assert cli(["--root", str(tmp_path / "m"), "import", "androidcontrol", str(src)]) == 0
    with MemoryPlane.open(tmp_path / "m") as plane:
        procs = _procedures(plane)
        assert procs and all((p.model_extra or {}).get("verified") is not False for p in procs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.text(st.characters(categories=["L", "N"]), min_size=2, max_size=10),
       where=st.sampled_from(["visible_text", "elements", "title", "nowhere"]),
       quote=st.sampled_from(['"{}"', "“{}”", "「{}」", "'{}'"]))
def test_the_quoted_target_on_the_last_screen_in_any_field_is_evidence(
        tmp_path_factory: Any, target: str, where: str, quote: str) -> None:
    last: dict[str, Any] = {"app": "Notes", "page": "List"}
    if where == "elements":
        last["elements"] = [{"label": target.upper()}]
    elif where != "nowhere":
        last[where] = [f"  {target}  "] if where == "visible_text" else target
    path = [*PATH[:-1], (PATH[-1][0], PATH[-1][1], last)]
    goal = f"Add a note {quote.format(target)} in Notes"
    with MemoryPlane.open(tmp_path_factory.mktemp("q") / "m") as plane:
        _episode(plane, goal=goal, path=path)
        (proc,) = _procedures(plane)
        unverified = (proc.model_extra or {}).get("verified") is False
        # casefold may not undo upper() for every letter (ß → SS): such a target counts as not shown
        shown = where != "nowhere" and (where != "elements" or target.upper().casefold() == target.casefold())
        assert unverified is not shown


# -- evidence is a change the goal asked for, seen after the last action -------------------------------------

EDITOR = {"app": "Notes", "page": "Editor", "visible_text": ["Title", "Save"]}


def _typed_then(last: list[Any]) -> list[Any]:
    """Open the editor, type the goal's value (the field shows it), then ``last``."""
    return [("tap", {"x": 500, "y": 1800, "target_label": "Add"}, EDITOR),
            ("keyboard_text", {"text": "buy milk"}, {**EDITOR, "visible_text": ["Title", "Save", "buy milk"]}),
            *last]


def _unverified(plane: MemoryPlane) -> bool:
    (proc,) = _procedures(plane)
    return (proc.model_extra or {}).get("verified") is False


def test_the_agents_own_typing_in_the_field_is_no_evidence(tmp_path: Path) -> None:
    # Typed the value, picked an option on the same page, and stopped before Save: the field shows the value.
    stopped = _typed_then([("tap", {"x": 500, "y": 900, "target_label": "Pin"},
                            {**EDITOR, "visible_text": ["Title", "Save", "buy milk", "Pinned"]})])
    saved = _typed_then([("tap", {"x": 900, "y": 120, "target_label": "Save"},
                          {"app": "Notes", "page": "List", "visible_text": ["Notes", "Add", "buy milk"]})])
    with freeze_time(T0), MemoryPlane.open(tmp_path / "a") as plane:
        _episode(plane, path=stopped)
        assert _unverified(plane)
    with freeze_time(T0), MemoryPlane.open(tmp_path / "b") as plane:
        _episode(plane, path=saved)
        assert not _unverified(plane)


def test_a_value_on_the_screen_before_the_work_is_no_evidence(tmp_path: Path) -> None:
    # The list showed the note from the start: a run that opened it and left shows nothing done.
    start = {"app": "Notes", "page": "List", "visible_text": ["Notes", "Add", "buy milk"]}
    path = [("tap", {"x": 500, "y": 600, "target_label": "buy milk"}, {"app": "Notes", "page": "Note",
                                                                        "visible_text": ["buy milk", "Back"]})]
    with freeze_time(T0), MemoryPlane.open(tmp_path / "m") as plane:
        req = MemoryRetrieveRequest(input=GOAL, current_hints={"language": "en-US"})
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_result("observe_screen", observed_state=start)
        for tool, args, obs in path:
            rec.tool_call(tool, args)
            rec.tool_result(tool, observed_state=obs)
        plane.commit_episode(rec.finish(success=True))
        assert plane.flush(30)
        assert _unverified(plane)


def test_the_app_on_the_screen_is_no_evidence_for_a_goal_that_asks_more_than_opening_it(tmp_path: Path) -> None:
    with freeze_time(T0), MemoryPlane.open(tmp_path / "a") as plane:
        # Typed a post and stopped before sending it: the app is on every screen of the run.
        _episode(plane, goal="Post a new moment in WeChat", path=[
            ("tap", {"x": 500, "y": 1800, "target_label": "Moments"}, {"app": "WeChat", "page": "Moments"}),
            ("keyboard_text", {"text": "sunny day"}, {"app": "WeChat", "page": "Moments", "visible_text": ["Post"]})])
        assert _unverified(plane)
    with freeze_time(T0), MemoryPlane.open(tmp_path / "b") as plane:
        _episode(plane, goal="Open WeChat", path=[
            ("tap", {"x": 300, "y": 300, "target_label": "WeChat"}, {"app": "WeChat", "page": "Chats"})])
        assert not _unverified(plane)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(st.characters(categories=["L", "N"]), min_size=2, max_size=12),
       committed=st.booleans(), extra_taps=st.integers(0, 2))
def test_a_typed_quoted_value_counts_only_once_the_page_moved_on(
        tmp_path_factory: Any, value: str, committed: bool, extra_taps: int) -> None:
    shown = {**EDITOR, "visible_text": ["Title", "Save", value]}
    path: list[Any] = [("tap", {"x": 500, "y": 1800, "target_label": "Add"}, EDITOR),
                       ("keyboard_text", {"text": value}, shown)]
    path += [("tap", {"x": 500, "y": 900 + 100 * k, "target_label": f"Option {k}"}, shown) for k in range(extra_taps)]
    if committed:
        path.append(("tap", {"x": 900, "y": 120, "target_label": "Save"},
                     {"app": "Notes", "page": "List", "visible_text": ["Notes", value]}))
    with MemoryPlane.open(tmp_path_factory.mktemp("v") / "m") as plane:
        _episode(plane, goal=f'Add a note "{value}" in Notes', path=path)
        assert _unverified(plane) is not committed


def test_a_value_of_the_goal_the_agent_typed_seen_on_the_next_page_is_evidence(tmp_path: Path) -> None:
    # No quotes, no parsed target: the title the goal gave, typed and saved, is on the list afterwards.
    goal = "在小日记里新建一篇日记，标题是买菜"
    editor = {"app": "小日记", "page": "编辑", "visible_text": ["标题"]}
    path = [("tap", {"x": 500, "y": 300, "target_label": "新建"}, editor),
            ("keyboard_text", {"text": "买菜"}, {"app": "小日记", "page": "编辑", "visible_text": ["标题", "买菜"]})]
    saved = ("tap", {"x": 900, "y": 120, "target_label": "保存"}, {"app": "小日记", "page": "日记列表",
                                                                  "visible_text": ["新建", "买菜"]})
    with freeze_time(T0), MemoryPlane.open(tmp_path / "a") as plane:
        _episode(plane, goal=goal, path=[*path, saved])
        assert not _unverified(plane)
    with freeze_time(T0), MemoryPlane.open(tmp_path / "b") as plane:
        _episode(plane, goal=goal, path=path)  # stopped before 保存: only the field holds it
        assert _unverified(plane)
