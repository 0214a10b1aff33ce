"""Hits: a chosen candidate as the MemoryHit the block shows, with its score factors.

The same memories are shown on every retrieve, so what an index line alone decides of its hit is kept
while the line stays (``HitMaker._fields``), and a replayed rule's hit is copied, not made again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from device_memory import DeviceMemory
from episodes import TaskEpisodeStore
from lifecycle import field_str, field_text, field_words

from .._long_term import LongTermStore
from .._retrieve_types import MemoryHit
from ._scoring import Cand, Scorer
from ._sources import Feat


def _own_copy(hit: MemoryHit) -> MemoryHit:
    """A copy of a hit whose dict and lists are its own."""
    # One copy with its containers replaced (assigning them afterwards goes through pydantic's __setattr__).
    return hit.model_copy(update={"factors": dict(hit.factors), "conflicts_with": list(hit.conflicts_with),
                                  "steps": list(hit.steps)})


class HitMaker:
    """Makes the MemoryHit of a chosen candidate (its layout's path, its texts, its rounded factors)."""

    def __init__(self, scorer: Scorer, device: DeviceMemory, episodes: TaskEpisodeStore,
                 long_term: LongTermStore) -> None:
        self.scorer = scorer
        self.device = device
        self.episodes = episodes
        self.long_term = long_term
        self._fields: dict[tuple[int, int], tuple[dict[str, Any], Any]] = {}  # see hit
        self._rule_hits: dict[int, tuple[Cand, MemoryHit]] = {}  # see rule_hit

    def hit(self, c: Cand, category: str, now: datetime, rec: Any = None,
            fresh: tuple[dict[str, Any], Feat] | None = None) -> MemoryHit:
        """The MemoryHit of a chosen candidate, with every score factor kept for --explain."""
        e, f = fresh if fresh is not None else (c.src.entries[c.i], c.src.feat(c.i))
        # Rounded as they are made (one hit per shown memory of every retrieve: no dict made twice).
        factors = {"goal_similarity": round(c.sim, 3), "entity_or_app_match": round(c.app_match, 3),
                   "applicability": round(c.appl, 3), "confidence": round(f.confidence, 3),
                   "recency": round(self.scorer.recency(f.when, now), 3), "validation": round(f.validation, 3),
                   "conflict_or_stale_penalty": round(f.penalty, 3)}
        if c.bonus:
            factors["user_rule_bonus"] = round(c.bonus, 3)
        if not f.has_evidence:
            factors["no_evidence"] = 1.0  # part of the penalty: nothing on disk shows this memory
        # What an index line alone decides, kept while the line is the same object (the same memories are
        # shown on every retrieve); a file read now (``rec``) decides anew.
        key = (id(c.src), c.i)
        known = self._fields.get(key) if rec is None else None
        if known is not None and known[0] is e:
            item_type, text, title, path, page = known[1]
        else:
            item_type, text, title, path, page = fields = self._fields_of(c, e, f, rec)
            if rec is None:
                if len(self._fields) > 8192:
                    self._fields.clear()
                self._fields[key] = (e, fields)  # the line is kept: its id is not reused meanwhile
        return MemoryHit(id=e["id"], type=item_type, score=round(c.score, 4), confidence=f.confidence, text=text,
                         title=title, path=path, app=f.app, page=page, status=f.status,
                         factors=factors, caution=category in ("failure_modes", "conflicts"),
                         conflicts_with=[x for x in field_words(e.get("conflicts_with")) if x != e["id"]][:3]
                         if category == "conflicts" else [])

    def _fields_of(self, c: Cand, e: dict[str, Any], f: Feat,
                   rec: Any) -> tuple[str, str, str | None, str, str | None]:
        """(type, text, title, path, page) of a hit, from its index line (and its file, when read now)."""
        kind = c.src.kind
        rel = field_str(e.get("path"))
        if kind == "episode":
            item_type = "task_episode" if f.validation == 1.0 else "task_episode_failure"
            text, title = field_text(e.get("summary")) or field_text(e.get("goal")), field_str(e.get("goal"))
            path = f"{self.episodes.layout.rel_dir}/{rel or ''}"
        elif kind == "long_term":
            item_type, text = field_str(e.get("type")) or "fact", field_text(e.get("summary"))
            if rec is not None:  # the text as the file holds it now, if a person edited it since
                text = " ".join(str(rec.content).split())[:240] or text
            title = field_str(e.get("title"))
            path = f"{self.long_term.layout.rel_dir}/{rel or ''}"
        else:
            item_type, title = c.item_type, field_str(e.get("title"))
            text = field_text(e.get("summary")) or field_text(e.get("title")) or e["id"]
            layout = self.device.collections[c.item_type].layout
            path = f"{layout.rel_dir}/{rel or layout.name_for(e['id'])}"
        return item_type, text, title, path, field_str(e.get("page"))

    def rule_hit(self, c: Cand, now: datetime) -> MemoryHit:
        """The hit of a rule or preference that stands as indexed. The scorer hands back the same candidate
        object for a verdict it replayed (no clock-bound field: its hit cannot differ), which gets a copy of
        the hit it had before instead of a new one (the copy's lists are its own: a caller may edit them)."""
        known = self._rule_hits.get(id(c))
        if known is not None and known[0] is c:
            return _own_copy(known[1])
        hit = self.hit(c, "long_term", now)
        if c.sim == 0.0:  # only a replayed verdict (similarity 0) comes back as the same object: kept for it
            if len(self._rule_hits) > 2048:
                self._rule_hits.clear()
            self._rule_hits[id(c)] = (c, _own_copy(hit))  # the candidate is kept: its id is not reused meanwhile
        return hit
