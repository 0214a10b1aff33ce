"""Step records and versioned summaries, appended to transcript/steps.jsonl."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SummaryStatus = Literal["pending", "ready", "failed", "stale"]
# Moves allowed within one version; anything else needs a higher version.
_SAME_VERSION_MOVES = {("pending", "ready"), ("pending", "failed"), ("ready", "stale"), ("failed", "stale"),
                       ("pending", "stale")}


class StepRecord(BaseModel):
    """One step: what was done, what the validator said, what was seen."""

    model_config = ConfigDict(defer_build=True, extra="allow")

    kind: Literal["step"] = "step"
    step_id: str
    step: int
    ts: str
    t: str  # "T+mm:ss" from the session start
    action: dict[str, Any] = Field(default_factory=dict)
    target_label: str | None = None
    target_label_source: Literal["index", "hit_test", "ocr", "none"] = "none"
    result: str | None = None
    validator: dict[str, Any] | None = None
    failure_recovery: list[dict[str, Any]] = Field(default_factory=list)
    thought: str | None = None
    message_ref: str | None = None
    pre_image: str | None = None
    post_image: str | None = None
    ui_text: list[str] = Field(default_factory=list)
    ui_diff: dict[str, list[str]] | None = None
    package: str | None = None
    activity: str | None = None
    subgoal_hash: str | None = None
    plan: str | None = None
    user_instructions: list[str] = Field(default_factory=list)
    notes_written: list[str] = Field(default_factory=list)
    note_excerpts: dict[str, str] | None = None  # note key -> the start of what the step wrote into it
    envelope_ref: str | None = None
    dhash: str | None = None
    session_id: str | None = None  # the agent session the step belongs to
    plan_revision: int | str | None = None  # which revision of the plan it worked from (3, or "rev-3")
    thought_signature: str | None = None  # the model's opaque signature of its thinking (base64), sent back as is
    thinking_ref: str | None = None  # a file of the episode holding the model's full thinking
    ui_dump_ref: str | None = None  # a file of the episode holding the full UI dump
    native_thinking_ref: str | None = None  # the model's native thinking as the API returned it (a file)
    post_ui_ref: str | None = None  # the UI dump after the action (a file)
    point_labels: list[str | None] | None = None  # a swipe's or gesture's points, each labelled
    same_turn: list[dict[str, Any]] | None = None  # tool outputs read before the action (tool, size, file, excerpt)

    def action_line(self) -> str:
        """``tap(632,1180)['确认']``: the exact action with its element label; coordinates always kept."""
        name = str(self.action.get("name") or "?")
        args = self.action.get("args") or {}
        pts = _points(args)
        if len(pts) >= 3:
            inner = f"{len(pts)} points {_n(pts[0][0])},{_n(pts[0][1])}→{_n(pts[-1][0])},{_n(pts[-1][1])}"
        elif len(pts) == 2:
            inner = f"{_n(pts[0][0])},{_n(pts[0][1])}→{_n(pts[1][0])},{_n(pts[1][1])}"
        elif "x" in args and "y" in args:
            inner = f"{_n(args['x'])},{_n(args['y'])}"
        elif args.get("text") is not None:
            inner = repr(str(args["text"])[:60])
        else:
            inner = ", ".join(f"{k}={str(v)[:30]}" for k, v in list(args.items())[:3])
        label = f"[{self.target_label!r}]" if self.target_label else ""
        pl = self.point_labels
        # A gesture's label is its first point's: the whole chain says more (where it started and ended).
        if pl and any(pl) and (not label or pl[0] == self.target_label):
            label = "[" + "→".join(repr(x) if x else "?" for x in pl) + "]"
        return f"{name}({inner}){label}"


def action_points(args: dict[str, Any]) -> list[tuple[Any, Any]]:
    """The points of a swipe or a multi-point gesture (empty for a tap or a key)."""
    return _points(args)


def _points(args: dict[str, Any]) -> list[tuple[Any, Any]]:
    """The points of a swipe or a multi-point gesture, in the shapes runtimes send them: ``start``/``end``
    (or ``from``/``to``) as ``[x, y]`` or ``{x, y}``, ``x1..y2``, ``start_x..end_y`` (or ``startX..endY``,
    ``fromX..toY``), and a list of points under ``points`` or ``coordinates`` (each ``[x, y]`` or ``{x, y}``)."""
    for a, b in (("start", "end"), ("from", "to")):
        p, q = _point(args.get(a)), _point(args.get(b))
        if p is not None and q is not None:
            return [p, q]
    # Coordinates as four numbers, however the runtime spells their names: x1..y2, start_x..end_y, startX..endY,
    # fromX..toY (compared without case or underscores).
    flat = {k.replace("_", "").lower(): v for k, v in args.items() if isinstance(k, str)}
    for xa, ya, xb, yb in (("x1", "y1", "x2", "y2"), ("startx", "starty", "endx", "endy"),
                           ("fromx", "fromy", "tox", "toy")):
        if all(k in flat for k in (xa, ya, xb, yb)):
            return [(flat[xa], flat[ya]), (flat[xb], flat[yb])]
    for key in ("points", "coordinates"):
        pts = args.get(key)
        if isinstance(pts, (list, tuple)):
            out = [p for p in map(_point, pts) if p is not None]
            if out:
                return out
    return []


def _point(p: Any) -> tuple[Any, Any] | None:
    """One point given as ``[x, y]`` (or longer) or as a mapping with ``x`` and ``y``; None otherwise."""
    if isinstance(p, (list, tuple)) and len(p) >= 2:
        return p[0], p[1]
    if isinstance(p, dict) and "x" in p and "y" in p:
        return p["x"], p["y"]
    return None


def _n(v: Any) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(f):
        return str(v)
    return str(int(f)) if f == int(f) else f"{f:g}"


class SummaryEvidence(BaseModel):
    """What a summary was made from, derived by the system, never by the model (a model may claim what it never saw)."""

    decision_image: str | None = None
    post_image: str | None = None
    used_ui_diff: bool = False
    model: str | None = None
    prompt_version: int | None = None
    lens: str | None = None


class SummaryRecord(BaseModel):
    """One version of a step's visual summary."""

    model_config = ConfigDict(defer_build=True, extra="allow")

    kind: Literal["summary"] = "summary"
    step: int
    version: int
    status: SummaryStatus
    text: str | None = None
    evidence: SummaryEvidence = Field(default_factory=SummaryEvidence)
    reason: str | None = None
    ts: str | None = None


@dataclass
class SummaryBook:
    """The current summary of each step, honouring version order; every version is kept on disk."""

    def __post_init__(self) -> None:
        self._current: dict[int, SummaryRecord] = {}

    def offer(self, rec: SummaryRecord) -> bool:
        """Take a record if it is newer (or a legal move within its version); True if taken."""
        cur = self._current.get(rec.step)
        if cur is None or rec.version > cur.version or (
                rec.version == cur.version and (cur.status, rec.status) in _SAME_VERSION_MOVES):
            self._current[rec.step] = rec
            return True
        return False

    def get(self, step: int) -> SummaryRecord | None:
        """The current record of a step."""
        return self._current.get(step)

    def next_version(self, step: int) -> int:
        """The version a new summary attempt of this step gets."""
        cur = self._current.get(step)
        return 1 if cur is None else cur.version + 1
