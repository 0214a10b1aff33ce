"""Nothing outside the root: no removal, move or write follows a link planted below the memory root, and no
journal is appended to through a hard link (GC, verify --fix, quarantine, the recorder, forget, commit).

It reaches inside the lifecycle bench for its aged tree and `lifecycle._gc` to swap a folder while GC runs.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.cli import main as cli
from memory_plane.lifecycle import MemoryPlaneError, StorageError, TombstoneLog, append_lines, remove_path

from helpers import screenshot, tree_state

OLD = datetime(2020, 1, 1, tzinfo=timezone.utc).timestamp()
LATE = datetime.now(timezone.utc) + timedelta(days=3 * 365)


def _outside(base: Path) -> Path:
    """An outside folder holding sentinel files and an old subfolder (what GC would take for debris)."""
    out = base / "outside"
    for rel in ("p/f", "2026/ep_x/episode.yaml", "sentinel.txt", "a/b/c.jsonl"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(f"sentinel {rel}\n")
    for dirpath, dirnames, files in os.walk(out):
        for name in dirnames + files:
            os.utime(Path(dirpath) / name, (OLD, OLD))
    return out


def _run(*args: str) -> tuple[int, str]:
    """The CLI in-process: its exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(list(args))
    return code, out.getvalue() + err.getvalue()


# -- the findings, one by one -------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", ["session_archive", "lifecycle/quarantine"])
def test_gc_never_deletes_through_a_symlinked_folder_of_the_tree(tmp_path: Path, folder: str) -> None:
    root = tmp_path / "M"
    outside = _outside(tmp_path)
    assert _run("--root", str(root), "init")[0] == 0
    shutil.rmtree(root / folder)
    (root / folder).symlink_to(outside, target_is_directory=True)
    before = tree_state(outside)
    code, text = _run("--root", str(root), "lifecycle", "gc", "--json")
    assert code == 0, text
    assert tree_state(outside) == before  # /tmp/out/p/f is still there
    report = json.loads(text)
    assert report["removed"] == [] and folder in report["skipped_symlinks"]


def _aged_tree(root: Path) -> None:
    from memory_plane.bench._lifecycle import build
    from memory_plane.lifecycle import init_tree

    init_tree(root)
    build(root, n_items=12, n_episodes=12, seed=3)


def test_a_year_folder_swapped_for_a_link_while_gc_runs_is_never_followed(tmp_path: Path, monkeypatch) -> None:
    import memory_plane.lifecycle._gc as gc_mod
    from memory_plane.bench._lifecycle import NOW

    root = tmp_path / "M"
    _aged_tree(root)
    away = tmp_path / "outside"
    away.mkdir()
    real_size = gc_mod.tree_size
    swapped: list[str] = []
    snapshot: dict[str, str] = {}

    def swap_then_size(path: Path) -> int:
        # Between GC's check of the folder and its removal, the year folder becomes a link to a copy outside.
        rel = path.relative_to(root).parts
        if rel[0] == "episodes" and len(rel) >= 3 and rel[1].isdigit() and rel[1] not in swapped:
            year = root / "episodes" / rel[1]
            shutil.copytree(year, away / rel[1], symlinks=True)
            shutil.rmtree(year)
            year.symlink_to(away / rel[1], target_is_directory=True)
            swapped.append(rel[1])
            snapshot.update(tree_state(away))  # what the outside holds once the swap is made
        return real_size(path)

    monkeypatch.setattr(gc_mod, "tree_size", swap_then_size)
    with MemoryPlane.open(root, clock=lambda: NOW + timedelta(days=400)) as plane:
        report = plane.gc()
        assert swapped, "no episode folder was collected: the race never ran"
        assert tree_state(away) == snapshot  # the copy outside lost nothing
        assert any(s.startswith("episodes/") for s in report.skipped_symlinks)


