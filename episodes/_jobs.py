"""The writer's own background jobs, by the names their marker files carry."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from memory_plane.device_memory import DeviceMemory

from ._store import TaskEpisodeStore
from ._writer import EpisodeJob

OUTCOMES_JOB = "update_outcomes"
"""Applies an episode's outcome to the memories it used (``.done-update_outcomes``)."""
LESSONS_JOB = "extract_lessons"
"""Turns an episode into device memories (``.done-extract_lessons``)."""


class _MadeOnFirstRun:
    """A job's worker, made the first time the job runs: a process that only retrieves never loads the code that
    learns from an episode (lesson extraction and outcome updates are most of this package)."""

    def __init__(self, make: Callable[[], Callable[..., Any]]) -> None:
        self._make = make
        self._worker: Callable[..., Any] | None = None
        self._lock = threading.Lock()  # the writer's thread and a caller's catch-up may run the first job at once

    def __call__(self, *args: Any) -> Any:
        """Run the worker (made now if it is not yet)."""
        if self._worker is None:
            with self._lock:
                if self._worker is None:
                    self._worker = self._make()
        return self._worker(*args)


def _outcome_updater(device: DeviceMemory, episodes: TaskEpisodeStore) -> Callable[..., Any]:
    from ._outcomes import OutcomeUpdater

    return OutcomeUpdater(device, episodes)


def _lesson_extractor(device: DeviceMemory, episodes: TaskEpisodeStore) -> Callable[..., Any]:
    from ._extract import LessonExtractor

    return LessonExtractor(device, episodes)


def episode_jobs(device: DeviceMemory, episodes: TaskEpisodeStore) -> list[EpisodeJob]:
    """The jobs every committed episode gets, in the order they run: its outcome first, then its lessons."""
    return [EpisodeJob(OUTCOMES_JOB, _MadeOnFirstRun(lambda: _outcome_updater(device, episodes)), takes_events=True),
            EpisodeJob(LESSONS_JOB, _MadeOnFirstRun(lambda: _lesson_extractor(device, episodes)), takes_events=True)]


__all__ = ["LESSONS_JOB", "OUTCOMES_JOB", "episode_jobs"]
