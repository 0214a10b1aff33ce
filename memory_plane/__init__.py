"""memory-plane: the memory of an on-device phone agent, kept as plain files.

``MemoryPlane.open(root)`` gives the runtime its calls: ``retrieve`` before a task,
``new_episode_recorder`` during it, ``commit_episode`` after it.
"""

from ._long_term import LongTermMemory, LongTermStore, SaveResult
from ._plane import MemoryPlane
from ._retrieve_types import CurrentEnvironmentHints, MemoryHit, MemoryRetrieveRequest, RoleMemoryContext
from ._session import SessionStore
from .lifecycle import MemoryPlaneError
from .retrieval import MemoryContext, ParsedQuery, RetrieveConfig, Retriever, parse_query, quote_data, render_context

__all__ = [
    "CurrentEnvironmentHints",
    "LongTermMemory",
    "LongTermStore",
    "MemoryContext",
    "MemoryHit",
    "MemoryPlane",
    "MemoryPlaneError",
    "MemoryRetrieveRequest",
    "MemoryTools",
    "ParsedQuery",
    "RetrieveConfig",
    "Retriever",
    "RoleMemoryContext",
    "SaveResult",
    "SessionStore",
    "ToolResult",
    "parse_query",
    "quote_data",
    "render_context",
]


def __getattr__(name: str) -> object:
    # The model's tools load on first use: a process that only retrieves pays nothing for them.
    if name in ("MemoryTools", "ToolResult"):
        from . import _tools

        return getattr(_tools, name)
    raise AttributeError(f"module 'memory_plane' has no attribute {name!r}")