def test_remove_path_walks_by_folder_descriptors_even_when_a_folder_is_swapped_mid_walk(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    root = tmp_path / "M"
    victim = root / "episodes" / "2026" / "ep_a"
    (victim / "artifacts").mkdir(parents=True)
    (victim / "artifacts" / "s.jpg").write_bytes(b"x")
    (victim / "episode.yaml").write_text("id: ep_a\n")
    outside = _outside(tmp_path)
    before = tree_state(outside)
    real_listdir = os.listdir

    def listdir_then_swap(fd):  # type: ignore[no-untyped-def]
        names = real_listdir(fd)
        art = victim / "artifacts"
        if art.exists() and not art.is_symlink():
            # After the walk has listed ep_a and opened it: artifacts/ becomes a link to the outside folder.
            shutil.rmtree(art)
            art.symlink_to(outside, target_is_directory=True)
        return names

    monkeypatch.setattr(os, "listdir", listdir_then_swap)
    kept = remove_path(root, victim)
    monkeypatch.undo()
    assert tree_state(outside) == before
    assert kept == [victim / "artifacts"]


def _broken_item(root: Path) -> Path:
    bad = root / "device" / "apps" / "app_broken.yaml"
    bad.write_text("id: [unclosed\n")
    return bad


def test_verify_fix_never_moves_a_file_out_of_the_tree_through_a_symlinked_quarantine(tmp_path: Path) -> None:
    root = tmp_path / "M"
    outside = tmp_path / "outside"
    outside.mkdir()
    assert _run("--root", str(root), "init")[0] == 0
    bad = _broken_item(root)
    shutil.rmtree(root / "lifecycle" / "quarantine", ignore_errors=True)
    (root / "lifecycle" / "quarantine").symlink_to(outside, target_is_directory=True)
    code, text = _run("--root", str(root), "lifecycle", "verify", "--fix", "--json")
    assert list(outside.iterdir()) == []  # nothing moved out
    assert bad.read_text() == "id: [unclosed\n"  # the broken file stays where it was, reported
    assert code == 1 and "not quarantined" in text


def test_gc_writes_no_tombstone_into_a_symlinked_lifecycle_folder(tmp_path: Path) -> None:
    from memory_plane.bench._lifecycle import NOW

    root = tmp_path / "M"
    _aged_tree(root)
    away = tmp_path / "lifecycle_elsewhere"
    shutil.move(str(root / "lifecycle"), away)
    (root / "lifecycle").symlink_to(away, target_is_directory=True)
    before = tree_state(away)
    with MemoryPlane.open(root, clock=lambda: NOW + timedelta(days=400)) as plane:
        report = plane.gc()
    assert tree_state(away) == before
    assert report.tombstones_written == 0 and report.errors  # said, and nothing removed without its tombstone
    assert not any(r["reason"] == "episode_summary_ttl" for r in report.removed)


def test_the_recorder_never_writes_through_a_year_folder_swapped_for_a_link(tmp_path: Path) -> None:
    root = tmp_path / "M"
    away = tmp_path / "outside"
    with MemoryPlane.open(root) as plane:
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="open settings"))
        rec.tool_call("launch_app", {"app": "Settings"})
        year = rec.dir.parent
        shutil.copytree(year, away)
        shutil.rmtree(year)
        year.symlink_to(away, target_is_directory=True)
        before = tree_state(away)
        errors = rec.errors
        # Screenshots and events after the swap: refused and counted, never raised to the agent.
        rec.tool_result("launch_app", screenshot=screenshot(), observed_state={"app": "Settings", "page": "Home"})
        rec.tool_call("tap", {"x": 1, "y": 2})
        ep = rec.finish(success=True)
        plane.commit_episode(ep)
        plane.flush(10)
        assert tree_state(away) == before
        assert rec.errors > errors


def test_a_long_task_transcript_is_never_written_through_a_year_folder_swapped_for_a_link(tmp_path: Path) -> None:
    from memory_plane.lifecycle import UnsafePathError

    root = tmp_path / "M"
    away = tmp_path / "outside"
    with MemoryPlane.open(root) as plane:
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="write a long note"))
        ledger = rec.open_transcript(system_prompt="you are a phone agent")
        year = rec.dir.parent
        shutil.copytree(year, away)
        shutil.rmtree(year)
        year.symlink_to(away, target_is_directory=True)
        before = tree_state(away)
        with pytest.raises(UnsafePathError):
            ledger.append_record({"kind": "note", "text": "after the swap"})
        assert tree_state(away) == before
        plane.commit_episode(rec.finish(success=True))
        plane.flush(10)
        assert tree_state(away) == before


def test_forget_never_appends_its_tombstone_to_a_hard_linked_journal(tmp_path: Path) -> None:
    root = tmp_path / "M"
    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    with MemoryPlane.open(root) as plane:
        mem = plane.long_term.save_memory(type="fact", content="The garage code is 4711")
        tombs = root / "lifecycle" / "tombstones.jsonl"
        tombs.unlink(missing_ok=True)
        os.link(outside, tombs)
        with pytest.raises(StorageError, match="hard link"):
            plane.forget(mem.id)
    assert outside.read_text() == ""


@pytest.mark.parametrize("journal", ["lifecycle/tombstones.jsonl", "lifecycle/conflicts.jsonl",
                                     "lifecycle/quarantine.jsonl", "session/events.jsonl"])
def test_no_journal_is_appended_to_through_a_hard_link(tmp_path: Path, journal: str) -> None:
    root = tmp_path / "M"
    MemoryPlane.open(root).close()
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"mine": 1}\n')
    target = root / journal
    target.unlink(missing_ok=True)
    os.link(outside, target)
    with pytest.raises(StorageError, match="hard link") as exc:
        append_lines(target, ['{"a": 1}'])
    assert str(target) in str(exc.value)  # the error names the file
    with pytest.raises(StorageError, match="hard link"):
        append_lines(target, ['{"a": 1}'], root=root)  # the guarded form refuses it too
    if journal == "lifecycle/tombstones.jsonl":
        with pytest.raises(StorageError, match="hard link"):
            TombstoneLog(root).add_many("episode", ["ep_1"], reason="gc")
    assert outside.read_text() == '{"mine": 1}\n'


