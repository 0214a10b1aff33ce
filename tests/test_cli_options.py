"""An option belongs to its own command: one of another command, or an id given to a list, is a usage error
and nothing runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest

REPO = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MEMPLANE_ROOT"}
    env["PYTHONPATH"] = str(REPO)
    return env


def memplane(*argv: str) -> subprocess.CompletedProcess[str]:
    """One `memplane` run in its own process, stderr apart from stdout."""
    return subprocess.run([sys.executable, "-m", "memory_plane", *argv], capture_output=True, text=True,
                          env=_env(), timeout=120)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("json") / "m"
    with MemoryPlane.open(root) as plane:
        req = MemoryRetrieveRequest(input="打开微信，找到张三", current_hints={"language": "zh-CN"})
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_call("launch_app", {"app": "微信"})
        rec.tool_result("launch_app", observed_state={"app": "微信", "page": "首页"})
        plane.commit_episode(rec.finish(success=True))
        plane.flush()
    return root


@pytest.mark.parametrize(("argv", "words"), [
    (["lifecycle", "verify", "--dry-run"], "--dry-run"),
    (["lifecycle", "verify", "--force"], "--force"),
    (["lifecycle", "gc", "--fix", "--force"], "--fix --force"),
    (["lifecycle", "gc", "extra"], "extra"),
    (["lifecycle", "quarantine", "list", "--force"], "--force goes with"),
    (["episodes", "show", "x", "--limit", "3"], "--limit"),
    (["device", "show", "x", "--type", "procedure"], "--type"),
    (["episodes", "list", "ep_x"], "takes no id"),
    (["device", "list", "proc_x"], "takes no id"),
])
def test_an_option_of_another_command_is_a_usage_error(root: Path, argv: list[str], words: str) -> None:
    before = sorted(str(p.relative_to(root)) + str(p.stat().st_mtime_ns) for p in root.rglob("*"))
    out = memplane("--root", str(root), *argv)
    assert out.returncode == 2, out.stdout
    assert words in out.stderr and out.stdout == ""
    # Nothing ran: verify with a stray --dry-run rebuilt and rewrote before.
    assert sorted(str(p.relative_to(root)) + str(p.stat().st_mtime_ns) for p in root.rglob("*")) == before


def test_every_documented_lifecycle_invocation_still_parses(root: Path) -> None:
    now = ["--now", "2026-12-01T00:00:00Z"]
    for argv in (["verify", "--json", *now], ["verify", "--fix", *now], ["gc", "--dry-run", "--json", *now],
                 ["quarantine"], ["quarantine", "list", "--json"]):
        out = memplane("--root", str(root), "lifecycle", *argv)
        assert out.returncode == 0, (argv, out.stdout, out.stderr)
    out = memplane("lifecycle", "quarantine", "restore", "nothing-here", "--force", "--root", str(root))
    assert out.returncode == 2 and "nothing-here" in out.stderr
