"""`bench scale`: the report's shape at a tiny size, and the tree builder writing what save_memory writes.

It reaches inside bench/ for the operations the report names and the builder's own check."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from memory_plane.bench import run_one
from memory_plane.bench._scale import OPS, check_builder


def test_the_builder_writes_what_save_memory_writes(tmp_path: Path) -> None:
    assert check_builder(tmp_path, 14) >= 14


def test_bench_scale_reports_every_operation_per_size() -> None:
    rep = run_one("scale", argparse.Namespace(sizes="8,16", short=False))
    assert rep["sizes"] == [8, 16]
    for n in ("8", "16"):
        row = rep["memories"][n]
        for op in OPS:
            assert "error" not in row[op], (op, row[op])
            assert row[op]["ms"] >= 0 and row[op]["peak_mb"] > 0
            assert "ms_ratio" in row[op] and "peak_mb_ratio" in row[op]
        assert row["commit"]["lessons_ms"] >= 0
    start = rep["startup"]
    assert start["runs"] >= 3 and 0 < start["best_ms"] <= start["median_ms"]
    assert 0 < start["import_median_ms"] < start["median_ms"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="VmHWM is Linux's")
def test_an_operations_peak_memory_is_its_own_not_the_parents() -> None:
    """The peak an operation reports is its process's own: a parent that holds much memory when it starts the
    operation's process does not lend it its peak (as ``ru_maxrss`` would across fork and exec)."""
    import subprocess
    import sys

    ballast = bytearray(300 * 1024 * 1024)  # the parent's peak: 300 MB more than any child needs
    out = subprocess.run([sys.executable, "-c", "from memory_plane.bench._scale import peak_mb; print(peak_mb())"],
                         capture_output=True, text=True, check=True).stdout
    assert len(ballast) and float(out) < 250
