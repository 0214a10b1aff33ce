"""`bench scale`: what one save, forget, commit, retrieve, verify and GC cost as the long-term store grows.

Each size's tree holds that many long-term memories. The tree is built by writing what ``save_memory`` writes
for a memory that matches no other (its file, then index.yaml, the candidates index and profile.md once); the
first memories are built both ways, through ``save_memory`` and by the builder, and the files compared byte for
byte (index.yaml by its lines, which the builder writes in the store's order and saves append). Each operation
then runs in a fresh process, which reports its own time and its peak memory (``VmHWM``). Apart from the sizes,
``startup`` is what a phone's agent pays once per start: ``import memory_plane`` and the first retrieve of a small
tree, in fresh processes. With ``--episode-sizes``, trees of that many committed episodes (``_episode_tree``) are
measured by verify and GC too (CPU time beside the wall time: the machine may be shared). Timings are figures to
read, never assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import UsageError, atomic_write, init_tree, remove_tree

from ._episode_tree import build_episodes
from ._util import r, same_files, temp_root

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
OPS = ("prepare", "save", "forget", "commit", "retrieve_cold", "retrieve_warm", "verify", "gc_dry_run")
"""In their order on one tree. ``prepare`` is an agent's start-up after the bulk write (what GC runs after it rewrote
indexes): it makes the derived retrieval files the library's own writers then keep in step."""
_SAMPLE = 40
_WORDS = [
    "office", "home", "gym", "school", "bank", "shop", "cafe", "park", "station", "airport", "clinic", "library",
    "garden", "kitchen", "garage", "phone", "laptop", "tablet", "watch", "camera", "printer", "router", "speaker",
    "charger",
    "headset", "keyboard", "monitor", "red", "blue", "green", "amber", "violet", "silver", "golden", "black", "white",
    "orange",
]
_KINDS = ("fact", "fact", "fact", "preference", "rule", "procedure", "profile")


def _memory(i: int, rng: random.Random) -> dict[str, Any]:
    """The i-th memory of a tree: a text of its own (a number no other text holds), like no other memory."""
    words = rng.sample(_WORDS, 5)
    text = f"the {words[0]} {words[1]} code {i}x is {words[2]} then {words[3]} {words[4]}"
    return {"type": _KINDS[i % len(_KINDS)], "content": text, "tags": [f"t{i}"], "entities": [f"e{i}"]}


def build(root: Path, n: int, seed: int = 7, *, through_api: bool = False) -> None:
    """n memories in a fresh tree at root (through save_memory, or by writing what it writes)."""
    from memory_plane.lifecycle import content_hash

    from .._long_term import LongTermStore
    from .._long_term_model import _norm
    from .._long_term_save import Plan, SaveRequest, _new_memory

    init_tree(root)
    rng = random.Random(seed)
    store = LongTermStore(root, clock=lambda: NOW)
    mems = [_memory(i, rng) for i in range(n)]
    if through_api:
        for m in mems:
            res = store.save_memory(**m)
            assert res.status == "saved", res
        return
    with store.lock():
        records = []
        for m in mems:
            key = content_hash("long_term", m["type"], _norm(m["content"]))
            req = SaveRequest(m["type"], m["content"], key, f"mem_{key}", None, m["tags"], m["entities"], False,
                              None, None, None, (), "user")
            mem, _ = _new_memory(store, req, Plan())
            atomic_write(store.path_for(mem.id), store.dump(mem, None), root=root)
            records.append(mem)
        store.rebuild_index()
        store._write_profile(records)


def check_builder(base: Path, n: int = _SAMPLE) -> int:
    """Build the first n memories both ways and compare the files; how many files were compared."""
    api, fast = base / "api", base / "fast"
    build(api, n, through_api=True)
    build(fast, n)
    return same_files(api, fast, "long_term",
                      lambda p: p.is_file() and p.name not in ("candidates.sqlite", ".lock"), "save_memory")


# -- the operations, each in a fresh process -----------------------------------------------------------------


