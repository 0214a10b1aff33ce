"""What a sequence of episodes teaches depends on the episodes and their order, never on the worker's pace.

It reaches inside the plane for its writer's one job runner (``plane._writer._run_marked``), to slow the
background worker down as a busy phone would."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.episodes import EpisodeJob, EpisodeRecorder, TaskEpisodeWriter

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)

ADD = [("tap", {"x": 500, "y": 1800, "target_label": "Add"}, {"app": "Notes", "page": "Editor"}),
       ("keyboard_text", {"text": "milk"}, {"app": "Notes", "page": "Editor", "visible_text": "milk"}),
       ("tap", {"x": 900, "y": 120, "target_label": "Save"}, {"app": "Notes", "page": "List",
                                                             "visible_text": "milk"})]
OPEN = [("launch_app", {"app": "Notes"}, {"app": "Notes", "page": "List"})]

# (goal, steps, success, failure reason): the same goal succeeds, then fails on the same path, then succeeds.
SEQUENCE: list[tuple[str, list[Any], bool, str | None]] = [
    ('Add a note "milk" in Notes', OPEN + ADD, True, None),
    ('Add a note "milk" in Notes', OPEN + ADD[:2], False, "the Save button did nothing"),
    ('Add a note "milk" in Notes', OPEN + ADD, True, None),
    ('Add a note "eggs" in Notes', OPEN + ADD[:1], False, "the editor closed"),
    ('Add a note "eggs" in Notes', OPEN + ADD, True, None),
]


def _feed(root: Path, *, slow: float = 0.0) -> dict[str, tuple[Any, ...]]:
    """Run SEQUENCE through a fresh tree as a runtime does (retrieve, record, commit), the worker slowed by
    ``slow`` seconds a job; every item file's id, status and counts afterwards."""
    plane = MemoryPlane.open(root, clock=lambda: T0)
    if slow:
        run = plane._writer._run_marked  # the one runner every job goes through

        def slowed(*args: Any) -> Any:
            time.sleep(slow)
            return run(*args)

        plane._writer._run_marked = slowed  # type: ignore[method-assign]
    for goal, steps, ok, why in SEQUENCE:
        req = MemoryRetrieveRequest(input=goal, current_hints={"language": "en-US", "app": "Notes"})
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        for tool, args, obs in steps:
            rec.tool_call(tool, args)
            rec.tool_result(tool, observed_state=obs)
        plane.commit_episode(rec.finish(success=ok, failure_reason=why, failure_phase=None if ok else "execution"))
    assert plane.flush(30)
    out = {e["id"]: (e.get("type"), e.get("status"), e.get("success_count"), e.get("failure_count"),
                     e.get("confidence")) for e in plane.device.entries()}
    plane.close()
    return out


def test_a_slow_worker_teaches_the_same_as_a_fast_one(tmp_path: Path) -> None:
    fast = _feed(tmp_path / "fast")
    slow = _feed(tmp_path / "slow", slow=0.4)
    again = _feed(tmp_path / "again")
    assert any(k.startswith("fail_") for k in fast)
    assert slow == fast
    assert again == fast  # the same episodes fed twice: the same failure ids, statuses and demotions


def test_a_retrieve_waits_a_bounded_time_and_says_what_it_did_not_wait_for(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    gate = threading.Event()
    stuck = EpisodeJob("stuck", lambda ep: gate.wait(20))
    plane = MemoryPlane(tmp_path / "m", extra_jobs=[stuck], lesson_wait_s=0.3)
    req = MemoryRetrieveRequest(input="open Notes")
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "Notes"})
    rec.tool_result("launch_app", observed_state={"app": "Notes", "page": "List"})
    plane.commit_episode(rec.finish(success=True))
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="memory_plane"):
        memory = plane.retrieve(req)
    assert time.monotonic() - start < 5
    assert memory.dropped.get("lessons_pending", 0) >= 1
    assert "still pending" in caplog.text
    gate.set()
    assert plane.flush(10)
    assert "lessons_pending" not in plane.retrieve(req).dropped
    plane.close()


def test_jobs_run_in_commit_order_when_the_queue_overflows(tmp_path: Path) -> None:
    """An episode committed while older ones wait in the backlog (the queue was full) runs after them."""
    order: list[str] = []
    started = {i: threading.Event() for i in range(5)}
    release = {i: threading.Event() for i in range(5)}

    def probe(ep: Any) -> None:
        i = int(ep.user_goal.split()[-1])
        started[i].set()
        release[i].wait(10)
        order.append(ep.user_goal)

    plane = MemoryPlane(tmp_path / "m")
    writer = TaskEpisodeWriter(plane.episodes, jobs=[EpisodeJob("probe", probe)], queue_size=1)

    def commit(i: int) -> None:
        rec = EpisodeRecorder(plane.episodes, f"open Notes {i}")
        rec.tool_call("launch_app", {"app": "Notes"})
        rec.tool_result("launch_app", observed_state={"app": "Notes", "page": "List"})
        assert writer.commit(rec.finish(success=True))

    commit(0)
    assert started[0].wait(5)  # the worker holds episode 0
    commit(1)  # fills the queue
    commit(2)
    commit(3)  # both wait in the backlog
    release[0].set()
    assert started[1].wait(5)  # the worker holds episode 1: the queue is empty, 2 and 3 still wait
    commit(4)
    for ev in release.values():
        ev.set()
    assert writer.flush(30)
    assert order == [f"open Notes {i}" for i in range(5)]
    writer.close()
    plane.close()
