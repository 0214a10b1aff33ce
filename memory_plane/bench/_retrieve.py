"""`bench retrieve`: warm and cold retrieval over 10,000 episodes, 3,000 device items and 500 long-term
memories, beside an SQLite FTS5 (BM25) index of the same texts queried in the same run."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memory_plane.device_memory import shipped_catalog
from memory_plane.lifecycle import IndexFile, collection_lock, content_hash, emit_block_yaml

from .._tokens import tokens
from ..retrieval import POSTINGS_CACHE_DIR as CACHE_DIR
from ._corpus import synthetic_goals
from ._util import data_dir, pct, r, temp_root

NOW = "2026-11-01T00:00:00Z"
PASSES = 3  # timed passes over the queries, on both sides


def build_store(root: Path, n_episodes: int, n_device: int, n_long_term: int, data: Path | None,
                seed: int = 3) -> list[str]:
    """Write a store of the given size (fixture: plain writes, no fsync) and return query goals."""
    rng = random.Random(seed)
    cat = shipped_catalog()
    goals = synthetic_goals(n_episodes + 400, seed=seed, data=data)
    ep_entries = []
    for i, (goal, app) in enumerate(goals[:n_episodes]):
        eid = f"ep_2026{(i % 12) + 1:02d}01_{i:010x}"
        appid = cat.app_id_for(app) if app else None
        ok = rng.random() > 0.15
        ep_entries.append({k: v for k, v in {
            "id": eid, "status": "active", "success": ok, "app": appid, "intent": None, "goal": goal,
            "summary": f"Goal: {goal}. Path: launch_app -> tap -> keyboard_text. Outcome: "
                       + ("success" if ok else "failure (state_mismatch): page unchanged"),
            "device_id": "default", "language": "zh-CN", "screen": "640x1200", "steps": 3,
            "started_at": f"2026-{(i % 12) + 1:02d}-01T00:00:00Z", "path": f"2026/{eid}/episode.yaml"}.items()
            if v is not None})
        d = root / "episodes" / "2026" / eid
        d.mkdir(parents=True, exist_ok=True)
        (d / "episode.yaml").write_text(emit_block_yaml({"id": eid, "status": "active", "user_goal": goal}), "utf-8")
    with collection_lock(root / "episodes"):
        IndexFile(root / "episodes" / "index.yaml").write(ep_entries)
    kinds = [("procedure", "procedures", 0.5), ("navigation", "navigation", 0.25), ("failure", "failures", 0.1),
             ("ui_anchor", "ui_anchors", 0.1), ("app_profile", "apps", 0.04), ("calibration", "calibration", 0.01)]
    per_kind: dict[str, list[dict[str, Any]]] = {k: [] for k, _, _ in kinds}
    for j in range(n_device):
        x = rng.random()
        acc = 0.0
        kind, folder = "procedure", "procedures"
        for k, f, share in kinds:
            acc += share
            if x <= acc:
                kind, folder = k, f
                break
        goal, app = goals[rng.randrange(len(goals))]
        appid = cat.app_id_for(app) if app else "wechat"
        prefix = {"procedure": "proc_", "navigation": "nav_", "failure": "fail_", "ui_anchor": "ui_",
                  "app_profile": "app_", "calibration": "cal_"}[kind]
        iid = f"{prefix}{content_hash(kind, j)}"
        page = rng.choice(["Home", "Search", "Chat", "Cart", "首页", "搜索"])
        summary = {"procedure": f"When goal is like {goal!r}: verified path launch_app → tap → keyboard_text",
                   "navigation": f"{app}/{page} → {app}/Detail via tap(@x=320,y=640)",
                   "failure": f"Trigger: tool=tap, page={page}. Avoid/verify: {goal[:40]} failed: page unchanged",
                   "ui_anchor": f"'搜索' on {app}/{page} at (0.5, 0.1) of the screen",
                   "app_profile": f"App {app}; pages: Home, Search, {page}",
                   "calibration": "screenshots are 640x1200; tap coordinates are pixels"}[kind]
        item = {"id": iid, "type": kind, "status": "active" if rng.random() > 0.05 else "conflicted",
                "title": f"{app}: {goal[:60]}", "app_id": appid, "app_name": app, "page_name": page,
                "device_id": "default", "summary": summary,
                "applicability": {"device_id": "default", "language": "zh-CN", "screen": "640x1200"},
                "confidence": round(rng.uniform(0.5, 0.95), 2), "ttl": "45d", "expires_at": "2027-01-01T00:00:00Z",
                "updated_at": NOW, "success_count": rng.randint(1, 5),
                "evidence_refs": [{"type": "episode", "id": ep_entries[j % len(ep_entries)]["id"]}]}
        if kind == "procedure":
            item["steps"] = [{"tool": "launch_app", "action": app}, {"tool": "tap", "coords": "x=320,y=100"},
                             {"tool": "keyboard_text", "text": "weixin"}]
        (root / "device" / folder / f"{iid}.yaml").write_text(emit_block_yaml(item), "utf-8")
        entry = {"id": iid, "type": kind, "status": item["status"], "title": item["title"], "app": appid,
                 "app_name": app, "page": page, "device_id": "default", "applicability": item["applicability"],
                 "confidence": item["confidence"], "success_count": item["success_count"], "evidence": 1,
                 "expires_at": item["expires_at"], "updated_at": NOW, "summary": summary, "path": f"{iid}.yaml"}
        per_kind[kind].append(entry)
    for kind, folder, _ in kinds:
        with collection_lock(root / "device" / folder):
            IndexFile(root / "device" / folder / "index.yaml").write(per_kind[kind])
    lt_entries = []
    for n_lt in range(n_long_term):
        goal, app = goals[rng.randrange(len(goals))]
        mid = f"mem_{content_hash('lt', n_lt)}"
        typ = rng.choice(["fact", "fact", "preference", "procedure", "rule"])
        text = f"{app or 'phone'}: remember {goal[:60]}"
        (root / "long_term" / "memories" / f"{mid}.md").write_text(
            "---\n" + emit_block_yaml({"id": mid, "type": typ, "status": "active", "title": text[:60]})
            + f"---\n\n# {text[:60]}\n\n{text}\n", "utf-8")
        lt_entries.append({"id": mid, "type": typ, "status": "active", "title": text[:60], "priority": 50,
                           "confidence": 0.8, "summary": text, "path": f"memories/{mid}.md"})
    with collection_lock(root / "long_term"):
        IndexFile(root / "long_term" / "index.yaml").write(lt_entries)
    queries = [g for g, _ in goals[n_episodes:n_episodes + 200]]
    return queries


def fts_index(root: Path) -> sqlite3.Connection:
    """An FTS5 table over the same texts (pre-tokenised with our tokenizer, so Chinese is comparable)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(kind UNINDEXED, id UNINDEXED, body)")
    rows = []
    for rel in ["episodes/index.yaml", "long_term/index.yaml",
                *(f"device/{f}/index.yaml" for f in ("procedures", "navigation", "failures", "ui_anchors", "apps",
                                                     "calibration"))]:
        for e in IndexFile(root / rel).read().entries:
            text = " ".join(str(e.get(k, "")) for k in ("goal", "title", "summary", "app", "app_name", "page"))
            rows.append((rel.split("/")[0], e["id"], " ".join(tokens(text))))
    db.executemany("INSERT INTO docs VALUES (?, ?, ?)", rows)
    db.commit()
    return db


