"""`bench retrieval-quality`: what the agent gets for real task goals, set by set, beside SQLite FTS5.

Every labelled task set in ../shared/data gets its own fresh store. Each task becomes an episode the
way a runtime records one (retrieve, recorder, one ``launch_app`` call whose result observes the app,
``finish``, ``commit_episode``, ``flush``). Then every goal is asked through ``MemoryPlane.retrieve``
with no app hint and its own episode in ``exclude_ids`` (strict, the headline: left out of everything the
ranking learns from the store, as a goal the device never saw); beside it, the looser figures with the own
episode only left out of the hits. A hit is relevant when its task is about
the same app; only goals whose app has another goal in the set are asked (no ranking can answer the others).
The same goal texts are indexed in SQLite FTS5 (``trigram``, the bar, and ``unicode61``)
in the same run and queried for their top 5 the same leave-one-out way. With ``--variants``, every goal is
also asked with typos, other word forms or its app's name left out (``_perturb``), ours and trigram alike.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import UsageError

from ._corpus import labelled_sets
from ._perturb import VARIANTS, variant_goals
from ._util import data_dir, no_data, r, temp_root

K = 5
CHINESE_SETS = ("spa-bench-chn", "mobiagent-zh")


def _record_all(root: Path, tasks: list[dict[str, Any]]) -> dict[str, int]:
    """Commit one episode per task through the public runtime path; episode id -> task number."""
    from .._plane import MemoryPlane
    from .._retrieve_types import MemoryRetrieveRequest

    owner: dict[str, int] = {}
    with MemoryPlane.open(root) as plane:
        for n, t in enumerate(tasks):
            req = MemoryRetrieveRequest(input=t["goal"])
            memory = plane.retrieve(req)
            rec = plane.new_episode_recorder(req, memory)
            obs = {"app": t["app"], "page": "Home"}
            if t.get("package"):
                obs["package"] = t["package"]
            rec.tool_call("launch_app", {"app_name": t["app"]}, content=f"open {t['app']}")
            rec.tool_result("launch_app", is_error=False, output="ok", observed_state=obs)
            ep = rec.finish(success=True, final_state=f"{t['app']} home", completion_reason="goal reached")
            plane.commit_episode(ep)
            owner[ep.id] = n
        plane.flush(120.0)
    return owner


def _ours(root: Path, tasks: list[dict[str, Any]], owner: dict[str, int], cap: int | None,
          strict: bool = False, asked: list[str] | None = None) -> list[list[int]]:
    """The task numbers of the similar episodes each goal's retrieve shows (its own left out of the hits;
    with ``strict``, also out of everything the ranking learns from the store, through ``exclude_ids``); each
    task is asked as its goal, or as its text in ``asked``."""
    from .._plane import MemoryPlane
    from .._retrieve_types import MemoryRetrieveRequest
    from ..retrieval import RetrieveConfig

    config = RetrieveConfig()
    if cap is not None:
        config.caps["similar_episodes"] = cap
    own = {n: eid for eid, n in owner.items()}
    out: list[list[int]] = []
    with MemoryPlane.open(root, retrieve_config=config) as plane:
        for n, t in enumerate(tasks):
            mine = [own[n]] if strict and n in own else []
            text = asked[n] if asked is not None else t["goal"]
            memory = plane.retrieve(MemoryRetrieveRequest(input=text, exclude_ids=mine))
            out.append([owner[h.id] for h in memory.common.similar_episodes if h.id != own.get(n) and h.id in owner])
    return out


def _fts_match(goal: str, tokenizer: str) -> str:
    """An OR query of the goal's terms: every character trigram (trigram) or every word (unicode61)."""
    text = " ".join(goal.lower().split())
    terms = [text[i:i + 3] for i in range(len(text) - 2)] if tokenizer == "trigram" else re.findall(r"\w+", text)
    terms = [x for x in dict.fromkeys(terms) if x.strip()]
    return " OR ".join('"' + x.replace('"', '""') + '"' for x in terms)


def _fts(tasks: list[dict[str, Any]], tokenizer: str, asked: list[str] | None = None) -> tuple[list[list[int]], float]:
    """FTS5 top-K (BM25) for each goal (or its text in ``asked``) over the other goals; and the mean ms per query."""
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE docs USING fts5(n UNINDEXED, body, tokenize='{tokenizer}')")
    db.executemany("INSERT INTO docs VALUES (?, ?)", [(n, t["goal"]) for n, t in enumerate(tasks)])
    out: list[list[int]] = []
    t0 = time.perf_counter()
    for n, t in enumerate(tasks):
        match = _fts_match(asked[n] if asked is not None else t["goal"], tokenizer)
        rows = db.execute("SELECT n FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
                          (match, K + 1)).fetchall() if match else []
        out.append([int(i) for (i,) in rows if int(i) != n][:K])
    per_query = (time.perf_counter() - t0) * 1000 / max(1, len(tasks))
    db.close()
    return out, per_query