def _op(name: str, root: Path) -> dict[str, Any]:
    """Run one operation on the tree (in this process) and say how long it took."""
    from .._plane import MemoryPlane
    from .._retrieve_types import MemoryRetrieveRequest

    plane = MemoryPlane.open(root)
    out: dict[str, Any] = {}
    try:
        if name == "prepare":
            t0 = time.perf_counter()
            plane.prepare()
            t1 = time.perf_counter()
            plane.close()  # the derived files are written off the caller's thread: waited for here
            out.update(ms=(t1 - t0) * 1000, written_ms=(time.perf_counter() - t0) * 1000)
        elif name == "save":
            times = []
            for k in range(5):
                t0 = time.perf_counter()
                plane.long_term.save_memory(type=_KINDS[k], content=f"the new {k} note at the marina is teal {k}q")
                times.append(time.perf_counter() - t0)
            out["ms"] = statistics.median(times) * 1000
        elif name == "forget":
            victim = sorted(p.stem for p in (root / "long_term" / "memories").glob("*.md"))[0]
            t0 = time.perf_counter()
            plane.forget(victim)
            out["ms"] = (time.perf_counter() - t0) * 1000
        elif name == "commit":
            req = MemoryRetrieveRequest(input="open the office router page and check the code")
            t0 = time.perf_counter()
            rec = plane.new_episode_recorder(req)
            for i in range(5):
                rec.tool_call("mouse_click", {"x": 10 * i, "y": 20 * i}, content=f"step {i}")
                rec.tool_result("mouse_click", output="ok", observed_state={"app": "Router", "page": f"P{i}"})
            ep = rec.finish(success=True, final_state="done")
            t1 = time.perf_counter()
            plane.commit_episode(ep)
            t2 = time.perf_counter()
            plane.flush(120)  # the episode's jobs: outcomes, then its lessons
            t3 = time.perf_counter()
            out.update(ms=(t2 - t1) * 1000, lessons_ms=(t3 - t2) * 1000, record_ms=(t1 - t0) * 1000)
        elif name in ("retrieve_cold", "retrieve_warm"):
            goals = [f"what is the {w} code" for w in _WORDS[:6]]
            t0 = time.perf_counter()
            plane.retrieve(goals[0])
            cold = time.perf_counter() - t0
            warm = []
            for g in goals[1:]:
                t0 = time.perf_counter()
                plane.retrieve(g)
                warm.append(time.perf_counter() - t0)
            out["ms"] = (cold if name == "retrieve_cold" else statistics.median(warm)) * 1000
        elif name == "verify":
            t0, c0 = time.perf_counter(), time.process_time()
            rep = plane.verify()
            cpu = time.process_time() - c0
            out.update(ms=(time.perf_counter() - t0) * 1000, cpu_ms=cpu * 1000, checked=rep.checked,
                       items_per_cpu_s=rep.checked / cpu if cpu else None)
        elif name == "gc_dry_run":
            t0, c0 = time.perf_counter(), time.process_time()
            plane.gc(dry_run=True)
            out.update(ms=(time.perf_counter() - t0) * 1000, cpu_ms=(time.process_time() - c0) * 1000)
        else:
            raise UsageError(f"unknown operation {name!r}")
    finally:
        plane.close()
    out["peak_mb"] = peak_mb()
    return out


