"""Verify over every collection of a plane, plus the checks only episodes need."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from episodes import TaskEpisodeStore
from lifecycle import Collection, VerifyReport, verify_collections


def verify_tree(root: Path, collections: Iterable[Collection], episodes: TaskEpisodeStore, *, fix: bool = False,
                now: datetime | None = None) -> VerifyReport:
    """Rebuild indexes, report bad files, close episodes whose recorder died."""
    report = VerifyReport()
    interrupted: list[str] = []
    # Episodes first: an interrupted episode gets its index line before the index rebuild.
    for item in episodes.iter_items():
        ep = item.record
        if ep is None or ep.status != "recording":
            continue
        if episodes.is_recording_live(ep.id):
            continue  # a running agent is recording it right now
        # Closing a dead recording is safe without --fix: it only adds what the crash lost.
        episodes.mark_interrupted(ep, now)
        interrupted.append(ep.id)
        report.fixed.append(f"marked {ep.id} interrupted")
    report.stats["interrupted"] = interrupted
    verify_collections(root, [*collections, episodes], fix=fix, report=report)
    return report
