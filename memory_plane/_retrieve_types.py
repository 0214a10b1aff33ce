"""The public request and result types of MemoryPlane.retrieve."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class CurrentEnvironmentHints(BaseModel):
    """What the runtime already knows about the device; never triggers device actions."""

    # A misspelt hint ("langauge") is an error naming it: kept aside, it would silently change nothing.
    model_config = ConfigDict(defer_build=True, extra="forbid")

    app: str | None = None
    page: str | None = None
    language: str | None = None
    screen_width: int | None = None
    screen_height: int | None = None
    frame_socket: str | None = None
    input_method: str | None = None

    def screen(self) -> str | None:
        """Screen size as ``WxH`` when both sides are known."""
        if self.screen_width and self.screen_height:
            return f"{self.screen_width}x{self.screen_height}"
        return None


class MemoryRetrieveRequest(BaseModel):
    """A task about to start: its goal text and what the runtime knows.

    Unknown fields are an error naming them (``tool_name=[...]`` for ``tool_names`` would otherwise leave the
    tool filter silently off); the request is built by the caller, never read back from disk.
    """

    model_config = ConfigDict(defer_build=True, extra="forbid")

    input: str
    device_id: str | None = None
    # Empty lists and dicts are defaults, not factories: pydantic copies a default for each instance, and a builtin
    # factory (list, dict) makes it read the builtin's signature by tokenizing its text, milliseconds on the
    # first model a process builds (a start's first retrieve).
    attachments: list[Any] = Field(default=[])
    skills: list[str] = Field(default=[])
    tool_names: list[str] = Field(default=[])
    current_hints: CurrentEnvironmentHints = Field(default_factory=CurrentEnvironmentHints)
    session_id: str | None = None
    # Memories not to consider at all (e.g. one the user rejected, or an episode being re-examined):
    # they are left out of the hits and of everything learned from the store for this request.
    exclude_ids: list[str] = Field(default=[])


class MemoryHit(BaseModel):
    """One retrieved memory: id, type, score, confidence, prompt text and file path."""

    # Built on first use, as every model of the package: ``import memory_plane`` builds no validator.
    model_config = ConfigDict(defer_build=True)

    id: str
    type: str
    score: float = 0.0
    confidence: float = 0.0
    text: str = ""
    path: str | None = None
    title: str | None = None
    app: str | None = None
    page: str | None = None
    status: str = "active"
    steps: list[str] = Field(default=[])
    factors: dict[str, float] = Field(default={})
    caution: bool = False
    conflicts_with: list[str] = Field(default=[])  # the memories a conflicted one contradicts


class RoleMemoryContext(BaseModel):
    """Retrieved memories by category, as the agent's prompt uses them."""

    model_config = ConfigDict(defer_build=True)

    device_profile: list[MemoryHit] = Field(default=[])
    app_profiles: list[MemoryHit] = Field(default=[])
    procedures: list[MemoryHit] = Field(default=[])
    navigation: list[MemoryHit] = Field(default=[])
    similar_episodes: list[MemoryHit] = Field(default=[])
    calibration_notes: list[MemoryHit] = Field(default=[])
    failure_modes: list[MemoryHit] = Field(default=[])
    conflicts: list[MemoryHit] = Field(default=[])
    long_term: list[MemoryHit] = Field(default=[])
    session_so_far: list[str] = Field(default=[])  # the compressed session's summary lines
    # The user's rules and preferences that apply but did not fit their share of the block (it says so).
    user_rules_left_out: int = 0

    def all_hits(self) -> list[MemoryHit]:
        """Every hit in render order."""
        return [h for name in CATEGORY_ORDER for h in getattr(self, name)]


CATEGORY_ORDER: tuple[str, ...] = (
    "device_profile", "app_profiles", "long_term", "procedures", "navigation", "similar_episodes",
    "calibration_notes", "failure_modes", "conflicts",
)
