"""Retrieval: what the device has learned that applies to a goal, ranked and rendered as the prompt block.

``Retriever`` recalls candidates from the stores' indexes (``_sources``, ``_postings_cache``), judges each
one (``_scoring``), routes the kept ones to the block's sections and fits them to the budget; ``_render``
writes the block.
"""

from ._context import MemoryContext
from ._postings_cache import CACHE_DIR as POSTINGS_CACHE_DIR
from ._query import ParsedQuery, parse_query
from ._render import quote_cut, quote_data, render_context
from ._retriever import RetrieveConfig, Retriever

__all__ = [
    "POSTINGS_CACHE_DIR",
    "MemoryContext",
    "ParsedQuery",
    "RetrieveConfig",
    "Retriever",
    "parse_query",
    "quote_cut",
    "quote_data",
    "render_context",
]
