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
