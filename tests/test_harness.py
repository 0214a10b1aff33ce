"""The short crash and concurrency harnesses (short enough to run with every test run): their goals are zeros."""

from __future__ import annotations

import argparse

import pytest

from memory_plane.bench import run_bench


@pytest.mark.slow
def test_crash_harness_short() -> None:
    res = run_bench("crash", argparse.Namespace(short=True, kills=20, seed=1))
    assert res["kills"] == 20 and res["acknowledged_commits"] > 0
    assert (res["lost_commits"], res["corrupt_files"], res["index_mismatches"]) == (0, 0, 0)
    # GC is in the kill set too: killed at random points and run again, it ends as an unkilled GC.
    assert res["gc_kills"] == 5 and res["gc_tombstones_expected"] > 0
    assert (res["gc_lost_tombstones"], res["gc_duplicate_tombstones"], res["gc_files_differing"]) == (0, 0, 0), \
        res.get("gc_differing_examples")
    # Killed at each of 60 points spread over its changes of the file system (not at random times): every
    # narrow window between two writes is met, and each ends as an unkilled GC.
    assert res["gc_points"] == 60 and res["gc_mutations"] > 60
    assert (res["gc_point_lost_tombstones"], res["gc_point_duplicate_tombstones"],
            res["gc_point_files_differing"]) == (0, 0, 0), res["gc_point_examples"]


def test_concurrency_harness_short() -> None:
    res = run_bench("concurrency", argparse.Namespace(short=True))
    assert res["commits"] == res["episodes_indexed"] == res["app_profile_success_count"]
    assert (res["lost_updates"], res["errors"]) == (0, 0)