def _same(tasks: list[dict[str, Any]], a: int, b: int) -> bool:
    return bool(tasks[a]["app"].lower() == tasks[b]["app"].lower())


def _metrics(tasks: list[dict[str, Any]], hits: list[list[int]], queries: list[int]) -> dict[str, Any]:
    """hit@1, precision@2 and @5 (a missing hit counts as wrong), mean hits, blocks missing the right app."""
    if not queries:
        return {}
    apps = Counter(t["app"].lower() for t in tasks)
    has_other = [n for n in queries if apps[tasks[n]["app"].lower()] > 1]

    def prec(n: int, k: int) -> float:
        return sum(1 for h in hits[n][:k] if _same(tasks, n, h)) / k

    return {
        "hit_at_1": r(sum(1 for n in queries if hits[n] and _same(tasks, n, hits[n][0])) / len(queries)),
        "precision_at_2": r(sum(prec(n, 2) for n in queries) / len(queries)),
        "precision_at_5": r(sum(prec(n, K) for n in queries) / len(queries)),
        "mean_hits": r(sum(len(hits[n]) for n in queries) / len(queries)),
        "no_right_app_share": r(sum(1 for n in has_other if not any(_same(tasks, n, h) for h in hits[n]))
                                / max(1, len(has_other))),
    }


def _bars(ours: dict[str, Any], tri: dict[str, Any]) -> dict[str, bool]:
    """The bars: P@5 >= trigram + 0.05 (>= trigram where trigram is at 0.90 or more), hit@1, P@2 >=."""
    need = tri["precision_at_5"] + (0.0 if tri["precision_at_5"] >= 0.90 else 0.05)
    return {"precision_at_5": ours["precision_at_5"] >= need - 1e-9,
            "hit_at_1": ours["hit_at_1"] >= tri["hit_at_1"] - 1e-9,
            "precision_at_2": ours["precision_at_2"] >= tri["precision_at_2"] - 1e-9}


def evaluate(tasks: list[dict[str, Any]], strict: bool = True, loose: bool = True,
             variants: tuple[str, ...] = ()) -> dict[str, Any]:
    """Build a store from one task set and measure ours (default caps, and 6 episodes) beside FTS5: ``strict``
    with the own episode left out of everything (``exclude_ids``), ``loose`` with it only left out of the hits;
    each of ``variants`` asks every goal as that variant of its text (strict, and FTS5 trigram), runs named
    ``strict@VARIANT``, ``strict@VARIANT_p5`` and ``fts5_trigram@VARIANT``."""
    with temp_root() as root:
        t0 = time.perf_counter()
        owner = _record_all(root, tasks)
        build_s = time.perf_counter() - t0
        runs: dict[str, list[list[int]]] = {}
        ours_ms = 0.0
        for label, on, leave_out in (("strict", strict, True), ("ours", loose, False)):
            if not on:
                continue
            t0 = time.perf_counter()
            runs[label] = _ours(root, tasks, owner, None, strict=leave_out)
            ours_ms = ours_ms or (time.perf_counter() - t0) * 1000 / max(1, len(tasks))
            runs[f"{label}_p5"] = _ours(root, tasks, owner, 6, strict=leave_out)
        asked_as = {v: variant_goals([t["goal"] for t in tasks], [t["app"] for t in tasks], v) for v in variants}
        for v, asked in asked_as.items():
            runs[f"strict@{v}"] = _ours(root, tasks, owner, None, strict=True, asked=asked)
            runs[f"strict@{v}_p5"] = _ours(root, tasks, owner, 6, strict=True, asked=asked)
    for v, asked in asked_as.items():
        runs[f"fts5_trigram@{v}"] = _fts(tasks, "trigram", asked)[0]
    tri, tri_ms = _fts(tasks, "trigram")
    uni, uni_ms = _fts(tasks, "unicode61")
    runs.update({"fts5_trigram": tri, "fts5_unicode61": uni})
    return {"tasks": len(tasks), "apps": len({t["app"].lower() for t in tasks}), "build_s": r(build_s),
            "runs": runs,
            "ms_per_query": {"ours": r(ours_ms), "fts5_trigram": r(tri_ms), "fts5_unicode61": r(uni_ms)}}


def _side(tasks: list[dict[str, Any]], runs: dict[str, list[list[int]]], label: str,
          queries: list[int]) -> dict[str, Any]:
    # P@5 is read from the run that shows 6 episodes (the default shows 3).
    m = _metrics(tasks, runs[label], queries)
    m["precision_at_5"] = _metrics(tasks, runs[f"{label}_p5"], queries)["precision_at_5"]
    return m


