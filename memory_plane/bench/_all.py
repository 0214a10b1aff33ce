"""`bench all`: every benchmark in its short mode, and the tables of BENCHMARKS.md rewritten."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from . import BENCHMARKS, run_one

MARK_START = "<!-- bench-all:start -->"
MARK_END = "<!-- bench-all:end -->"


def _table(results: dict[str, dict[str, Any]]) -> str:
    lines = [MARK_START, "", "## Short runs of every benchmark (`memplane bench all --json`)", "",
             "Sizes are the short ones (CI-sized); the sections above have the full-size runs.", ""]
    for name, res in results.items():
        lines += [f"### {name}", "", "| figure | value |", "|---|---|"]
        for k, v in res.items():
            if isinstance(v, (dict, list)):
                v = json.dumps(v, ensure_ascii=False)
                if len(v) > 160:
                    v = v[:157] + "..."
            lines.append(f"| {k} | {v} |")
        lines.append("")
    lines.append(MARK_END)
    return "\n".join(lines)


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    """Run each benchmark with --short and rewrite the generated section of BENCHMARKS.md."""
    args.short = True
    results: dict[str, dict[str, Any]] = {}
    t0 = time.perf_counter()
    for name in BENCHMARKS:
        start = time.perf_counter()
        res = run_one(name, args)
        res["bench_seconds"] = round(time.perf_counter() - start, 1)
        results[name] = res
    path = Path(__file__).resolve().parent.parent.parent / "BENCHMARKS.md"
    if path.is_file():
        text = path.read_text("utf-8")
        block = _table(results)
        if MARK_START in text and MARK_END in text:
            text = text[: text.index(MARK_START)] + block + text[text.index(MARK_END) + len(MARK_END):]
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        path.write_text(text, "utf-8")
    return {"seconds": round(time.perf_counter() - t0, 1), "benchmarks_md": str(path), "results": results}
