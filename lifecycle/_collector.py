"""Pausing Python's cycle collector while a large acyclic structure is built."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # regions open in any thread
_paused_by_us = False  # whether the outermost region found the collector running (and so restarts it)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold off the cycle collector for the block; it runs again as before once every such block has ended."""
    # Why: reading ten thousand index lines or a postings file makes a few hundred thousand dicts, lists and
    # strings, none in a cycle, yet every 700 of them start a collection that walks the young ones, and the
    # older generations are walked again as they fill. Held off there, a fresh process's first retrieve took
    # 8-15% less time (BENCHMARKS.md, session 10). Anything cyclic made meanwhile is collected only after the
    # block, so a block holds no work that makes cycles as it goes: no YAML parsing (ruamel's loader is
    # one), no rebuild from every item file.
    global _depth, _paused_by_us
    with _lock:
        if _depth == 0:
            _paused_by_us = gc.isenabled()
            if _paused_by_us:
                gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _paused_by_us:
                _paused_by_us = False
                gc.enable()
