"""`--json` is one JSON line whatever happens: usage errors, a show of nothing, a failed run.

Run as cron runs it: a separate process whose stdout and stderr go into one log that `jq` reads.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import memplane_env, tree_with_one_task
from helpers import run_memplane as memplane

REPO = Path(__file__).resolve().parent.parent
OPERATING = REPO / "docs" / "operating.md"  # where the cron recipe is documented




def one_line(out: subprocess.CompletedProcess[str]) -> dict:
    """The run's only stdout line, as JSON; stderr must be empty (cron logs both into one file)."""
    assert out.stderr == ""
    (line,) = out.stdout.splitlines()
    return json.loads(line)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tree_with_one_task(tmp_path_factory.mktemp("json") / "m")


@pytest.mark.parametrize(("argv", "command", "words"), [
    (["lifecycle", "gc", "--json", "--dryrun"], "lifecycle gc", "--dryrun"),
    (["lifecycle", "verify", "--json", "--now"], "lifecycle verify", "--now"),
    (["lifecycle", "--json"], "lifecycle", "ACTION"),
    (["episodes", "list", "--json", "--limit", "0"], "episodes list", "at least 1"),
    (["nosuch", "--json"], "", "nosuch"),
])
def test_a_usage_error_with_json_is_one_json_line(root: Path, argv: list[str], command: str, words: str) -> None:
    out = memplane("--root", str(root), *argv)
    assert out.returncode == 2
    rec = one_line(out)
    assert rec["exit_code"] == 2 and rec["command"] == command and words in rec["error"]
    assert rec["root"] == str(root) and rec["ts"].endswith("Z")


def test_without_json_a_usage_error_still_shows_the_usage(root: Path) -> None:
    out = memplane("--root", str(root), "lifecycle", "gc", "--dryrun")
    assert out.returncode == 2 and out.stdout == ""
    assert "usage:" in out.stderr and "--dryrun" in out.stderr


@pytest.mark.parametrize(("argv", "command", "error"), [
    (["device", "show", "nope", "--json"], "device show", "no device memory nope"),
    (["episodes", "show", "nope", "--json"], "episodes show", "no episode nope"),
    (["memory", "forget", "mem_nope", "--json"], "memory forget", "no memory mem_nope"),
])
def test_a_show_of_nothing_with_json_is_one_json_line(root: Path, argv: list[str], command: str, error: str) -> None:
    out = memplane("--root", str(root), *argv)
    assert out.returncode == 1
    rec = one_line(out)
    assert rec["command"] == command and rec["exit_code"] == 1 and rec["error"] == error


def test_a_show_of_nothing_without_json_says_so_on_stderr(root: Path) -> None:
    out = memplane("--root", str(root), "episodes", "show", "nope")
    assert out.returncode == 1 and out.stdout == "" and "no episode nope" in out.stderr


def _cron_lines() -> list[str]:
    """The documented crontab lines (docs/operating.md), each without its five schedule fields."""
    block = re.search(r"```cron\n(.*?)```", OPERATING.read_text("utf-8"), re.S)
    assert block is not None
    return [line.split(None, 5)[5] for line in block.group(1).splitlines()
            if line.strip() and not line.startswith("#") and "=" not in line.split()[0]]


@pytest.mark.skipif(shutil.which("jq") is None or shutil.which("flock") is None, reason="needs jq and flock")
def test_the_readme_cron_recipe_through_bash_and_jq_reads_every_line(root: Path, tmp_path: Path) -> None:
    log = tmp_path / "memplane.log"
    jobs = [line.replace("/var/log/memplane.log", str(log)).replace("/tmp/memplane-", f"{tmp_path}/memplane-")
            for line in _cron_lines()]
    assert len(jobs) == 2 and all("--json" in j for j in jobs)
    verify, gc = jobs
    mp = f"{sys.executable} -m memory_plane"
    tree = str(root)
    script = "\n".join([
        f"MP='{mp}'",
        verify.replace("/userdata/agent/memory", tree),                       # passes
        gc.replace("lifecycle gc --json", "lifecycle gc --json --dryrun").replace("/userdata/agent/memory", tree),
        verify.replace("/userdata/agent/memory", f"{tmp_path}/not-mounted"),  # no root: 4
        gc.replace("/userdata/agent/memory", tree).replace("gc --json", "gc --json --now 2026-12-01T00:00:00Z"),
    ])
    run = subprocess.run(["bash", "-c", script], env=memplane_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = log.read_text("utf-8").splitlines()
    assert len(lines) == 4 and all(json.loads(x) for x in lines)
    every = subprocess.run(["jq", "-c", ".exit_code", str(log)], capture_output=True, text=True, timeout=30)
    assert every.returncode == 0 and every.stdout.split() == ["0", "2", "4", "0"], every.stderr
    bad = subprocess.run(["jq", "-c", "select(.exit_code != 0)", str(log)], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 0, bad.stderr
    failed = [json.loads(x) for x in bad.stdout.splitlines()]
    assert [(r["command"], r["exit_code"]) for r in failed] == [("lifecycle gc", 2), ("lifecycle verify", 4)]
    assert "--dryrun" in failed[0]["error"] and "not-mounted" in failed[1]["error"]
    grep = subprocess.run(["grep", '"exit_code":[1-9]', str(log)], capture_output=True, text=True, timeout=30)
    assert len(grep.stdout.splitlines()) == 2
