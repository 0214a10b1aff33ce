"""Ownership kept: a command run by root (a cron line) on a tree owned by the agent's user leaves every file and
folder it makes with the tree's owner, and a lock the user cannot take for lack of permission says so."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.cli import main as cli
from memory_plane.lifecycle import StorageError, init_tree, locked

AGENT = 12345
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")


def task(plane: MemoryPlane, goal: str, ok: bool) -> None:
    req = MemoryRetrieveRequest(input=goal, current_hints={"language": "zh-CN"})
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "微信"})
    rec.tool_result("launch_app", observed_state={"app": "微信", "page": "首页"})
    plane.commit_episode(rec.finish(success=ok, failure_phase=None if ok else "login"))


def chown_tree(root: Path, uid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)
    os.chown(root, uid, uid)


def not_the_agents(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in [root, *root.rglob("*")]
            if (p.lstat().st_uid, p.lstat().st_gid) != (AGENT, AGENT)]


@as_root
def test_commands_run_by_root_keep_the_trees_owner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "m"
    init_tree(root)
    with MemoryPlane.open(root) as plane:
        task(plane, "打开微信，找到张三", True)
        assert plane.flush(20)
    chown_tree(root, AGENT)
    with MemoryPlane.open(root) as plane:  # root's process: commits, lessons, indexes, saved memories
        task(plane, "打开微信，找到李四", False)
        task(plane, "打开微信看朋友圈", True)
        plane.long_term.save_memory(type="fact", content="Zhang San is my colleague")
        assert plane.flush(20)
    for argv in (["lifecycle", "verify", "--fix"], ["lifecycle", "gc"], ["lifecycle", "verify"],
                 ["retrieve", "打开微信"], ["memory", "save", "I live in Shanghai"]):
        assert cli(["--root", str(root), *argv]) in (0, 1), argv
    capsys.readouterr()
    assert not_the_agents(root) == []


@as_root
def test_a_lock_refused_for_lack_of_permission_says_so() -> None:
    top = Path(tempfile.mkdtemp())  # pytest's tmp_path is closed to other users: this one is opened
    try:
        os.chmod(top, 0o755)
        _refused(top / "episodes" / ".lock")
    finally:
        shutil.rmtree(top)


def _refused(lock: Path) -> None:
    lock.parent.mkdir()
    lock.touch(mode=0o644)  # root's, as a cron line before this fix left it
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the agent's user, in a child so this process stays root
        os.close(r)
        try:
            os.setegid(AGENT)
            os.seteuid(AGENT)
            with locked(lock, timeout=1):
                msg = "taken"
        except StorageError as exc:
            msg = str(exc)
        except BaseException as exc:  # any other outcome is reported to the parent, which fails on it
            msg = f"{type(exc).__name__}: {exc}"
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode()
    assert str(lock) in msg and "permission denied" in msg and "not a lock file" not in msg, msg
    assert "belongs to root" in msg, msg
