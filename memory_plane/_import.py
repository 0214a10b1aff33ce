"""Importers of public phone-task data into episodes (and the lessons extracted from them)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from episodes import EpisodeRecorder
from lifecycle import UsageError

from ._query import parse_query

log = logging.getLogger("memory_plane")


@dataclass
class ImportReport:
    """What an import did."""

    episodes: int = 0
    steps: int = 0
    skipped_actions: int = 0
    skipped_lines: int = 0
    items_created: dict[str, int] = field(default_factory=dict)
    items_updated: dict[str, int] = field(default_factory=dict)
    tombstoned: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {**self.__dict__, "duplicates_avoided": sum(self.items_updated.values()),
                "episodes_per_s": round(self.episodes / self.seconds, 1) if self.seconds else None}


def androidcontrol_action(action: Any) -> tuple[str, dict[str, Any]] | None:
    """Map one AndroidControl action to (tool, input); None for an empty or unparsable action."""
    if not isinstance(action, dict):
        return None
    kind = action.get("action")

    def point(key: str) -> list[float] | None:
        v = action.get(key)
        if isinstance(v, (list, tuple)) and len(v) >= 2 and all(isinstance(x, (int, float)) for x in v[:2]):
            return [float(v[0]), float(v[1])]
        return None

    if kind == "click" and (p := point("coordinate")):
        return "tap", {"x": p[0], "y": p[1]}
    if kind == "long_press" and (p := point("coordinate")):
        return "long_press", {"x": p[0], "y": p[1], "seconds": action.get("time", 1)}
    if kind == "swipe":
        start, end = point("coordinate"), point("coordinate2")
        if start and end:
            return "swipe", {"start": start, "end": end}
        if isinstance(action.get("direction"), str):
            return "swipe", {"direction": action["direction"]}
        return None
    if kind == "type" and isinstance(action.get("text"), str) and action["text"].strip():
        return "keyboard_text", {"text": action["text"]}
    if kind == "open":
        name = action.get("app_name") or action.get("text")
        return ("launch_app", {"app": name}) if isinstance(name, str) and name.strip() else None
    if kind == "wait":
        t = action.get("time", 1)
        return "wait", {"seconds": t if isinstance(t, (int, float)) else 1}
    if kind == "system_button" and isinstance(action.get("button"), str):
        return "system_button", {"button": action["button"]}
    return None


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except ValueError:
                yield n, None


def import_androidcontrol(plane: Any, path: str | Path, *, limit: int | None = None) -> ImportReport:
    """Turn an AndroidControl jsonl export into committed episodes and run extraction on each."""
    src = Path(path)
    if not src.is_file():
        raise UsageError(f"no such file: {src}")
    rep = ImportReport()
    t0 = time.perf_counter()
    for n, data in _lines(src):
        if limit is not None and rep.episodes >= limit:
            break
        valid = isinstance(data, dict) and isinstance(data.get("goal"), str) and isinstance(data.get("steps"), list)
        if not valid:
            rep.skipped_lines += 1
            log.warning("%s:%d: not an AndroidControl episode; skipped", src, n)
            continue
        goal = data["goal"]
        q = parse_query(goal, plane.device.catalog)
        rec = EpisodeRecorder(plane.episodes, goal, normalized_goal={"intent": q.intent, "app": q.app_name,
                                                                     "target": q.target},
                              clock=plane.clock, tags=["import:androidcontrol"])
        app: str | None = None
        for step in data["steps"]:
            mapped = androidcontrol_action(step.get("action_content") if isinstance(step, dict) else None)
            if mapped is None:
                rep.skipped_actions += 1
                continue
            tool, tool_input = mapped
            content = step.get("step_instruction") if isinstance(step.get("step_instruction"), str) else None
            rec.tool_call(tool, tool_input, content=content)
            if tool == "launch_app":
                app = str(tool_input["app"])
            rec.tool_result(tool, output="ok", observed_state={"app": app} if app else None)
            rep.steps += 1
        ok = bool(data.get("is_successful", True))
        ep = rec.finish(success=ok, failure_phase=None if ok else "unknown")
        ep.status = "active"
        # Synchronous here: an import must not overflow the runtime's bounded background queue.
        plane.episodes.write(ep)
        res = plane.extractor(ep)
        for k, v in res.created.items():
            rep.items_created[k] = rep.items_created.get(k, 0) + v
        for k, v in res.updated.items():
            rep.items_updated[k] = rep.items_updated.get(k, 0) + v
        rep.tombstoned += res.skipped_tombstoned
        rep.episodes += 1
    rep.seconds = round(time.perf_counter() - t0, 3)
    return rep
