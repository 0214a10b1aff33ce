"""One-line renderings of an episode: its tool path and its index summary."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._model import TaskEpisode
from ._tool_inputs import parse_tool_input, step_label

MAX_PATH_STEPS = 8


def tool_path(events: Iterable[Mapping[str, Any]], max_steps: int = MAX_PATH_STEPS) -> list[str]:
    """Labels of the tool calls of an episode in order."""
    out = []
    for ev in events:
        if ev.get("type") == "tool_call":
            out.append(step_label(str(ev.get("tool_name") or "?"), parse_tool_input(ev.get("tool_input"))))
    return out


def episode_summary(ep: TaskEpisode, events: Iterable[Mapping[str, Any]]) -> str:
    """``Goal: … Path: a -> b … Outcome: …`` for the index and for retrieval."""
    steps = tool_path(events)
    shown = steps[:MAX_PATH_STEPS]
    path = " -> ".join(shown) + (f" -> …(+{len(steps) - len(shown)})" if len(steps) > len(shown) else "")
    o = ep.outcome
    if o.success:
        outcome = "success" + (f", {o.final_state}" if o.final_state else "")
    else:
        why = o.failure_reason or o.error or o.completion_reason or "unknown"
        outcome = f"failure ({o.failure_phase or 'unknown'}): {why}"
    goal = " ".join(ep.user_goal.split())[:200]
    return f"Goal: {goal}. Path: {path or '(no tool calls)'}. Outcome: {outcome}"[:600]
