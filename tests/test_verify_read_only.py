"""`lifecycle verify` on a read-only tree: every finding reported with its file; `--fix` exits 3 naming one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from memory_plane.cli import main as cli

from helpers import read_only

REPO = Path(__file__).resolve().parent.parent

_BUILD = """
import sys
from memory_plane import MemoryPlane, MemoryRetrieveRequest as Req
with MemoryPlane.open(sys.argv[1]) as plane:
    plane.long_term.save_memory(type="fact", content="the locker code is 1234")
    plane.long_term.save_memory(type="fact", content="the gym opens at six")
    req = Req(input="open wechat and find zhang san")
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "wechat"})
    print(rec.episode.id if hasattr(rec, "episode") else "")
import os
os._exit(0)  # a crash: the recording is never finished
"""


def _tree(tmp_path: Path) -> Path:
    """A tree (built in another process, which dies mid-recording) with a crashed episode, memories that expire
    by the --now the tests give, and a long-term index missing one line, all written an hour ago."""
    root = tmp_path / "m"
    subprocess.run([sys.executable, "-c", _BUILD, str(root)], check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    index = root / "long_term" / "index.yaml"
    lines = index.read_text().splitlines(keepends=True)
    index.write_text("".join(ln for ln in lines if "the gym opens at six" not in ln))
    old = time.time() - 3600
    for p in root.rglob("*"):
        os.utime(p, (old, old), follow_symlinks=False)
    return root


LATER = ["--now", "2099-01-01T00:00:00Z"]


def test_verify_on_a_read_only_tree_reports_every_finding_with_its_file(tmp_path: Path, monkeypatch,
                                                                       capsys) -> None:
    root = _tree(tmp_path)
    (ep_file,) = [p.relative_to(root).as_posix() for p in root.glob("episodes/*/*/episode.yaml")]
    memories = sorted(p.relative_to(root).as_posix() for p in root.glob("long_term/memories/*.md"))
    read_only(monkeypatch, root)
    assert cli(["--root", str(root), "lifecycle", "verify", "--json", *LATER]) == 1
    rec = json.loads(capsys.readouterr().out)
    by_path = {p["path"]: p["message"] for p in rec["problems"]}
    assert "crashed recording" in by_path[ep_file]
    for m in memories:
        assert "expired" in by_path[m]
    assert "index out of date" in by_path["long_term/index.yaml"]
    assert not any(".recording.lock" in p for p in by_path)
    assert sorted(rec["not_written"]) == sorted([ep_file, *memories, "long_term/index.yaml"])
    assert all("read-only" in msg for msg in by_path.values())
    assert cli(["--root", str(root), "lifecycle", "verify", *LATER]) == 1  # and the same for a person
    out = capsys.readouterr().out
    assert ep_file in out and all(m in out for m in memories) and "long_term/index.yaml" in out


def test_verify_fix_on_a_read_only_tree_exits_3_naming_the_file_it_could_not_write(tmp_path: Path, monkeypatch,
                                                                                   capsys) -> None:
    root = _tree(tmp_path)
    (ep_file,) = [p.relative_to(root).as_posix() for p in root.glob("episodes/*/*/episode.yaml")]
    read_only(monkeypatch, root)
    assert cli(["--root", str(root), "lifecycle", "verify", "--fix", "--json", *LATER]) == 3
    rec = json.loads(capsys.readouterr().out)
    assert rec["exit_code"] == 3 and rec["error"].startswith(f"cannot write {ep_file}")
    assert len(rec["problems"]) == 4  # the findings are still all there
    assert cli(["--root", str(root), "lifecycle", "verify", "--fix", *LATER]) == 3
    err = capsys.readouterr().err
    assert f"cannot write {ep_file}" in err and "read-only" in err
