"""Visual lenses: what turns an old screenshot into a neutral description. The offline one is the default."""

from __future__ import annotations

import threading
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ._records import StepRecord


@dataclass
class VisualJob:
    """Everything a lens may use for one step; images only when they really exist."""

    record: StepRecord
    decision_image: Path | None
    post_image: Path | None
    ui_diff: dict[str, list[str]] | None
    recent: list[str] = field(default_factory=list)


@dataclass
class LensOutput:
    """A summary text and where it came from."""

    text: str
    model: str
    prompt_version: int


@runtime_checkable
class VisualLens(Protocol):
    """Describes one step neutrally. Must not judge outcomes; may raise to signal a transient failure."""

    name: str

    def summarize(self, job: VisualJob) -> LensOutput:
        """The neutral description of the decision frame and the action taken on it."""
        ...


class OfflineVisualLens:
    """Deterministic, neutral, honest about what it cannot see: built from the action, its label,
    the package/activity and the UI text diff, never from pixels."""

    name = "offline"
    version = 1

    def summarize(self, job: VisualJob) -> LensOutput:
        """Describe the step from its recorded facts."""
        r = job.record
        where = "/".join(x for x in (r.package, r.activity) if x) or "the current app"
        parts = [f"Step {r.step}: on {where} I chose {r.action_line()}"]
        if r.target_label and r.target_label_source != "index":
            parts[0] += f" (the element at that point is labelled {r.target_label!r}, by {r.target_label_source})"
        parts[0] += "."
        if r.ui_text:
            shown = ", ".join(repr(t) for t in r.ui_text[:8])
            parts.append(f"The screen listed {shown}{' and more' if len(r.ui_text) > 8 else ''}.")
        d = job.ui_diff
        if d is not None:
            if d.get("appeared"):
                shown_after = ", ".join(repr(t) for t in d["appeared"][:6])
                parts.append(f"Afterwards the UI list also showed {shown_after}.")
            if d.get("disappeared"):
                parts.append("Text no longer listed: " + ", ".join(repr(t) for t in d["disappeared"][:6]) + ".")
            if not d.get("appeared") and not d.get("disappeared"):
                parts.append("The UI text list was the same before and after.")
        elif job.post_image is None:
            parts.append("There is no independent post-action evidence for this step.")
        parts.append("(Offline summary: built from recorded actions and UI text, not from the pixels.)")
        return LensOutput(" ".join(parts), model="offline", prompt_version=self.version)


MAX_REQUESTS_PER_MODEL = 3  # one request and at most 2 retries per model for one step (or one capsule)


class RequestBudget:
    """The requests one step (or one capsule) may send to each model, shared by the lens call and the
    service's retries, so that retries at both levels do not multiply."""

    def __init__(self, per_model: int = MAX_REQUESTS_PER_MODEL) -> None:
        self.per_model = per_model
        self.used: dict[str, int] = {}
        self._lock = threading.Lock()

    def available(self, model: str) -> bool:
        """Whether another request to ``model`` is allowed."""
        with self._lock:
            return self.used.get(model, 0) < self.per_model

    def take(self, model: str) -> bool:
        """Count a request about to be sent; False (and nothing counted) when the model's share is spent."""
        with self._lock:
            if self.used.get(model, 0) >= self.per_model:
                return False
            self.used[model] = self.used.get(model, 0) + 1
            return True


# The budget of the job running in this thread (set by the service, read by the model lenses).
current_budget: ContextVar[RequestBudget | None] = ContextVar("memplane_request_budget", default=None)


def describe(lens: Any) -> str:
    """A lens's name for metadata."""
    return str(getattr(lens, "name", type(lens).__name__))
