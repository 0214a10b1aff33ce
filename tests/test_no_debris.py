"""A commit that fails on a full disk leaves no episode folder behind that nothing would ever close."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from memory_plane import MemoryPlane
from memory_plane.cli import main as cli

REPO = Path(__file__).resolve().parent.parent

# The disk is full from the task's start: every write fails with ENOSPC (folders and empty files are still
# made, as on a real full disk), so the header, the events and the commit all fail.
FULL_DISK_TASK = """
import errno, os, sys
from memory_plane import MemoryPlane, MemoryRetrieveRequest

plane = MemoryPlane.open(sys.argv[1])
real_write = os.write

def full(fd, data):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

os.write = full
rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="open settings"))
rec.tool_call("click", {"x": 1}, content="tap")
ep = rec.finish(success=False, failure_phase="login", completion_reason="asks to sign in")
ok = plane.commit_episode(ep)
os.write = real_write
print(ok, ep.id, plane.stats()["commit_errors"])
plane.close()
"""


def _episode_dirs(root: Path) -> list[Path]:
    return [d for y in (root / "episodes").iterdir() if y.is_dir() and y.name.isdigit() for d in y.iterdir()]


def test_a_commit_that_fails_on_a_full_disk_removes_its_folder(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", FULL_DISK_TASK, str(root)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    ok, ep_id, errors = out.stdout.split()
    assert ok == "False" and errors == "1"  # the commit failed and said so
    assert "never written; its folder is removed" in out.stderr
    assert _episode_dirs(root) == []  # no empty events.jsonl and .recording.lock left for good
    assert not list(root.rglob(".recording.lock"))
    # Nothing is left for verify or gc to find, today or 400 days later.
    later = "--now", "2028-01-10T00:00:00Z"
    assert cli(["--root", str(root), "lifecycle", "verify", "--json", *later]) == 0
    assert json.loads(capsys.readouterr().out)["problems"] == []
    assert cli(["--root", str(root), "lifecycle", "gc", "--json", *later]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == []
    assert ep_id.startswith("ep_")


def test_debris_left_by_an_older_version_is_reported_and_collected(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    MemoryPlane.open(root).close()
    d = root / "episodes" / "2026" / "ep_20260101_0000000001"
    (d / "artifacts").mkdir(parents=True)
    (d / "events.jsonl").write_bytes(b"")
    (d / ".recording.lock").write_bytes(b"")  # nobody holds it: the process that made it is gone
    old = time.time() - 400 * 86400
    for p in (d / "artifacts", d / "events.jsonl", d / ".recording.lock", d):
        os.utime(p, (old, old))
    assert cli(["--root", str(root), "lifecycle", "verify", "--json"]) == 1
    rec = json.loads(capsys.readouterr().out)
    assert [(p["category"], p["path"]) for p in rec["problems"]] == [
        ("orphanfolder", "episodes/2026/ep_20260101_0000000001/episode.yaml")]
    assert cli(["--root", str(root), "lifecycle", "gc", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["removed_by_reason"] == {"orphan_episode_folder": 1}
    assert not d.exists()
    assert cli(["--root", str(root), "lifecycle", "verify", "--json"]) == 0
