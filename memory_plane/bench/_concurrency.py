"""`bench concurrency`: several processes commit episodes about the same app while another runs GC and
verify in a loop; every update must land (the app profile's counter equals the episodes committed)."""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from pathlib import Path
from typing import Any

from ._util import temp_root


def _writer(root: str, n: int, tag: int, q: Any) -> None:
    errors = 0
    try:
        from .._plane import MemoryPlane
        from .._retrieve_types import MemoryRetrieveRequest

        with MemoryPlane.open(root) as plane:
            for i in range(n):
                rec = plane.new_episode_recorder(MemoryRetrieveRequest(input=f"打开微信给联系人{tag}-{i}发消息"))
                rec.tool_call("launch_app", {"app": "com.tencent.mm"}, content="微信")
                obs = {"app": "微信", "page": "首页", "package": "com.tencent.mm"}
                rec.tool_result("launch_app", observed_state=obs)
                rec.tool_call("mouse_click", {"x": 5, "y": 5}, content=f"联系人{i}")
                rec.tool_result("mouse_click", observed_state={"app": "微信", "page": f"聊天{i % 3}"})
                if not plane.commit_episode(rec.finish(success=True)):
                    errors += 1
            plane.flush(120)
            s = plane.stats()
            errors += s["commit_errors"] + s["jobs_failed"] + s["jobs_dropped"] + s["retrieve_errors"]
    except Exception:
        errors += 1
    q.put(errors)


def _janitor(root: str, stop: Any, q: Any) -> None:
    errors = rounds = 0
    try:
        from .._plane import MemoryPlane

        with MemoryPlane.open(root) as plane:
            while not stop.is_set():
                plane.gc()
                plane.verify()
                rounds += 1
    except Exception:
        errors += 1
    q.put(("janitor", errors, rounds))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """processes, commits, lost_updates, errors (goals 0, 0)."""
    short = getattr(args, "short", False)
    procs, per = (3, 10) if short else (4, 40)
    spawn = mp.get_context("spawn")  # no inherited locks or threads
    t0 = time.perf_counter()
    with temp_root() as root:
        q, stop = spawn.Queue(), spawn.Event()
        jan = spawn.Process(target=_janitor, args=(str(root), stop, q))
        jan.start()
        writers = [spawn.Process(target=_writer, args=(str(root), per, t, q)) for t in range(procs)]
        for w in writers:
            w.start()
        for w in writers:
            w.join(600)
        stop.set()
        jan.join(600)
        results = [q.get(timeout=10) for _ in range(procs + 1)]
        from .._plane import MemoryPlane

        with MemoryPlane.open(root) as plane:
            app = plane.device.get("app_wechat")
            count = app.success_count if app is not None else 0
            episodes = len(plane.episodes.entries())
            rep = plane.verify()
    writer_errors = sum(r for r in results if isinstance(r, int))
    jan_res = next(r for r in results if isinstance(r, tuple))
    commits = procs * per
    return {"processes": procs + 1, "writers": procs, "commits": commits, "episodes_indexed": episodes,
            "app_profile_success_count": count, "lost_updates": commits - count,
            "lost_episodes": commits - episodes, "errors": writer_errors + jan_res[1],
            "gc_verify_rounds": jan_res[2], "verify_problems_after": len(rep.problems),
            "seconds": round(time.perf_counter() - t0, 1), "root": str(Path(root).name)}
