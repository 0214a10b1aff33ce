"""Hits: a chosen candidate as the MemoryHit the block shows, with its score factors.

The same memories are shown on every retrieve, so what an index line alone decides of its hit is kept
for the index's generation (``Generation.hit_fields``), and a replayed rule's hit is copied, not made again
(``EnvView.rule_hits``).
"""

from __future__ import annotations

from datetime import datetime

from memory_plane.lifecycle import field_words

from .._retrieve_types import MemoryHit
from ._candidates import Cand, Rejudged
from ._generation import ShownRule
from ._goal_match import Query
from ._scoring import Scorer


def _own_copy(hit: MemoryHit) -> MemoryHit:
    """A copy of a hit whose dict and lists are its own."""
    # One copy with its containers replaced (assigning them afterwards goes through pydantic's __setattr__).
    return hit.model_copy(update={"factors": dict(hit.factors), "conflicts_with": list(hit.conflicts_with),
                                  "steps": list(hit.steps)})


class HitMaker:
    """Makes the MemoryHit of a chosen candidate (its layout's path, its texts, its rounded factors)."""

    def __init__(self, scorer: Scorer) -> None:
        self.scorer = scorer

    def hit(self, c: Cand, category: str, now: datetime, fresh: Rejudged | None = None) -> MemoryHit:
        """The MemoryHit of a chosen candidate, with every score factor kept for --explain (``fresh``: what its
        file says now, when it changed since its index line)."""
        src = c.src
        e, f = (fresh.entry, fresh.feat) if fresh is not None else (src.entries[c.i], src.feat(c.i))
        # Rounded as they are made (one hit per shown memory of every retrieve: no dict made twice).
        factors = {"goal_similarity": round(c.sim, 3), "entity_or_app_match": round(c.app_match, 3),
                   "applicability": round(c.appl, 3), "confidence": round(f.confidence, 3),
                   "recency": round(self.scorer.recency(f.when, now), 3), "validation": round(f.validation, 3),
                   "conflict_or_stale_penalty": round(f.penalty, 3)}
        if c.bonus:
            factors["user_rule_bonus"] = round(c.bonus, 3)
        if not f.has_evidence:
            factors["no_evidence"] = 1.0  # part of the penalty: nothing on disk shows this memory
        # What an index line alone decides, kept for its generation (the same memories are shown on every
        # retrieve); a file read now decides anew.
        known = src.gen.hit_fields
        fields = known.get(c.i) if fresh is None else None
        if fields is None:
            fields = src.hit_fields(e, f, c.item_type, fresh.record if fresh is not None else None)
            if fresh is None:
                known[c.i] = fields
        return MemoryHit(id=e["id"], type=fields.type, score=round(c.score, 4), confidence=f.confidence,
                         text=fields.text, title=fields.title, path=fields.path, app=f.app, page=fields.page,
                         status=f.status, factors=factors, caution=category in ("failure_modes", "conflicts"),
                         conflicts_with=[x for x in field_words(e.get("conflicts_with")) if x != e["id"]][:3]
                         if category == "conflicts" else [])

    def rule_hit(self, c: Cand, ctx: Query) -> MemoryHit:
        """The hit of a rule or preference that stands as indexed. The scorer hands back the same candidate
        object for a verdict it replayed (no clock-bound field: its hit cannot differ), which gets a copy of
        the hit it had before instead of a new one (the copy's lists are its own: a caller may edit them)."""
        if c.sim != 0.0:  # only a replayed verdict (similarity 0) comes back as the same object
            return self.hit(c, "long_term", ctx.now)
        shown = c.src.gen.view(ctx.env).rule_hits
        known = shown.get(c.i)
        if known is not None and known.cand is c:
            return _own_copy(known.hit)
        hit = self.hit(c, "long_term", ctx.now)
        shown[c.i] = ShownRule(c, _own_copy(hit))
        return hit
