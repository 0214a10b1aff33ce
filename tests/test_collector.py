"""collector_paused: the cycle collector is held off inside, and found as it was once every block has ended.

It reaches inside `lifecycle._index` to watch the YAML fallback its index reader calls.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_plane.lifecycle import IndexFile, collector_paused


@contextmanager
def collector(enabled: bool) -> Iterator[None]:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("enabled", [True, False])
def test_paused_inside_and_as_before_after(enabled: bool) -> None:
    with collector(enabled):
        with collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled


def test_an_exception_inside_restarts_it() -> None:
    with collector(True):
        with pytest.raises(RuntimeError), collector_paused():
            raise RuntimeError("boom")
        assert gc.isenabled()


@given(st.booleans(), st.lists(st.booleans(), max_size=12))
def test_nested_blocks_restore_it_only_at_the_outermost_end(enabled: bool, steps: list[bool]) -> None:
    # steps: True opens a block, False closes the innermost open one (when there is one).
    with collector(enabled):
        open_blocks: list[ExitStack] = []
        for opening in steps:
            if opening:
                block = ExitStack()
                block.enter_context(collector_paused())
                open_blocks.append(block)
            elif open_blocks:
                open_blocks.pop().close()
            assert gc.isenabled() is (enabled and not open_blocks)
        while open_blocks:
            open_blocks.pop().close()
        assert gc.isenabled() is enabled


def test_overlapping_blocks_in_two_threads_leave_it_running() -> None:
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            entered.set()
            release.wait(5)

    with collector(True):
        t = threading.Thread(target=other)
        with collector_paused():
            t.start()
            assert entered.wait(5)
        assert not gc.isenabled()  # the other thread's block is still open
        release.set()
        t.join(5)
        assert gc.isenabled()


def watch_collector(monkeypatch, owner: object, name: str) -> list[bool]:  # type: ignore[no-untyped-def]
    """Whether the collector was running at each call of ``owner.name`` from now on."""
    seen: list[bool] = []
    original = getattr(owner, name)

    def watched(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, watched)
    return seen


def test_a_hand_edited_index_line_is_parsed_with_the_collector_running(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # ruamel's loader leaves a cycle per parse: the YAML fallback for a hand-edited line is never held off.
    import memory_plane.lifecycle._index as index_module

    seen = watch_collector(monkeypatch, index_module, "load_yaml")
    path = tmp_path / "index.yaml"
    path.write_text('- {"id": "a"}\n- {id: b, title: edited by hand}\n', "utf-8")
    with collector(True):
        read = IndexFile(path).read()
    assert [e["id"] for e in read.entries] == ["a", "b"]
    assert seen and all(seen)


def test_an_index_read_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    path = tmp_path / "index.yaml"
    path.write_text("- {\"id\": \"a\"}\n- not json: [\n", "utf-8")  # the slow path too
    for enabled in (True, False):
        with collector(enabled):
            IndexFile(path).read()
            assert gc.isenabled() is enabled


def test_a_retrieve_rebuilds_a_damaged_index_with_the_collector_running(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A rebuild reads every item file (and may leave cyclic garbage per file): never inside a pause.
    from memory_plane import MemoryPlane, MemoryRetrieveRequest

    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        for i in range(3):
            req = MemoryRetrieveRequest(input=f"open app number {i}")
            rec = plane.new_episode_recorder(req, plane.retrieve(req))
            rec.tool_call("launch_app", {"app": "x"})
            rec.tool_result("launch_app", output="ok", observed_state={"app": "WeChat"})
            assert plane.commit_episode(rec.finish(success=True))
        plane.flush()
        store = type(plane.episodes)
    (root / "episodes" / "index.yaml").write_bytes(b"\x00 not an index \xff\n")
    seen = watch_collector(monkeypatch, store, "rebuild_index")
    with collector(True), MemoryPlane.open(root) as plane:
        memory = plane.retrieve(MemoryRetrieveRequest(input="open app number 1"))
        assert gc.isenabled()
    assert seen and all(seen)
    assert memory.common.similar_episodes  # the episodes are found through the rebuilt index
