"""The writer's own background jobs, by the names their marker files carry."""

from __future__ import annotations

from memory_plane.device_memory import DeviceMemory

from ._extract import LessonExtractor
from ._outcomes import OutcomeUpdater
from ._store import TaskEpisodeStore
from ._writer import EpisodeJob

OUTCOMES_JOB = "update_outcomes"
"""Applies an episode's outcome to the memories it used (``.done-update_outcomes``)."""
LESSONS_JOB = "extract_lessons"
"""Turns an episode into device memories (``.done-extract_lessons``)."""


def episode_jobs(device: DeviceMemory, episodes: TaskEpisodeStore) -> list[EpisodeJob]:
    """The jobs every committed episode gets, in the order they run: its outcome first, then its lessons."""
    return [EpisodeJob(OUTCOMES_JOB, OutcomeUpdater(device, episodes), takes_events=True),
            EpisodeJob(LESSONS_JOB, LessonExtractor(device, episodes), takes_events=True)]


__all__ = ["LESSONS_JOB", "OUTCOMES_JOB", "episode_jobs"]
