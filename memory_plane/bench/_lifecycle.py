"""`bench lifecycle`: verify throughput and GC time on 20,000 memory files and 10,000 episodes."""

from __future__ import annotations

import argparse
import random
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from memory_plane.lifecycle import IndexFile, collection_lock, content_hash, emit_block_yaml, format_ts

from ._util import r, temp_root

FOLDERS = [("procedure", "procedures", "proc_"), ("navigation", "navigation", "nav_"), ("failure", "failures", "fail_"),
           ("ui_anchor", "ui_anchors", "ui_"), ("app_profile", "apps", "app_"), ("calibration", "calibration", "cal_")]
NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)


def build(root: Any, n_items: int, n_episodes: int, seed: int = 5) -> None:
    """Items and episodes with a spread of ages (fixture: plain writes)."""
    rng = random.Random(seed)
    eps = []
    for i in range(n_episodes):
        started = NOW - timedelta(days=rng.uniform(0, 240))
        eid = f"ep_{started.strftime('%Y%m%d')}_{i:010x}"
        d = root / "episodes" / started.strftime("%Y") / eid
        (d / "artifacts").mkdir(parents=True, exist_ok=True)
        (d / "episode.yaml").write_text(emit_block_yaml({
            "id": eid, "type": "task_episode", "status": "active", "started_at": format_ts(started),
            "user_goal": f"goal {i}", "outcome": {"success": True}}), "utf-8")
        (d / "events.jsonl").write_text('{"event_id":"evt_0001","type":"tool_call","tool_name":"tap"}\n'
                                        '{"event_id":"evt_0002","type":"tool_result","tool_name":"tap",'
                                        '"screenshot_ref":"artifacts/step_001.jpg"}\n', "utf-8")
        (d / "artifacts" / "step_001.jpg").write_bytes(b"\xff\xd8\xff" + bytes(200))
        eps.append({"id": eid, "status": "active", "success": True, "goal": f"goal {i}",
                    "started_at": format_ts(started), "path": f"{started.strftime('%Y')}/{eid}/episode.yaml"})
    with collection_lock(root / "episodes"):
        IndexFile(root / "episodes" / "index.yaml").write(eps)
    per: dict[str, list[dict[str, Any]]] = {f: [] for _, f, _ in FOLDERS}
    for j in range(n_items):
        kind, folder, prefix = FOLDERS[j % len(FOLDERS)]
        iid = f"{prefix}{content_hash(kind, j)}"
        updated = NOW - timedelta(days=rng.uniform(0, 120))
        item = {"id": iid, "type": kind, "status": "active", "title": f"item {j}", "app_id": "wechat",
                "summary": f"memory {j}", "confidence": 0.7, "ttl": "45d",
                "expires_at": format_ts(updated + timedelta(days=45)), "updated_at": format_ts(updated),
                "last_validated_at": format_ts(updated),
                "evidence_refs": [{"type": "episode", "id": eps[rng.randrange(len(eps))]["id"]}]}
        (root / "device" / folder / f"{iid}.yaml").write_text(emit_block_yaml(item), "utf-8")
        per[folder].append({"id": iid, "type": kind, "status": "active", "path": f"{iid}.yaml"})
    for folder, entries in per.items():
        with collection_lock(root / "device" / folder):
            IndexFile(root / "device" / folder / "index.yaml").write(entries)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Verify items/s and GC seconds (a dry run and a real run) on a large store."""
    from .._plane import MemoryPlane

    short = getattr(args, "short", False)
    n_items = 2000 if short else int(getattr(args, "items", 20_000) or 20_000)
    n_eps = n_items // 2
    with temp_root() as root:
        build(root, n_items, n_eps)
        plane = MemoryPlane(root, clock=lambda: NOW)
        t0 = time.perf_counter()
        first = plane.verify()  # marks the expired: a one-time rewrite of those files
        first_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rep = plane.verify()  # what cron pays on a settled tree
        verify_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        dry = plane.gc(dry_run=True)
        dry_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        gc = plane.gc()
        gc_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = plane.verify()
        verify2_s = time.perf_counter() - t0
        plane.close()
    return {
        "memory_files": n_items, "episodes": n_eps, "verify_checked": rep.checked,
        "verify_s": r(verify_s, 2), "verify_items_per_s": r(rep.checked / verify_s, 0),
        "first_verify_s": r(first_s, 2), "first_verify_items_per_s": r(first.checked / first_s, 0),
        "first_verify_expired_marked": len(first.stats.get("expired_marked", [])),
        "gc_dry_run_s": r(dry_s, 2), "gc_s": r(gc_s, 2), "gc_removed": len(gc.removed),
        "gc_removed_by_reason": gc.to_dict()["removed_by_reason"], "gc_bytes_freed": gc.bytes_freed,
        "verify_after_gc_s": r(verify2_s, 2), "verify_after_gc_problems": len(again.problems),
        "dry_run_would_remove": len(dry.removed),
    }
