"""What a memory tool answers: a ToolResult whose text stays within the answer budget."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memory_plane.episodes.transcript import estimate_text_tokens as estimate_tokens
from memory_plane.lifecycle import counted

from .retrieval import quote_cut

DEFAULT_BUDGET_TOKENS = 2000
WHOLE_CHARS = 4000  # a memory asked for by id is shown up to this long (MAX_CONTENT of the store)


@dataclass
class ToolResult:
    """What a memory tool answers: text for the model, whether it is an error, the memory ids it showed."""

    text: str
    is_error: bool = False
    refs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The function response sent back to the model."""
        return {"result": self.text, "is_error": self.is_error, "memory_ids": self.refs}


def bounded(lines: list[str], budget: int, head: str = "", more: Callable[[int], str] | None = None) -> str:
    """Lines until the token budget is used, then a note of how many were left out: ``more(i)`` (``i`` is the
    first line not shown) says how to get them, else "N more, narrow the query"."""
    out = [head] if head else []
    used = estimate_tokens(head)
    # Room for the note is kept while lines may follow, so the note itself never overruns the budget.
    room = budget - (60 if more else 0)
    for i, line in enumerate(lines):
        cost = estimate_tokens(line) + 1
        if used + cost > (budget if i == len(lines) - 1 else room):
            out.append(more(i) if more else f"… {len(lines) - i} more, narrow the query")
            break
        out.append(line)
        used += cost
    return "\n".join(out)


def whole(budget_tokens: int, text: str) -> str:
    """A memory asked for by id, quoted whole, or as much as one answer holds (and how much is left)."""
    limit = WHOLE_CHARS
    quoted, left = quote_cut(text, limit)
    while limit > 200 and estimate_tokens(quoted) > budget_tokens * 0.7:
        limit = int(min(limit, len(quoted)) * 0.7)
        quoted, left = quote_cut(text, limit)
    return quoted + (f" (+{left} chars not shown: longer than one answer holds)" if left else "")


def shown(budget_tokens: int, lines: list[str], refs: list[str], head: str, *, tool: str = "", offset: int = 0,
          more_exists: bool = False, note: str = "", more_count: int | None = None) -> ToolResult:
    """Lines within the budget; a cut says how many results were left out and the offset that reads on
    (``more_count``: how many more match past this page, when the caller knows)."""
    def resume(i: int) -> str:
        # A result is a line that does not start with a space (an event of a chunk is indented under it).
        results = sum(1 for ln in lines[i:] if not ln.startswith(" "))
        left = counted(results, "more result") if results else counted(len(lines) - i, "more line")
        skip = offset + sum(1 for ln in lines[:i] if not ln.startswith(" "))
        how = f"{tool} offset={skip} reads on, or narrow the query" if tool else "ask for fewer ids at a time"
        return f"… {left} not shown (answer budget): {how}"

    text = bounded(lines, budget_tokens - (40 if more_exists or note else 0), head, resume)
    if more_exists and tool and "not shown (answer budget)" not in text:
        many = counted(more_count, "more match") if more_count else "more match"
        text += f"\n({many}: {tool} offset={offset + sum(1 for ln in lines if not ln.startswith(' '))})"
    if note:
        text += f"\n({note})"
    found = [r for r in refs if r in text]  # only the ids that made it into the answer
    return ToolResult(text, refs=found)
