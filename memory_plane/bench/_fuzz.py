"""`bench fuzz`: break one field (or one file) of a realistic tree, then run every reader; none may raise.

A realistic tree (every kind of item, episodes with events, long-term memories, indexes, logs, config
and retention) is built once. Each example copies it, replaces one field of one file with any YAML
value, or the whole file with something else (bytes that are not UTF-8, a BOM, CRLF line ends, a
duplicated key, a torn tail, random bytes), then runs retrieve, recall, the model tools, verify (with
and without ``--fix``), GC (dry run and real), the listing and show commands and the MCP resources.

Counted per example: ``raises`` (any reader raised, printed other than one JSON line with ``--json``,
retrieve fell back to an empty block, or verify named a problem without its file, or a field without its
line), ``lost``
(items of other files, or the item of a file whose field could be dropped, no longer listed), and
``silent_fix`` (``verify --fix`` quarantined an item for a field it could drop). All must be 0. The
test suite runs the same property with a bounded number of examples and a fixed seed. With ``--shapes``
the tree's shape is broken instead (``_fuzz_shapes``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._fuzz_mutations import Mutation, apply, catalogue, droppable, strategies

GOALS = ["打开微信，找到张三，准备发消息", "open meituan and search for coffee", "在设置里打开蓝牙",
         "pay with alipay", "what is the door code"]


@dataclass
class Outcome:
    """What one example did: the readers that raised, items lost, quarantines of fixable items."""

    raises: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    silent_fix: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing raised, nothing lost, nothing quarantined that could have stayed."""
        return not (self.raises or self.lost or self.silent_fix)


# -- the tree -------------------------------------------------------------------------------------------


def build_template(root: Path) -> None:
    """A small realistic tree: simulated tasks (apps, procedures, navigation, calibration, failures, UI
    anchors, episodes), a second device profile, long-term memories, config and retention."""
    from memory_plane.lifecycle import init_tree

    from .._plane import MemoryPlane
    from ..sim import run_rounds

    init_tree(root)
    with MemoryPlane.open(root) as plane, contextlib.redirect_stdout(io.StringIO()):
        run_rounds(plane, n_tasks=1, seed=3)
        plane.flush(30)
        plane.long_term.save_memory(type="fact", content="The door code is 4711", title="door code")
        plane.long_term.save_memory(type="rule", content="Always confirm before paying", tags=("pay",))
        plane.long_term.forget_memory(plane.long_term.save_memory(type="fact", content="old number 12").id,
                                      reason="fuzz fixture")
        plane.flush(30)


# -- the readers ----------------------------------------------------------------------------------------


class _FallbackWatch(logging.Handler):
    """Notices retrieve's last-resort fallback (an empty block because something raised inside)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the fallback's message."""
        msg = record.getMessage()
        if "continuing without memory" in msg or record.exc_info:
            self.seen.append(msg[:200])


def inventory(plane: Any) -> dict[str, str]:
    """id -> where it lives, for every item the stores list."""
    out: dict[str, str] = {}
    for coll in plane.device.collections.values():
        for e in coll.entries():
            out[str(e.get("id"))] = f"device/{coll.rel_dir.split('/')[-1]}/{e.get('path') or ''}"
    for e in plane.episodes.entries():
        out[str(e.get("id"))] = f"episodes/{e.get('path') or ''}"
    for e in plane.long_term.entries():
        out[str(e.get("id"))] = f"long_term/{e.get('path') or ''}"
    return out


def _cli(root: Path, *argv: str) -> tuple[int, str]:
    from ..cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--root", str(root), *argv])
    return code, out.getvalue()


