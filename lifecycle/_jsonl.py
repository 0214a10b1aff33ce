"""JSON lines: one object per line, UTF-8 readable, torn last lines tolerated."""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ._clock import format_ts

log = logging.getLogger("memory_plane")

# Characters that JSON with ensure_ascii=False leaves raw but that YAML or line tools mishandle
# (C1 controls, line/paragraph separators, BOM, lone surrogates): escape them.
_UNSAFE_CHARS = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, datetime):
        return format_ts(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, bytes):
        return f"[bytes: {len(obj)} omitted]"
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json", exclude_none=True)
    return str(obj)


def dumps_compact(obj: Any, *, separators: tuple[str, str] = (",", ":")) -> str:
    """Serialise to one line of JSON, keeping non-ASCII text readable."""
    text = json.dumps(obj, ensure_ascii=False, separators=separators, default=_json_default)
    return _UNSAFE_CHARS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


@dataclass
class JsonlProblem:
    """A line of a jsonl file that was skipped."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class JsonlRead:
    """Records read from a jsonl file plus the lines skipped."""

    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[JsonlProblem] = field(default_factory=list)
    torn_tail: bool = False


def parse_jsonl(data: bytes, path: str | Path = "<jsonl>") -> JsonlRead:
    """Parse jsonl bytes; bad lines become problems, a torn last line is flagged, never raised."""
    out = JsonlRead()
    lines = data.split(b"\n")
    last_complete = data.endswith(b"\n")
    for i, raw in enumerate(lines, start=1):
        is_last = i == len(lines)
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            if is_last and not last_complete:
                out.torn_tail = True
                out.problems.append(JsonlProblem(str(path), i, "torn last line (interrupted append)"))
                log.warning("%s:%d: skipping torn last line", path, i)
            else:
                out.problems.append(JsonlProblem(str(path), i, f"invalid JSON: {exc}"))
                log.warning("%s:%d: skipping invalid JSON line", path, i)
            continue
        if not isinstance(obj, dict):
            out.problems.append(JsonlProblem(str(path), i, "line is not a JSON object"))
            continue
        out.records.append(obj)
    return out


def read_jsonl(path: str | Path) -> JsonlRead:
    """Read a jsonl file (missing file = no records)."""
    from ._atomic import read_bytes_nofollow

    try:
        data = read_bytes_nofollow(path)
    except FileNotFoundError:
        return JsonlRead()
    return parse_jsonl(data, path)
