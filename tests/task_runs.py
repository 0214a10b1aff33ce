"""A task recorded through the public path, as a runtime does: retrieve, record each call and what the phone
showed after it, finish, commit, flush; and the device's procedures afterwards."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.device_memory import Navigation, Procedure

Call = tuple[str, dict[str, Any], str | None, dict[str, Any]]
"""(tool, tool input, the label it targets as the screen shows it, the observed state after it)."""


def screen(app: str, page: str, *labels: str, **state: Any) -> dict[str, Any]:
    """An observed state: app, page, the elements' labels, and any other state the phone reports."""
    return {"app": app, "page": page, "elements": [{"label": x} for x in labels], **state}


def run_task(plane: MemoryPlane, goal: str, calls: Sequence[Call], *, success: bool = True) -> str:
    """Record one task through the recorder and commit it; return its episode id."""
    req = MemoryRetrieveRequest(input=goal, current_hints={"language": "en-US"})
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    for tool, tool_input, label, after in calls:
        rec.tool_call(tool, tool_input, target_label=label)
        rec.tool_result(tool, output="ok", observed_state=after)
    plane.commit_episode(rec.finish(success=success, completion_reason="the screen shows the goal state"
                                    if success else None))
    plane.flush()
    return rec.id


EN = CurrentEnvironmentHints(language="en-US", screen_width=1080, screen_height=2400)
"""An English phone of 1080x2400."""


def record_task(plane: MemoryPlane, goal: str, steps: Sequence[tuple[Any, ...]], *, success: bool = True,
                before: Callable[[Any, Any], None] | None = None, **finish: Any) -> tuple[Any, Any]:
    """One task as a runtime records it on an English phone, (tool, input, label, observed_state[, error]) per
    step (``before`` gets the recorder and the retrieve result first); returns the committed episode and what
    retrieve showed it."""
    req = MemoryRetrieveRequest(input=goal, current_hints=EN)
    ctx = plane.retrieve(req)
    rec = plane.new_episode_recorder(req, ctx)
    if before is not None:
        before(rec, ctx)
    for tool, ti, label, obs, *err in steps:
        rec.tool_call(tool, ti, target_label=label)
        rec.tool_result(tool, is_error=bool(err), error=err[0] if err else None, observed_state=obs)
    ep = rec.finish(success=success, **finish)
    plane.commit_episode(ep)
    assert plane.flush(20)
    return ep, ctx


def procedures(plane: MemoryPlane) -> list[Procedure]:
    """The device's procedures."""
    out = [plane.device.get(e["id"]) for e in plane.device.entries("procedure")]
    return [p for p in out if isinstance(p, Procedure)]


def navigation_rules(plane: MemoryPlane) -> list[Navigation]:
    """The device's navigation rules."""
    out = [plane.device.get(e["id"]) for e in plane.device.entries("navigation")]
    return [n for n in out if isinstance(n, Navigation)]
