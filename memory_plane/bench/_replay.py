"""`bench replay`: the simulated phone over rounds of similar tasks, before and after an environment change."""

from __future__ import annotations

import argparse
from typing import Any

from ._util import temp_root


def run(args: argparse.Namespace) -> dict[str, Any]:
    """steps_first, steps_second, step_reduction, repeat_failure_rate, stale_refs_after_env_change,
    false_completions and tasks, all computed from the runs; with ``--pack``, a fleet pack is pulled into the
    phone's tree first (``pack_lessons_pulled``: what it added)."""
    from .._plane import MemoryPlane
    from ..sim import replay_metrics, run_rounds

    n = 3 if getattr(args, "short", False) else 6
    seed = int(getattr(args, "seed", 0) or 0)
    pulled = None
    with temp_root() as root, MemoryPlane.open(root) as plane:
        if getattr(args, "pack", None):
            from ..fleet import pull_pack, read_pack

            pulled = len(pull_pack(plane.device, read_pack(str(args.pack)), "default", plane.episodes).added)
        rounds = run_rounds(plane, n_tasks=n, seed=seed, screen_change=True)
        out = replay_metrics(rounds)
        out["memory_errors"] = plane.stats()["commit_errors"] + plane.stats()["jobs_failed"]
    out["tasks_per_round"] = n
    out["rounds"] = [{"name": r.name, "steps": r.steps, "steps_without_memory": r.baseline_steps} for r in rounds]
    if pulled is not None:
        out["pack_lessons_pulled"] = pulled
    return out
