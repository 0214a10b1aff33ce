"""A procedure's ``summary:`` changed by a person is what the block and the index line show, and the lessons of
later episodes keep it; a generated summary is rebuilt from the goals and steps whenever they change."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.device_memory import Procedure
from memory_plane.lifecycle import load_yaml

GOAL = "open Notes and write a shopping list"
AGAIN = "Open Notes and write a shopping list"  # the same kind of goal, written otherwise: the same procedure
MINE = "Open Notes from the home screen dock, then press the pencil button"


def _task(plane: MemoryPlane, goal: str = GOAL) -> None:
    req = MemoryRetrieveRequest(input=goal, current_hints={"language": "en-US"})
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "Notes"})
    rec.tool_result("launch_app", observed_state={"app": "Notes", "page": "List"})
    rec.tool_call("tap", {"x": 600, "y": 1100}, target_label="New note")
    rec.tool_result("tap", observed_state={"app": "Notes", "page": "Editor"})
    assert plane.commit_episode(rec.finish(success=True, completion_reason="the editor is open"))
    assert plane.flush(10)


def _edit_summary(path: Path, text: str) -> None:
    body = path.read_text("utf-8")
    new, n = re.subn(r"(?m)^summary:.*(\n[ \t]+.*)*$", f"summary: {text!r}".replace("'", '"'), body, count=1)
    assert n == 1
    path.write_text(new, "utf-8")


def _proc(plane: MemoryPlane) -> tuple[str, Path]:
    (e,) = plane.device.entries("procedure")
    return str(e["id"]), plane.device.collection("procedure").item_path(str(e["id"]))


def test_a_hand_edited_summary_is_shown_in_the_block_and_the_index_line(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        _task(plane)
        pid, path = _proc(plane)
        generated = plane.retrieve(GOAL).render()
        assert pid in generated and MINE not in generated
        _edit_summary(path, MINE)
        block = plane.retrieve(GOAL).render()
        assert MINE in block  # the file is the truth at once
        plane.verify(fix=True)  # the index rebuilt from the files
        (line,) = plane.device.entries("procedure")
        assert line["summary"] == MINE
        _task(plane, AGAIN)  # a later success renews the procedure
        assert load_yaml(path.read_text("utf-8"))["summary"] == MINE
        assert MINE in plane.retrieve(GOAL).render()


def test_a_generated_summary_follows_the_goals_it_was_made_from(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        _task(plane)
        _task(plane, AGAIN)
        _, path = _proc(plane)
        data = load_yaml(path.read_text("utf-8"))
        assert AGAIN in data["summary"]  # rebuilt: the newest goal example is the one it names


@settings(max_examples=60, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=80)
       .filter(lambda t: t.strip()), examples=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=4))
def test_a_written_summary_is_kept_and_a_generated_one_rebuilt(text: str, examples: list[str]) -> None:
    p = Procedure(id="proc_x", goal_examples=examples[:1], steps=[{"tool": "tap", "target_label": "Go"}])
    p.refresh_summary()
    assert p.written_summary() is None and p.body() == p.generated_body()
    p.goal_examples = examples
    p.refresh_summary()  # generated: rebuilt from what changed
    assert p.summary == p.generated_body() and p.written_summary() is None
    if text.strip() == p.summary.strip():
        return
    p.summary = text  # a person's words
    assert p.body() == p.written_summary() == text.strip()
    p.goal_examples = [*examples, "another goal"]
    p.refresh_summary()
    assert p.summary == text and p.body() == text.strip()
    loaded = Procedure.model_validate(p.model_dump())  # as the file is read back
    assert loaded.body() == text.strip()
