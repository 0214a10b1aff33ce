"""GC after a verify of the same process: a memory marked expired whose index line that verify proved, and a live
one verify parsed, both unchanged since, are not parsed again (the line, or what verify read, says what GC needs).
Anything changed since (the file edited, replaced with its old mtime, the index edited by hand) is parsed as before,
and GC removes exactly what it removes without the proof.

The proof counts a file as seen by verify only when it last changed a margin before verify began (file times lag
the system clock by a tick); these tests set that margin to nothing and wait a little instead, so that the files
just built count as older than the verify that proves their index.

It reaches inside ``lifecycle._index_proof`` for that margin (and to forget the proofs, as a new process would) and
inside ``lifecycle._collection`` for the bound on what a proof gives; it builds its trees with
``bench._lifecycle``'s builder, for the bench's spread of ages.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane
from memory_plane.bench._lifecycle import NOW, build
from memory_plane.lifecycle import YamlCollection, _index_proof, collect_reason, init_tree, load_retention

_FAR_FUTURE = "2027-06-01T00:00:00Z"
_LONG_AGO = "2026-06-01T00:00:00Z"


def _tree(base: Path, n_items: int = 48) -> Path:
    root = base / "memory"
    init_tree(root)
    build(root, n_items, n_items // 2)
    return root


def _proved(root: Path) -> MemoryPlane:
    """A plane whose verify marked the expired, then (a moment later) proved every index."""
    plane = MemoryPlane(root, clock=lambda: NOW)
    plane.verify()
    time.sleep(0.05)  # the marks are older than the verify that proves the indexes
    plane.verify()
    return plane


@pytest.fixture(autouse=True)
def _no_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_index_proof, "PROOF_MARGIN_NS", 0)


def _memories(root: Path) -> list[Path]:
    return sorted(p for p in (root / "device").rglob("*.yaml") if p.name != "index.yaml" and "history" not in p.parts)


def _removable(plane: MemoryPlane, root: Path) -> list[Path]:
    """The memory files GC would remove by their own fields (parsed here)."""
    ret = load_retention(root / "lifecycle" / "retention.yaml")
    out = []
    for coll in plane.device.collections.values():
        for item in coll.iter_items():
            if item.record is not None and collect_reason(item.record, ret, NOW):
                out.append(item.path)
    return sorted(out)


def _live(plane: MemoryPlane) -> list[Path]:
    return sorted(item.path for coll in plane.device.collections.values() for item in coll.iter_items()
                  if item.record is not None and item.record.status == "active" and not item.record.is_expired(NOW))


def _removed(rep: Any) -> list[str]:
    return sorted(r["path"] for r in rep.removed)


def _parsed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    seen: list[Path] = []
    real = YamlCollection.load_path

    def counting(self: Any, path: Path) -> Any:
        seen.append(Path(path))
        return real(self, path)

    monkeypatch.setattr(YamlCollection, "load_path", counting)
    return seen


def _edit(path: Path, status: str, expires: str) -> None:
    text = path.read_text("utf-8")
    lines = [f"status: {status}" if ln.startswith("status:") else f"expires_at: '{expires}'"
             if ln.startswith("expires_at:") else ln for ln in text.split("\n")]
    path.write_text("\n".join(lines), "utf-8")


def test_gc_after_verify_reads_no_memory_it_proved_expired_or_live(tmp_path: Path, monkeypatch) -> None:
    root = _tree(tmp_path)
    plane = _proved(root)
    removable = _removable(plane, root)
    live = _live(plane)
    assert removable and live
    unproved = tmp_path / "copy"
    shutil.copytree(root, unproved, symlinks=True)
    parsed = _parsed(monkeypatch)
    rep = plane.gc()
    monkeypatch.undo()
    assert not set(parsed) & set(removable)  # judged from their lines
    assert not set(parsed) & set(live)  # what they cite, as verify read it
    assert not any(p.exists() for p in removable)
    # The same removals as a GC that proved nothing (another process, or one with no verify before it).
    assert _removed(rep) == _removed(MemoryPlane(unproved, clock=lambda: NOW).gc())


def test_a_memory_edited_after_verify_so_that_it_no_longer_expires_is_kept(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    plane = _proved(root)
    target = _removable(plane, root)[0]
    _edit(target, "active", _FAR_FUTURE)
    rep = plane.gc()
    assert target.exists()
    assert all(not r["path"].endswith(target.name) for r in rep.removed)


def test_a_memory_replaced_after_verify_under_its_old_mtime_is_read_again(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    plane = _proved(root)
    target = _removable(plane, root)[0]
    before = os.stat(target)
    _edit(target, "active", _FAR_FUTURE)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # the mtime as verify saw it; the ctime moves on
    plane.gc()
    assert target.exists()


def test_a_memory_edited_after_verify_so_that_it_expires_is_removed(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    plane = _proved(root)
    target = _live(plane)[0]
    _edit(target, "expired", _LONG_AGO)
    rep = plane.gc()
    assert not target.exists()
    assert any(r["path"].endswith(target.name) and r["reason"] == "expired_past_grace" for r in rep.removed)


def test_an_index_edited_by_hand_after_verify_removes_nothing_on_its_word(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    plane = _proved(root)
    target = _live(plane)[0]
    index = target.parent / "index.yaml"
    text = index.read_text("utf-8")
    lines = []
    for ln in text.split("\n"):
        if ln.startswith("- {"):
            entry = json.loads(ln[2:])
            if entry["id"] == target.stem:  # the line says what an expired memory's would
                ln = "- " + json.dumps({**entry, "status": "expired", "expires_at": _LONG_AGO})
        lines.append(ln)
    assert lines != text.split("\n")
    index.write_text("\n".join(lines), "utf-8")
    plane.gc()
    assert target.exists()


def test_a_fresh_process_proves_nothing_until_its_own_verify(tmp_path: Path, monkeypatch) -> None:
    root = _tree(tmp_path)
    _proved(root)
    _index_proof._proofs.clear()  # what a new process holds
    _index_proof._live.clear()
    parsed = _parsed(monkeypatch)
    MemoryPlane(root, clock=lambda: NOW).gc()
    assert len(set(parsed)) >= 40  # every memory file read (a few removed ones are young at NOW)


def test_a_live_memory_edited_after_verify_to_cite_another_episode_keeps_that_episode(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    plane = _proved(root)
    oldest = _oldest_episode(root)
    assert (root / "episodes" / oldest[3:7] / oldest).is_dir()
    target = _live(plane)[0]
    assert _cite(target, oldest)
    rep = plane.gc()
    assert (root / "episodes" / oldest[3:7] / oldest / "episode.yaml").exists()  # evidence now: kept as an excerpt
    assert not any(oldest in r["path"] and r["reason"] == "episode_summary_ttl" for r in rep.removed)


def _oldest_episode(root: Path) -> str:
    """The episode started first (past its summary TTL at NOW: GC drops it unless a live memory cites it)."""
    return min((d.name for d in (root / "episodes").glob("*/ep_*")), key=lambda n: n.split("_")[1])


def _cite(path: Path, episode_id: str) -> bool:
    """Make a memory cite another episode; whether that changed it."""
    text = path.read_text("utf-8")
    lines = [f"    id: {episode_id}" if ln.startswith("    id: ep_") else ln for ln in text.split("\n")]
    path.write_text("\n".join(lines), "utf-8")
    return lines != text.split("\n")


_EDITS = st.sampled_from(["none", "live", "expired", "live_old_mtime", "touch", "cite", "cite_old_mtime"])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(_EDITS, min_size=24, max_size=24), later=st.sampled_from([0, 3, 20, 60]))
def test_gc_removes_with_the_proof_exactly_what_it_removes_without(tmp_path_factory: Any, edits: list[str],
                                                                   later: int) -> None:
    from datetime import timedelta

    base = tmp_path_factory.mktemp("proof")
    root = _tree(base, 24)
    when = [NOW]
    plane = MemoryPlane(root, clock=lambda: when[0])
    plane.verify()
    time.sleep(0.05)
    plane.verify()  # proves the indexes and the live memories, at NOW
    copy = base / "copy"
    shutil.copytree(root, copy, symlinks=True)  # a tree no verify of this process proved
    oldest = _oldest_episode(root)
    for tree in (root, copy):
        for path, edit in zip(_memories(tree), edits):
            before = os.stat(path)
            if edit in ("live", "live_old_mtime"):
                _edit(path, "active", _FAR_FUTURE)
            elif edit == "expired":
                _edit(path, "expired", _LONG_AGO)
            elif edit == "touch":
                os.utime(path)
            elif edit.startswith("cite"):
                _cite(path, oldest)
            if edit.endswith("_old_mtime"):
                os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    when[0] = NOW + timedelta(days=later)  # GC some days after the verify: memories live then may have expired
    assert _removed(plane.gc()) == _removed(MemoryPlane(copy, clock=lambda: when[0]).gc())


def test_what_gc_takes_from_a_proof_is_bounded_per_store(tmp_path: Path, monkeypatch) -> None:
    from memory_plane.lifecycle import _collection

    monkeypatch.setattr(_collection, "KEPT_PER_STORE", 1)
    root = _tree(tmp_path)
    plane = _proved(root)
    removable, live = _removable(plane, root), _live(plane)
    unproved = tmp_path / "copy"
    shutil.copytree(root, unproved, symlinks=True)
    parsed = _parsed(monkeypatch)
    rep = plane.gc()
    stores = len(plane.device.collections)
    # At most one line and one live memory taken per store; the others read from their files, the same removals.
    assert len(set(parsed) & set(removable)) >= len(removable) - stores
    assert len(set(parsed) & set(live)) >= len(live) - stores
    assert _removed(rep) == _removed(MemoryPlane(unproved, clock=lambda: NOW).gc())
