"""`bench retrieval-quality`: leave-one-out over real task descriptions (SPA-Bench ENG/CHN single-app,
Android-Lab): each task's description is the query against episodes made from all the other tasks;
ours beside an SQLite FTS5 (BM25) index of the same episode texts."""

from __future__ import annotations

import argparse
import sqlite3
from datetime import datetime, timezone
from typing import Any

from lifecycle import IndexFile, collection_lock

from .._text import tokens
from ._corpus import real_tasks
from ._util import data_dir, r, temp_root

K = 5


def _metrics(results: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, float]:
    if not results:
        return {}
    p5 = sum(sum(1 for h in hits[:K] if h["app"] == t["app"]) / K for t, hits in results) / len(results)
    h1 = sum(1 for t, hits in results if hits and hits[0]["app"] == t["app"]) / len(results)
    cat = [(t, hits) for t, hits in results if t.get("category")]
    c5 = (sum(1 for t, hits in cat if any(h.get("category") == t["category"] and h["app"] == t["app"]
                                          for h in hits[:K])) / len(cat)) if cat else float("nan")
    return {"same_app_precision_at_5": r(p5), "same_app_hit_at_1": r(h1), "same_category_hit_at_5": r(c5),
            "queries": len(results)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Same-app precision@5, hit@1 and same-category hit@5 for ours and FTS5, overall and by language."""
    from .._plane import MemoryPlane
    from .._retrieve import _episode_text
    from .._types import MemoryRetrieveRequest

    tasks = real_tasks(data_dir(args))
    if not tasks:
        return {"skipped": "../shared/data (spa-bench, android-lab) is not here (pass --data PATH)"}
    with temp_root() as root:
        plane = MemoryPlane(root)
        cat = plane.device.catalog
        entries = []
        by_id: dict[str, dict[str, Any]] = {}
        for n, t in enumerate(tasks):
            eid = f"ep_20260101_{n:010x}"
            app = cat.app_id_for(t["app"].replace("_", " ")) if t["app"] else None
            t["eid"] = eid
            t["canon"] = app
            entries.append({"id": eid, "status": "active", "success": True, "app": app, "goal": t["goal"],
                            "summary": f"Goal: {t['goal']}. Outcome: success", "started_at": "2026-01-01T00:00:00Z",
                            "path": f"2026/{eid}/episode.yaml"})
            by_id[eid] = t
        with collection_lock(root / "episodes"):
            IndexFile(root / "episodes" / "index.yaml").write(entries)
        db = sqlite3.connect(":memory:")
        db.execute("CREATE VIRTUAL TABLE docs USING fts5(id UNINDEXED, body)")
        db.executemany("INSERT INTO docs VALUES (?, ?)", [(e["id"], " ".join(tokens(_episode_text(e))))
                                                         for e in entries])
        now = datetime(2026, 2, 1, tzinfo=timezone.utc)
        ours, fts = [], []
        for t in tasks:
            # True leave-one-out: the task's own episode is removed before ranking and app voting.
            hits = plane.retriever.rank_episodes(MemoryRetrieveRequest(input=t["goal"]), now, limit=K,
                                                 exclude=frozenset([t["eid"]]))
            got = [by_id[h.id] for h in hits]
            ours.append((t, got))
            toks = list(dict.fromkeys(tokens(t["goal"])))
            rows = db.execute("SELECT id FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
                              (" OR ".join('"' + x.replace('"', '""') + '"' for x in toks), K + 1)).fetchall() \
                if toks else []
            fts.append((t, [by_id[i] for (i,) in rows if i != t["eid"]][:K]))
        plane.close()
    out: dict[str, Any] = {"tasks": len(tasks)}
    for label, pred in (("all", lambda t: True), ("chinese", lambda t: t["lang"] == "zh"),
                        ("english", lambda t: t["lang"] == "en")):
        o = _metrics([x for x in ours if pred(x[0])])
        f = _metrics([x for x in fts if pred(x[0])])
        out[label] = {"ours": o, "fts5": f,
                      "delta_same_app_precision_at_5": r(o.get("same_app_precision_at_5", 0)
                                                         - f.get("same_app_precision_at_5", 0))}
    return out
