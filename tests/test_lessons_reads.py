"""The lessons of one episode open the item files they weigh, found through the index lines, never every
procedure and failure of the app: what they read does not grow with the store."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from task_runs import record_task as run

from memory_plane import MemoryPlane
from memory_plane.device_memory import Failure, Procedure

LAUNCHER = {"app": "Launcher", "page": "Home", "package": "com.android.launcher3"}
GOAL = 'Send an e-mail to "{}" in Gmail'
MANY = 60


def gmail(page: str, **extra: Any) -> dict[str, Any]:
    return {"app": "Gmail", "page": page, "package": "com.google.android.gm", **extra}


COMPOSE = [("home", {}, None, LAUNCHER),
           ("tap", {"x": 300, "y": 1500}, "Gmail", gmail("Inbox")),
           ("tap", {"x": 980, "y": 2000}, "Compose", gmail("Compose")),
           ("keyboard_text", {"text": "bob@example.com"}, None, gmail("Compose", visible_text=["bob@example.com"])),
           ("tap", {"x": 1000, "y": 150}, "Send", gmail("Sent"))]
# The same goal by another way: the contact picked from a list instead of typed.
PICKED = [("home", {}, None, LAUNCHER),
          ("tap", {"x": 300, "y": 1500}, "Gmail", gmail("Inbox")),
          ("tap", {"x": 980, "y": 2000}, "Compose", gmail("Compose")),
          ("tap", {"x": 100, "y": 400}, "Contacts", gmail("Contacts")),
          ("tap", {"x": 300, "y": 700}, "Carol", gmail("Compose", visible_text=["carol@example.com"])),
          ("tap", {"x": 1000, "y": 150}, "Send", gmail("Sent"))]


def crowded(root: Path) -> tuple[MemoryPlane, Procedure]:
    """A tree with one procedure of the goal learned from a run, and ``MANY`` more procedures of the same goal
    and app (paths of other tools), and ``MANY`` failures of the app met on procedures of other goals."""
    plane = MemoryPlane.open(root)
    run(plane, GOAL.format("bob@example.com"), COMPOSE)
    (first,) = [p for p in (plane.device.get(e["id"]) for e in plane.device.entries("procedure"))
                if isinstance(p, Procedure)]
    procs, fails = plane.device.collection("procedure"), plane.device.collection("failure")
    for i in range(MANY):
        longer = [*first.steps, first.steps[-1].model_copy(update={"tool": "swipe", "target_label": None})]
        procs.save(first.model_copy(update={"id": f"proc_other_way_{i:03d}", "steps": longer}))
        fail = Failure(id=f"fail_met_elsewhere_{i:03d}", app_id=first.app_id, failure_mode=f"mode {i}",
                       title=f"Gmail: mode {i}", created_at=first.created_at, updated_at=first.updated_at,
                       occurrences=1, led_by=[f"proc_another_goal_{i:03d}"])
        fails.save(fail)
    return plane, first


def read_files(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The item files opened for reading from now on, counted by folder (index files left out)."""
    counts: Counter[str] = Counter()
    real_open = os.open

    def counting(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        p = os.fspath(path)
        if isinstance(p, str) and p.endswith(".yaml") and not p.endswith("index.yaml") and flags & 3 == os.O_RDONLY:
            counts[os.path.basename(os.path.dirname(p))] += 1
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting)
    return counts


def test_a_success_reads_neither_every_failure_of_the_app_nor_every_procedure_of_the_goal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plane, first = crowded(tmp_path / "m")
    with plane:
        seen: list[Counter[str]] = []
        # Counted once retrieve is done: the task's record, its commit and its lessons.
        run(plane, GOAL.format("carol@example.com"), PICKED,
            before=lambda rec, ctx: seen.append(read_files(monkeypatch)))
        monkeypatch.undo()
        (counts,) = seen
        # A new procedure of the goal was learned (its path is none of the others'), and weighed against the
        # failures that name a path of the goal: none does.
        goal = [e for e in plane.device.entries("procedure", first.app_id) if e.get("goal") == first.goal_pattern]
        assert len(goal) == MANY + 2
        assert counts["failures"] <= 10, counts  # of the app: MANY + 1
        assert counts["procedures"] <= 10, counts  # of the goal: MANY + 1


def test_a_failure_line_names_the_procedures_it_was_met_on(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, GOAL.format("bob@example.com"), COMPOSE)
        run(plane, GOAL.format("carol@example.com"), [
            *COMPOSE[:3], ("tap", {"x": 1000, "y": 150}, "Send", gmail("Compose"))], success=False,
            failure_phase="state_mismatch", failure_reason="nothing happened")
        for e in plane.device.entries("failure"):
            fail = plane.device.get(e["id"])
            assert isinstance(fail, Failure)
            assert e["led_by"] == (fail.model_extra or {}).get("led_by", [])
        assert any(e["led_by"] for e in plane.device.entries("failure"))


def test_a_failure_file_edited_after_its_line_is_read_as_it_is_now(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, GOAL.format("bob@example.com"), COMPOSE)
        (proc,) = [p for p in (plane.device.get(e["id"]) for e in plane.device.entries("procedure"))
                   if isinstance(p, Procedure)]
        fails = plane.device.collection("failure")
        fails.save(Failure(id="fail_edited_by_hand", app_id=proc.app_id, failure_mode="mode", title="Gmail: mode",
                           created_at=proc.created_at, updated_at=proc.updated_at, occurrences=1))
        # A person names the procedure in the file; its index line still says it names none.
        path = fails.path_of("fail_edited_by_hand")
        path.write_text(path.read_text("utf-8") + f"led_by: [{proc.id}]\n", "utf-8")
        later = os.stat(fails.index.path).st_mtime_ns + 5_000_000_000
        os.utime(path, ns=(later, later))
        again, _ = run(plane, GOAL.format("bob@example.com"), COMPOSE)  # the whole path worked again
        assert proc.id in again.reusable_lessons
        edited = plane.device.get("fail_edited_by_hand")
        assert isinstance(edited, Failure) and edited.led_by() == []


def test_a_procedure_read_again_is_the_file_as_it_is_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, GOAL.format("bob@example.com"), COMPOSE)
        (line,) = plane.device.entries("procedure")
        procs = plane.device.collection("procedure")
        first = procs.peek(line["id"])
        counts = read_files(monkeypatch)
        assert procs.peek(line["id"]) is first and counts["procedures"] == 0  # unchanged: not parsed again
        path = procs.path_of(line["id"])
        path.write_text(re.sub(r"(?m)^confidence: .*$", "confidence: 0.5", path.read_text("utf-8")), "utf-8")
        os.utime(path, ns=(os.stat(path).st_mtime_ns + 10**9,) * 2)
        again = procs.peek(line["id"])
        assert isinstance(again, Procedure) and again.confidence == 0.5 and counts["procedures"] == 1
        path.unlink()
        assert procs.peek(line["id"]) is None
