"""Rounds of tasks on the simulated phone: the demo and the replay benchmark share them."""

from __future__ import annotations

import argparse
import shlex
import shutil
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import UsageError, counted

from ._agent import ScriptedAgent, TaskRun, no_memory_steps, tasks_for
from ._world import SimPhone

DEFAULT_DEMO_ROOT = "./.memplane-demo/agent/memory"


@dataclass
class Round:
    """One pass over a task list, with the no-memory baseline of each task."""

    name: str
    language: str
    screen: tuple[int, int]
    runs: list[TaskRun] = field(default_factory=list)
    baselines: list[TaskRun] = field(default_factory=list)

    @property
    def steps(self) -> int:
        """Steps with memory."""
        return sum(r.steps for r in self.runs)

    @property
    def baseline_steps(self) -> int:
        """Steps of the same tasks without memory."""
        return sum(b.steps for b in self.baselines)


def run_rounds(plane: Any, *, n_tasks: int = 3, seed: int = 0, screen_change: bool = False,
               progress: Callable[[str], None] | None = None) -> list[Round]:
    """Round 1 and 2 in zh-CN (similar goals, new targets), round 3 after a switch to en-US, and
    optionally round 4 after a resolution change; every task is also run without memory."""
    phone = SimPhone()
    agent = ScriptedAgent(phone, plane)
    plan = [("1: first time", "zh-CN", (640, 1200), 0), ("2: similar goals", "zh-CN", (640, 1200), 1),
            ("3: language switched to en-US", "en-US", (640, 1200), 2)]
    if screen_change:
        plan.append(("4: resolution switched to 1080x2400", "en-US", (1080, 2400), 3))
    rounds = []
    for name, lang, screen, no in plan:
        phone.language, phone.screen = lang, screen
        rnd = Round(name, lang, screen)
        for task in tasks_for(lang, no, n_tasks, seed):
            if progress:
                progress(f"  round {name.split(':')[0]}: {task.goal} ...")
            rnd.baselines.append(no_memory_steps(phone, task))
            rnd.runs.append(agent.run(task))
        rounds.append(rnd)
    return rounds


