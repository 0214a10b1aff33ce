"""collector_paused: the cycle collector is held off inside, and found as it was once every block has ended."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle import IndexFile, collector_paused


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
    with collector(enabled), ExitStack() as stack:
        depth = 0
        inner: list[ExitStack] = []
        for opening in steps:
            if opening:
                s = ExitStack()
                s.enter_context(collector_paused())
                inner.append(s)
                depth += 1
            elif inner:
                inner.pop().close()
                depth -= 1
            assert gc.isenabled() is (enabled and depth == 0)
        while inner:
            inner.pop().close()
        stack.close()
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


def test_an_index_read_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    path = tmp_path / "index.yaml"
    path.write_text("- {\"id\": \"a\"}\n- not json: [\n", "utf-8")  # the slow path too
    for enabled in (True, False):
        with collector(enabled):
            IndexFile(path).read()
            assert gc.isenabled() is enabled
