"""Outcomes keep their words: the reason a runtime gives for a failure reaches the episode, the lesson and the block."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.lifecycle import load_yaml_file

from helpers import screenshot

ZH = CurrentEnvironmentHints(language="zh-CN", screen_width=640, screen_height=1200)
GOAL = "打开美团，点一份外卖"


def failed_login(plane: MemoryPlane, **finish: str) -> str:
    req = MemoryRetrieveRequest(input=GOAL, current_hints=ZH)
    rec = plane.new_episode_recorder(req)
    rec.tool_call("launch_app", {"app": "美团"}, content="open the app")
    rec.tool_result("launch_app", output="ok", screenshot=screenshot("login"),
                    observed_state={"app": "美团", "page": "登录"})
    ep = rec.finish(success=False, failure_phase="login", **finish)
    plane.commit_episode(ep)
    assert plane.flush(20)
    return ep.id


@pytest.mark.parametrize("key", ["completion_reason", "failure_reason"])
def test_the_reason_given_reaches_episode_lesson_and_block(tmp_path: Path, key: str) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        eid = failed_login(plane, **{key: "asks to sign in"})
        ep = plane.episodes.get(eid)
        assert ep is not None and ep.outcome.failure_reason == "asks to sign in"
        assert ep.summary.endswith("Outcome: failure (login): asks to sign in")
        on_disk = load_yaml_file(next((plane.root / "episodes").rglob(f"{eid}/episode.yaml")))
        assert on_disk["outcome"]["failure_reason"] == "asks to sign in"
        lessons = [e for e in plane.device.entries("failure")]
        texts = [str(plane.device.get(e["id"]).model_dump()) for e in lessons]  # type: ignore[union-attr]
        assert any("asks to sign in" in t for t in texts), texts
        block = plane.retrieve(MemoryRetrieveRequest(input=GOAL, current_hints=ZH)).render()
        assert "asks to sign in" in block and "unknown" not in block.split("asks to sign in")[0][-40:]
        assert "failure (login): unknown" not in block


def test_finish_arguments_are_documented() -> None:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "runtime.md").read_text("utf-8")
    for arg in ("completion_reason", "failure_reason", "failure_phase", "final_state", "final_answer"):
        assert f"`{arg}`" in readme, arg
