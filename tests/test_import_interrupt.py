"""`memplane import`: the documented line format imports, and a Ctrl-C stops between episodes saying what it did."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_plane import MemoryPlane
from memory_plane.cli import main as cli

REPO = Path(__file__).resolve().parent.parent
FILES_DOC = REPO / "docs" / "files.md"  # where the import format is documented


def _line(n: int) -> str:
    steps = [{"action_content": {"action": "open", "app_name": "Settings"}, "step_instruction": "open settings"}]
    steps += [{"action_content": {"action": "click", "coordinate": [10 * i, 20 * i]}, "step_instruction": f"tap {i}"}
              for i in range(1, 3)]
    return json.dumps({"episode_id": n, "goal": f"turn on setting number {n}", "is_successful": n % 5 != 0,
                       "steps": steps})


def _committed(root: Path) -> int:
    return sum(1 for _ in (root / "episodes").glob("2000/*/episode.yaml"))


def _run(root: Path, src: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "memory_plane", "--root", str(root), "import", "androidcontrol",
                             str(src), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
def test_ctrl_c_during_an_import_stops_between_episodes_says_how_many_and_a_rerun_adds_the_rest(
        tmp_path: Path) -> None:
    root = tmp_path / "m"
    assert cli(["--root", str(root), "init"]) == 0
    src = tmp_path / "ac.jsonl"
    src.write_text("".join(_line(n) + "\n" for n in range(200)))
    proc = _run(root, src)
    deadline = time.monotonic() + 60
    while _committed(root) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    (line,) = out.splitlines()  # one JSON line, nothing on stderr
    rec = json.loads(line)
    assert err == ""
    assert rec["exit_code"] == 130 and rec["error"] == "interrupted" and rec["command"] == "import"
    first = rec["imported"]
    assert 3 <= first < 200 and rec["skipped"] == 0
    assert _committed(root) == first  # the one being imported at the Ctrl-C was finished, none half-written
    with MemoryPlane.open(root) as plane:
        assert len(plane.episodes.entries()) == first
    # Again, without --json: the rest is imported, nothing twice.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    again = subprocess.run([sys.executable, "-m", "memory_plane", "--root", str(root), "import", "androidcontrol",
                            str(src), "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0, again.stderr
    rest = json.loads(again.stdout)
    assert rest["imported"] == 200 - first and rest["already_imported"] == first and not rest["interrupted"]
    with MemoryPlane.open(root) as plane:
        assert len(plane.episodes.entries()) == 200
        assert plane.verify().ok


def test_ctrl_c_without_json_says_what_was_imported_on_stderr(tmp_path: Path) -> None:
    root = tmp_path / "m"
    assert cli(["--root", str(root), "init"]) == 0
    src = tmp_path / "ac.jsonl"
    src.write_text("".join(_line(n) + "\n" for n in range(200)))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "memory_plane", "--root", str(root), "import", "androidcontrol",
                             str(src)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while _committed(root) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    m = re.search(r"interrupted: imported (\d+) episodes?, skipped 0 lines", err)
    assert m is not None, err
    assert int(m.group(1)) == _committed(root) and "run it again" in err


def test_the_readme_documents_the_import_format_and_its_example_line_imports(tmp_path: Path, capsys) -> None:
    text = FILES_DOC.read_text("utf-8")
    for field in ("episode_id", "goal", "steps", "action_content", "step_instruction", "is_successful"):
        assert f"`{field}`" in text, field
    (example,) = [b for b in re.findall(r"```json\n(.*?)\n```", text, re.S) if "action_content" in b]
    assert "\n" not in example  # one line, as the file holds it
    src = tmp_path / "ac.jsonl"
    src.write_text(example + "\n")
    root = tmp_path / "m"
    assert cli(["--root", str(root), "init"]) == 0
    capsys.readouterr()
    assert cli(["--root", str(root), "import", "androidcontrol", str(src), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["imported"] == 1 and rep["skipped_actions"] == 0 and rep["skipped_lines"] == 0
    with MemoryPlane.open(root) as plane:
        (entry,) = plane.episodes.entries()
        assert len(plane.episodes.events(entry["id"]).records) >= 2 * len(json.loads(example)["steps"])
