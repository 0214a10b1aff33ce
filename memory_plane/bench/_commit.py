"""`bench commit`: commit latency of a 30-event, 30-screenshot episode with 100 and 10,000 stored."""

from __future__ import annotations

import argparse
import io
import os
import time
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from memory_plane.episodes import TaskEpisodeStore
from memory_plane.lifecycle import IndexFile, collection_lock

from ._util import pct, r, temp_root

EVENTS = 30


def _shots(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        img = Image.new("RGB", (640, 1200), (250, 250, 250))
        d = ImageDraw.Draw(img)
        for k in range(10):
            d.rectangle([(i * 37 + k * 53) % 560, (k * 111 + i * 7) % 1100, (i * 37 + k * 53) % 560 + 80,
                         (k * 111 + i * 7) % 1100 + 60], fill=((i * 20) % 255, (k * 25) % 255, 90))
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=75)
        out.append(buf.getvalue())
    return out


def _prefill(root: Path, n: int, year: str = "2026") -> None:
    """Store n committed episodes (episode.yaml plus index line) quickly, without fsync: fixture only."""
    store = TaskEpisodeStore(root)
    entries = []
    for i in range(n):
        eid = f"ep_{year}0101_{i:010x}"
        d = store.episode_dir(eid)
        d.mkdir(parents=True, exist_ok=True)
        (d / "episode.yaml").write_text(f"id: {eid}\nstatus: active\nuser_goal: goal {i}\nstarted_at: "
                                        f"'2026-01-01T00:00:00Z'\noutcome:\n  success: true\n", "utf-8")
        entries.append({"id": eid, "status": "active", "success": True, "app": "wechat", "intent": "send_message",
                        "goal": f"打开微信给联系人{i}发消息", "summary": f"Goal: 打开微信给联系人{i}发消息. Path: tap. "
                        "Outcome: success", "started_at": f"{year}-01-01T00:00:00Z",
                        "path": f"{year}/{eid}/episode.yaml"})
    with collection_lock(store.dir):
        IndexFile(store.dir / "index.yaml").write(entries)
    # The fixture is written without fsync; flush it now, so what is measured is the commit and not
    # the kernel writing back 10,000 fixture files during the first commits' fsyncs.
    os.sync()


def _record(plane: Any, req: Any, shots: list[bytes], t: int) -> Any:
    """Record one finished episode of EVENTS events, each tool result with a screenshot."""
    rec = plane.new_episode_recorder(req)
    for i in range(EVENTS // 2):
        rec.tool_call("mouse_click", {"x": 10 * i, "y": 20 * i}, content=f"step {i}")
        rec.tool_result("mouse_click", output="ok", screenshot=shots[(2 * i + t) % len(shots)],
                        observed_state={"app": "WeChat", "page": f"P{i % 5}"})
        rec.tool_result("mouse_click", output="ok", screenshot=shots[(2 * i + 1 + t) % len(shots)])
    return rec.finish(success=True, final_state="chat")


def _measure(stores: dict[str, tuple[int, str]], trials: int, shots: list[bytes]) -> dict[str, dict[str, float]]:
    """Commit latencies of every store, interleaved trial by trial.

    Interleaving makes the comparison paired: a busy phase of the machine (fsync latency on a shared
    disk varies by 2x over seconds) lands on every store alike instead of on whichever ran then.
    """
    from contextlib import ExitStack

    from .._plane import MemoryPlane
    from .._retrieve_types import CurrentEnvironmentHints, MemoryRetrieveRequest

    req = MemoryRetrieveRequest(input="打开微信，找到张三，准备发消息", current_hints=CurrentEnvironmentHints(
        language="zh-CN", screen_width=640, screen_height=1200))
    commit_ms: dict[str, list[float]] = {name: [] for name in stores}
    record_ms: dict[str, list[float]] = {name: [] for name in stores}
    with ExitStack() as stack:
        planes = {}
        for name, (stored, year) in stores.items():
            root = stack.enter_context(temp_root())
            _prefill(root, stored, year)
            planes[name] = stack.enter_context(MemoryPlane.open(root))
        names = list(stores)
        for t in range(trials):
            for name in names[t % len(names):] + names[:t % len(names)]:  # rotate who goes first
                plane = planes[name]
                t0 = time.perf_counter()
                ep = _record(plane, req, shots, t)
                record_ms[name].append((time.perf_counter() - t0) * 1000)
                t1 = time.perf_counter()
                ok = plane.commit_episode(ep)
                commit_ms[name].append((time.perf_counter() - t1) * 1000)
                assert ok, plane.stats()
                plane.flush(30)  # background extraction is not part of the commit the agent waits for
    return {name: {"p50": pct(commit_ms[name], 50), "p95": pct(commit_ms[name], 95),
                   "record_p50": pct(record_ms[name], 50)} for name in stores}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Commit p50/p95 at 100 and at 10,000 stored episodes, and their ratio."""
    short = getattr(args, "short", False)
    big = 2000 if short else int(getattr(args, "episodes", 10_000) or 10_000)
    trials = 15 if short else 60
    shots = _shots(EVENTS)
    stores = {"small": (100, "2026"), "large": (big, "2026")}
    if not short:
        # The same store with the old episodes in last year's folder: separates our work (index, files
        # of the new episode) from the kernel's cost of one folder holding 10,000 episode folders.
        stores["other"] = (big, "2025")
    m = _measure(stores, trials, shots)
    small, large = m["small"], m["large"]
    extra = {}
    if "other" in m:
        extra = {f"p50_ms_at_{big}_in_last_years_folder": r(m["other"]["p50"], 2),
                 "ratio_p50_when_old_episodes_are_in_last_years_folder": r(m["other"]["p50"] / small["p50"], 2)}
    return {**extra,
        "events_per_episode": EVENTS,
        "screenshots_per_episode": EVENTS,
        "screenshot": "640x1200 JPEG",
        "trials": trials,
        "interleaved": True,
        "stored_small": 100,
        "stored_large": big,
        "p50_ms_at_100": r(small["p50"], 2),
        "p95_ms_at_100": r(small["p95"], 2),
        f"p50_ms_at_{big}": r(large["p50"], 2),
        f"p95_ms_at_{big}": r(large["p95"], 2),
        "ratio_p50_large_vs_small": r(large["p50"] / small["p50"], 2),
        "record_episode_p50_ms": r(large["record_p50"], 1),
        "cpu_count": os.cpu_count(),
    }
