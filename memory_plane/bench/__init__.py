"""Benchmarks behind `memplane bench NAME --json`; each measures ours beside a baseline in one run."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from lifecycle import UsageError

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
}


def names() -> list[str]:
    """Names of every benchmark."""
    return sorted(BENCHMARKS)


def run_bench(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one benchmark (or ``all``) and return its figures."""
    if name == "all":
        from ._all import run_all

        return run_all(args)
    if name not in BENCHMARKS:
        raise UsageError(f"unknown benchmark {name!r}; known: {', '.join(names())}, all")
    module = importlib.import_module(f"{__name__}.{BENCHMARKS[name]}")
    result: dict[str, Any] = module.run(args)
    return result
