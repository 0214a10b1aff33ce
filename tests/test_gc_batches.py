"""GC changes the tree in batches: the removals of a plan share their folders' descriptors, the files GC rewrites
are flushed together, the histories of removed items go through one descriptor of their folder. A batch is never
a way out of the tree: a link planted anywhere on the way is met, named and never followed.

It reaches inside `lifecycle._guarded` (the descriptor chain) and counts calls of ``os.open``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from memory_plane import MemoryPlane
from memory_plane.lifecycle import (
    FolderChain,
    GcReport,
    UnsafePathError,
    apply_plan,
    atomic_write_many,
)

from helpers import tree_state

_DIR_FLAG = getattr(os, "O_DIRECTORY", 0)


def _outside(base: Path) -> Path:
    out = base / "outside"
    (out / "sub").mkdir(parents=True)
    for name in ("a.jsonl", "b.jsonl", "events.jsonl", "episode.yaml", "sub/c.jsonl"):
        (out / name).write_text(f"sentinel {name}\n")
    return out


def _folder_opens(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The folders ``os.open`` is asked to open from now on (by name, as given)."""
    seen: list[Any] = []
    real = os.open

    def counting(path: Any, flags: int, *a: Any, **k: Any) -> int:
        if flags & _DIR_FLAG:
            seen.append(path)
        return real(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", counting)
    return seen


def test_the_removals_of_a_plan_open_each_folder_on_their_way_once(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "M"
    folder = root / "episodes" / "2026" / "ep_a"
    (folder / "artifacts").mkdir(parents=True)
    files = [folder / f"f{i}.jsonl" for i in range(20)] + [folder / "artifacts" / f"s{i}.jpg" for i in range(20)]
    for f in files:
        f.write_text("x\n")
    rep = GcReport()
    for f in files:
        rep.discard(root, f, "episode_trace_ttl")
    opened = _folder_opens(monkeypatch)
    apply_plan(root, rep)
    monkeypatch.undo()
    assert not any(f.exists() for f in files) and folder.is_dir()
    # The root, episodes, 2026, ep_a, artifacts: once each for all 40 removals (one walk per removal opened 4-5).
    assert len(opened) == 5, opened


def test_a_link_planted_partway_stops_the_removals_below_it_only_and_is_named(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "M"
    outside = _outside(tmp_path)
    before = tree_state(outside)
    year = root / "episodes" / "2026"
    for ep in ("ep_a", "ep_b", "ep_c"):
        (year / ep).mkdir(parents=True)
        for name in ("events.jsonl", "a.jsonl"):
            (year / ep / name).write_text("x\n")
    rep = GcReport()
    for ep in ("ep_a", "ep_b", "ep_c"):
        for name in ("events.jsonl", "a.jsonl"):
            rep.discard(root, year / ep / name, "episode_trace_ttl")
    assert len(rep.plan) == 6
    real_unlink = os.unlink

    def unlink_then_swap(name: Any, *a: Any, **k: Any) -> None:
        real_unlink(name, *a, **k)
        b = year / "ep_b"
        if b.is_dir() and not b.is_symlink():
            # Once the batch has begun (a folder of it opened and kept): ep_b becomes a link to the outside.
            for child in b.iterdir():
                real_unlink(child)
            b.rmdir()
            b.symlink_to(outside, target_is_directory=True)

    monkeypatch.setattr(os, "unlink", unlink_then_swap)
    apply_plan(root, rep)
    monkeypatch.undo()
    assert tree_state(outside) == before  # nothing through the link: outside's events.jsonl and a.jsonl are there
    assert (year / "ep_b").is_symlink()
    assert not list((year / "ep_a").iterdir()) and not list((year / "ep_c").iterdir())  # before it and after it
    assert rep.skipped_symlinks == ["episodes/2026/ep_b"]


def test_a_link_in_place_of_a_folder_the_chain_holds_is_refused_when_asked_again(tmp_path: Path) -> None:
    root = tmp_path / "M"
    outside = _outside(tmp_path)
    (root / "a" / "b").mkdir(parents=True)
    (root / "c").mkdir()
    with FolderChain(root) as chain:
        chain.fd_of(root / "a" / "b")
        chain.fd_of(root / "c")  # a and b let go
        (root / "a" / "b").rmdir()
        (root / "a" / "b").symlink_to(outside, target_is_directory=True)
        with pytest.raises(UnsafePathError) as err:
            chain.fd_of(root / "a" / "b")
        assert err.value.name == "a/b"
        assert os.path.samestat(os.fstat(chain.fd_of(root / "a")), os.stat(root / "a"))  # above the link: usable
    with pytest.raises(UnsafePathError):
        FolderChain(root).fd_of(tmp_path)  # outside the root


def test_files_written_together_are_all_replaced_and_each_folder_flushed_once(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "M"
    folders = [root / "episodes" / "2026" / f"ep_{i}" for i in range(5)]
    for d in folders:
        d.mkdir(parents=True)
        (d / "episode.yaml").write_text("old\n")
    writes = [(d / name, f"new {d.name} {name}\n".encode()) for d in folders for name in ("excerpt.jsonl",
                                                                                          "episode.yaml")]
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    atomic_write_many(root, writes)
    monkeypatch.undo()
    for target, payload in writes:
        assert target.read_bytes() == payload
    assert sorted(p.name for p in folders[0].iterdir()) == ["episode.yaml", "excerpt.jsonl"]  # no temp left
    assert len(synced) == len(writes) + len(folders)  # each file, and each folder once (not once per file)


def test_files_written_together_never_go_through_a_link_on_the_way(tmp_path: Path) -> None:
    root = tmp_path / "M"
    outside = _outside(tmp_path)
    before = tree_state(outside)
    (root / "episodes" / "2026" / "ep_a").mkdir(parents=True)
    (root / "episodes" / "2026" / "ep_b").symlink_to(outside, target_is_directory=True)
    writes = [(root / "episodes" / "2026" / "ep_a" / "episode.yaml", b"a\n"),
              (root / "episodes" / "2026" / "ep_b" / "episode.yaml", b"b\n")]
    with pytest.raises(UnsafePathError) as err:
        atomic_write_many(root, writes)
    assert err.value.name == "episodes/2026/ep_b"
    assert tree_state(outside) == before
    # The file before the link is written, as a loop of atomic_write would leave it, and no temp file is left.
    assert [p.name for p in (root / "episodes" / "2026" / "ep_a").iterdir()] == ["episode.yaml"]


def test_gc_removes_the_histories_of_what_it_removes_through_one_descriptor(tmp_path: Path, monkeypatch) -> None:
    from datetime import timedelta

    from memory_plane.bench._lifecycle import NOW, build
    from memory_plane.lifecycle import init_tree

    root = tmp_path / "M"
    init_tree(root)
    build(root, 60, 30)
    with MemoryPlane.open(root, clock=lambda: NOW) as plane:
        plane.verify()  # marks the expired: a revision, so a history, for each
    hists = [d for d in (root / "device").glob("*/.history") if any(d.iterdir())]
    before = {p.stem for d in hists for p in d.iterdir()}
    assert len(hists) >= 3 and len(before) >= 10
    later = NOW + timedelta(days=200)
    with MemoryPlane.open(root, clock=lambda: later) as plane:
        opened = _folder_opens(monkeypatch)
        report = plane.gc()
        monkeypatch.undo()
    gone = {Path(r["path"]).stem for r in report.removed if r["path"].startswith("device/")}
    assert before <= gone  # every item with a history was removed here
    assert not any(p for d in hists for p in d.iterdir())
    # Each history folder opened once for all its histories, not once per history.
    assert sum(1 for p in opened if os.fspath(p) == ".history") == len(hists), opened


def test_a_link_in_place_of_a_history_is_removed_as_a_link_and_its_target_kept(tmp_path: Path) -> None:
    from memory_plane.device_memory._history import ItemHistory

    root = tmp_path / "M"
    outside = _outside(tmp_path)
    before = tree_state(outside)
    items = root / "device" / "procedures"
    (items / ".history").mkdir(parents=True)
    (items / ".history" / "proc_a.jsonl").write_text("{}\n")
    (items / ".history" / "proc_b.jsonl").symlink_to(outside / "a.jsonl")
    history = ItemHistory(root, items, clock=None)
    assert history.remove_many(["proc_a", "proc_b", "proc_gone", "../../outside/b"]) == 2
    assert list((items / ".history").iterdir()) == []
    assert tree_state(outside) == before  # the link went, what it pointed at stayed; an unsafe id named nothing
    (items / ".history").rmdir()
    (items / ".history").symlink_to(outside, target_is_directory=True)
    assert history.remove_many(["a", "b"]) == 0  # a linked history folder: nothing removed through it
    assert tree_state(outside) == before


def test_a_gc_killed_while_it_writes_trimmed_episodes_leaves_at_most_one_temp_file_and_resumes(
        tmp_path: Path, monkeypatch) -> None:
    import shutil
    from datetime import timedelta

    from memory_plane.bench._lifecycle import NOW, build
    from memory_plane.lifecycle import init_tree, is_temp_name
    from memory_plane.upkeep import gc_tree

    class Killed(BaseException):
        pass

    base = tmp_path / "base"
    init_tree(base)
    build(base, 60, 40, seed=3)
    now = NOW + timedelta(days=20)  # episodes 20-260 days old: many trimmed to a summary or an excerpt

    def gc(root: Path) -> Any:
        with MemoryPlane.open(root, clock=lambda: now) as plane:
            return gc_tree(root, plane.device, plane.episodes, plane.long_term, plane.session, now=now)

    def state(root: Path) -> tuple[list[str], list[str]]:
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".cache" not in p.parts
                       and p.name not in ("tombstones.jsonl", ".lock"))
        return [f for f in files if not is_temp_name(Path(f).name)], [f for f in files if is_temp_name(Path(f).name)]

    ref = tmp_path / "ref"
    shutil.copytree(base, ref)
    assert any(r["reason"] == "episode_trace_ttl" for r in gc(ref).removed)
    want, _ = state(ref)
    real = os.replace
    for kill_at in (1, 4, 9):
        root = tmp_path / f"k{kill_at}"
        shutil.copytree(base, root)
        calls = [0]

        def dying(*a: Any, _at: int = kill_at, _calls: list[int] = calls, **k: Any) -> None:
            _calls[0] += 1
            if _calls[0] == _at:
                raise Killed  # stands in for a kill between a temp file's fsync and its rename
            real(*a, **k)

        monkeypatch.setattr(os, "replace", dying)
        with pytest.raises(Killed):
            gc(root)
        monkeypatch.setattr(os, "replace", real)
        assert len(state(root)[1]) <= 1  # the one file being written, never a whole batch
        gc(root)
        assert state(root)[0] == want, kill_at