def exercise(root: Path, m: Mutation | None, clean: dict[str, str] | None = None) -> tuple[Outcome, dict[str, str]]:
    """Run every reader on the tree; return what went wrong and the inventory after ``verify --fix``."""
    from memory_plane.lifecycle import ClockError, ConfigError

    from .._plane import MemoryPlane
    from .._retrieve_types import MemoryRetrieveRequest
    from ..cli import mcp_resources

    res = Outcome()
    watch = _FallbackWatch()
    logger = logging.getLogger("memory_plane")
    logger.addHandler(watch)
    after: dict[str, str] = {}

    def step(name: str, fn: Any) -> Any:
        try:
            return fn()
        except ConfigError as exc:
            if name == "gc" and str(exc.path).endswith("retention.yaml"):
                return None  # documented: GC refuses to delete anything while retention.yaml is bad (exit 1)
            res.raises.append(f"{name}: {type(exc).__name__}: {exc}")
            return None
        except ClockError as exc:
            if name == "gc":
                return None  # documented: GC removes nothing by age when a write time in the tree is ahead of the clock
            res.raises.append(f"{name}: {type(exc).__name__}: {exc}")
            return None
        except Exception as exc:  # counting raises is the point
            res.raises.append(f"{name}: {type(exc).__name__}: {exc} | {traceback.format_exc(limit=-3)[-600:]}")
            return None

    try:
        plane = step("open", lambda: MemoryPlane.open(root))
        if plane is None:
            return res, after
        with plane:
            for goal in GOALS:
                step(f"retrieve {goal!r}", lambda g=goal: plane.retrieve(MemoryRetrieveRequest(input=g)).render())
            step("recall", lambda: plane.long_term.recall_memory("door code"))
            first: dict[str, Any] = next(iter(plane.episodes.entries()), {})
            calls: list[tuple[str, dict[str, Any]]] = [
                ("recall_memory", {"query": "code"}), ("recall_device_memory", {"query": "wechat"}),
                ("inspect_episode", {"episode_id": first.get("id") or "ep_x"}),
                ("recall_session_chunks", {"query": "x"})]
            for name, args in calls:
                r = step(f"tool {name}", lambda n=name, a=args: plane.tools.call(n, a))
                if r is not None and "Traceback" in r.text:
                    res.raises.append(f"tool {name}: {r.text[:200]}")
            rep = step("verify", lambda: plane.verify())
            if rep is not None:
                unnamed = [str(p) for p in rep.problems if not p.path]
                if unnamed:
                    res.raises.append(f"verify: problems without a file: {unnamed[:3]}")
                # A field set aside is named with its file, line and field (the line of its top-level key).
                unplaced = [str(p) for p in rep.problems if p.category == "field"
                            and (not p.line or not p.message.startswith("field "))]
                if unplaced:
                    res.raises.append(f"verify: field problems without a line: {unplaced[:3]}")
            step("resources", lambda: [p.read_bytes() for _, _, p in mcp_resources(plane).values()])
        json_runs: list[tuple[str, ...]] = [("lifecycle", "verify", "--json"),
                                            ("lifecycle", "gc", "--dry-run", "--json")]
        for argv in json_runs:
            code, out = step(" ".join(argv), lambda a=argv: _cli(root, *a)) or (None, "")
            lines = [ln for ln in out.splitlines() if ln.strip()]
            if code is not None and (len(lines) != 1 or code not in (0, 1)):
                res.raises.append(f"{' '.join(argv)}: exit {code}, {len(lines)} stdout lines")
            elif code is not None:
                step(f"{' '.join(argv)} json", lambda ln=lines[0]: json.loads(ln))
        listings: list[tuple[str, ...]] = [("episodes", "list"), ("device", "list"),
                                           ("lifecycle", "quarantine", "list"), ("episodes", "list", "--json"),
                                           ("device", "list", "--json")]
        for argv in listings:
            code, _ = step(" ".join(argv), lambda a=argv: _cli(root, *a)) or (None, "")
            if code not in (None, 0):
                res.raises.append(f"{' '.join(argv)}: exit {code}")
        for item_id in sorted(clean or {})[:200]:
            verb = "episodes" if item_id.startswith("ep_") else "device" if not item_id.startswith("mem_") else ""
            if verb:
                code, _ = step(f"{verb} show {item_id}", lambda v=verb, i=item_id: _cli(root, v, "show", i)) or (0, "")
                if code not in (0, 1):
                    res.raises.append(f"{verb} show {item_id}: exit {code}")
        with MemoryPlane.open(root) as plane:
            fixed = step("verify --fix", lambda: plane.verify(fix=True))
            after = step("inventory", lambda: inventory(plane)) or {}
            if fixed is not None and m is not None and m.mode == "field" and droppable(m):
                gone = [f for f in fixed.fixed if "quarantined" in f and m.path in f]
                if gone:
                    res.silent_fix.append(f"{m.describe()}: {gone[0]}")
            step("gc", lambda: plane.gc())
            for goal in GOALS[:2]:
                step(f"retrieve after gc {goal!r}", lambda g=goal: plane.retrieve(MemoryRetrieveRequest(input=g)))
    finally:
        logger.removeHandler(watch)
    res.raises.extend(f"retrieve fell back: {s}" for s in watch.seen)
    if clean is not None:
        res.lost = [f"{i} ({where})" for i, where in sorted(clean.items())
                    if i not in after and not _may_lose(m, where)]
    return res, after


