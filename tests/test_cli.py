"""The memplane CLI end to end on a small tree, and the AndroidControl importer on bad lines."""

from __future__ import annotations

import json
from pathlib import Path

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.cli import main as cli


def seed(root: Path) -> str:
    with MemoryPlane.open(root) as plane:
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="打开微信，找到张三"))
        rec.tool_call("launch_app", {"app": "com.tencent.mm"}, content="微信")
        rec.tool_result("launch_app", observed_state={"app": "微信", "page": "首页", "package": "com.tencent.mm"})
        rec.tool_call("tap", {"x": 10, "y": 20}, content="张三")
        rec.tool_result("tap", observed_state={"app": "微信", "page": "聊天"})
        ep = rec.finish(success=True)
        plane.commit_episode(ep)
        plane.flush()
        return ep.id


def test_cli_commands(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    r = ["--root", str(root)]
    assert cli([*r, "init", "--json"]) == 0
    ep_id = seed(root)
    capsys.readouterr()
    assert cli([*r, "episodes", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == ep_id
    assert cli([*r, "episodes", "show", ep_id]) == 0
    assert "events" in capsys.readouterr().out
    assert cli([*r, "episodes", "show", "ep_20200101_0000000000"]) == 1
    assert cli([*r, "device", "list", "--app", "WeChat", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert any(i["id"] == "app_wechat" for i in items)
    assert cli([*r, "device", "show", "app_wechat"]) == 0
    assert "app_profile" in capsys.readouterr().out
    assert cli([*r, "retrieve", "打开微信找李四", "--language", "zh-CN", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "app_wechat" in out["refs"] and out["rendered"].startswith("# Retrieved Device Experience")
    assert cli([*r, "retrieve", "打开微信找李四", "--explain"]) == 0
    assert "sim" in capsys.readouterr().out
    assert cli([*r, "memory", "save", "User prefers dark mode", "--type", "preference", "--json"]) == 0
    saved = json.loads(capsys.readouterr().out)
    assert saved["status"] == "saved"
    assert cli([*r, "memory", "recall", "dark mode"]) == 0
    assert saved["id"] in capsys.readouterr().out
    assert cli([*r, "memory", "forget", saved["id"]]) == 0
    assert cli([*r, "memory", "forget", saved["id"]]) == 1
    assert cli([*r, "memory", "save", "x", "--type", "bogus"]) == 2
    assert cli([*r, "bench", "nope"]) == 2


def test_import_skips_bad_lines_and_empty_actions(tmp_path: Path, capsys) -> None:
    src = tmp_path / "ac.jsonl"
    src.write_text("\n".join([
        json.dumps({"goal": "open the settings", "is_successful": True, "steps": [
            {"action_content": {"action": "open", "text": "Settings"}, "step_instruction": "open settings"},
            {"action_content": {"action": "click"}, "step_instruction": "click without coordinates"},
            {"action_content": {}, "step_instruction": "nothing"}]}),
        "not json",
        json.dumps({"goal": "no steps here"}),
        json.dumps({"goal": "only empty actions", "steps": [{"action_content": {"action": "type", "text": ""}}]}),
    ]) + "\n")
    root = tmp_path / "m"
    assert cli(["--root", str(root), "import", "androidcontrol", str(src), "--json"]) == 4  # no root yet
    assert cli(["--root", str(root), "init"]) == 0
    capsys.readouterr()
    assert cli(["--root", str(root), "import", "androidcontrol", str(src), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["episodes"] == 2 and rep["skipped_lines"] == 2 and rep["skipped_actions"] == 3 and rep["steps"] == 1
    with MemoryPlane.open(root) as plane:
        procs = [plane.device.get(e["id"]) for e in plane.device.entries("procedure")]
    assert len(procs) == 1 and [s.tool for s in procs[0].steps] == ["launch_app"]  # type: ignore[union-attr]
    assert cli(["--root", str(root), "import", "androidcontrol", str(tmp_path / "missing.jsonl")]) == 2


def test_bench_reports_are_strict_json(monkeypatch) -> None:
    """A figure that could not be measured is null in the report, not NaN (which JSON readers reject)."""
    import argparse
    import types

    from memory_plane import bench

    fake = types.SimpleNamespace(run=lambda args: {"p50": float("nan"), "by": [{"x": float("inf")}], "n": 3})
    monkeypatch.setattr(bench.importlib, "import_module", lambda name: fake)
    assert bench.run_bench("index", argparse.Namespace()) == {"p50": None, "by": [{"x": None}], "n": 3}
