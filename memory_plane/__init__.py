"""memory-plane: the memory of an on-device phone agent, kept as plain files.

``MemoryPlane.open(root)`` gives the runtime its calls: ``retrieve`` before a task,
``new_episode_recorder`` during it, ``commit_episode`` after it.
"""

from lifecycle import MemoryPlaneError

from ._plane import MemoryPlane
from ._types import CurrentEnvironmentHints, MemoryHit, MemoryRetrieveRequest, RoleMemoryContext

__all__ = [
    "CurrentEnvironmentHints",
    "MemoryHit",
    "MemoryPlane",
    "MemoryPlaneError",
    "MemoryRetrieveRequest",
    "RoleMemoryContext",
]
