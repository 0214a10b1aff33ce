"""Helpers shared by benchmarks: timing, percentiles, temporary roots, data paths."""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import init_tree


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of values, in the same unit."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(p / 100 * (len(s) - 1))))
    return s[k]


def ms(fn: Callable[[], Any]) -> float:
    """Milliseconds one call of fn takes."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def median_ms(fn: Callable[[], Any], n: int) -> float:
    """Median milliseconds over n calls."""
    return statistics.median(ms(fn) for _ in range(n))


@contextmanager
def temp_root(prefix: str = "memplane-bench-") -> Iterator[Path]:
    """A fresh memory tree in a temporary folder, removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        root = d / "memory"
        init_tree(root)
        yield root
    finally:
        shutil.rmtree(d, ignore_errors=True)


def shared_data_dir(explicit: str | None) -> Path:
    """The public task data's folder: --data, else $MEMPLANE_SHARED_DATA, else shared/data beside the checkout's
    folder (where a development machine keeps it; a clone has none, and the benchmarks that need it skip)."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("MEMPLANE_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent.parent.parent / "shared" / "data"


def data_dir(args: Any) -> Path | None:
    """The public task data's folder (None when absent: benchmarks that need it say so and skip)."""
    d = shared_data_dir(getattr(args, "data", None))
    return d if d.is_dir() else None


def no_data(what: str) -> dict[str, str]:
    """The figure of a benchmark whose data is not there: what it needed and how to give it."""
    return {"skipped": f"no {what} in the data folder: pass --data PATH (see `memplane bench --help`) "
                       "or set $MEMPLANE_SHARED_DATA"}


def tree_bytes(root: Path) -> int:
    """Bytes of every regular file under root."""
    total = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def same_files(api: Path, fast: Path, folder: str, compared: Callable[[Path], bool], writer: str) -> int:
    """Compare the files a faster builder wrote under ``fast/folder`` with those the public API wrote under
    ``api/folder`` (an index.yaml's lines in any order); raise AssertionError naming the first file that differs
    or that only one side wrote; how many files were compared."""
    names = {p.relative_to(fast) for p in (fast / folder).rglob("*") if compared(p)}
    count = 0
    for p in sorted((api / folder).rglob("*")):
        if not compared(p):
            continue
        rel = p.relative_to(api)
        names.discard(rel)
        q = fast / rel
        a, b = p.read_bytes(), q.read_bytes() if q.is_file() else None
        if p.name == "index.yaml":
            a = b"\n".join(sorted(a.splitlines()))
            b = b"\n".join(sorted(b.splitlines())) if b is not None else None
        if a != b:
            raise AssertionError(f"the builder wrote {rel} otherwise than {writer}")
        count += 1
    if names:
        raise AssertionError(f"the builder wrote files {writer} does not: {sorted(map(str, names))[:3]}")
    return count


def r(x: float, n: int = 3) -> float:
    """Round for reports."""
    return round(float(x), n)