def _report(tasks: list[dict[str, Any]], runs: dict[str, list[list[int]]], queries: list[int]) -> dict[str, Any]:
    """The strict figures as the headline (``ours_strict``, its bars and deltas), the looser ones beside them."""
    tri = _metrics(tasks, runs["fts5_trigram"], queries)
    uni = _metrics(tasks, runs["fts5_unicode61"], queries)
    out: dict[str, Any] = {"protocol": "strict: each goal's own episode in exclude_ids (left out of everything "
                                       "the ranking learns from the store); loose: only out of the hits"}
    if "strict" in runs:
        strict = _side(tasks, runs, "strict", queries)
        out["ours_strict"] = strict
        out["delta_vs_trigram"] = {k: r(strict[k] - tri[k]) for k in ("hit_at_1", "precision_at_2", "precision_at_5")}
        out["bars"] = _bars(strict, tri)
    if "ours" in runs:
        ours = _side(tasks, runs, "ours", queries)
        out["ours_loose"] = ours
        out["bars_loose"] = _bars(ours, tri)
    out.update({"fts5_trigram": tri, "fts5_unicode61": uni})
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Per set and pooled: hit@1, P@2, P@5, mean hits and empty-of-right-app share, ours (strict headline,
    loose beside it) vs FTS5."""
    sets = labelled_sets(data_dir(args))
    only = getattr(args, "set", None)
    if only:
        sets = {k: v for k, v in sets.items() if k in only.split(",")}
    if not sets:
        return no_data("labelled task set (spa-bench/, android-lab/, mobiagent/)" + (f" named {only}" if only else ""))
    variants = _variants(getattr(args, "variants", None))
    out: dict[str, Any] = {"sets": {}}
    for name, tasks in sets.items():
        # --short (bench all) measures the strict protocol only.
        queries = answerable(tasks)
        if not queries:  # every app has one goal: nothing to measure (and no bar to meet)
            out["sets"][name] = {"tasks": len(tasks), "apps": len({t["app"].lower() for t in tasks}), "queries": 0,
                                 "skipped": "no goal whose app has another goal in the set"}
            continue
        ev = evaluate(tasks, loose=not getattr(args, "short", False), variants=variants)
        rep = _report(tasks, ev["runs"], queries)
        out["sets"][name] = {"tasks": ev["tasks"], "apps": ev["apps"], "queries": len(queries), **rep,
                             "ms_per_query": ev["ms_per_query"], "build_s": ev["build_s"]}
        if variants:
            out["sets"][name]["variants"] = {v: _variant_report(tasks, ev["runs"], v, queries) for v in variants}
    measured = {n: s for n, s in out["sets"].items() if s["queries"]}
    for label, names in (("pooled", list(measured)),
                         ("chinese", [n for n in measured if n in CHINESE_SETS]),
                         ("english", [n for n in measured if n not in CHINESE_SETS])):
        if names:
            out[label] = _pool([measured[n] for n in names])
    out["all_bars_met"] = bool(measured) and all(all(s["bars"].values()) for s in measured.values())
    out["bars_met_per_set"] = {n: s["bars"] for n, s in measured.items()}
    if variants:
        out["variant_bars_met"] = {n: {v: all(rep["bars"].values()) for v, rep in s["variants"].items()}
                                   for n, s in measured.items()}
    return out


def answerable(tasks: list[dict[str, Any]]) -> list[int]:
    """The goals whose app has another goal in the set: no ranking can show the right app for the others."""
    apps = Counter(t["app"].lower() for t in tasks)
    return [n for n, t in enumerate(tasks) if apps[t["app"].lower()] > 1]


def _variants(spec: str | None) -> tuple[str, ...]:
    """The query variants asked for (``all`` for every one)."""
    if not spec:
        return ()
    names = VARIANTS if spec == "all" else tuple(v for v in spec.split(",") if v)
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise UsageError(f"--variants: unknown {', '.join(unknown)} (one of {', '.join(VARIANTS)}, or all)")
    return names


def _variant_report(tasks: list[dict[str, Any]], runs: dict[str, list[list[int]]], variant: str,
                    queries: list[int]) -> dict[str, Any]:
    """Ours (strict) and FTS5 trigram asked the same altered goals, with the deltas and the bars."""
    ours = _side(tasks, runs, f"strict@{variant}", queries)
    tri = _metrics(tasks, runs[f"fts5_trigram@{variant}"], queries)
    return {"ours_strict": ours, "fts5_trigram": tri,
            "delta_vs_trigram": {k: r(ours[k] - tri[k]) for k in ("hit_at_1", "precision_at_2", "precision_at_5")},
            "bars": _bars(ours, tri)}


def _pool(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Query-weighted means of each side's figures over several sets."""
    total = sum(rep["queries"] for rep in reports)
    out: dict[str, Any] = {"tasks": sum(rep["tasks"] for rep in reports), "queries": total}
    for side in ("ours_strict", "ours_loose", "fts5_trigram", "fts5_unicode61"):
        if side not in reports[0]:
            continue
        keys = reports[0][side].keys()
        out[side] = {k: r(sum(rep[side][k] * rep["queries"] for rep in reports) / total) for k in keys}
    out["delta_vs_trigram"] = {k: r(out["ours_strict"][k] - out["fts5_trigram"][k])
                               for k in ("hit_at_1", "precision_at_2", "precision_at_5")}
    return out
