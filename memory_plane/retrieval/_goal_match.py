"""The goal a candidate memory is judged against, and how a memory's app, intent and tools match it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

from memory_plane.lifecycle import field_text, field_words

from .._tokens import token_set
from ._query import ParsedQuery

GOAL_MASK = "…"  # what stands for a goal's own value in a procedure's goal shapes (``Procedure.goal_shapes``)


class Query(NamedTuple):
    """A parsed goal with the request facts every candidate is judged against."""

    q: ParsedQuery
    env: tuple[str | None, ...]
    now: datetime
    names: tuple[str, ...]  # lowercase entity names worth looking for in a memory's text
    tools: frozenset[str]  # lowercase tools the agent has now (empty: not told, nothing is filtered)
    exclude: frozenset[str]  # memory ids the caller asked to leave out of everything


def app_match_of(ctx: Query, app: Any, e: dict[str, Any], text_field: str) -> float:
    """How strongly a memory's app (or, when the goal names something, its text) points at the goal's app."""
    q = ctx.q
    if q.app and app == q.app:
        return 0.4 if q.app_generic else 1.0
    if app and app in q.apps:
        return 0.5
    if ctx.names:  # the memory's text is only looked at when the goal names something
        low = field_text(e.get(text_field)).lower()
        if any(e in low for e in ctx.names):
            return 0.4  # the same name or quoted value elsewhere: weak evidence of the same task
    return 0.3 if not app else 0.0


def intent_sim(q: ParsedQuery, intent: Any, sim: float, specific: frozenset[str] = frozenset(),
               asks: frozenset[str] = frozenset()) -> float:
    """Similarity raised for a memory of the goal's own intent; for a past goal whose intents are known (``asks``,
    ``specific`` those of them that are not broad), also when the two share a specific one or this goal asks for
    all the past one did."""
    # A goal of several steps asks for several things: a past goal that was one of its steps ("check the
    # details of …" in "check …, then turn off …") is of its intent too. A broad intent alone (search, check,
    # open) is asked by nearly every goal and is not shared by that.
    if (q.intent != "unknown" and intent == q.intent) or not q.intents.isdisjoint(specific) or (
            asks and asks <= q.intents):
        return max(sim, 0.5 + 0.5 * sim)
    return sim


def tools_available(e: dict[str, Any], tools: frozenset[str]) -> bool:
    """Whether the agent has every tool a memory's actions need (an entry naming none needs none)."""
    return all(t.lower() in tools for t in field_words(e.get("tools")))


@lru_cache(maxsize=8192)
def _shape_tokens(shape: str) -> frozenset[str]:
    """A goal shape's tokens, the masked values left out."""
    return frozenset().union(*(token_set(p) for p in shape.split(GOAL_MASK)))


def goal_closeness(goal: frozenset[str], shapes: Sequence[str]) -> float:
    """How alike a goal (its tokens) is to the closest of a procedure's goal shapes (its examples with their
    values masked): the Dice overlap of their tokens, 0..1. The examples' values are not compared, so a value
    two tasks share (a title, a contact) does not make them one task. (Unweighted: a word every goal of a task
    has is what makes them one task, not noise to discount as an IDF would.)"""
    best = 0.0
    for shape in shapes:
        theirs = _shape_tokens(shape)
        if goal or theirs:
            best = max(best, 2 * len(goal & theirs) / (len(goal) + len(theirs)))
    return best
