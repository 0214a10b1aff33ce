"""Trees of many committed episodes for `bench scale --episodes`, built by writing what ``commit_episode`` writes.

Each episode is recorded by the public recorder (``new_episode_recorder``, its tool calls, ``finish``) and
committed by the episode writer the plane uses, without fsync. The background jobs (outcomes, lessons) do not run:
what they learn is not built, only their done-markers (empty files) are written, so verify's catch-up finds no job
left to run. The first episodes are built both ways, through ``commit_episode`` (its jobs held back) and by the
builder, and every file under episodes/ but the markers compared byte for byte (index.yaml by its sorted lines).
Episode ids and the recorder's duration come from a counter in both builds, so two builds of a size are the same.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ._util import same_files

SPAN = timedelta(days=240)
"""The episodes of a tree start over this time, up to the day of the build: past the full-trace TTL (30 days) most
of them, past the summary TTL (180 days) a quarter, as a phone's store stands once GC has run for a while."""
_APPS = ("Router", "Clock", "Notes", "Mail", "Maps", "Wallet", "Camera", "Music")
_GOALS = ("check the {w} code on the {p} page", "note down the {w} time", "send the {w} report",
          "打开{w}的页面查看第{p}项", "find the {w} route to the {p} station")
_WORDS = ("office", "home", "gym", "school", "bank", "shop", "cafe", "park", "station", "airport", "clinic")


def _goal(i: int) -> str:
    return _GOALS[i % len(_GOALS)].format(w=_WORDS[(i // 5) % len(_WORDS)], p=i % 97)


class _Counter:
    """The build's clock and monotonic time: every call one step later (reproducible across builds)."""

    def __init__(self, start: datetime) -> None:
        # Episodes of one size start apart by SPAN / n; the clock stands still within one episode.
        self.at = start
        self.mono = 1000.0

    def clock(self) -> datetime:
        """The start time of the episode being recorded."""
        return self.at

    def monotonic(self) -> float:
        """A quarter of a second later than the last call."""
        self.mono += 0.25
        return self.mono


@contextlib.contextmanager
def _reproducible(counter: _Counter, fast: bool) -> Iterator[None]:
    """Episode ids from the start time and a counter, the recorder's duration from ``counter`` and, when
    ``fast``, no fsync (a fixture: the bytes written are the same)."""
    from memory_plane.episodes import reproducible_recordings

    seq = iter(range(1 << 40))
    saved = os.fsync
    if fast:
        os.fsync = lambda fd: None
    try:
        with reproducible_recordings(lambda started: f"ep_{started.strftime('%Y%m%d')}_{next(seq):010x}",
                                     counter.monotonic):
            yield
    finally:
        os.fsync = saved


def _record(plane: Any, i: int) -> Any:
    """Record the i-th episode (a few paired steps) and return it finished."""
    from memory_plane._retrieve_types import MemoryRetrieveRequest

    rec = plane.new_episode_recorder(MemoryRetrieveRequest(input=_goal(i)))
    app = _APPS[i % len(_APPS)]
    for k in range(2 + i % 3):
        rec.tool_call("mouse_click", {"x": 10 * k + i % 7, "y": 20 * k}, content=f"step {k} of {i}")
        rec.tool_result("mouse_click", output="ok", observed_state={"app": app, "page": f"P{k}"})
    ok = i % 4 != 3
    return rec.finish(success=ok, final_state="done" if ok else None,
                      failure_reason=None if ok else f"the {app} page never showed item {i % 97}")


def span_start(now: datetime | None = None) -> datetime:
    """When the first episode of a tree built now starts (midnight UTC, so two builds of one day agree)."""
    today = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return today.replace(hour=0, minute=0, second=0, microsecond=0) - SPAN


def build_episodes(root: Path, n: int, *, through_api: bool = False, start: datetime | None = None) -> None:
    """n committed episodes in a fresh tree at root (through commit_episode, or by writing what it writes), started
    one after the other over ``SPAN`` from ``start`` (``span_start()``)."""
    from memory_plane._plane import MemoryPlane
    from memory_plane.episodes import TaskEpisodeWriter
    from memory_plane.lifecycle import guarded_touch, init_tree

    init_tree(root)
    first = start or span_start()
    step = SPAN / max(n, 1)
    counter = _Counter(first)
    with _reproducible(counter, fast=not through_api):
        plane = MemoryPlane.open(root, clock=counter.clock)
        try:
            jobs = [j.name for j in plane._writer.jobs]
            bare = TaskEpisodeWriter(plane._episodes, jobs=[])
            for i in range(n):
                counter.at = first + i * step
                ep = _record(plane, i)
                if through_api:
                    plane._writer.jobs = []  # what commit_episode writes; what its jobs learn is not built
                    assert plane.commit_episode(ep)
                    continue
                assert bare.commit(ep)
                d = plane._episodes.episode_dir(ep.id)
                for name in jobs:
                    guarded_touch(root, d / f".done-{name}")
        finally:
            plane.close()
    if not through_api:
        os.sync()  # the fixture's pages written back now, not during the first measured operation


def check_episode_builder(base: Path, n: int) -> int:
    """Build the first n episodes both ways and compare every file under episodes/; how many were compared."""
    api, fast = base / "ep_api", base / "ep_fast"
    start = span_start()
    build_episodes(api, n, through_api=True, start=start)
    build_episodes(fast, n, start=start)
    return same_files(api, fast, "episodes",
                      lambda p: p.is_file() and p.name != ".lock" and not p.name.startswith(".done-"),
                      "commit_episode")
