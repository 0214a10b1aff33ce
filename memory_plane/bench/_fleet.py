"""`bench fleet`: many simulated phones export, the fleet reports on DuckDB and Spark, a pack goes to a new phone."""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ._util import temp_root

BROKEN_APP = "meituan"
"""The app that is broken on every seventh phone (its "add" button does nothing): its orders fail there."""


def _broken_phone(base: type) -> type:
    class BrokenPhone(base):  # type: ignore[misc, valid-type]
        """A phone whose shopping app adds nothing to the cart (a broken build): its orders fail, and the fleet
        report shows where."""

        def _tap(self, e: Any) -> None:
            if not (self.app == BROKEN_APP and e.key == "add"):
                super()._tap(e)

    return BrokenPhone


def _environment(i: int) -> tuple[str, tuple[int, int]]:
    # Most phones in Chinese on one small screen; some in English, some on a large screen.
    lang = "en-US" if i % 4 == 3 else "zh-CN"
    return lang, ((1080, 2400) if i % 5 == 4 else (640, 1200))


def _phone_tree(root: Path, i: int, rounds: int, tasks: int) -> tuple[Any, set[tuple[Any, ...]]]:
    """Run one simulated phone's tasks in its own tree; its verified lessons as (fleet key, applicability)."""
    from .._plane import MemoryPlane
    from ..fleet import FLEET_TYPES, fleet_key, personal_values, screen_class, shareable
    from ..sim import ScriptedAgent, SimPhone, tasks_for

    lang, screen = _environment(i)
    phone = (_broken_phone(SimPhone) if i % 7 == 6 else SimPhone)()
    phone.language, phone.screen = lang, screen
    device = f"phone-{i:05d}"
    plane = MemoryPlane.open(root)
    agent = ScriptedAgent(phone, plane, device_id=device, step_limit=25)
    for rnd in range(rounds):
        for task in tasks_for(lang, rnd, tasks, seed=i % 3):
            agent.run(task)
    held = set()
    personal = personal_values(plane.device, plane.episodes)
    for t in FLEET_TYPES:
        for e in plane.device.collection(t).iter_items():
            item = e.record
            if item is not None and item.status == "active" and (item.model_extra or {}).get("verified") is not False:
                appl = item.applicability or {}
                held.add((fleet_key(shareable(item, personal)), item.app_id, appl.get("app_version"),
                          appl.get("language"), screen_class(appl.get("screen"))))
    return plane, held


def _new_phone_steps(root: Path, pack: dict[str, Any] | None, n: int) -> tuple[int, int, int]:
    """Steps a new phone takes on the fleet's kind of tasks, with the pack pulled or without; successes; and the
    fleet lessons it holds after a forget and a second pull (the forgotten one must not come back)."""
    from .._plane import MemoryPlane
    from ..fleet import pull_pack
    from ..sim import ScriptedAgent, SimPhone, tasks_for

    phone = SimPhone()
    with MemoryPlane.open(root) as plane:
        if pack is not None:
            pull_pack(plane.device, pack, "phone-new", plane.episodes)
        agent = ScriptedAgent(phone, plane, device_id="phone-new", step_limit=25)
        runs = [agent.run(t) for t in tasks_for("zh-CN", 7, n, seed=5)]
        back = 0
        if pack is not None:
            fleet_ids = [e["id"] for e in plane.device.entries() if e.get("source") == "fleet"]
            if fleet_ids:
                plane.forget(fleet_ids[0], reason="bench: forgotten")
                pull_pack(plane.device, pack, "phone-new", plane.episodes)
                back = int(plane.device.get(fleet_ids[0]) is not None)
    return sum(r.steps for r in runs), sum(r.true_success for r in runs), back


def run(args: argparse.Namespace) -> dict[str, Any]:
    """export_ms_per_device (median, p95), duckdb_report_s, spark_report_s, pack lessons and whether each holds on
    at least --min-devices phones (counted from the phones' own trees), and a new phone's steps with and without
    the pack."""
    try:
        import duckdb  # noqa: F401
        import fsspec  # noqa: F401
    except ImportError:
        return {"skipped": "needs the fleet extra: pip install 'memory-plane[fleet]'"}
    from ..fleet import FleetSource, TreeExport, build_pack, export_tree, fleet_report

    short = bool(getattr(args, "short", False))
    n = 8 if short else int(getattr(args, "devices", None) or 1000)
    min_devices = max(2, n // 10)
    out: dict[str, Any] = {"devices": n, "min_devices": min_devices}
    with temp_root("memplane-fleet-") as base:
        dest = str(base / "fleet")
        export_ms: list[float] = []
        holders: dict[tuple[Any, ...], set[int]] = {}
        sim_s = 0.0
        for i in range(n):
            t0 = time.perf_counter()
            plane, held = _phone_tree(base / f"phone{i}", i, rounds=2, tasks=3)
            sim_s += time.perf_counter() - t0
            with plane:
                t0 = time.perf_counter()
                export_tree(TreeExport(plane.device, plane.episodes, plane.clock), dest, f"phone-{i:05d}")
                export_ms.append((time.perf_counter() - t0) * 1000)
            for k in held:
                holders.setdefault(k, set()).add(i)
        out["simulate_s"] = round(sim_s, 1)
        out["export_ms_per_device_median"] = round(statistics.median(export_ms), 1)
        out["export_ms_per_device_p95"] = round(sorted(export_ms)[int(0.95 * (len(export_ms) - 1))], 1)
        with FleetSource.open(dest) as src:
            t0 = time.perf_counter()
            duck = fleet_report(src, engine="duckdb", min_devices=min_devices)
            out["duckdb_report_s"] = round(time.perf_counter() - t0, 2)
            out["spark_report_s"] = None
            if not short and not getattr(args, "no_spark", False):
                t0 = time.perf_counter()
                spark = fleet_report(src, engine="spark", min_devices=min_devices)
                out["spark_report_s"] = round(time.perf_counter() - t0, 2)
                out["engines_agree"] = {**spark, "engine": "duckdb"} == duck
            pack = build_pack(src, min_devices=min_devices, now=datetime.now(timezone.utc))
        out["apps"] = {app: {k: v for k, v in r.items() if k != "top_failures"} for app, r in duck["apps"].items()}
        out["top_failure"] = {app: (r["top_failures"][0]["cause"] if r["top_failures"] else None)
                              for app, r in duck["apps"].items()}
        out["pack_lessons"] = len(pack["lessons"])
        out["pack_lessons_below_min_devices"] = sum(
            len(holders.get((x["lesson_key"], x["applicability"].get("app"), x["applicability"].get("app_version"),
                             x["applicability"].get("language"), x["applicability"].get("screen_class")), ()))
            < min_devices for x in pack["lessons"])
        tasks = 3 if short else 6
        out["new_phone_steps_without_pack"], ok_without, _ = _new_phone_steps(base / "new0", None, tasks)
        out["new_phone_steps_with_pack"], ok_with, back = _new_phone_steps(base / "new1", pack, tasks)
        out["new_phone_successes"] = {"without_pack": ok_without, "with_pack": ok_with, "tasks": tasks}
        out["forgotten_fleet_lessons_back_after_pull"] = back
    return out