def peak_mb() -> float:
    """This process's peak resident memory in MB: ``VmHWM`` where Linux gives it. Not ``ru_maxrss``: a process
    started by fork and exec keeps the peak its parent had at the fork (the bench's own, which built the tree),
    so every operation of a size would report the same figure."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB (another system: its own unit)


def _in_child(name: str, root: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "memory_plane.bench._scale", name, str(root)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


_STARTUP = """
import json, sys, time
t0 = time.perf_counter()
from memory_plane import MemoryPlane
t1 = time.perf_counter()
MemoryPlane.open(sys.argv[1]).retrieve("what is the office code")
t2 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1000, "total_ms": (t2 - t0) * 1000}))
"""
STARTUP_MEMORIES = 50
STARTUP_RUNS = 7


def startup(base: Path) -> dict[str, Any]:
    """``import memory_plane`` plus the first retrieve of a small tree, each in a fresh process (the best and the
    median of a few runs: a phone's agent pays this once per start)."""
    root = base / "startup"
    build(root, STARTUP_MEMORIES)
    runs = []
    for _ in range(STARTUP_RUNS):
        proc = subprocess.run([sys.executable, "-c", _STARTUP, str(root)], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    total = sorted(x["total_ms"] for x in runs)
    return {"memories": STARTUP_MEMORIES, "runs": STARTUP_RUNS, "best_ms": r(total[0], 1),
            "median_ms": r(statistics.median(total), 1),
            "import_median_ms": r(statistics.median(x["import_ms"] for x in runs), 1)}


def _sizes(args: argparse.Namespace, name: str = "sizes") -> list[int]:
    text = getattr(args, name, None) or ("200,1000" if getattr(args, "short", False) else "1000,10000")
    try:
        sizes = sorted({int(x) for x in str(text).split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--{name.replace('_', '-')} takes numbers separated by commas, not {text!r}") from None
    if not sizes or sizes[0] < 1:
        raise UsageError(f"--{name.replace('_', '-')} takes positive numbers")
    return sizes


EPISODE_OPS = ("verify", "gc_dry_run")
"""What a tree of many episodes is measured by: the cron jobs that walk it."""
_RATIOS = ("ms", "cpu_ms", "lessons_ms", "peak_mb", "items_per_cpu_s")


def _ratios(rows: dict[str, dict[str, Any]], ops: tuple[str, ...]) -> None:
    """Each figure's ratio to the smallest size's."""
    base = next(iter(rows.values()))
    for row in rows.values():
        for op in ops:
            for key in _RATIOS:
                a, b = row[op].get(key), base[op].get(key)
                if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
                    row[op][f"{key}_ratio"] = r(a / b, 2)


def _episode_rows(tmp: Path, sizes: list[int]) -> tuple[int, dict[str, dict[str, Any]]]:
    """Per episode-store size: verify and GC (dry run), each in a fresh process; and the builder's check."""
    from ._episode_tree import check_episode_builder, span_start

    compared = check_episode_builder(tmp / "episode_sample", min(12, sizes[0]))
    start = span_start()
    rows: dict[str, dict[str, Any]] = {}
    for n in sizes:
        root = tmp / f"episodes_{n}"
        t0 = time.perf_counter()
        build_episodes(root, n, start=start)
        row: dict[str, Any] = {"build_s": r(time.perf_counter() - t0, 1)}
        for op in EPISODE_OPS:
            fig = _in_child(op, root)
            row[op] = {k: r(v, 2) if isinstance(v, float) else v for k, v in fig.items()}
        rows[str(n)] = row
        remove_tree(tmp, root)  # one large tree on disk at a time
    _ratios(rows, EPISODE_OPS)
    return compared, rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Per size: each operation's time and peak memory, and its ratio to the smallest size."""
    sizes = _sizes(args)
    episode_sizes = _sizes(args, "episode_sizes") if getattr(args, "episode_sizes", None) else []
    rows: dict[str, dict[str, Any]] = {}
    with temp_root() as tmp:
        compared = check_builder(tmp.parent / "sample", min(_SAMPLE, sizes[0]))
        start = startup(tmp.parent)
        for n in sizes:
            root = tmp.parent / f"tree_{n}"
            t0 = time.perf_counter()
            build(root, n)
            row: dict[str, Any] = {"build_s": r(time.perf_counter() - t0, 1)}
            for op in OPS:
                fig = _in_child(op, root)
                row[op] = {k: r(v, 2) if isinstance(v, float) else v for k, v in fig.items()}
            rows[str(n)] = row
        episodes = _episode_rows(tmp.parent, episode_sizes) if episode_sizes else None
    _ratios(rows, OPS)
    extra: dict[str, Any] = {}
    if episodes is not None:
        extra = {"episode_sizes": episode_sizes, "episode_builder_checked_files": episodes[0],
                 "episodes": episodes[1]}
    return {"sizes": sizes, "builder_checked_files": compared, "memories": rows, "startup": start, **extra,
            "note": "lessons_ms is the flush of the committed episode's jobs (outcomes, then lessons) on a tree of "
                    "long-term memories; peak_mb is the operation's fresh process (import included)"}


if __name__ == "__main__":
    print(json.dumps(_op(sys.argv[1], Path(sys.argv[2]))))
