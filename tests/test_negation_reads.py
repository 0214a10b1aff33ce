"""A verified path against the failures met on it: each failure of the app is read once per episode, however
many procedures the goal group holds, and the decisions are the same as reading them per procedure.

It reaches inside episodes/ for ``negation`` and its ``LessonContext``: a goal group of a dozen procedures and
twenty failures is built in a few lines there, and only the reads of one lesson writer are counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory_plane.device_memory import DeviceMemory, Failure, Procedure
from memory_plane.episodes import TaskEpisode
from memory_plane.episodes._lesson_conflicts import negation
from memory_plane.episodes._lesson_context import LessonContext
from memory_plane.lifecycle import init_tree


def _tree(root: Path, procs: int, fails: int) -> DeviceMemory:
    init_tree(root)
    device = DeviceMemory(root)
    for i in range(procs):
        device.collection("procedure").save(Procedure(id=f"proc_{i:04d}", app_id="notes", goal_pattern="g",
                                                      success_count=1 + 3 * (i % 2)))
    for j in range(fails):
        fail = Failure(id=f"fail_{j:04d}", app_id="notes", goal_pattern="g", occurrences=1 + (j % 3))
        fail.model_extra["led_by"] = [f"proc_{(j * 7 + k) % procs:04d}" for k in range(2)]  # type: ignore[index]
        device.collection("failure").save(fail)
    return device


def test_each_failure_is_read_once_for_the_goal_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    device = _tree(tmp_path, 12, 20)
    coll = device.collection("failure")
    reads: list[str] = []
    real = type(coll).get

    def counting(self: Any, item_id: str) -> Any:
        if self is coll:
            reads.append(item_id)
        return real(self, item_id)

    monkeypatch.setattr(type(coll), "get", counting)
    ep = TaskEpisode(id="ep_20260101_0000000001", user_goal="g")
    lesson = LessonContext(ep, [], device)
    negation(device, lesson, "notes", "g")
    monkeypatch.undo()
    assert len(reads) == len(set(reads)) == 20
    # Every failure met on a procedure was weighed against it, once per pair.
    assert len(lesson.decisions) == 40
    assert {d for _, _, d, _, _ in lesson.decisions} == {"failure_outvoted", "undecided", "procedure_outvoted"}