def _may_lose(m: Mutation | None, where: str) -> bool:
    """Whether an item may be missing after this mutation: only the item of the file it made unreadable."""
    if m is None:
        return False
    if m.path.endswith(("index.yaml", ".jsonl")) or not where.endswith(m.path.split("/")[-1]):
        return False  # an index is derived and a log is not an item: no item may go with them
    return not (m.mode == "field" and droppable(m))


class Fixture:
    """The template tree, built once, and a fresh copy of it per example."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="memplane-fuzz-"))
        self.template = self.base / "template"
        build_template(self.template)
        self.catalogue = catalogue(self.template)
        work = self.copy()
        out, self.clean = exercise(work, None)
        shutil.rmtree(work.parent, ignore_errors=True)
        if not out.ok:
            raise RuntimeError(f"the clean tree already fails: {out}")
        self._n = 0

    def copy(self) -> Path:
        """A fresh copy of the template (symlinks copied as links, never followed)."""
        self._n = getattr(self, "_n", 0) + 1
        d = self.base / f"ex{self._n}"
        shutil.copytree(self.template, d / "memory", symlinks=True)
        return d / "memory"

    def run(self, m: Mutation) -> Outcome:
        """Apply one mutation to a copy and exercise it."""
        root = self.copy()
        try:
            apply(root, m)
            return exercise(root, m, self.clean)[0]
        finally:
            shutil.rmtree(root.parent, ignore_errors=True)

    def close(self) -> None:
        """Remove the template and every copy."""
        shutil.rmtree(self.base, ignore_errors=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """examples, raises, items_lost, silent_quarantines (goals: 0, 0, 0) and the first failures."""
    try:
        from hypothesis import HealthCheck, given, settings
    except ImportError as exc:  # pragma: no cover - hypothesis is in the dev extra
        from memory_plane.lifecycle import UsageError

        raise UsageError("bench fuzz needs hypothesis (pip install 'memory-plane[dev]')") from exc
    n = 40 if getattr(args, "short", False) else int(getattr(args, "examples", 0) or 500)
    seed = int(getattr(args, "seed", 0) or 0)
    if getattr(args, "shapes", False):
        from ._fuzz_shapes import run_shapes

        return run_shapes(n, seed)
    fx = Fixture()
    totals: dict[str, Any] = {"examples": 0, "raises": 0, "items_lost": 0, "silent_quarantines": 0,
                              "files_in_tree": len(fx.catalogue),
                              "fields_in_tree": sum(len(v) for v in fx.catalogue.values())}
    failures: list[dict[str, Any]] = []
    t0 = time.perf_counter()

    @settings(max_examples=n, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(m=strategies(fx.catalogue))
    def one(m: Mutation) -> None:
        out = fx.run(m)
        totals["examples"] += 1
        totals["raises"] += bool(out.raises)
        totals["items_lost"] += len(out.lost)
        totals["silent_quarantines"] += len(out.silent_fix)
        if not out.ok and len(failures) < 10:
            failures.append({"mutation": m.describe(), "raises": out.raises[:2], "lost": out.lost[:3],
                             "silent_fix": out.silent_fix[:1]})

    from hypothesis import seed as hseed

    try:
        hseed(seed)(one)()
    finally:
        fx.close()
    totals["seconds"] = round(time.perf_counter() - t0, 1)
    totals["failures"] = failures
    return totals
