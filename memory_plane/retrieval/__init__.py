"""Retrieval: what the device has learned that applies to a goal, ranked and rendered as the prompt block.

``Retriever`` (``_retriever``) recalls each source's candidates from the stores' indexes (``_recall``;
``_sources``: one class per kind of store; ``_features``: what an index line says; ``_postings_cache``), each
source's derived state held by its index's current ``Generation`` (``_generation``; a fresh process starts the
long-term one from its snapshot: ``_snapshot``, ``_snapshot_source``, ``_line_entries``), has each one judged
(``Scorer.judge`` in ``_scoring``, its records in ``_candidates``: the filters of its kind in their order, the
score, the section it belongs to; ``_goal_match``: how a memory's app, intent and tools match the goal),
routes the kept ones to the block's sections, keeps each section's best within its cap and fits the block to
its budget (``_budget``), counting what it turned away and why (``_drops``); ``_user_rules`` orders the user's
rules and preferences, ``_rule_plan`` plans the verdicts of those a goal's words do not reach, replayed from
one retrieve to the next, ``_hits`` makes the hits shown, ``_render`` writes the block; ``RetrieveConfig``
(``_config``) holds the caps and thresholds.
"""

from ._config import RetrieveConfig
from ._context import MemoryContext
from ._postings_cache import CACHE_DIR as POSTINGS_CACHE_DIR
from ._query import ParsedQuery, goal_facts, parse_query
from ._render import quote_cut, quote_data, render_context
from ._retriever import Retriever

__all__ = [
    "POSTINGS_CACHE_DIR",
    "MemoryContext",
    "ParsedQuery",
    "RetrieveConfig",
    "Retriever",
    "goal_facts",
    "parse_query",
    "quote_cut",
    "quote_data",
    "render_context",
]
