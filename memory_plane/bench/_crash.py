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
    from .._retrieve_types import CurrentEnvironmentHints, MemoryRetrieveRequest

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


def _gc_child(root: Path, now: Any) -> None:
    """Run one GC (in a forked child that is killed at some point of it)."""
    from .._plane import MemoryPlane
    from ..upkeep import gc_tree

    plane = MemoryPlane(root)
    gc_tree(root, plane.device, plane.episodes, plane.long_term, plane.session, now=now)


def _gc_state(root: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """The files left (tombstones aside) and the (type, id) of every tombstone line, sorted."""
    from memory_plane.lifecycle import read_jsonl

    files = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                   if p.is_file() and ".cache" not in p.parts and p.name not in ("tombstones.jsonl", ".lock"))
    tombs = [r.get("ref") or {} for r in read_jsonl(root / "lifecycle" / "tombstones.jsonl").records]
    return files, sorted((str(t.get("type")), str(t.get("id"))) for t in tombs)


def _rerun_against(root: Path, now: Any, want_files: list[str],
                   want_tombs: list[tuple[str, str]]) -> tuple[int, int, list[str]]:
    """Run GC again on a tree a killed GC left (the next cron run) and compare it with an unkilled GC's: the
    tombstones lost, the tombstones written twice, the files that differ."""
    _gc_child(root, now)
    files, tombs = _gc_state(root)
    got = {t: tombs.count(t) for t in set(tombs)}
    lost = sum(1 for t in set(want_tombs) if t not in got)
    return lost, sum(c - 1 for c in got.values()), sorted(set(files) ^ set(want_files))


def gc_kills(n: int, rng: random.Random, items: int = 1200, episodes: int = 600) -> dict[str, Any]:
    """SIGKILL a GC n times at random points, run it again each time, and compare with an unkilled run:
    tombstones lost or written twice, and files left that an unkilled run removes (goals 0, 0, 0)."""
    import shutil
    import tempfile
    from datetime import timedelta

    from memory_plane.lifecycle import init_tree

    from ._lifecycle import NOW, build

    now = NOW + timedelta(days=200)  # most episodes past their summary TTL, most items past their grace
    out: dict[str, Any] = {"gc_kills": 0, "gc_killed_midway": 0, "gc_tombstones_expected": 0,
                           "gc_lost_tombstones": 0, "gc_duplicate_tombstones": 0, "gc_files_differing": 0}
    with tempfile.TemporaryDirectory(prefix="memplane-gc-crash-") as tmp:
        base = Path(tmp) / "base"
        init_tree(base)
        build(base, items, episodes, seed=rng.randint(0, 10**6))
        ref = Path(tmp) / "ref"
        shutil.copytree(base, ref)
        t0 = time.perf_counter()
        _gc_child(ref, now)
        gc_seconds = time.perf_counter() - t0
        want_files, want_tombs = _gc_state(ref)
        out["gc_tombstones_expected"] = len(want_tombs)
        out["gc_seconds_unkilled"] = round(gc_seconds, 2)
        for k in range(n):
            root = Path(tmp) / f"k{k}"
            shutil.copytree(base, root)
            pid = os.fork()
            if pid == 0:
                try:
                    _gc_child(root, now)
                finally:
                    os._exit(0)
            time.sleep(rng.uniform(0.0, gc_seconds))
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            out["gc_kills"] += 1
            out["gc_killed_midway"] += int(os.WIFSIGNALED(status))
            lost, twice, differing = _rerun_against(root, now, want_files, want_tombs)
            out["gc_lost_tombstones"] += lost
            out["gc_duplicate_tombstones"] += twice
            out["gc_files_differing"] += len(differing)
            # Named, so that a difference seen once (a kill at one narrow point) says where to look.
            out["gc_differing_examples"] = (out.get("gc_differing_examples", []) + differing)[:5]
            shutil.rmtree(root, ignore_errors=True)
    return out


_MUTATIONS = ("unlink", "rmdir", "replace", "rename", "write", "ftruncate", "fsync")
_WRITE_FLAGS = os.O_CREAT | os.O_WRONLY | os.O_RDWR


def _die_at(limit: int) -> list[int]:
    """In a forked child: exit at the ``limit``-th call that changes the file system through ``os``; the calls
    counted so far (what SQLite does itself is not seen)."""
    count = [0]

    def step() -> None:
        count[0] += 1
        if count[0] >= limit:
            os._exit(9)

    def counting(fn: Any) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            step()
            return fn(*a, **k)
        return call

    for name in _MUTATIONS:
        setattr(os, name, counting(getattr(os, name)))
    real_open = os.open

    def opening(path: Any, flags: int, *a: Any, **k: Any) -> int:
        if flags & _WRITE_FLAGS:
            step()
        return real_open(path, flags, *a, **k)

    os.open = opening  # type: ignore[assignment]
    return count


def gc_kill_points(points: int, items: int = 40, episodes: int = 20) -> dict[str, Any]:
    """Kill a GC at its n-th change of the file system, for ``points`` values of n spread over all of them (not
    random timing: every narrow window between two writes is met), run it again, and compare with an unkilled
    run as ``gc_kills`` does. Counts with the first differing paths (goals 0, 0, 0)."""
    import shutil
    import tempfile
    from datetime import timedelta

    from memory_plane.lifecycle import init_tree

    from ._lifecycle import NOW, build

    now = NOW + timedelta(days=200)
    out: dict[str, Any] = {"gc_points": 0, "gc_point_lost_tombstones": 0, "gc_point_duplicate_tombstones": 0,
                           "gc_point_files_differing": 0, "gc_point_examples": []}
    with tempfile.TemporaryDirectory(prefix="memplane-gc-points-") as tmp:
        base = Path(tmp) / "base"
        init_tree(base)
        build(base, items, episodes, seed=3)
        ref = Path(tmp) / "ref"
        shutil.copytree(base, ref)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                count = _die_at(1 << 60)
                _gc_child(ref, now)
                os.write(write_end, str(count[0]).encode())
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        os.close(write_end)
        total = int(os.read(read_end, 64) or b"0")
        os.close(read_end)
        out["gc_mutations"] = total
        want_files, want_tombs = _gc_state(ref)
        for limit in sorted({1 + (total - 1) * i // max(1, points - 1) for i in range(points)}) if total else []:
            root = Path(tmp) / "k"
            shutil.copytree(base, root)
            pid = os.fork()
            if pid == 0:
                try:
                    _die_at(limit)
                    _gc_child(root, now)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            lost, twice, differing = _rerun_against(root, now, want_files, want_tombs)
            out["gc_points"] += 1
            out["gc_point_lost_tombstones"] += lost
            out["gc_point_duplicate_tombstones"] += twice
            out["gc_point_files_differing"] += len(differing)
            out["gc_point_examples"] = (out["gc_point_examples"] + [f"{limit}: {p}" for p in differing])[:5]
            shutil.rmtree(root)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """kills, lost_commits, corrupt_files, index_mismatches; then GC kills, at random times and at spread
    changes of the file system: lost and duplicate tombstones and files differing from an unkilled GC (goals 0
    for all)."""
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
    short = getattr(args, "short", False)
    out.update(gc_kills(5 if short else max(10, kills // 10), rng, *((300, 150) if short else (4000, 2000))))
    out.update(gc_kill_points(60 if short else 400))
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
