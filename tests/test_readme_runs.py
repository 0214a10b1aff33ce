"""The README's code examples run as written (in a temp root, with a made-up screenshot).

It reaches inside `_fake_gemini` for the fake Gemini server the README's lens example talks to.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest

from helpers import screenshot as make_screenshot

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    """Every ```python block of the README, in order."""
    return re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.S)


def _in_temp_root(code: str, root: Path) -> str:
    # The examples name the phone's own root; a test must never write there.
    return code.replace('"/userdata/agent/memory"', repr(str(root)))


def test_every_python_example_is_run_here() -> None:
    assert len(python_blocks()) == 3  # runtime, genai loop, transcript: a new example needs its test below


def test_the_runtime_example_runs_as_written_and_leaves_a_committed_episode(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "screen.jpg").write_bytes(make_screenshot("home"))
    root = tmp_path / "memory"
    exec(compile(_in_temp_root(python_blocks()[0], root), "README.md", "exec"), {})
    assert (root / "episodes" / "index.yaml").is_file()  # the example wrote where the test pointed it
    with MemoryPlane.open(root) as plane:
        (entry,) = plane.episodes.entries()
        ep = plane.episodes.get(entry["id"])
        assert ep is not None and ep.status == "active" and ep.outcome.success is True
        events = plane.episodes.events(ep.id).records
        assert any(e.get("screenshot_ref") for e in events)  # the screenshot went to artifacts/
        ctx = plane.retrieve("打开微信，找到张三，准备发消息")
        assert ep.id not in [h.id for h in ctx.common.failure_modes]  # nothing half-written shows as a failure
        assert plane.verify().ok


def test_the_genai_loop_example_runs_as_written_against_a_fake_gemini(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("google.genai")
    from memory_plane._fake_gemini import FakeGemini

    with FakeGemini() as fake, MemoryPlane.open(tmp_path / "m") as plane:
        fake.script("gemini-3.8-flash",
                    (200, {"parts": [{"functionCall": {"id": "call_1", "name": "recall_memory",
                                                       "args": {"query": "zhang san"}}}]}, 0),
                    (200, "Opened the chat.", 0))
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
        req = MemoryRetrieveRequest(input="打开微信，找到张三")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        ns: dict[str, Any] = {"plane": plane, "req": req, "rec": rec, "phone_tools": []}
        exec(compile(python_blocks()[1], "README.md", "exec"), ns)
        assert len(fake.requests) == 2
        ep = rec.finish(success=True)
        assert plane.commit_episode(ep)


def test_the_transcript_example_runs_with_its_names_given(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        req = MemoryRetrieveRequest(input="read the OTP and type it")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        ns: dict[str, Any] = {
            "rec": rec, "SYSTEM": "You drive an Android phone.", "ui_tree": [{"text": "OTP", "bounds": [0, 0, 9, 9]}],
            "plan_text": "read the code", "shot_dhash": "0" * 16, "thought": "the code is visible",
            "controller_output": "tapped", "h": "subgoal-1",
            "resp": SimpleNamespace(usage_metadata=SimpleNamespace(prompt_token_count=1200))}
        exec(compile(python_blocks()[2], "README.md", "exec"), ns)
        assert ns["contents"] is not None
        rec.finish(success=True)


def test_bench_refuses_a_root_it_would_not_use(tmp_path: Path, capsys) -> None:
    from memory_plane.cli import main as cli

    assert cli(["--root", str(tmp_path), "bench", "index", "--short"]) == 2
    assert "--root" in capsys.readouterr().err
