"""`bench crash`: SIGKILL a writer at random (seeded) points, many times; nothing committed may be lost.

The child commits episodes (with screenshots), upserts device memories through extraction, saves
long-term memories and runs GC, acknowledging each commit in a journal outside the tree only after
``commit_episode`` returned. After every kill the parent reopens the tree, runs verify, and checks
that every acknowledged episode is there, that no file is unparsable, and that every index equals
a rebuild from the item files.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

from ._util import temp_root


def _child(root: Path, ack: Path, seed: int) -> None:
    """Work until killed (runs in a forked child)."""
    from helpers_for_bench import screenshot  # type: ignore[import-not-found]

    from .._plane import MemoryPlane
    from .._types import CurrentEnvironmentHints, MemoryRetrieveRequest

    rng = random.Random(seed)
    plane = MemoryPlane(root)
    hints = CurrentEnvironmentHints(language="zh-CN", screen_width=320, screen_height=600)
    i = 0
    while True:
        i += 1
        app = rng.choice(["微信", "美团", "设置"])
        req = MemoryRetrieveRequest(input=f"在{app}里做第{i}件事", current_hints=hints)
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        for k in range(rng.randint(1, 4)):
            rec.tool_call("mouse_click", {"x": 10 * k, "y": 20 * k}, content=f"按钮{k}")
            rec.tool_result("mouse_click", screenshot=screenshot(f"{seed}-{i}-{k}"),
                            observed_state={"app": app, "page": f"页{k}"})
        ep = rec.finish(success=rng.random() > 0.2, failure_reason="页面没有变化")
        if plane.commit_episode(ep):
            fd = os.open(ack, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, (ep.id + "\n").encode())
            os.fsync(fd)
            os.close(fd)
        if i % 3 == 0:
            plane.long_term.save_memory(type="fact", content=f"fact {seed}-{i}: the code is {rng.randint(1000, 9999)}")
        if i % 7 == 0:
            plane.flush(5)
            plane.gc()


def check(root: Path, acked: set[str]) -> dict[str, int]:
    """Reopen, verify, and count lost commits, unparsable files and index mismatches."""
    from .._plane import MemoryPlane

    with MemoryPlane.open(root) as plane:
        rep = plane.verify()
        corrupt = sum(1 for p in rep.problems if p.category in ("parse", "validation", "yamlbomb"))
        present = {e["id"] for e in plane.episodes.entries()}
        lost = sum(1 for eid in acked if eid not in present or plane.episodes.get(eid) is None)
        mismatches = 0
        stores: list[Any] = [*plane.device.collections.values(), plane.long_term, plane.episodes]
        for coll in stores:
            current = sorted(e["id"] for e in coll.index.read().entries)
            # After verify the index must already equal a rebuild from the item files.
            if coll.rebuild_index() or current != sorted(e["id"] for e in coll.index.read().entries):
                mismatches += 1
    return {"lost": lost, "corrupt": corrupt, "mismatches": mismatches}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """kills, lost_commits, corrupt_files, index_mismatches (goals 0, 0, 0)."""
    import sys

    kills = 20 if getattr(args, "short", False) else int(getattr(args, "kills", 300) or 300)
    rng = random.Random(int(getattr(args, "seed", 0) or 0))
    sys.modules.setdefault("helpers_for_bench", _helpers())
    out: dict[str, Any] = {"kills": 0, "lost_commits": 0, "corrupt_files": 0, "index_mismatches": 0,
                           "acknowledged_commits": 0}
    t0 = time.perf_counter()
    with temp_root() as root:
        ack = root.parent / "acks.log"
        for k in range(kills):
            pid = os.fork()
            if pid == 0:  # the child: never returns
                try:
                    _child(root, ack, rng.randint(0, 10**9) + k)
                finally:
                    os._exit(0)
            time.sleep(rng.uniform(0.02, 0.4))
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            out["kills"] += 1
            acked = set(ack.read_text().split()) if ack.exists() else set()
            res = check(root, acked)
            out["lost_commits"] += res["lost"]
            out["corrupt_files"] += res["corrupt"]
            out["index_mismatches"] += res["mismatches"]
            out["acknowledged_commits"] = len(acked)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def _helpers() -> Any:
    import io
    import types

    from PIL import Image, ImageDraw

    mod = types.ModuleType("helpers_for_bench")

    def screenshot(label: str) -> bytes:
        img = Image.new("RGB", (320, 600), (240, 240, 240))
        ImageDraw.Draw(img).text((10, 10), label, fill=(0, 0, 0))
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=60)
        return buf.getvalue()

    mod.screenshot = screenshot  # type: ignore[attr-defined]
    return mod
