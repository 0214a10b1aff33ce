"""`fleet report`: per app across devices, from the files the manifests name; DuckDB's numbers are the ones the rows
give, and Spark (local, 2 cores) runs the same SQL to the same numbers."""

from __future__ import annotations

import json
import os
import shutil
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_plane import MemoryPlane
from memory_plane.fleet import FleetSource, TreeExport, export_tree, fleet_report

from helpers import run_memplane, sim_phone_tree

pytest.importorskip("duckdb")
pytest.importorskip("fsspec")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fleet folder three phones exported to: two that did the same tasks in Chinese, one in English."""
    base = tmp_path_factory.mktemp("fleet")
    zh = sim_phone_tree(base / "zh", device_id="phone-a")
    en = sim_phone_tree(base / "en", device_id="phone-c", rounds=1, language="en-US")
    shutil.copytree(zh, base / "zh2", symlinks=True)
    for tree, device in ((zh, "phone-a"), (base / "zh2", "phone-b"), (en, "phone-c")):
        with MemoryPlane.open(tree) as plane:
            export_tree(TreeExport(plane.device, plane.episodes, plane.clock), str(base / "out"), device)
    yield str(base / "out")


def _expected(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The per-app numbers computed here from the rows, apart from any SQL."""
    out: dict[str, dict[str, Any]] = {}
    for app in sorted({r["app"] for r in rows if r["app"]}):
        mine = [r for r in rows if r["app"] == app]
        wins = lambda rs: round(sum(r["outcome"] == "success" for r in rs) / len(rs), 4) if rs else None  # noqa: E731
        med = lambda rs: float(statistics.median(r["steps"] for r in rs)) if rs else None  # noqa: E731
        followed = [r for r in mine if r["memory_followed"]]
        not_followed = [r for r in mine if not r["memory_followed"]]
        out[app] = {"devices": len({r["device"] for r in mine}), "episodes": len(mine), "success_rate": wins(mine),
                    "success_rate_with_memory": wins(followed), "success_rate_without_memory": wins(not_followed),
                    "median_steps_with_memory": med(followed), "median_steps_without_memory": med(not_followed)}
    return out


def test_duckdb_gives_the_numbers_the_rows_give(fleet: str) -> None:
    with FleetSource.open(fleet) as src:
        rep = fleet_report(src, engine="duckdb", min_devices=2)
        expected = _expected(src.rows("episodes"))
    assert rep["manifests"] == 3
    got = {app: {k: v for k, v in r.items() if k not in ("top_failures", "verified_lessons")}
           for app, r in rep["apps"].items() if app in expected}
    assert got == expected
    assert {r["devices"] for r in rep["apps"].values() if "devices" in r} <= {1, 2, 3}
    # Two phones hold the same lessons (one is a copy of the other): verified on two devices; the English phone's
    # lessons of other pages and words are not the same lesson.
    assert sum(r["verified_lessons"] for r in rep["apps"].values()) > 0
    with FleetSource.open(fleet) as src:
        assert sum(r["verified_lessons"] for r in fleet_report(src, min_devices=4)["apps"].values()) == 0


def test_a_broken_file_is_refused_by_name(fleet: str, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(fleet, tmp_path / "fleet"))
    part = next(copy.rglob("lessons/*/part-*.jsonl.gz"))
    part.write_bytes(part.read_bytes()[:-8])
    out = run_memplane("fleet", "report", str(copy), "--json")
    assert out.returncode == 2 and part.name in json.loads(out.stdout)["error"]


def test_the_cli_reports_as_json_and_as_a_table(fleet: str) -> None:
    out = run_memplane("fleet", "report", fleet, "--json")
    assert out.returncode == 0, out.stderr
    assert set(json.loads(out.stdout)["apps"]) >= {"wechat", "meituan", "settings"}
    table = run_memplane("fleet", "report", fleet)
    assert table.returncode == 0 and "wechat" in table.stdout and "success" in table.stdout


@pytest.mark.slow
def test_spark_runs_the_same_sql_to_the_same_numbers(fleet: str) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (17 or later)")
    with FleetSource.open(fleet) as src:
        duck = fleet_report(src, engine="duckdb", min_devices=2)
        spark = fleet_report(src, engine="spark", min_devices=2)
    assert spark["engine"] == "spark"
    assert {**spark, "engine": "duckdb"} == duck
