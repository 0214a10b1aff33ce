"""MemoryContext: what retrieve returns, ready to render into the prompt."""

from __future__ import annotations

from typing import Any

from .._retrieve_types import CATEGORY_ORDER, MemoryHit, RoleMemoryContext
from ._query import ParsedQuery
from ._scoring import WEIGHTS


class MemoryContext:
    """Retrieved memories by category, with the parsed query and the rendered prompt block."""

    def __init__(self, common: RoleMemoryContext, query: ParsedQuery | None = None, *,
                 frozen_block: str | None = None, session_id: str | None = None,
                 dropped: dict[str, int] | None = None) -> None:
        self.common = common
        self.query = query
        self.frozen_block = frozen_block
        self.session_id = session_id
        self.dropped = dropped or {}
        # Each candidate a filter turned away ({id, reason, detail}); filled by MemoryPlane.explain().
        self.dropped_items: list[dict[str, Any]] = []

    def refs(self) -> list[str]:
        """Ids of every memory shown, in render order, without repeats."""
        return list(dict.fromkeys(h.id for h in self.common.all_hits()))

    def hits(self) -> list[MemoryHit]:
        """Every hit in render order."""
        return self.common.all_hits()

    def render(self) -> str:
        """The prompt block (frozen for the session when session freeze applies)."""
        if self.frozen_block is not None:
            return self.frozen_block
        from ._render import render_context

        return render_context(self.common)

    def explain(self) -> dict[str, Any]:
        """Every hit with its score factors, what hard filters dropped, and the weights the score gives each
        factor (for ``--explain``)."""
        return {
            "query": self.query.to_dict() if self.query else None,
            "hits": {name: [h.model_dump(exclude={"steps"}) for h in getattr(self.common, name)]
                     for name in CATEGORY_ORDER},
            "dropped": self.dropped,
            "dropped_items": self.dropped_items,
            "weights": dict(WEIGHTS),  # the score of each hit: its factors times these, summed
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON form: query, hits by category, refs and the rendered block."""
        return {
            "query": self.query.to_dict() if self.query else None,
            "refs": self.refs(),
            "hits": {name: [h.model_dump(exclude={"factors"}) for h in getattr(self.common, name)]
                     for name in CATEGORY_ORDER},
            "rendered": self.render(),
        }
