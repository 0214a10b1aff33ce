"""Caps and budget: each section's candidates best first within its cap, and the block trimmed to its size."""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from .._retrieve_types import RoleMemoryContext
from ._candidates import Cand
from ._drops import DropLog
from ._render import LineMemo, render_context

# The sections the budget may trim: the weakest last hit among them goes first, cautions only when
# nothing else is left.
TRIM_ORDER = ("similar_episodes", "navigation", "calibration_notes", "long_term", "procedures", "app_profiles",
              "conflicts", "failure_modes")


def rank_key(c: Cand) -> tuple[float, float, str]:
    """Best score first; ties by closeness (episodes), then by id, so equal scores always come out in one order."""
    return (-c.score, -c.closeness, c.item_id or c.src.entries[c.i]["id"])


def in_rank_order(cands: list[Cand], cap: int) -> Iterator[Cand]:
    """Candidates best first: the cap's best without a full sort, the rest only if some are turned away."""
    if len(cands) <= 512:  # a C sort of a few hundred beats a heap walked in Python
        yield from sorted(cands, key=rank_key)
        return
    head = heapq.nsmallest(cap + 2, cands, key=rank_key)
    yield from head
    if len(cands) > len(head):
        yield from sorted(cands, key=rank_key)[len(head):]


def fit_budget(common: RoleMemoryContext, budget: int, users: int = 0, drop: DropLog | None = None) -> None:
    """Drop the weakest hits until the block fits ``budget`` characters, cautions last."""
    # The user's rules and preferences that apply (the first ``users`` long-term hits, already within
    # their share) stay; the weakest other hits are dropped until the block fits, cautions last.
    memo: LineMemo = {}  # the hits do not change while the weakest are dropped
    why = f"left out of the {budget}-character block"
    size = len(render_context(common, memo))
    while size > budget:
        victims = [(getattr(common, c)[-1].score, c) for c in TRIM_ORDER
                   if len(getattr(common, c)) > (users if c == "long_term" else 0)]
        if not victims:
            return
        non_caution = [v for v in victims if v[1] not in ("conflicts", "failure_modes")]
        _, cat = min(non_caution or victims)
        hits = getattr(common, cat)
        gone = hits.pop()
        if drop is not None:
            drop("budget", gone.id, f"{why} ({cat}; weakest there)")
        line = memo.get((cat, len(hits)))  # the line of the hit just taken off the section's end
        if hits and line is not None:
            # One line of a section that stays: the block is that line (and its newline) shorter. When
            # the estimate fits, the block is rendered once more to be sure.
            size -= len(line) + 1
            if size <= budget:
                size = len(render_context(common, memo))
        else:
            size = len(render_context(common, memo))
