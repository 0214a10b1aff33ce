"""Upkeep: what cron runs over the tree (verify, GC) and the way back from quarantine."""

from ._gc import gc_tree
from ._restore import restore_from_quarantine
from ._verify import verify_tree

__all__ = ["gc_tree", "restore_from_quarantine", "verify_tree"]
