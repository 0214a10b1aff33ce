"""The session's text helpers: the offline summary of a run of events, the Go-layout chunk index appended by text."""

from __future__ import annotations

import json
import re
from typing import Any

from memory_plane.lifecycle import counted


def summarize_events(events: list[dict[str, Any]]) -> str:
    """Offline summary of a run of session events: who asked what, which apps, how it ended."""
    users = [str(e.get("content", "")) for e in events if e.get("type") == "user_input"]
    outs = [str(e.get("content", "")) for e in events if e.get("type") == "assistant_output"]
    apps = sorted({str(e["app_name"]) for e in events if e.get("app_name")})
    tools = sum(1 for e in events if e.get("type") == "tool_result")
    parts = []
    if users:
        parts.append("User asked: " + " | ".join(" ".join(u.split())[:80] for u in users[:3]))
    if apps:
        parts.append("apps: " + ", ".join(apps[:5]))
    if tools:
        parts.append(counted(tools, "tool result"))
    if outs:
        parts.append("last reply: " + " ".join(outs[-1].split())[:120])
    return "; ".join(parts)[:400] or counted(len(events), "event")


_TOP_LEVEL = re.compile(r"^[^\s#-]")
_ITEM = re.compile(r"^(\s*)- ")


def append_to_go_chunks(text: str, line: str, now: str) -> str | None:
    """The Go-layout index with one more entry (one flow-mapping line, valid YAML the Go agent reads) and a new
    updated_at, by text: no parse and no re-dump of the older entries (a 1,000-chunk index parses in ~150 ms).
    None when the layout is not the plain one (``chunks:`` not the last key), and the caller re-dumps."""
    lines = text.split("\n")
    heads = [i for i, ln in enumerate(lines) if ln.startswith("chunks:")]
    if len(heads) != 1 or lines[heads[0]].split("#")[0].strip() != "chunks:":
        return None
    rest = lines[heads[0] + 1:]
    if any(_TOP_LEVEL.match(ln) for ln in rest):
        return None  # another key follows the list: appending would put the entry under it
    items = [m.group(1) for m in map(_ITEM.match, rest) if m]
    indent = items[0] if items else "  "
    out = text.rstrip("\n") + "\n" + indent + line + "\n"
    stamped, n = re.subn(r"^updated_at:[^\n#]*", f"updated_at: {json.dumps(now)}", out, count=1, flags=re.M)
    return stamped if n else out
