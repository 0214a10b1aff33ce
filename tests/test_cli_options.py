"""An option belongs to its own command: one of another command, or an id given to a list, is a usage error
and nothing runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_memplane as memplane
from helpers import tree_with_one_task

REPO = Path(__file__).resolve().parent.parent




@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tree_with_one_task(tmp_path_factory.mktemp("json") / "m")


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
