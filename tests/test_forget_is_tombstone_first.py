"""A forget is durable before anything is removed: a process killed at the unlink of the memory's file leaves
a tombstone and the file, and the file is then forgotten (never served, never saved again) until the next
forget, verify --fix or GC removes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest

REPO = Path(__file__).resolve().parent.parent
TEXT = "The spare key of the Zorbix flat is under the blue flower pot"

# Forget in a child process that dies (os._exit, no cleanup) the moment it unlinks a memory or device file.
KILLED_FORGET = textwrap.dedent("""
    import os, sys
    from memory_plane import MemoryPlane
    real_unlink = os.unlink
    def unlink(path, *args, **kwargs):
        p = os.fspath(path)
        # The guarded path unlinks by name inside an opened folder (dir_fd): the name alone is matched.
        if p.endswith((".md", ".yaml")) and os.path.basename(p).startswith(("mem_", "proc_")):
            os._exit(9)
        return real_unlink(path, *args, **kwargs)
    os.unlink = unlink
    plane = MemoryPlane.open(sys.argv[1], create=False)
    plane.forget(sys.argv[2], reason="the user asked")
    os._exit(0)
""")


def _killed_forget(root: Path, item_id: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", KILLED_FORGET, str(root), item_id], env=env, timeout=120)
    assert done.returncode == 9  # killed at the unlink, as a phone losing power would be


def _tombstoned(root: Path, item_id: str) -> bool:
    lines = (root / "lifecycle" / "tombstones.jsonl").read_text().splitlines()
    return any(json.loads(x)["ref"]["id"] == item_id and json.loads(x)["reason"] != "gc" for x in lines if x)


@pytest.fixture
def killed(tmp_path: Path) -> tuple[Path, str]:
    """A tree where a forget of TEXT's memory was killed at its unlink."""
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        mem = plane.long_term.save_memory(type="fact", content=TEXT, entities=["Zorbix"])
    _killed_forget(root, mem.id)
    return root, mem.id


def test_a_killed_forget_leaves_the_tombstone_and_the_text_is_not_saved_again(killed: tuple[Path, str]) -> None:
    root, mem_id = killed
    assert _tombstoned(root, mem_id)  # durable before the file went
    with MemoryPlane.open(root) as plane:
        assert plane.long_term.save_memory(type="fact", content=TEXT).status == "ignored"
        assert "status=ignored" in plane.tools.call("save_memory", {"type": "fact", "content": TEXT}).text


def test_a_killed_forgets_file_is_never_served(killed: tuple[Path, str]) -> None:
    root, mem_id = killed
    assert (root / "long_term" / "memories" / f"{mem_id}.md").is_file()  # the leftover
    with MemoryPlane.open(root) as plane:
        plane.long_term.rebuild_index()  # as verify does: the leftover's index line is back
        assert mem_id in {e["id"] for e in plane.long_term.entries()}
        assert plane.long_term.recall_memory("spare key Zorbix flat") == []
        assert plane.long_term.list_memories(["fact"]) == []
        ctx = plane.retrieve(MemoryRetrieveRequest(input="where is the spare key of the Zorbix flat"))
        assert mem_id not in ctx.refs() and "blue flower pot" not in ctx.render()


@pytest.mark.parametrize("how", ["forget", "verify", "gc"])
def test_the_next_forget_verify_fix_or_gc_removes_the_leftover(killed: tuple[Path, str], how: str) -> None:
    root, mem_id = killed
    path = root / "long_term" / "memories" / f"{mem_id}.md"
    with MemoryPlane.open(root) as plane:
        report = plane.verify()
        assert any(p.category == "forgotten" and p.path.endswith(f"{mem_id}.md") for p in report.problems)
        assert path.is_file()  # verify without --fix changes nothing
        if how == "forget":
            assert plane.forget(mem_id, reason="again")
        elif how == "verify":
            plane.verify(fix=True)
        else:
            assert any(r["reason"] == "forgotten" for r in plane.gc().removed)
        assert not path.exists()
        assert plane.verify().ok
        assert plane.long_term.save_memory(type="fact", content=TEXT).status == "ignored"
    lines = (root / "lifecycle" / "tombstones.jsonl").read_text().splitlines()
    assert sum(json.loads(x)["ref"]["id"] == mem_id for x in lines if x) == 1  # one tombstone, not two


def _open_zorbix_settings(plane: MemoryPlane) -> None:
    """One finished task that teaches the two-step "open Zorbix settings" procedure."""
    req = MemoryRetrieveRequest(input="open Zorbix settings")
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "Zorbix"})
    rec.tool_result("launch_app", observed_state={"app": "Zorbix", "page": "Home"})
    rec.tool_call("tap", {"x": 10, "y": 20, "element": "Settings"})
    rec.tool_result("tap", observed_state={"app": "Zorbix", "page": "Settings"})
    plane.commit_episode(rec.finish(success=True))
    plane.flush()


def test_a_killed_device_forget_is_not_learned_again(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        for _ in range(2):
            _open_zorbix_settings(plane)
        procs = [e["id"] for e in plane.device.collections["procedure"].entries()]
    assert procs
    _killed_forget(root, procs[0])
    assert _tombstoned(root, procs[0])
    with MemoryPlane.open(root) as plane:
        assert procs[0] not in plane.retrieve(MemoryRetrieveRequest(input="open Zorbix settings")).refs()
        _open_zorbix_settings(plane)
        assert plane.verify(fix=True) is not None
        assert plane.device.get(procs[0]) is None  # removed, and the same evidence did not teach it again
