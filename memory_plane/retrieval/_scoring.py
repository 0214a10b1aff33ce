"""Filters and the design's weighted score: what a candidate memory is worth to a goal.

Everything here looks at one candidate at a time (its features, the parsed goal and the request's
environment); recall, routing and the prompt block are the retriever's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from lifecycle import STATUSES, field_text, field_words

from ._query import ParsedQuery
from ._sources import BAD_TIME, ENV_KEYS, Feat

if TYPE_CHECKING:
    from ._retriever import RetrieveConfig

WEIGHTS = {"goal_similarity": 0.35, "entity_or_app_match": 0.20, "applicability": 0.15, "confidence": 0.10,
           "recency": 0.10, "validation": 0.10}
PENALTY_WEIGHT = 0.30


class Query(NamedTuple):
    """A parsed goal with the request facts every candidate is judged against."""

    q: ParsedQuery
    env: tuple[str | None, ...]
    now: datetime
    names: tuple[str, ...]  # lowercase entity names worth looking for in a memory's text
    tools: frozenset[str]  # lowercase tools the agent has now (empty: not told, nothing is filtered)
    exclude: frozenset[str]  # memory ids the caller asked to leave out of everything


Drop = Callable[..., None]
"""Counts why a candidate was not offered: drop(reason, item_id=None, detail=None)."""


def mismatch(appl: tuple[str | None, ...], env: tuple[str | None, ...]) -> str:
    """Which applicability keys of a memory differ from the request's (for --explain)."""
    diffs = [f"{k} {a} ≠ {b}" for k, a, b in zip(ENV_KEYS, appl, env) if a is not None and b is not None and a != b]
    return "; ".join(diffs) or "not applicable here"


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


def intent_sim(q: ParsedQuery, intent: Any, sim: float) -> float:
    """Similarity raised for a memory of the goal's own intent."""
    if q.intent != "unknown" and intent == q.intent:
        return max(sim, 0.5 + 0.5 * sim)
    return sim


def tools_available(e: dict[str, Any], tools: frozenset[str]) -> bool:
    """Whether the agent has every tool a memory's actions need (an entry naming none needs none)."""
    return all(t.lower() in tools for t in field_words(e.get("tools")))


class Scorer:
    """The filters and the weighted score under one RetrieveConfig (applicability memoised)."""

    def __init__(self, config: RetrieveConfig) -> None:
        self.config = config
        self._appl_memo: dict[tuple[Any, ...], float | None] = {}

    def applicability(self, appl: tuple[str | None, ...], env: tuple[str | None, ...],
                       app_bound: bool) -> float | None:
        """1.0 all keys known and matching, lower when the request does not know some; None on a mismatch."""
        memo_key = (appl, env, app_bound)
        if memo_key in self._appl_memo:
            return self._appl_memo[memo_key]
        total = known = 0
        result: float | None = None
        for i, (have, want) in enumerate(zip(appl, env)):
            if have is None or (i == 3 and not app_bound):
                continue
            total += 1
            if want is None:
                continue
            known += 1
            if have != want:
                break
        else:
            result = 0.6 if total == 0 else (1.0 if known == total else 0.6 + 0.4 * known / total)
        if len(self._appl_memo) > 4096:
            self._appl_memo.clear()
        self._appl_memo[memo_key] = result
        return result

    def live(self, f: Feat, now: datetime, drop: Drop, item_id: str) -> bool:
        """Whether a memory may be served at all (status and expiry); the reason is counted otherwise."""
        if f.status not in ("active", "conflicted"):
            # replaced, deleted, expired, and inactive or any status a person typed: not served.
            drop(f.status if f.status in STATUSES else "inactive", item_id, f"status {f.status}")
            return False
        if f.expires is not None and (f.expires is BAD_TIME or f.expires <= now):
            drop("expired", item_id, "expires_at unreadable" if f.expires is BAD_TIME else "past expires_at")
            return False
        return True

    def recency(self, when: datetime | None, now: datetime) -> float:
        """1.0 for a memory of now, falling with age (0.5 when its time is unknown)."""
        if when is None or when is BAD_TIME:
            return 0.5
        age = max(0.0, (now - when).total_seconds() / 86400)
        return math.exp(-age / self.config.recency_days)

    def score(self, f: Feat, sim: float, app_match: float, appl: float, now: datetime) -> float:
        """The design's weighted score."""
        return (0.35 * sim + 0.20 * app_match + 0.15 * appl + 0.10 * f.confidence
                + 0.10 * self.recency(f.when, now) + 0.10 * f.validation - PENALTY_WEIGHT * f.penalty)

    def relevant(self, item_type: str, sim: float, q: ParsedQuery, app: Any, status: str) -> bool:
        """Whether a recalled memory is about this goal at all (tested before the hard filters)."""
        # "The goal names this memory's app" (an app match of 0.8 or more) is the only app evidence used.
        named = bool(q.app) and app == q.app and not q.app_generic
        if item_type == "calibration":
            return True
        if status == "conflicted":
            return named or sim >= 0.3
        if item_type == "app_profile":
            return app is not None and (app == q.app or app in q.apps)
        if item_type == "failure":
            if not app:
                return True  # a device-wide failure mode (e.g. the input method) is always a caution
            return named or sim >= 0.4
        if item_type in ("navigation", "ui_anchor"):
            return q.app is not None and app == q.app
        if q.app and app and app != q.app:
            return False
        if q.app and app == q.app:
            return sim >= 0.1
        return sim >= self.config.min_similarity + 0.05
