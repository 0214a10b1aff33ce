"""Unfinished is not failed: a run that stopped (its recorder died, the runtime raised, its record ends on a
call that never got its result) is never shown as a failure mode or a caution, writes no failure memory and
blames nothing; it still teaches what it showed of its app, at low confidence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.device_memory import AppProfile, Procedure

EN = CurrentEnvironmentHints(language="en-US", screen_width=1080, screen_height=2400)


def gmail(page: str, **extra: Any) -> dict[str, Any]:
    return {"app": "Gmail", "page": page, "package": "com.google.android.gm", **extra}


SEARCH = [("launch_app", {"app": "Gmail"}, None, gmail("Inbox")),
          ("tap", {"x": 540, "y": 150}, "Search in mail", gmail("Search")),
          ("keyboard_text", {"text": "invoice"}, None, gmail("Search", visible_text=["invoice"])),
          ("tap", {"x": 300, "y": 500}, "Invoice March", gmail("Message"))]


def record(plane: MemoryPlane, goal: str, steps: list[tuple[Any, ...]]) -> Any:
    """A recorder that took these steps and has not finished; it is returned to be finished, or to die."""
    req = MemoryRetrieveRequest(input=goal, current_hints=EN)
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    for tool, ti, label, obs in steps:
        rec.tool_call(tool, ti, target_label=label)
        if obs is not None:
            rec.tool_result(tool, observed_state=obs)
    return rec


def cautions(plane: MemoryPlane, goal: str) -> tuple[list[str], str]:
    ctx = plane.retrieve(MemoryRetrieveRequest(input=goal, current_hints=EN))
    return [h.id for h in ctx.common.failure_modes + ctx.common.conflicts], ctx.render()


def test_an_interrupted_run_is_no_caution_for_another_goal(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        rec = record(plane, "Search e-mails in Gmail for the invoice from March", SEARCH[:3])
        crashed = rec.episode.id
        rec._release_recording_lock()  # the recorder's process died here
        del rec
    with MemoryPlane.open(root) as plane:
        plane.verify()
        ep = plane.episodes.get(crashed)
        assert ep is not None and ep.status == "interrupted"
        assert plane.flush(20)
        for goal in ("Search e-mails in Gmail for the receipt from April",
                     "Search e-mails in Gmail for the invoice from March"):
            ids, block = cautions(plane, goal)
            assert crashed not in ids and crashed not in block
        assert plane.device.entries("failure") == []
        prof = plane.device.get("app_gmail")
        assert isinstance(prof, AppProfile) and prof.confidence <= 0.3  # its app facts, at low confidence


def test_a_run_that_raised_is_no_caution(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        rec = record(plane, "Search e-mails in Gmail for the invoice from March", SEARCH[:2])
        with pytest.raises(RuntimeError), rec:
            raise RuntimeError("the device went away")
        assert plane.flush(20)
        ids, _ = cautions(plane, "Search e-mails in Gmail for the receipt from April")
        assert rec.episode.id not in ids and not [i for i in ids if i.startswith("fail_")]


def test_a_run_cut_off_mid_call_writes_no_failure_and_blames_nothing(tmp_path: Path) -> None:
    goal = "Search e-mails in Gmail for the invoice from March"
    with MemoryPlane.open(tmp_path / "m") as plane:
        done = record(plane, goal, SEARCH)
        plane.commit_episode(done.finish(success=True))
        assert plane.flush(20)
        (proc,) = [plane.device.get(e["id"]) for e in plane.device.entries("procedure")]
        assert isinstance(proc, Procedure)
        # The same path, whose record ends on the tap's call: the result never came.
        cut = record(plane, goal, [*SEARCH[:3], (*SEARCH[3][:3], None)])
        cut.memory_used(proc.id)
        plane.commit_episode(cut.finish(success=False, failure_phase="navigation", failure_reason="no result"))
        assert plane.flush(20)
        assert plane.device.entries("failure") == []
        cur = plane.device.get(proc.id)
        assert isinstance(cur, Procedure) and cur.failure_count == 0 and cur.status == "active"
        ep = plane.episodes.get(cut.episode.id)
        assert ep is not None and ep.failure_causes == ["navigation: no result"]  # the runtime's word, kept


def test_a_run_ended_without_a_word_right_after_a_step_that_worked_is_no_failure(tmp_path: Path) -> None:
    """A record that stops mid-task (the last step took effect, and the runtime named no phase, reason or
    error) did not fail: it writes no failure memory, its index line says so, and it is no caution; a run
    the runtime says failed, on the same steps, still is a failure."""
    with MemoryPlane.open(tmp_path / "m") as plane:
        cut = record(plane, "Search e-mails in Gmail for the invoice from March", SEARCH[:3])
        plane.commit_episode(cut.finish(success=False))
        assert plane.flush(20)
        assert plane.device.entries("failure") == []
        (line,) = [e for e in plane.episodes.entries() if e["id"] == cut.episode.id]
        assert line.get("unfinished") is True
        ids, block = cautions(plane, "Search e-mails in Gmail for the receipt from April")
        assert cut.episode.id not in ids and cut.episode.id not in block
        said = record(plane, "Search e-mails in Gmail for the contract from May", SEARCH[:3])
        plane.commit_episode(said.finish(success=False, failure_phase="planning", failure_reason="no results"))
        assert plane.flush(20)
        (line,) = [e for e in plane.episodes.entries() if e["id"] == said.episode.id]
        assert "unfinished" not in line and len(plane.device.entries("failure")) == 1


def test_a_crashed_run_verify_completes_from_its_finish_event_keeps_its_unfinished_mark(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        rec = record(plane, "Search e-mails in Gmail for the invoice from March", SEARCH[:3])
        rec.finish(success=False)  # finished, never committed: the process died before the commit
        stopped = rec.episode.id
        rec._release_recording_lock()
        del rec
    with MemoryPlane.open(root) as plane:
        plane.verify()
        assert plane.flush(20)
        (line,) = [e for e in plane.episodes.entries() if e["id"] == stopped]
        assert line.get("status") == "active" and line.get("unfinished") is True
        assert plane.device.entries("failure") == []
        ids, _ = cautions(plane, "Search e-mails in Gmail for the receipt from April")
        assert stopped not in ids


def test_a_run_ended_without_a_word_is_a_failure_only_where_the_events_show_it_stuck(tmp_path: Path) -> None:
    """Ended silently on one tap that changed nothing to see (a field taking the focus), the run stopped; on
    the same tap again without effect, it was stuck there: that is a failure, and its cause is taught."""
    field = ("tap", {"x": 540, "y": 150}, "Search in mail", gmail("Search"))
    with MemoryPlane.open(tmp_path / "m") as plane:
        focus = record(plane, "Search e-mails in Gmail for the invoice from March", [*SEARCH[:2], field])
        plane.commit_episode(focus.finish(success=False))
        assert plane.flush(20)
        assert plane.device.entries("failure") == []
        stuck = record(plane, "Search e-mails in Gmail for the receipt from April", [*SEARCH[:2], field, field])
        plane.commit_episode(stuck.finish(success=False))
        assert plane.flush(20)
        assert len(plane.device.entries("failure")) == 1
        (line,) = [e for e in plane.episodes.entries() if e["id"] == stuck.episode.id]
        assert "unfinished" not in line


def test_a_run_stopped_without_a_word_teaches_only_its_app_facts_at_low_confidence(tmp_path: Path) -> None:
    """The record of a run that ended without a word while the task was going on says nothing about its path or
    its end: it teaches no navigation rule, anchor or calibration, and its app at the low confidence of a crash."""
    with MemoryPlane.open(tmp_path / "m") as plane:
        req = MemoryRetrieveRequest(input="Search e-mails in Gmail for the invoice from March", current_hints=EN)
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        for tool, ti, label, obs in SEARCH[:2]:
            rec.tool_call(tool, ti, target_label=label)
            rec.tool_result(tool, observed_state=obs)
        plane.commit_episode(rec.finish(success=False))
        assert plane.flush(20)
        kinds = {e["type"] for e in plane.device.entries()}
        assert kinds <= {"device_profile", "app_profile"}
        (profile,) = [plane.device.get(e["id"]) for e in plane.device.entries("app_profile")]
        assert profile is not None and profile.confidence <= 0.3