def fts_query(db: sqlite3.Connection, q: str, limit: int = 30) -> list[tuple[str, str]]:
    """BM25 top hits for a goal (OR of its tokens)."""
    toks = list(dict.fromkeys(tokens(q)))
    if not toks:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in toks)
    return db.execute("SELECT kind, id FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
                      (match, limit)).fetchall()


_COLD = """
import json, sys, time
t0 = time.perf_counter()
from memory_plane import MemoryPlane, MemoryRetrieveRequest, CurrentEnvironmentHints
t1 = time.perf_counter()
plane = MemoryPlane(sys.argv[1])
memory = plane.retrieve(MemoryRetrieveRequest(input=sys.argv[2], current_hints=CurrentEnvironmentHints(
    language="zh-CN", screen_width=640, screen_height=1200)))
block = memory.render()
t2 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1000, "retrieve_ms": (t2 - t1) * 1000, "refs": len(memory.refs())}))
"""


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Warm p50/p95, cold ms in a fresh process, FTS5 warm p50, and the ratio."""
    from .._plane import MemoryPlane
    from .._retrieve_types import CurrentEnvironmentHints, MemoryRetrieveRequest

    short = getattr(args, "short", False)
    n_ep = 2000 if short else int(getattr(args, "episodes", 10_000) or 10_000)
    n_dev, n_lt = (600, 100) if short else (3000, 500)
    with temp_root() as root:
        t0 = time.perf_counter()
        queries = build_store(root, n_ep, n_dev, n_lt, data_dir(args))
        build_s = time.perf_counter() - t0
        os.sync()  # the fixture's 13,500 fresh files are written back now, not during the timed runs
        hints = CurrentEnvironmentHints(language="zh-CN", screen_width=640, screen_height=1200)
        cold: list[dict[str, float]] = []
        uncached: list[dict[str, float]] = []
        for k, q in enumerate(queries[:6]):
            if k < 3:
                # A process that finds no persisted postings (the first one after install, or after the
                # folder was deleted): it tokenises every index and leaves the files for the next.
                shutil.rmtree(root / CACHE_DIR, ignore_errors=True)
            out = subprocess.run([sys.executable, "-c", _COLD, str(root), q], capture_output=True, text=True,
                                 check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
            (uncached if k < 3 else cold).append(json.loads(out.stdout.strip().splitlines()[-1]))
        plane = MemoryPlane(root)
        db = fts_index(root)
        for q in queries:  # one untimed pass: indexes, features and item caches are warm
            plane.retrieve(MemoryRetrieveRequest(input=q, current_hints=hints)).render()
            fts_query(db, q)
        warm: list[float] = []
        fts: list[float] = []
        refs: list[int] = []

        def ours(q: str) -> None:
            t = time.perf_counter()
            memory = plane.retrieve(MemoryRetrieveRequest(input=q, current_hints=hints))
            memory.render()
            warm.append((time.perf_counter() - t) * 1000)
            refs.append(len(memory.refs()))

        def theirs(q: str) -> None:
            t = time.perf_counter()
            fts_query(db, q)
            fts.append((time.perf_counter() - t) * 1000)

        # Paired and interleaved: every query runs on both sides back to back (who goes first
        # alternates), PASSES times, so a slow phase of the machine lands on both alike.
        for n in range(PASSES):
            for k, q in enumerate(queries):
                for side in ((ours, theirs) if (k + n) % 2 == 0 else (theirs, ours)):
                    side(q)
        plane.close()
    warm_p50, fts_p50 = pct(warm, 50), pct(fts, 50)
    cold_total = sorted(c["import_ms"] + c["retrieve_ms"] for c in cold)[len(cold) // 2]
    return {
        "episodes": n_ep, "device_items": n_dev, "long_term": n_lt, "queries": len(queries),
        "warm_p50_ms": r(warm_p50, 3), "warm_p95_ms": r(pct(warm, 95), 3),
        # cold_ms: the first retrieve of a fresh process, once the runtime has imported the library at
        # start-up (nothing in memory yet; the postings an earlier process persisted are on disk);
        # cold_with_import_ms adds the import itself.
        "cold_ms": r(sorted(c["retrieve_ms"] for c in cold)[len(cold) // 2], 1),
        # the same without the persisted postings (.cache/retrieve deleted before each run)
        "cold_without_postings_cache_ms": r(sorted(c["retrieve_ms"] for c in uncached)[len(uncached) // 2], 1),
        "cold_import_ms": r(sorted(c["import_ms"] for c in cold)[len(cold) // 2], 1),
        "cold_with_import_ms": r(cold_total, 1),
        "fts5_warm_p50_ms": r(fts_p50, 3), "fts5_warm_p95_ms": r(pct(fts, 95), 3),
        "ratio_warm_p50_vs_fts5": r(warm_p50 / fts_p50, 2),
        "mean_refs_per_block": r(sum(refs) / len(refs), 1),
        "timed_passes": PASSES, "interleaved": True,
        "fixture_build_s": r(build_s, 1),
        "note": "ours = retrieve + render (filters, scoring, routing, prompt block); FTS5 = one BM25 top-30 query",
    }
