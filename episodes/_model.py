"""The TaskEpisode model: one task's goal, scope, outcome and lessons (episode.yaml)."""

from __future__ import annotations

import os
import re
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from memory_plane.lifecycle import StrList, Text, Timestamp, format_ts, is_safe_id, normalize_status

EpisodeStatus = Literal["recording", "active", "interrupted", "expired", "deleted", "inactive"]

FAILURE_PHASES: tuple[str, ...] = (
    "planning",
    "tool_error",
    "state_mismatch",
    "verification_timeout",
    "max_iterations",
    "model_parse_error",
    "login",
    "input",
    "navigation",
    "interrupted",
    "exception",
    "unknown",
)
"""Failure phases of the design, the task's own stages a runtime reports (``login``: a sign-in or
verification wall; ``input``: text that could not be entered; ``navigation``: the page or app not
reached), plus ``interrupted`` (crash), ``exception`` and ``unknown``. Any other phase is kept as
given, normalised to a short ``lower_snake`` word."""

MAX_PHASE = 40
_PHASE_JUNK = re.compile(r"\W+")  # letters of any script, digits and _ stay


def normalize_phase(value: str | None) -> str | None:
    """A failure phase as stored: lowercase, words joined by ``_``, other marks dropped, at most 40 characters
    (None if nothing is left)."""
    if value is None:
        return None
    phase = _PHASE_JUNK.sub("_", "_".join(str(value).strip().lower().replace("-", " ").split())).strip("_")
    return phase[:MAX_PHASE].rstrip("_") or None


_EP_ID = re.compile(r"^ep_(\d{4})\d{4}_[a-z0-9]+$")


def new_episode_id(started: datetime) -> str:
    """Make an episode id ``ep_<yyyymmdd>_<hex>`` for a start time."""
    return f"ep_{started.strftime('%Y%m%d')}_{os.urandom(5).hex()}"


def episode_year(episode_id: str) -> str:
    """The ``<yyyy>`` folder of an episode id (``unknown`` for ids of another shape)."""
    m = _EP_ID.match(episode_id)
    return m.group(1) if m else "unknown"


class _Open(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="allow")


class NormalizedGoal(_Open):
    """What the goal asks: intent, app and target, as parsed before the task."""

    intent: Text = None
    app: Text = None
    target: Text = None


class DeviceScope(_Open):
    """Where the episode ran: device id, UI language and screenshot size ``WxH``."""

    device_id: str = "default"
    language: Text = None
    screen: Text = None
    input_method: Text = None  # the keyboard the phone used (e.g. a pinyin IME): typed text depends on it


class InitialState(_Open):
    """What the screen showed before the first action."""

    summary: Text = None
    app: Text = None
    page: Text = None
    screenshot_ref: Text = None


class Outcome(_Open):
    """How the task ended, and why."""

    success: bool = False
    final_state: Text = None
    final_answer: Text = None
    completion_reason: Text = None
    failure_phase: Text = None  # one of FAILURE_PHASES, or a runtime's own phase kept as given (normalised)
    failure_reason: Text = None
    error: Text = None

    @field_validator("failure_phase")
    @classmethod
    def _phase(cls, v: str | None) -> str | None:
        return normalize_phase(v)


class Metrics(_Open):
    """Counts and costs of the episode."""

    tool_steps: int = 0
    events: int = 0
    screenshots: int = 0
    duration_ms: int = 0
    tokens: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class TaskEpisode(BaseModel):
    """One task, successful or not: the raw material for every lesson."""

    model_config = ConfigDict(defer_build=True, extra="allow")

    id: str
    type: str = "task_episode"
    status: EpisodeStatus = "recording"
    started_at: Timestamp = None
    ended_at: Timestamp = None
    user_goal: str = ""
    normalized_goal: NormalizedGoal = Field(default_factory=NormalizedGoal)
    observed_app: Text = None  # the app the task worked in, as observed (set by the recorder at finish)
    device_scope: DeviceScope = Field(default_factory=DeviceScope)
    initial_state: InitialState = Field(default_factory=InitialState)
    outcome: Outcome = Field(default_factory=Outcome)
    retrieved_memory_refs: StrList = Field(default_factory=list)
    reusable_lessons: StrList = Field(default_factory=list)
    failure_causes: StrList = Field(default_factory=list)
    conflicts: StrList = Field(default_factory=list)
    tags: StrList = Field(default_factory=list)
    entities: StrList = Field(default_factory=list)
    metrics: Metrics = Field(default_factory=Metrics)
    summary: Text = None
    traceability: Text = None
    _release: Any = PrivateAttr(default=None)  # releases the recording lock once committed
    _events: Any = PrivateAttr(default=None)  # the events the recorder read at finish, for the writer's jobs
    # A status nobody defined (set by hand) keeps the episode out of retrieval; verify names it.
    LENIENT_FALLBACK: ClassVar[dict[str, Any]] = {"status": "inactive"}

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, v: Any) -> Any:
        return normalize_status(v)

    def committed(self) -> None:
        """Called by the writer after the episode is on disk: the recording is over."""
        self.release_recording()

    def release_recording(self) -> None:
        """Let go of the recording lock (and its file), once: after the commit, or before its debris is removed."""
        if self._release is not None:
            release, self._release = self._release, None
            release()

    def keep_events(self, events: list[dict[str, Any]]) -> None:
        """Hold the events the recorder read at finish, so the background jobs need not read them again."""
        self._events = events

    def take_events(self) -> list[dict[str, Any]] | None:
        """The events kept by ``keep_events`` (once; None when none were kept)."""
        events, self._events = self._events, None
        return events if isinstance(events, list) else None

    @field_validator("id")
    @classmethod
    def _safe(cls, v: str) -> str:
        if not is_safe_id(v):
            raise ValueError("episode id must be 1-80 chars of [a-z0-9_-]")
        return v

    @property
    def year(self) -> str:
        """The ``<yyyy>`` folder this episode lives in."""
        return episode_year(self.id)

    @property
    def rel_dir(self) -> str:
        """Folder of this episode relative to ``episodes/``."""
        return f"{self.year}/{self.id}"

    def app(self) -> str | None:
        """The app the episode was about: the one observed most, else the goal's app, else the starting app."""
        return self.observed_app or self.normalized_goal.app or self.initial_state.app

    def to_yaml_dict(self) -> dict[str, Any]:
        """Dump for episode.yaml, dropping empty values so the file stays short."""
        data = self.model_dump(mode="json", exclude_none=True)
        return {k: v for k, v in data.items() if v not in ([], {})}

    def started_ts(self) -> str:
        """started_at as RFC 3339 text ('' when unknown)."""
        if isinstance(self.started_at, datetime):
            return format_ts(self.started_at)
        return self.started_at or ""
