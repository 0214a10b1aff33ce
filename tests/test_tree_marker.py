"""Only `memplane init` makes a memory tree: every other command refuses a folder that is not one (exit 4)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory_plane import MemoryPlane
from memory_plane.cli import main as cli
from memory_plane.lifecycle import TREE_MARKER, NoRootError

REPO = Path(__file__).resolve().parent.parent

COMMANDS = [
    ["lifecycle", "verify"],
    ["lifecycle", "verify", "--fix"],
    ["lifecycle", "gc"],
    ["lifecycle", "quarantine"],
    ["retrieve", "open settings"],
    ["episodes", "list"],
    ["episodes", "show", "ep_20260101_0000000000"],
    ["device", "list"],
    ["device", "show", "proc_x"],
    ["memory", "recall", "settings"],
    ["memory", "save", "I like tea"],
    ["memory", "forget", "mem_x"],
    ["mcp"],
]


def _paths(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_cron_on_an_empty_mount_point_exits_4_and_creates_nothing(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "memory_plane", "--root", str(d), "lifecycle", "verify", "--json"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 4, out
    (line,) = out.stdout.splitlines()
    rec = json.loads(line)
    assert rec["exit_code"] == 4 and rec["command"] == "lifecycle verify"
    assert str(d) in rec["error"] and "not a memory tree" in rec["error"]
    assert out.stderr == ""
    assert _paths(d) == []


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
@pytest.mark.parametrize("held", [None, "notes.txt"], ids=["empty", "other-files"])
def test_every_command_refuses_a_folder_that_is_not_a_tree(tmp_path: Path, capsys, argv: list[str],
                                                            held: str | None) -> None:
    d = tmp_path / "d"
    d.mkdir()
    if held:
        (d / held).write_text("someone's file\n")
    before = _paths(d)
    assert cli(["--root", str(d), *argv]) == 4
    err = capsys.readouterr().err
    assert str(d) in err and "not a memory tree" in err and "memplane init" in err
    assert _paths(d) == before


def test_import_refuses_a_folder_that_is_not_a_tree(tmp_path: Path, capsys) -> None:
    d = tmp_path / "d"
    d.mkdir()
    data = tmp_path / "ac.jsonl"
    data.write_text('{"episode_id": 1, "goal": "open settings", "steps": []}\n')
    assert cli(["--root", str(d), "import", "androidcontrol", str(data), "--json"]) == 4
    rec = json.loads(capsys.readouterr().out)
    assert rec["exit_code"] == 4 and str(d) in rec["error"]
    assert _paths(d) == []


def test_init_writes_the_marker_and_then_the_tree_works(tmp_path: Path, capsys) -> None:
    d = tmp_path / "d"
    d.mkdir()
    assert cli(["--root", str(d), "init", "--json"]) == 0
    created = json.loads(capsys.readouterr().out)["created"]
    assert TREE_MARKER in created
    assert "layout: 1" in (d / TREE_MARKER).read_text()
    assert cli(["--root", str(d), "lifecycle", "verify", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_a_tree_made_by_an_older_version_is_recognised_and_marked_by_init_only(tmp_path: Path, capsys) -> None:
    d = tmp_path / "old"
    MemoryPlane.open(d).close()
    (d / TREE_MARKER).unlink()  # what an older version left: the layout without the marker
    for argv in (["lifecycle", "verify"], ["lifecycle", "gc"], ["episodes", "list"], ["device", "list"],
                 ["retrieve", "open settings"], ["memory", "recall", "tea"]):
        assert cli(["--root", str(d), *argv]) == 0, argv
        assert not (d / TREE_MARKER).exists(), argv
    assert MemoryPlane.open(d).close() is None and not (d / TREE_MARKER).exists()
    capsys.readouterr()
    assert cli(["--root", str(d), "init", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["created"] == [TREE_MARKER]


def test_a_folder_with_only_part_of_the_layout_is_not_a_tree(tmp_path: Path, capsys) -> None:
    d = tmp_path / "d"
    (d / "episodes").mkdir(parents=True)
    (d / "config.yaml").write_text("x: 1\n")
    assert cli(["--root", str(d), "lifecycle", "gc"]) == 4
    assert sorted(os.listdir(d)) == ["config.yaml", "episodes"]


def test_the_library_still_makes_a_tree_where_it_is_asked(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    with pytest.raises(NoRootError):
        MemoryPlane.open(d, create=False)
    assert _paths(d) == []
    with MemoryPlane.open(d) as plane:  # create=True, as documented: the runtime's tree
        assert plane.root == d
    assert (d / TREE_MARKER).is_file() and (d / "episodes").is_dir()
    shutil.rmtree(d / "session")  # a missing folder is filled in by any command, the marker says it is a tree
    assert cli(["--root", str(d), "lifecycle", "verify"]) in (0, 1)
    assert (d / "session").is_dir()
