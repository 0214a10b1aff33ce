"""Task episodes: the recorder used during a task, the store and the writer used after it."""

from ._artifacts import ImageInfo, dhash, hamming
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
from ._recorder import EpisodeRecorder
from ._sanitize import REDACTED, excerpt, sanitize, scrub_base64
from ._store import EPISODE_FILE, EVENTS_FILE, TaskEpisodeStore
from ._summary import episode_summary, parse_tool_input, step_label, tool_coords, tool_path, tool_text
from ._writer import EpisodeJob, TaskEpisodeWriter, WriterStats

__all__ = [
    "EPISODE_FILE",
    "EVENTS_FILE",
    "FAILURE_PHASES",
    "REDACTED",
    "DeviceScope",
    "EpisodeJob",
    "EpisodeRecorder",
    "ImageInfo",
    "InitialState",
    "Metrics",
    "NormalizedGoal",
    "Outcome",
    "TaskEpisode",
    "TaskEpisodeStore",
    "TaskEpisodeWriter",
    "WriterStats",
    "dhash",
    "episode_summary",
    "episode_year",
    "excerpt",
    "hamming",
    "new_episode_id",
    "parse_tool_input",
    "sanitize",
    "scrub_base64",
    "step_label",
    "tool_coords",
    "tool_path",
    "tool_text",
]
