"""MemoryPlane: the one object the agent runtime talks to."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from device_memory import DeviceMemory
from episodes import (
    EpisodeJob,
    EpisodeRecorder,
    LessonExtractor,
    OutcomeUpdater,
    TaskEpisode,
    TaskEpisodeStore,
    TaskEpisodeWriter,
)
from lifecycle import DEFAULT_LOCK_TIMEOUT, Clock, Collection, VerifyReport, init_tree, resolve_root, system_clock

from ._maintenance import verify_tree
from ._types import MemoryRetrieveRequest

log = logging.getLogger("memory_plane")


class MemoryPlane:
    """Retrieve before a task, record during it, commit after it; never fails the task."""

    def __init__(self, root: Path, *, clock: Clock = system_clock, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 queue_size: int = 64, extra_jobs: Iterable[EpisodeJob] = ()) -> None:
        self.root = Path(root)
        self.clock = clock
        self.lock_timeout = lock_timeout
        self.episodes = TaskEpisodeStore(self.root, clock=clock, lock_timeout=lock_timeout)
        self.device = DeviceMemory(self.root, clock=clock, lock_timeout=lock_timeout)
        self.extractor = LessonExtractor(self.device, self.episodes)
        self.outcomes = OutcomeUpdater(self.device, self.episodes)
        jobs: list[EpisodeJob] = [self.outcomes, self.extractor, *extra_jobs]
        self.writer = TaskEpisodeWriter(self.episodes, jobs=jobs, queue_size=queue_size)

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None, **kwargs: Any) -> MemoryPlane:
        """Open (and create if missing) the memory tree at root (default: $MEMPLANE_ROOT or the device path)."""
        path = resolve_root(root)
        init_tree(path)
        return cls(path, **kwargs)

    # -- the runtime's three calls ----------------------------------------------

    def new_episode_recorder(self, req: MemoryRetrieveRequest, ctx: Any = None) -> EpisodeRecorder:
        """Start recording the task described by req; ctx's memory ids are kept as its refs."""
        hints = req.current_hints
        refs = ctx.refs() if ctx is not None and hasattr(ctx, "refs") else []
        query = getattr(ctx, "query", None)
        normalized = None
        if query is not None:
            normalized = {"intent": query.intent, "app": query.app, "target": query.target}
        return EpisodeRecorder(
            self.episodes, req.input, device_id=req.device_id or "default", language=hints.language,
            screen=hints.screen(), app=hints.app, page=hints.page, normalized_goal=normalized,
            retrieved_refs=refs, clock=self.clock, on_exit_commit=self.commit_episode,
        )

    def commit_episode(self, episode: TaskEpisode) -> bool:
        """Write the episode now and queue lesson extraction; return False (logged) on failure."""
        return self.writer.commit(episode)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait for background work (tests, shutdown); False if the timeout passed."""
        return self.writer.flush(timeout)

    def stats(self) -> dict[str, Any]:
        """Counters of commits and background jobs, including failures."""
        return self.writer.stats.to_dict()

    # -- lifecycle ----------------------------------------------------------------

    def collections(self) -> list[Collection]:
        """Every collection of memory files in this tree (for verify and GC)."""
        return list(self.device.all_collections())

    def verify(self, *, fix: bool = False) -> VerifyReport:
        """Check the tree, rebuild indexes, close crashed episodes; quarantine broken files with fix."""
        return verify_tree(self.root, self.collections(), self.episodes, fix=fix, now=self.clock())

    def close(self, timeout: float = 10.0) -> None:
        """Finish background work and stop the worker."""
        self.writer.close(timeout)

    def __enter__(self) -> MemoryPlane:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
