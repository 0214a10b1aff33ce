"""`bench fleet` at a small size: simulated phones (one with a broken app) export, DuckDB reports, the pack holds
only lessons verified on enough phones, and a new phone with the pack takes fewer steps."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memory_plane import MemoryPlane
from memory_plane.bench import run_one
from memory_plane.fleet import FleetSource, TreeExport, build_pack, export_tree, write_pack

from helpers import sim_phone_tree

pytest.importorskip("duckdb")
pytest.importorskip("fsspec")


@pytest.mark.slow
def test_bench_fleet_at_seven_phones() -> None:
    rep = run_one("fleet", argparse.Namespace(short=False, devices=7, no_spark=True))
    assert rep["devices"] == 7 and rep["min_devices"] == 2
    assert rep["export_ms_per_device_median"] > 0 and rep["duckdb_report_s"] >= 0 and rep["spark_report_s"] is None
    assert set(rep["apps"]) >= {"wechat", "meituan", "settings"}
    assert rep["apps"]["meituan"]["devices"] == 7 and rep["apps"]["meituan"]["success_rate"] < 1.0  # the broken one
    assert rep["top_failure"]["meituan"] is not None
    assert rep["pack_lessons"] > 0 and rep["pack_lessons_below_min_devices"] == 0
    assert rep["new_phone_steps_with_pack"] < rep["new_phone_steps_without_pack"]
    assert rep["forgotten_fleet_lessons_back_after_pull"] == 0


@pytest.mark.slow
def test_bench_replay_with_a_fleet_pack_takes_fewer_steps_the_first_time(tmp_path: Path) -> None:
    """A phone that pulls what other phones verified does its first round of their tasks in fewer steps."""
    for name in ("a", "b"):
        tree = sim_phone_tree(tmp_path / name, device_id=f"phone-{name}")
        with MemoryPlane.open(tree) as plane:
            export_tree(TreeExport(plane.device, plane.episodes, plane.clock), str(tmp_path / "fleet"), name)
    with FleetSource.open(str(tmp_path / "fleet")) as src:
        write_pack(build_pack(src, min_devices=2, now=datetime.now(timezone.utc)), str(tmp_path / "pack.json"))
    without = run_one("replay", argparse.Namespace(short=True, seed=0))
    with_pack = run_one("replay", argparse.Namespace(short=True, seed=0, pack=str(tmp_path / "pack.json")))
    assert with_pack["pack_lessons_pulled"] > 0 and "pack_lessons_pulled" not in without
    assert with_pack["rounds"][0]["steps"] < without["rounds"][0]["steps"]
    assert with_pack["false_completions"] == 0 and with_pack["memory_errors"] == 0
