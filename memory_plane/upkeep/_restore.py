"""The way back from lifecycle/quarantine/: restore a file after checking that its store can load it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory_plane.device_memory import DeviceMemory
from memory_plane.episodes import TaskEpisodeStore
from memory_plane.lifecycle import (
    QUARANTINE_DIR,
    FileProblemError,
    UsageError,
    find_quarantined,
    restore_quarantined,
)

from .._long_term import LongTermStore


def _owner(root: Path, device: DeviceMemory, episodes: TaskEpisodeStore, long_term: LongTermStore,
           rel: str) -> Any:
    """The store a path of the tree belongs to (None for files that are not memory items)."""
    stores: list[Any] = [episodes, long_term, device.profiles, *device.collections.values()]
    return next((s for s in stores if s.layout.owns(rel)), None)


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


__all__ = ["restore_from_quarantine"]
