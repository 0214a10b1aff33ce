"""The operator's side of `memplane`: options where people type them, honest listings, cron lines, import.

It reaches inside `cli/_main` for the argument parser, to walk every command's options.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.cli import main as cli
from memory_plane.cli._main import build_parser

REPO = Path(__file__).resolve().parent.parent


def seed(root: Path, goals: list[tuple[str, str, bool]]) -> list[str]:
    ids = []
    with MemoryPlane.open(root) as plane:
        for goal, app, ok in goals:
            req = MemoryRetrieveRequest(input=goal, current_hints={"language": "zh-CN"})
            rec = plane.new_episode_recorder(req, plane.retrieve(req))
            rec.tool_call("launch_app", {"app": app})
            rec.tool_result("launch_app", observed_state={"app": app, "page": "首页"})
            ep = rec.finish(success=ok)
            plane.commit_episode(ep)
            ids.append(ep.id)
        plane.flush()
    return ids


GOALS = [("打开微信，找到张三", "微信", True), ("打开微信，找到李四", "微信", False), ("用支付宝付款", "支付宝", True),
         ("打开美团点外卖", "美团", True), ("打开微信看朋友圈", "微信", True)]


def test_global_options_work_before_or_after_the_command(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    assert cli(["init", "--root", str(root)]) == 0 and root.is_dir()
    seed(root, GOALS[:1])
    capsys.readouterr()
    assert cli(["episodes", "list", "--root", str(root), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    assert cli(["--root", str(tmp_path / "elsewhere"), "episodes", "list", "--root", str(root)]) == 0  # last wins
    assert cli(["lifecycle", "verify", "-v", "--root", str(root)]) == 0


def test_python_m_works_from_inside_a_memory_root(tmp_path: Path) -> None:
    root = tmp_path / "m"
    assert cli(["--root", str(root), "init"]) == 0
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-m", "memory_plane", "--root", ".", "episodes", "list"], cwd=root,
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "(0 episodes)" in out.stdout


def test_episode_listing_is_honest_validated_and_filtered(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    ids = seed(root, GOALS)
    r = ["--root", str(root)]
    capsys.readouterr()
    assert cli([*r, "episodes", "list", "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "(2 of 5 episodes; --limit 5 shows all)" in out
    for bad in ("-5", "0", "x"):
        assert cli([*r, "episodes", "list", "--limit", bad]) == 2
    capsys.readouterr()
    assert cli([*r, "episodes", "list", "--app", "WeChat", "--json"]) == 0
    assert {e["id"] for e in json.loads(capsys.readouterr().out)} == {ids[0], ids[1], ids[4]}
    assert cli([*r, "episodes", "list", "--failed", "--json"]) == 0
    assert [e["id"] for e in json.loads(capsys.readouterr().out)] == [ids[1]]
    assert cli([*r, "episodes", "list", "--since", "1d", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 5
    assert cli([*r, "episodes", "list", "--since", "2999-01-01", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert cli([*r, "episodes", "list", "--since", "last tuesday"]) == 2
    assert "--since takes" in capsys.readouterr().err


def test_explain_is_a_table_with_each_dropped_candidate_and_why(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    seed(root, GOALS[:2])
    r = ["--root", str(root)]
    capsys.readouterr()
    # The episodes were recorded with a zh-CN screen: under en-US their procedures do not apply.
    assert cli([*r, "retrieve", "打开微信，找到王五", "--language", "en-US", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "dropped by the hard filters: " in out and "inapplicable" in out and "language zh-cn ≠ en-us" in out
    assert "sim" in out and "appl" in out
    assert cli([*r, "retrieve", "打开微信，找到王五", "--language", "en-US", "--explain", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert any(d["reason"] == "inapplicable" and "language" in d["detail"] for d in data["dropped_items"])


def test_recall_says_when_nothing_matches_and_save_force_overrides_a_tombstone(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    r = ["--root", str(root)]
    assert cli([*r, "init"]) == 0
    capsys.readouterr()
    assert cli([*r, "memory", "recall", "anything at all"]) == 0
    assert capsys.readouterr().out.strip() == "no memory matches 'anything at all'"
    assert cli([*r, "memory", "save", "Prefers the dark theme", "--type", "preference", "--json"]) == 0
    mem_id = json.loads(capsys.readouterr().out)["id"]
    assert cli([*r, "memory", "forget", mem_id]) == 0
    assert cli([*r, "memory", "save", "Prefers the dark theme", "--type", "preference", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1])["status"] == "ignored"
    assert cli([*r, "memory", "save", "Prefers the dark theme", "--type", "preference", "--force", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "saved"


def test_every_option_has_help() -> None:
    parser = build_parser()
    parsers = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers += list(action.choices.values())
    missing = [f"{p.prog} {a.dest}" for p in parsers for a in p._actions
               if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and not a.help]
    assert missing == []


def test_cron_gets_one_json_line_per_run_even_on_failure(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    seed(root, GOALS[:1])
    r = ["--root", str(root)]
    capsys.readouterr()
    assert cli([*r, "lifecycle", "verify", "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    rec = json.loads(line)
    assert rec["command"] == "lifecycle verify" and rec["exit_code"] == 0 and rec["root"] == str(root)
    assert rec["ts"].endswith("Z") and rec["ok"] is True
    (root / "lifecycle" / "retention.yaml").write_text("ttl: {procedure: soon}\n")
    assert cli([*r, "lifecycle", "gc", "--json"]) == 1
    captured = capsys.readouterr()
    (line,) = captured.out.splitlines()
    rec = json.loads(line)
    assert rec["command"] == "lifecycle gc" and rec["exit_code"] == 1 and "retention.yaml" in rec["error"]
    assert captured.err == ""  # with --json the error is in the line; stderr would break `2>&1 | jq`


def _ac_line(goal: str, n: int) -> str:
    return json.dumps({"episode_id": n, "goal": goal, "is_successful": True, "steps": [
        {"action_content": {"action": "open", "app_name": "Settings"}, "step_instruction": "open settings"},
        {"action_content": {"action": "click", "coordinate": [100, 200]}, "step_instruction": "tap wifi"}]})


def test_import_is_idempotent_and_says_what_it_could_not_read(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    r = ["--root", str(root)]
    assert cli([*r, "init"]) == 0
    src = tmp_path / "ac.jsonl"
    src.write_text("\n".join([_ac_line("turn on wifi", 1), _ac_line("turn off wifi", 2), "not json",
                              json.dumps({"goal": "no steps"})]) + "\n")
    capsys.readouterr()
    assert cli([*r, "import", "androidcontrol", str(src), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["episodes"] == 2 and first["skipped_lines_by_reason"] == {"not_json": 1, "not_an_episode": 1}
    assert cli([*r, "import", "androidcontrol", str(src), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["episodes"] == 0 and again["already_imported"] == 2
    with MemoryPlane.open(root) as plane:
        assert len(plane.episodes.entries()) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("nope\n{}\n")
    assert cli([*r, "import", "androidcontrol", str(bad)]) == 2
    assert "no AndroidControl episode" in capsys.readouterr().err
    csv = tmp_path / "spa.csv"
    csv.write_text("id,task,app\n1,open wifi,Settings\n")
    assert cli([*r, "import", "androidcontrol", str(csv)]) == 2
    assert "looks like CSV" in capsys.readouterr().err
    assert cli([*r, "import", "androidcontrol", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_demo_says_it_replaces_the_previous_tree(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli(["demo", "--tasks", "1"]) == 0
    capsys.readouterr()
    assert cli(["demo", "--tasks", "1"]) == 0
    assert "replacing the previous demo tree" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--help"], ["lifecycle", "--help"]])
def test_help_shows_the_exit_codes(argv: list[str], capsys) -> None:
    assert cli(argv) == 0
    assert "4  no memory root" in capsys.readouterr().out


def test_set_up_files_say_what_they_do() -> None:
    text = (REPO / "pyproject.toml").read_text()  # (tomllib is 3.11+; the project supports 3.10)
    # SPDX string and license-files: setuptools prints no deprecation banner for them.
    assert '\nlicense = "MIT"\n' in text and '\nlicense-files = ["LICENSE"]\n' in text
    assert (REPO / "LICENSE").is_file()
    rule = (REPO / "Makefile").read_text().split("$(STAMP): pyproject.toml\n", 1)[1].split("\n\n", 1)[0]
    first = rule.splitlines()[0]
    assert first.lstrip().startswith("@echo") and "first run only" in first  # said before the silent install
