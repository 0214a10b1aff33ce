"""`bench fleet` at a small size: simulated phones (one with a broken app) export, DuckDB reports, the pack holds
only lessons verified on enough phones, and a new phone with the pack takes fewer steps."""

from __future__ import annotations

import argparse

import pytest

from memory_plane.bench import run_one

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
