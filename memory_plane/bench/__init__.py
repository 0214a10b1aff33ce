"""Benchmarks behind `memplane bench NAME --json`; each measures ours beside a baseline in one run."""

from __future__ import annotations

import argparse
import importlib
import math
from typing import Any as _Any

from memory_plane.lifecycle import UsageError as _UsageError

__all__ = ["BENCHMARKS", "DATA_HELP", "names", "run_bench", "run_one"]

DATA_HELP = ("the folder of public phone-task data some benchmarks read: androidcontrol/ (an AndroidControl export, "
             "one JSON episode a line: extract, lessons), spa-bench/, android-lab/ and mobiagent/ (task lists with "
             "their apps: retrieve, retrieval-quality). Default: $MEMPLANE_SHARED_DATA, else shared/data beside the "
             "checkout's folder when there is one. A benchmark whose data is not there says so and skips")

# name -> module of this package with a run(args) -> dict function
BENCHMARKS: dict[str, str] = {
    "index": "_index",
    "commit": "_commit",
    "extract": "_extract",
    "retrieve": "_retrieve",
    "retrieval-quality": "_quality",
    "lifecycle": "_lifecycle",
    "replay": "_replay",
    "compaction": "_compaction",
    "crash": "_crash",
    "concurrency": "_concurrency",
    "lessons": "_lessons",
    "fuzz": "_fuzz",
    "scale": "_scale",
    "summaries": "_summaries",
    "fleet": "_fleet",
}


def names() -> list[str]:
    """Names of every benchmark."""
    return sorted(BENCHMARKS)


def run_bench(name: str, args: argparse.Namespace) -> dict[str, _Any]:
    """Run one benchmark (or ``all``) and return its figures."""
    if name == "all":
        from ._all import run_all

        return run_all(args)
    if name not in BENCHMARKS:
        raise _UsageError(f"unknown benchmark {name!r}; known: {', '.join(names())}, all")
    return run_one(name, args)


def run_one(name: str, args: argparse.Namespace) -> dict[str, _Any]:
    """Run one named benchmark; a figure that could not be measured is None (JSON null), never NaN."""
    module = importlib.import_module(f"{__name__}.{BENCHMARKS[name]}")
    result: dict[str, _Any] = _finite(module.run(args))
    return result


def _finite(obj: _Any) -> _Any:
    # NaN and infinity are not JSON: strict readers (jq, browsers) reject the whole report.
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
