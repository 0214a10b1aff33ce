"""What a tool call's input says: its arguments however the model wrote them, coordinates, text, label."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from memory_plane.lifecycle import dumps_compact

TEXT_FIELDS: tuple[str, ...] = ("text", "query", "keyword", "input", "value")


def parse_tool_input(raw: Any) -> dict[str, Any]:
    """Tool input as a dict: JSON strings and Go's ``__arg1`` wrapper are unwrapped."""
    value = raw
    for _ in range(6):
        if isinstance(value, str):
            s = value.strip()
            if s.startswith("{"):
                try:
                    value = json.loads(s)
                    continue
                except ValueError:
                    return {"raw": value}
            return {"raw": value} if value else {}
        if isinstance(value, Mapping):
            inner = value.get("__arg1")
            if isinstance(inner, (str, Mapping)) and len(value) == 1:
                value = inner
                continue
            return dict(value)
        break
    if isinstance(value, Mapping):
        return dict(value)
    return {} if value is None else {"raw": value}


def stored_event(record: dict[str, Any]) -> dict[str, Any]:
    """An event as ``events.jsonl`` holds it: a tool call's ``tool_input`` as the JSON text of its arguments (a
    string, as the design and the Go recorder write it, so a reader that types it as a string reads ours); a
    bare string input stays as it was given."""
    value = record.get("tool_input")
    if value is None or isinstance(value, str):
        return record
    return {**record, "tool_input": dumps_compact(value)}


def shown_tool_input(raw: Any) -> Any:
    """A stored ``tool_input`` as its arguments, for showing: the JSON text of an object (as written now) read
    back, an object (as older events hold it) or any other value as it is."""
    if isinstance(raw, str) and raw.strip()[:1] in ("{", "["):
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return raw
    return raw


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        x = float(v.strip()) if isinstance(v, str) else float(v) if isinstance(v, (int, float)) else None
    except ValueError:
        return None
    # "nan" and "inf" parse as floats but are no coordinate (and would break the label's int()).
    return x if x is not None and math.isfinite(x) else None


def _fmt(v: float) -> str:
    return str(int(v)) if v == int(v) else f"{v:g}"


def tool_coords(tool_input: Mapping[str, Any]) -> str | None:
    """Coordinates of a tap or swipe as ``x=500,y=850`` or ``x=..,y=.. -> x=..,y=..``."""
    def point(obj: Any) -> tuple[float, float] | None:
        if isinstance(obj, str) and obj.strip()[:1] in ("[", "{"):
            try:  # a point sent as the text of a JSON array or object, as models do
                obj = json.loads(obj)
            except ValueError:
                return None
        if isinstance(obj, Mapping):
            x, y = _num(obj.get("x")), _num(obj.get("y"))
            return (x, y) if x is not None and y is not None else None
        if isinstance(obj, (list, tuple)) and len(obj) >= 2:
            x, y = _num(obj[0]), _num(obj[1])
            return (x, y) if x is not None and y is not None else None
        return None

    start = None
    for keys in (("x", "y"), ("start_x", "start_y"), ("x1", "y1"), ("from_x", "from_y")):
        x, y = _num(tool_input.get(keys[0])), _num(tool_input.get(keys[1]))
        if x is not None and y is not None:
            start = (x, y)
            break
    if start is None:
        for key in ("coordinate", "coords", "point", "start", "from", "position"):
            start = point(tool_input.get(key))
            if start:
                break
    end = None
    for keys in (("end_x", "end_y"), ("x2", "y2"), ("to_x", "to_y")):
        x, y = _num(tool_input.get(keys[0])), _num(tool_input.get(keys[1]))
        if x is not None and y is not None:
            end = (x, y)
            break
    if end is None:
        for key in ("end", "to", "end_coordinate", "coordinate2"):
            end = point(tool_input.get(key))
            if end:
                break
    if start is None:
        return None
    s = f"x={_fmt(start[0])},y={_fmt(start[1])}"
    return f"{s} -> x={_fmt(end[0])},y={_fmt(end[1])}" if end else s


def tool_text(tool_input: Mapping[str, Any]) -> str | None:
    """Text typed or searched by a tool call (first of text, query, keyword, input, value)."""
    for key in TEXT_FIELDS:
        v = tool_input.get(key)
        if isinstance(v, str) and v.strip():
            return v
    return None


def step_label(tool_name: str, tool_input: Mapping[str, Any]) -> str:
    """Short rendering of one call: ``tap(x=320,y=100)``, ``keyboard_text("weixin")``."""
    coords = tool_coords(tool_input)
    text = tool_text(tool_input)
    args: list[str] = []
    for key in ("app", "app_name", "package", "type", "action", "button", "direction"):
        v = tool_input.get(key)
        if isinstance(v, str) and v:
            args.append(v[:40])
            break
    if coords:
        args.append(coords)
    if text:
        args.append(json.dumps(text[:40], ensure_ascii=False))
    return f"{tool_name}({', '.join(args)})"
