"""The way back from lifecycle/quarantine/: restore a file after checking that its store can load it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from device_memory import DeviceMemory
from episodes import EPISODE_FILE, TaskEpisodeStore
from lifecycle import (
    QUARANTINE_DIR,
    FileProblemError,
    UsageError,
    find_quarantined,
    quarantine_name,
    restore_quarantined,
)

from .._long_term import LongTermStore


def _owner(root: Path, device: DeviceMemory, episodes: TaskEpisodeStore, long_term: LongTermStore,
           rel: str) -> Any:
    """The store a path of the tree belongs to (None for files that are not memory items)."""
    parts = Path(rel).parts
    if parts[:1] == ("episodes",) and parts[-1] == EPISODE_FILE:
        return episodes
    if parts[:2] == ("long_term", "memories"):
        return long_term
    if rel == "device/profile.yaml" or parts[:2] == ("device", "profiles"):
        return device.profiles
    for coll in device.collections.values():
        if len(parts) == 3 and "/".join(parts[:2]) == coll.rel_dir:
            return coll
    return None


def restore_from_quarantine(root: Path, device: DeviceMemory, episodes: TaskEpisodeStore,
                            long_term: LongTermStore, name: str, *, force: bool = False) -> dict[str, Any]:
    """Put a quarantined file back after checking it loads (``force``: even if not), then re-index its store."""
    q = find_quarantined(root, name)
    owner = _owner(root, device, episodes, long_term, q.original)
    problem = None
    if owner is not None:
        try:
            owner.load_path(root / QUARANTINE_DIR / q.name)
        except (FileProblemError, OSError) as exc:
            problem = str(exc).replace(str(root / QUARANTINE_DIR / q.name), q.original)
    if problem and not force:
        raise UsageError(f"{q.name} still does not load ({problem}); fix it in {QUARANTINE_DIR}/ and "
                         "restore again, or restore --force")
    target = restore_quarantined(root, q)
    rebuilt = bool(owner is not None and owner.rebuild_index())
    return {"restored": q.original, "from": f"{QUARANTINE_DIR}/{q.name}", "path": str(target),
            "problem": problem, "reindexed": rebuilt}


def quarantined(root: Path, path: Path) -> bool:
    """Tell whether a file of this path was moved to quarantine (and is still there)."""
    qdir = root / QUARANTINE_DIR
    prefix = quarantine_name(root, path) + "."
    try:
        with os.scandir(qdir) as it:
            return any(e.name.startswith(prefix) for e in it)
    except OSError:
        return False


__all__ = ["quarantined", "restore_from_quarantine"]