def replay_metrics(rounds: list[Round]) -> dict[str, Any]:
    """The replay benchmark's figures, computed from the runs."""
    first, second = rounds[0], rounds[1]
    later = [r for rnd in rounds[1:] for r in rnd.runs]
    warned = [r for r in later if r.cautions]
    repeated = [r for r in warned if r.caution_failures > 0]
    changed = rounds[2:]
    all_runs = [r for rnd in rounds for r in rnd.runs]
    # The A/B on the repeated task types: the same round-2 tasks done as if for the first time (no
    # memory) and with what round 1 taught.
    out: dict[str, Any] = {
        "tasks": len(all_runs),
        "steps_first": second.baseline_steps,
        "steps_second": second.steps,
        "step_reduction": round(1 - second.steps / second.baseline_steps, 3) if second.baseline_steps else None,
        "steps_round1_with_memory": first.steps,
        "steps_round1_without_memory": first.baseline_steps,
        "repeat_failure_rate": round(len(repeated) / len(warned), 3) if warned else 0.0,
        "tasks_with_failure_caution": len(warned),
        "stale_refs_after_env_change": sum(r.stale_refs for rnd in changed for r in rnd.runs),
        "steps_after_env_change": sum(rnd.steps for rnd in changed),
        "steps_after_env_change_without_memory": sum(rnd.baseline_steps for rnd in changed),
        "false_completions": sum(1 for r in all_runs if r.declared_success and not r.true_success),
        "success_rate": round(sum(r.true_success for r in all_runs) / len(all_runs), 3) if all_runs else None,
    }
    base = out["steps_after_env_change_without_memory"]
    out["env_change_steps_vs_no_memory"] = round(out["steps_after_env_change"] / base, 3) if base else None
    return out


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def _table(rounds: list[Round]) -> list[str]:
    head = ["round", "task", "steps without memory", "with memory", "memory refs used", "cautions shown", "done"]
    rows = []
    for rnd in rounds:
        for run, base in zip(rnd.runs, rnd.baselines):
            goal = run.task.goal if _width(run.task.goal) <= 44 else run.task.goal[:40] + "…"
            rows.append([rnd.name.split(":")[0], goal, str(base.steps), str(run.steps), str(len(run.used_refs)),
                         str(len(run.cautions)), "yes" if run.true_success else "NO"])
    widths = [max(_width(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(_pad(h, w) for h, w in zip(head, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(_pad(c, w) for c, w in zip(r, widths)) for r in rows]
    return lines


def _tree_summary(root: Path) -> list[str]:
    """One line per folder: how many files and bytes it holds (lock files left out)."""
    out = []
    for d in sorted([root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]):
        files = [f for f in d.iterdir() if f.is_file() and not f.name.startswith(".")]
        if not files and d != root:
            continue
        rel = "." if d == root else str(d.relative_to(root))
        if rel.startswith("episodes/") and rel.count("/") >= 2:
            continue  # one line for the episodes, not one per episode folder
        size = sum(f.stat().st_size for f in files)
        out.append(f"  {rel + '/':34} {counted(len(files), 'file'):>10} {size:9,} bytes")
    n_eps = sum(1 for _ in root.glob("episodes/*/*/episode.yaml"))
    shots = sum(1 for _ in root.glob("episodes/*/*/artifacts/*"))
    out.append(f"  {'episodes/<yyyy>/<episode_id>/':34} {counted(n_eps, 'episode'):>10}, "
               f"{counted(shots, 'screenshot')} in artifacts/")
    return out


def run_demo(args: argparse.Namespace, command: str = "memplane") -> int:
    """`memplane demo`: the simulated phone, twice with memory, then after a language change (``command``: how the
    user runs memplane, for the commands it suggests trying)."""
    from .._plane import MemoryPlane

    explicit = getattr(args, "root", None)
    root = Path(explicit or DEFAULT_DEMO_ROOT).absolute()
    if explicit:
        if root.exists() and any(root.iterdir()):
            raise UsageError(f"{root} is not empty: the demo needs a fresh root (or omit --root)")
    elif root.exists():
        old = root.parent.parent if root.parent.parent.name == ".memplane-demo" else root
        print(f"memory-plane demo: replacing the previous demo tree at {old} (give --root DIR to keep one)",
              flush=True)
        shutil.rmtree(old)
    n = int(getattr(args, "tasks", None) or 3)
    seed = int(getattr(args, "seed", 0) or 0)

    def say(line: str) -> None:
        print(line, flush=True)

    say(f"memory-plane demo: a simulated phone ({counted(n, 'task')} a round), memory at {root}")
    with MemoryPlane.open(root) as plane:
        rounds = run_rounds(plane, n_tasks=n, seed=seed, progress=say)
        stats = plane.stats()
    m = replay_metrics(rounds)
    say("")
    for line in _table(rounds):
        say(line)
    say("")
    say(f"round 2 (similar goals): {m['steps_second']} steps with memory vs {m['steps_first']} without: "
        f"{m['step_reduction']:.0%} fewer")
    say(f"after the language switch: {m['steps_after_env_change']} steps with memory vs "
        f"{m['steps_after_env_change_without_memory']} without; stale procedures shown as applicable: "
        f"{m['stale_refs_after_env_change']}")
    say(f"known failures repeated: {m['repeat_failure_rate']:.0%}; false completions: {m['false_completions']}; "
        f"memory errors: {stats['commit_errors'] + stats['jobs_failed']}")
    say("")
    say(f"the tree it made under {root}:")
    for line in _tree_summary(root):
        say(line)
    say("")
    say("key files:")
    for rel in ("device/procedures/index.yaml", "device/apps/index.yaml", "device/failures/index.yaml",
                "episodes/index.yaml", "lifecycle/conflicts.jsonl"):
        say(f"  {root / rel}")
    say("try:")
    q = shlex.quote(str(root))  # a path with a space still pastes as one word
    say(f"  grep -h 微信 {q}/device/*/index.yaml | head -3")
    say(f"  {command} --root {q} retrieve '打开微信，找到王五，准备发消息' --language zh-CN --screen 640x1200")
    say(f"  {command} --root {q} lifecycle verify")
    ok = all(r.true_success for rnd in rounds for r in rnd.runs) and m["false_completions"] == 0
    return 0 if ok else 1


__all__ = ["DEFAULT_DEMO_ROOT", "Round", "replay_metrics", "run_demo", "run_rounds"]