def test_tombstones_add_many_refuses_a_symlinked_lifecycle_folder(tmp_path: Path) -> None:
    from memory_plane.lifecycle import UnsafePathError

    root = tmp_path / "M"
    MemoryPlane.open(root).close()
    away = tmp_path / "away"
    shutil.move(str(root / "lifecycle"), away)
    (root / "lifecycle").symlink_to(away, target_is_directory=True)
    before = tree_state(away)
    with pytest.raises(UnsafePathError):
        TombstoneLog(root).add_many("episode", ["ep_1"], reason="gc")
    assert tree_state(away) == before


# -- the property: a link at any level, every destructive command ------------------------------------------


@functools.lru_cache(maxsize=1)
def _template() -> Path:
    """A populated tree, built once: aged episodes and items, memories, a recorded episode with a screenshot,
    a closed session, a quarantined file, a broken file for verify, and a folder of the tree's own to link to."""
    base = Path(tempfile.mkdtemp(prefix="guarded-template-"))
    root = base / "M"
    _aged_tree(root)
    with MemoryPlane.open(root) as plane:
        plane.long_term.save_memory(type="rule", content="Never share the OTP code")
        plane.long_term.save_memory(type="fact", content="The garage code is 4711")
        req = MemoryRetrieveRequest(input="open settings and turn on wifi")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_call("launch_app", {"app": "Settings"})
        rec.tool_result("launch_app", screenshot=screenshot(), observed_state={"app": "Settings", "page": "Home"})
        plane.commit_episode(rec.finish(success=True))
        plane.flush(10)
        plane.session.append("user_input", "remember the garage code", role="user")
        plane.session.close()
        _broken_item(root)
        plane.verify(fix=True)  # one file in quarantine
        _broken_item(root)  # and one more for the next verify --fix
    for p in (root / "session_archive").iterdir():
        os.utime(p, (OLD, OLD))
    keep = root / "keep"
    (keep / "inner").mkdir(parents=True)
    (keep / "inner" / "k.txt").write_text("inside sentinel\n")
    return root


def _candidates() -> list[str]:
    root = _template()
    out = []
    for dirpath, dirnames, files in os.walk(root):
        for name in sorted(dirnames) + sorted(files):
            rel = str((Path(dirpath) / name).relative_to(root))
            if not rel.startswith("keep"):
                out.append(rel)
    return sorted(out)


def _no_internal_error(*args: str) -> None:
    """Run the CLI; whatever it refused, it said so as a documented error, never as an internal one."""
    code, text = _run(*args)
    assert code in (0, 1, 2, 3) and "internal error" not in text, (args, text)


def _commands(root: Path) -> None:
    """Every destructive command against the tree: gc, verify --fix, quarantine restore, forget, commit of a new
    episode, retrieve, and gc under a clock years ahead."""
    r = ["--root", str(root)]
    _no_internal_error(*r, "lifecycle", "gc", "--json")
    _no_internal_error(*r, "lifecycle", "verify", "--fix", "--json")
    _no_internal_error(*r, "lifecycle", "quarantine", "restore", "device/apps/app_broken.yaml", "--force")
    _no_internal_error(*r, "memory", "save", "The garage code is 4711", "--json")
    with MemoryPlane.open(root) as plane:
        for mem in [i.record for i in plane.long_term.iter_items() if i.record is not None]:
            _no_internal_error(*r, "memory", "forget", mem.id)
        req = MemoryRetrieveRequest(input="open settings and turn on wifi")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))  # the recorder never raises
        rec.tool_call("launch_app", {"app": "Settings"})
        rec.tool_result("launch_app", screenshot=screenshot(), observed_state={"app": "Settings", "page": "Wi-Fi"})
        with contextlib.suppress(MemoryPlaneError):
            plane.commit_episode(rec.finish(success=True))
        plane.flush(10)
    with MemoryPlane.open(root, clock=lambda: LATE) as late, contextlib.suppress(MemoryPlaneError):
        late.gc()  # an old tree: everything past its TTL goes (or is skipped)
    _no_internal_error(*r, "retrieve", "open settings")


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kind=st.sampled_from(["outside_folder", "outside_file", "inside_folder"]))
def test_a_link_planted_at_any_level_never_lets_a_command_change_anything_outside(data: st.DataObject,
                                                                                 kind: str) -> None:
    rel = data.draw(st.sampled_from(_candidates()), label="path replaced by a link")
    with tempfile.TemporaryDirectory(prefix="guarded-") as tmp:
        base = Path(tmp)
        root = base / "M"
        shutil.copytree(_template(), root, symlinks=True)
        outside = _outside(base)
        (base / "lone.txt").write_text("outside file\n")
        target = {"outside_folder": outside, "outside_file": base / "lone.txt", "inside_folder": root / "keep"}[kind]
        planted = root / rel
        if planted.is_dir() and not planted.is_symlink():
            shutil.rmtree(planted)
        else:
            planted.unlink()
        planted.symlink_to(target)
        before, inside_before = tree_state(base / "outside"), tree_state(root / "keep")
        lone = (base / "lone.txt").read_text()
        _commands(root)
        assert tree_state(base / "outside") == before, rel
        assert (base / "lone.txt").read_text() == lone, rel
        assert tree_state(root / "keep") == inside_before, rel
