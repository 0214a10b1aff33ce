"""Recordings made twice alike: the episode ids and durations a recorder takes, given by its caller (builders of
benchmark trees, which check their fast build against the recorder's own, byte for byte)."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from . import _recorder


@contextmanager
def reproducible_recordings(new_id: Callable[[datetime], str], monotonic: Callable[[], float]) -> Iterator[None]:
    """Within it, every recorder takes its episode id from ``new_id`` (given the start time) and measures its
    duration with ``monotonic``. It changes what the recorder module reads for the whole process: for a builder
    that records one episode at a time, never beside a running agent."""
    saved = (_recorder.new_episode_id, _recorder.time)
    _recorder.new_episode_id = new_id  # type: ignore[assignment]
    _recorder.time = types.SimpleNamespace(monotonic=monotonic)  # type: ignore[assignment]
    try:
        yield
    finally:
        _recorder.new_episode_id, _recorder.time = saved
