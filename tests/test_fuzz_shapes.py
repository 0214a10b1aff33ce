"""The tree's shape, not only its fields, may be wrong: a folder where a file was, a file where a folder was,
a dangling symlink, a named pipe or a socket. Every public path still answers, nothing else is lost, verify
names the odd path, and nothing hangs.

The property runs here bounded (fixed seed, a few dozen examples plus the faults that once broke the tree);
`memplane bench fuzz --shapes --examples N` runs every fault of every path of the fixture.

It reaches inside bench/ for the shape fuzzer's fixture and strategies, which the bench runs but does not export.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, seed, settings

from memory_plane import MemoryPlane
from memory_plane.bench._fuzz_shapes import ShapeFault, ShapeFixture, release_fifos, shape_strategy, watchdog
from memory_plane.lifecycle import NotAFileError, StorageError, append_lines, init_tree, locked, read_bytes_nofollow

from helpers import built_once

fixture, _cleanup = built_once(ShapeFixture)  # the template tree, built once for the module


def _property(f: ShapeFault) -> None:
    out = fixture().run_shape(f)
    assert out.ok, (f.describe(), out.brief())


@pytest.mark.slow
def test_any_one_shape_fault_costs_at_most_what_it_replaced() -> None:
    """Hypothesis draws a path of the realistic tree and a shape fault for it; every public path must hold."""
    fx = fixture()
    test = _property
    for f in (ShapeFault("device/apps/index.yaml", "fifo"), ShapeFault("device/navigation", "dir_to_empty_file"),
              ShapeFault("session", "dangling_symlink"), ShapeFault("device/profiles", "dangling_symlink"),
              ShapeFault("lifecycle/.lock", "file_to_full_dir")):
        test = example(f=f)(test)
    seed(31)(settings(max_examples=20, deadline=None, database=None, derandomize=True,
                      suppress_health_check=list(HealthCheck), print_blob=True)(
        given(f=shape_strategy(fx.shapes))(test)))()


# -- the faults that broke the tree, one by one ------------------------------------------------------------


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        plane.long_term.save_memory(type="fact", content="The door code is 4711", title="door code")
        coll = plane.device.collection("procedure")
        coll.save(plane.device.new_item(coll.model, "proc_send", title="Send a WeChat message", app_id="wechat",
                                        intent="send", steps=[{"tool": "tap", "target_label": "Send"}]))
    return root


def _removed(target: Path) -> Path:
    """A folder of the tree emptied and removed, for something else to stand in its place."""
    for p in sorted(target.rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()
    target.rmdir()
    return target


def _problems(plane: MemoryPlane) -> dict[str, str]:
    return {p.path: p.category for p in plane.verify().problems}


def test_reading_a_named_pipe_does_not_block(tmp_path: Path) -> None:
    pipe = tmp_path / "index.yaml"
    os.mkfifo(pipe)
    try:
        with watchdog(5), pytest.raises(NotAFileError) as got:
            read_bytes_nofollow(pipe)  # the old open() waited for a writer that never comes
    finally:
        release_fifos(tmp_path)
    assert isinstance(got.value, FileNotFoundError) and str(pipe) in str(got.value)
    os.mkdir(tmp_path / "folder")
    os.symlink("nowhere", tmp_path / "link")
    (tmp_path / "file").write_text("x")
    for odd in ("folder", "link", "file/below"):
        with pytest.raises(NotAFileError):
            read_bytes_nofollow(tmp_path / odd)


def test_a_named_pipe_where_an_index_or_item_was_is_named_and_nothing_hangs(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    index = root / "device" / "procedures" / "index.yaml"
    index.unlink()
    os.mkfifo(index)
    item = root / "long_term" / "memories"
    mem = next(item.glob("mem_*.md"))
    try:
        with watchdog(30), MemoryPlane.open(root) as plane:
            assert "proc_send" in plane.retrieve("send a wechat message").refs()
            assert index.is_file()  # derived: rebuilt in place of the pipe
            mem.unlink()
            os.mkfifo(mem)
            assert _problems(plane).get(str(mem.relative_to(root))) == "shape"
            plane.gc(dry_run=True)
            plane.gc()
    finally:
        release_fifos(root)


@pytest.mark.parametrize("folder", ["device/navigation", "device/profiles", "long_term/memories", "episodes"])
def test_a_file_where_a_store_folder_belongs_is_named_and_the_rest_is_served(tmp_path: Path, folder: str) -> None:
    root = _tree(tmp_path)
    target = _removed(root / folder)
    target.write_bytes(b"\x00junk")
    with MemoryPlane.open(root) as plane:  # the old scandir raised NotADirectoryError from here or in verify
        refs = plane.retrieve("send a wechat message").refs()
        assert "proc_send" in refs or folder == "device/procedures"
        assert _problems(plane).get(folder) == "shape"
        plane.verify(fix=True)
        plane.gc()
        assert plane.long_term.recall_memory("door code") or folder == "long_term/memories"
    assert target.read_bytes() == b"\x00junk"  # someone's file: named, never replaced


@pytest.mark.parametrize("folder", ["session", "lifecycle", "device/profiles"])
def test_a_dangling_symlink_where_a_folder_was_does_not_stop_the_plane(tmp_path: Path, folder: str) -> None:
    root = _tree(tmp_path)
    target = _removed(root / folder)
    target.symlink_to(tmp_path / "gone")
    with MemoryPlane.open(root) as plane:  # the old constructors raised UnsafePathError: no memory at all
        assert "proc_send" in plane.retrieve("send a wechat message").refs()
        assert _problems(plane).get(folder) == "symlink"
        plane.verify(fix=True)
        plane.gc(dry_run=True)
        mem = plane.long_term.recall_memory("door code")[0]
        if folder == "lifecycle":
            with pytest.raises(Exception, match=folder):
                plane.forget(mem.id, reason="test")  # refused, named: no tombstone written through the link
        else:
            assert plane.forget(mem.id, reason="test")
    assert not (tmp_path / "gone").exists()


def test_a_folder_where_an_item_file_was_is_named(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    item = root / "device" / "procedures" / "proc_send.yaml"
    item.unlink()
    item.mkdir()
    (item / "stray.yaml").write_text("id: stray\n")
    with MemoryPlane.open(root) as plane:
        assert _problems(plane).get("device/procedures/proc_send.yaml") == "shape"  # it was silently skipped
        assert plane.long_term.recall_memory("door code")


def test_a_lock_or_a_log_that_is_not_a_file_is_a_clear_error(tmp_path: Path) -> None:
    lock = tmp_path / "c" / ".lock"
    lock.mkdir(parents=True)
    with pytest.raises(StorageError, match=r"\.lock"), locked(lock, timeout=1):
        pass
    log = tmp_path / "tombstones.jsonl"
    os.mkfifo(log)
    with pytest.raises(StorageError, match="named pipe"):
        append_lines(log, ["{}"])  # the old append failed with a bare OSError (EINVAL) from pread
    short = Path(os.path.join("/tmp", f"mps-{os.getpid()}"))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(short))
        with pytest.raises(StorageError):
            append_lines(short, ["{}"])
        with pytest.raises(NotAFileError, match="socket"):
            read_bytes_nofollow(short)
    finally:
        s.close()
        short.unlink()


def test_a_symlink_on_the_way_to_an_item_reads_as_absent(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    with MemoryPlane.open(root) as plane:
        rec = plane.new_episode_recorder(__import__("memory_plane").MemoryRetrieveRequest(input="open wechat"))
        ep = rec.finish(success=True)
        assert plane.commit_episode(ep)
        plane.flush()
        year = plane.episodes.episode_dir(ep.id).parent
        os.rename(year, tmp_path / "moved")
        year.symlink_to(tmp_path / "moved")
        assert plane.episodes.get(ep.id) is None  # was UnsafePathError: the tool inspect_episode could not run
        assert "could not run" not in plane.tools.call("inspect_episode", {"episode_id": ep.id}).text


def test_mcp_resources_skip_a_profile_behind_a_symlink(tmp_path: Path) -> None:
    from memory_plane.cli import mcp_resources

    root = _tree(tmp_path)
    (root / "device" / "profile.yaml").unlink()
    (root / "device" / "profile.yaml").symlink_to(tmp_path / "gone.yaml")
    with MemoryPlane.open(root) as plane:
        assert "memory://device/profile" not in mcp_resources(plane)  # was UnsafePathError


def test_init_fills_in_the_tree_around_a_file_where_a_folder_belongs(tmp_path: Path) -> None:
    root = tmp_path / "m"
    root.mkdir()
    (root / "device").mkdir()
    (root / "device" / "apps").write_text("not a folder")
    init_tree(root)  # the old mkdir raised FileExistsError and left the rest of the tree unmade
    assert (root / "episodes").is_dir() and (root / "long_term" / "memories").is_dir()
    assert (root / "device" / "apps").read_text() == "not a folder"



def test_gc_keeps_an_episodes_screenshots_when_its_file_is_a_pipe(tmp_path: Path) -> None:
    # GC asks the episode file which screenshots it still refers to; a pipe there must not block it, and
    # what cannot be asked is kept.
    from memory_plane import MemoryRetrieveRequest

    with MemoryPlane.open(tmp_path / "m") as plane:
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="open the camera"))
        rec.tool_call("launch_app", {"app_name": "Camera"})
        rec.tool_result("launch_app", observed_state={"app": "Camera"})
        ep = rec.finish(success=True)
        assert plane.commit_episode(ep) and plane.flush(10)
        d = plane.episodes.episode_dir(ep.id)
        (d / "artifacts").mkdir(exist_ok=True)
        shot = d / "artifacts" / "step_001.jpg"
        shot.write_bytes(b"\xff\xd8 not referenced by any event")
        (d / "episode.yaml").unlink()
        os.mkfifo(d / "episode.yaml")
        try:
            with watchdog(20):
                plane.gc(dry_run=True)
                plane.gc()
        finally:
            release_fifos(tmp_path)
        assert shot.exists()
