"""Issue 27: hand edits and faults are never silent (GC resumes, indexes are checked, the file is the truth...)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane._cli import main as cli

GOAL = "用支付宝付款 pay with alipay"


def _procedure(plane: MemoryPlane, item_id: str = "proc_manual") -> Path:
    coll = plane.device.collection("procedure")
    item = plane.device.new_item(coll.model, item_id, title="Pay with Alipay", app_id="alipay", intent="pay",
                                 steps=[{"tool": "tap", "target_label": "Pay"}])
    return coll.save(item)


def _touch_later(path: Path, text: str) -> None:
    """Write a hand edit whose mtime is surely after the index line's."""
    path.write_text(text)
    later = time.time() + 2
    os.utime(path, (later, later))


# -- point 4: the file is the truth, at once --------------------------------------------------------------


def test_a_changed_file_is_scored_and_rendered_as_it_is_now(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        path = _procedure(plane)
        (hit,) = plane.retrieve(GOAL).common.procedures
        assert hit.confidence == 0.5
        text = path.read_text()
        _touch_later(path, text.replace("confidence: 0.5", "confidence: 0.01"))
        (hit,) = plane.retrieve(GOAL).common.procedures
        assert hit.confidence == 0.01 and hit.factors["confidence"] == 0.01
        _touch_later(path, text.replace("expires_at: \"2", "expires_at: \"2020-01-01T00:00:00Z\"\nold_expiry: \"2"))
        ctx = plane.retrieve(GOAL)
        assert "proc_manual" not in ctx.refs() and ctx.dropped.get("expired") == 1
        _touch_later(path, text.replace("intent: pay", "intent: pay\napplicability:\n  language: fr-FR"))
        ctx = plane.retrieve(MemoryRetrieveRequest(input=GOAL, current_hints=CurrentEnvironmentHints(language="zh-CN")))
        assert "proc_manual" not in ctx.refs() and ctx.dropped.get("inapplicable") == 1


def test_a_changed_long_term_summary_is_what_the_prompt_shows(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        r = plane.long_term.save_memory(type="fact", content="The door code is 4711", title="door code")
        path = plane.long_term.dir / "memories" / f"{r.id}.md"
        _touch_later(path, path.read_text().replace("4711", "9999"))
        ctx = plane.retrieve("what is the door code")
        (hit,) = [h for h in ctx.common.long_term if h.id == r.id]
        assert "9999" in hit.text and "4711" not in ctx.render()


def test_a_renamed_item_is_found_by_the_id_inside_it(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        path = _procedure(plane)
        os.rename(path, path.with_name("my-alipay-notes.yaml"))
        ctx = plane.retrieve(GOAL)
        assert "proc_manual" in ctx.refs()
        (hit,) = ctx.common.procedures
        assert hit.path == "device/procedures/my-alipay-notes.yaml" and hit.steps
        assert plane.device.get("proc_manual") is not None
    assert cli(["--root", str(root), "device", "show", "proc_manual", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "proc_manual"



# -- point 2: a GC killed at any point resumes to the same files and tombstones -----------------------------


class _Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs (a BaseException, so no handler swallows it)."""


def _gc_fixture(root: Path) -> None:
    from lifecycle import init_tree
    from memory_plane.bench._lifecycle import build

    init_tree(root)
    build(root, n_items=48, n_episodes=30, seed=11)


def _gc_state(root: Path) -> tuple[list[str], list[tuple[str, str]]]:
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".cache" not in p.parts
                   and p.name != "tombstones.jsonl")
    tombs = [json.loads(line) for line in (root / "lifecycle" / "tombstones.jsonl").read_text().splitlines() if line]
    return files, sorted((t["ref"]["type"], t["ref"]["id"]) for t in tombs)


def _gc(root: Path, now) -> None:  # type: ignore[no-untyped-def]
    from memory_plane._maintenance import gc_tree

    with MemoryPlane.open(root) as plane:
        gc_tree(root, plane.device, plane.episodes, plane.long_term, plane.session, now=now)


def test_a_gc_killed_at_any_removal_resumes_to_the_same_files_and_tombstones(tmp_path: Path, monkeypatch) -> None:
    import shutil
    from datetime import timedelta

    import memory_plane._maintenance as maint
    from memory_plane.bench._lifecycle import NOW

    now = NOW + timedelta(days=200)  # most episodes past their summary TTL, most items past grace
    base = tmp_path / "base"
    _gc_fixture(base)
    ref = tmp_path / "ref"
    shutil.copytree(base, ref)
    _gc(ref, now)
    want = _gc_state(ref)
    assert len(want[1]) > 20 and any(t == "episode" for t, _ in want[1])
    real = maint.remove_path
    for kill_at in (1, 3, 9, 20, 33):
        root = tmp_path / f"k{kill_at}"
        shutil.copytree(base, root)
        calls = [0]

        def dying(r, p, _real=real, _calls=calls, _at=kill_at):  # type: ignore[no-untyped-def]
            _calls[0] += 1
            if _calls[0] == _at:
                raise _Killed
            return _real(r, p)

        monkeypatch.setattr(maint, "remove_path", dying)
        try:
            _gc(root, now)
        except _Killed:
            pass
        monkeypatch.setattr(maint, "remove_path", real)
        _gc(root, now)
        assert _gc_state(root) == want, kill_at
