"""Upkeep: what cron runs over the tree (verify, GC) and the way back from quarantine."""

from ._gc import gc_tree
from ._restore import restore_from_quarantine
from ._verify import check_jobs, repair_tree, verify_tree

__all__ = ["check_jobs", "gc_tree", "repair_tree", "restore_from_quarantine", "verify_tree"]
