"""Task episodes: the recorder used during a task, the store and the writer used after it."""

from __future__ import annotations

import importlib
import typing

from ._causes import UNFINISHED_PHASES, CauseKey
from ._config_file import read_config
from ._jobs import LESSONS_JOB, OUTCOMES_JOB, episode_jobs
from ._model import (
    FAILURE_PHASES,
    DeviceScope,
    InitialState,
    Metrics,
    NormalizedGoal,
    Outcome,
    TaskEpisode,
    episode_year,
    new_episode_id,
)
from ._sanitize import REDACTED, excerpt, sanitize, scrub_base64
from ._steps import MEMORY_TOOLS, Step, coords_close, effective_path, is_system_screen, pair_steps, step_action
from ._store import EPISODE_FILE, EVENTS_FILE, OnClosed, TaskEpisodeStore, recording_is_live
from ._summary import episode_summary, tool_path
from ._tool_inputs import parse_tool_input, shown_tool_input, step_label, tool_coords, tool_text
from ._writer import FAILED_PREFIX, EpisodeJob, TaskEpisodeWriter, WriterStats

if typing.TYPE_CHECKING:
    from ._artifacts import ImageInfo, dhash, hamming
    from ._blame import RESTORE_AFTER, RETIRE_AFTER
    from ._extract import EXTRACTOR_VERSION, ExtractionResult, LessonExtractor, goal_pattern
    from ._outcomes import DEMOTE_AFTER, OutcomeResult, OutcomeUpdater, trigger_passed
    from ._recorder import EpisodeRecorder
    from ._reproducible import reproducible_recordings
    from ._transcript_config import TranscriptConfig

# What is loaded on first use, by the module that holds it: the recorder and what learns from an episode
# (lessons, outcomes, blame) are most of this package, and a process that only retrieves needs none of them.
_ON_FIRST_USE = {
    "ImageInfo": "_artifacts", "dhash": "_artifacts", "hamming": "_artifacts",
    "RESTORE_AFTER": "_blame", "RETIRE_AFTER": "_blame",
    "EXTRACTOR_VERSION": "_extract", "ExtractionResult": "_extract", "LessonExtractor": "_extract",
    "goal_pattern": "_extract",
    "DEMOTE_AFTER": "_outcomes", "OutcomeResult": "_outcomes", "OutcomeUpdater": "_outcomes",
    "trigger_passed": "_outcomes",
    "EpisodeRecorder": "_recorder",
    "reproducible_recordings": "_reproducible",
    "TranscriptConfig": "_transcript_config",
}

__all__ = [
    "DEMOTE_AFTER",
    "EPISODE_FILE",
    "EVENTS_FILE",
    "EXTRACTOR_VERSION",
    "FAILED_PREFIX",
    "FAILURE_PHASES",
    "LESSONS_JOB",
    "MEMORY_TOOLS",
    "OUTCOMES_JOB",
    "REDACTED",
    "RESTORE_AFTER",
    "RETIRE_AFTER",
    "UNFINISHED_PHASES",
    "CauseKey",
    "DeviceScope",
    "EpisodeJob",
    "EpisodeRecorder",
    "ExtractionResult",
    "ImageInfo",
    "InitialState",
    "LessonExtractor",
    "Metrics",
    "NormalizedGoal",
    "OnClosed",
    "Outcome",
    "OutcomeResult",
    "OutcomeUpdater",
    "Step",
    "TaskEpisode",
    "TaskEpisodeStore",
    "TaskEpisodeWriter",
    "TranscriptConfig",
    "WriterStats",
    "coords_close",
    "dhash",
    "effective_path",
    "episode_jobs",
    "episode_summary",
    "episode_year",
    "excerpt",
    "goal_pattern",
    "hamming",
    "is_system_screen",
    "new_episode_id",
    "pair_steps",
    "parse_tool_input",
    "read_config",
    "recording_is_live",
    "reproducible_recordings",
    "sanitize",
    "scrub_base64",
    "shown_tool_input",
    "step_action",
    "step_label",
    "tool_coords",
    "tool_path",
    "tool_text",
    "trigger_passed",
]


def __getattr__(name: str) -> object:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # found by the next lookup without this function
    return value
