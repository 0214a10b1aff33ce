"""`bench lessons`: whether what the device learned from real paths is what happened.

On the shared AndroidControl evaluation file, through the runtime's public path (`import_androidcontrol`,
the code of `memplane import androidcontrol`: recorder, episode write, extraction; then
``MemoryPlane.retrieve``), it reports:

- ``procedures``: how many procedures the full import made;
- ``cross_task``: procedures that name a goal (in their title, in the line retrieve shows, or in
  ``goal_examples``) none of whose episodes has the shown steps as its effective path; beside it two
  looser counts: steps that are the path of no named goal's episode at all, and steps that are the path
  of none of the procedure's evidence episodes;
- ``traced``: per item type, items whose every episode evidence names event ids;
- ``split``: goals split 80/20 by a sha256 of the goal; the 80% are imported, each of the 20% whose app
  is known (an ``open`` action names it) is asked through ``retrieve``: is the first procedure shown of
  the right app, and how close are its steps to what the person did (normalised longest common
  subsequence of (action type, target words) tokens), beside the action sequence of the recorded episode
  whose goal is nearest by SQLite FTS5 trigram, in the same run;
- ``blame``: the scripted blame scenario on the simulated phone (see ``_blame.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memory_plane.device_memory import ITEM_TYPES, Procedure, type_of_id
from memory_plane.episodes import Step
from memory_plane.lifecycle import MemoryPlaneError

from ._lesson_paths import action_tokens, episode_path, lcs_closeness, procedure_tokens, steps_agree
from ._quality import _fts_match
from ._util import data_dir, no_data, r, temp_root

DATA_FILE = ("androidcontrol", "android_control_evaluation_std.jsonl")
SHORT_LIMIT = 150  # episodes read in --short (`bench all`): seconds, not minutes
ASKED_SHARE = 20  # percent of goals asked (by sha256 of the goal); the rest are recorded
EXAMPLES = 5  # cross-task procedures named in the report, for a person to look at

# -- the data ---------------------------------------------------------------------------


def read_rows(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The episodes of an AndroidControl jsonl file (unreadable lines left out), at most ``limit``."""
    rows: list[dict[str, Any]] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if limit is not None and len(rows) >= limit:
                break
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and isinstance(d.get("goal"), str) and isinstance(d.get("steps"), list):
                rows.append(d)
    return rows


def asked(goal: str) -> bool:
    """Whether a goal is on the asked side of the fixed split (a stable hash, not Python's ``hash``)."""
    return int(hashlib.sha256(goal.encode("utf-8")).hexdigest()[:8], 16) % 100 < ASKED_SHARE


def row_actions(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A source episode's actions as the importer maps them: tool, input and the person's instruction."""
    from .._androidcontrol import androidcontrol_action

    out = []
    for step in row["steps"]:
        mapped = androidcontrol_action(step.get("action_content") if isinstance(step, dict) else None)
        if mapped is None:
            continue
        tool, ti = mapped
        desc = step.get("step_instruction")
        out.append({"tool": tool, "input": ti, "description": desc if isinstance(desc, str) else None})
    return out


def row_app(row: dict[str, Any]) -> str | None:
    """The app an episode names through its first ``open`` action (None: not known)."""
    for a in row_actions(row):
        if a["tool"] == "launch_app":
            return str(a["input"]["app"])
    return None


def _import(root: Path, rows: list[dict[str, Any]], workdir: Path) -> dict[str, Any]:
    """Import rows the way `memplane import androidcontrol FILE` does (the same function, on a file)."""
    from .._androidcontrol import import_androidcontrol
    from .._plane import MemoryPlane

    src = workdir / "episodes.jsonl"
    with open(src, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    with MemoryPlane.open(root) as plane:
        rep = import_androidcontrol(plane, src)
    return rep.to_dict()


# -- (a) (b) (c): a store after an import ------------------------------------------------------


def audit_procedures(plane: Any, examples: int = EXAMPLES) -> dict[str, Any]:
    """Procedures, and the cross-task ones: a goal they name (title, shown line, ``goal_examples``) none of
    whose episodes took the steps they show."""
    by_goal: dict[str, list[str]] = {}
    for e in plane.episodes.entries():
        ep = plane.episodes.get(str(e["id"]))
        if ep is not None:
            by_goal.setdefault(ep.user_goal[:200], []).append(ep.id)
    paths: dict[str, tuple[list[Step], str | None]] = {}

    def path_of(eid: str) -> tuple[list[Step], str | None]:
        if eid not in paths:
            try:
                ep = plane.episodes.get(eid)
                target = ep.normalized_goal.target if ep is not None else None
                paths[eid] = (episode_path(plane.episodes.events(eid).records), target)
            except (MemoryPlaneError, OSError):
                paths[eid] = ([], None)  # a hand-edited evidence id that names no episode: no path to agree with
        return paths[eid]

    def agrees(proc: Procedure, eid: str) -> bool:
        path, target = path_of(eid)
        return steps_agree(proc.steps, proc.steps_target, path, target)

    total = cross = loose = off_evidence = no_named = 0
    named_examples: list[dict[str, Any]] = []
    for read in plane.device.collection("procedure").iter_items():
        proc = read.record
        if not isinstance(proc, Procedure):
            continue
        total += 1
        if not proc.steps:
            continue  # nothing shown, nothing to be wrong (a hand-written rule may have prose only)
        goals = [g for g in dict.fromkeys([*proc.goal_examples, *named_in(proc, by_goal)]) if g in by_goal]
        if not goals:
            no_named += 1
        per_goal = {g: any(agrees(proc, eid) for eid in by_goal[g]) for g in goals}
        if goals and not all(per_goal.values()):
            cross += 1
            if len(named_examples) < examples:
                named_examples.append({
                    "id": proc.id, "title": proc.title, "shown": proc.body()[:200],
                    "goals_off_path": [g for g, ok in per_goal.items() if not ok][:3],
                    "first_steps": [s.render() for s in proc.steps[:3]]})
        if goals and not any(per_goal.values()):
            loose += 1
        ev = [ref.id for ref in proc.evidence_refs if ref.type == "episode"]
        if not any(agrees(proc, eid) for eid in ev):
            off_evidence += 1
    return {"procedures": total, "cross_task": cross, "cross_task_share": r(cross / total) if total else None,
            "steps_of_no_named_goal": loose, "steps_of_no_evidence_episode": off_evidence,
            "naming_no_episode": no_named, "cross_task_examples": named_examples}


def named_in(proc: Procedure, goals: Iterable[str]) -> list[str]:
    """Goals a procedure names in its title or in the line retrieve shows for it (quoted whole)."""
    shown = f"{proc.title}\n{proc.body()}"
    return [g for g in goals if g and any(q + g + q in shown for q in ("'", '"'))]


def audit_traces(plane: Any) -> dict[str, dict[str, Any]]:
    """Per item type: items, and those whose every episode evidence ref names event ids (and has one)."""
    out: dict[str, dict[str, Any]] = {}
    items: dict[str, list[Any]] = {"device_profile": list(plane.device.profiles.all())}
    for t in ITEM_TYPES:
        if t != "device_profile":
            items[t] = [read.record for read in plane.device.collection(t).iter_items() if read.record is not None]
    for t, records in items.items():
        if not records:
            continue
        traced = 0
        refs = with_ids = 0
        for item in records:
            eps = [ref for ref in item.evidence_refs if ref.type == "episode"]
            refs += len(eps)
            with_ids += sum(1 for ref in eps if ref.event_ids)
            traced += 1 if eps and all(ref.event_ids for ref in eps) else 0
        out[t] = {"items": len(records), "traced": traced, "untraced": len(records) - traced,
                  "episode_refs": refs, "episode_refs_with_event_ids": with_ids}
    return out


def traced_summary(per_type: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """All types together: items, traced, and whether every one is."""
    items = sum(v["items"] for v in per_type.values())
    traced = sum(v["traced"] for v in per_type.values())
    return {"items": items, "traced": traced, "all_traced": items == traced}


# -- (d): the split ------------------------------------------------------------------------------


def _nearest(recorded: list[dict[str, Any]], goals: list[str]) -> list[int | None]:
    """For each goal, the recorded row whose goal is the FTS5 trigram (BM25) top hit."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(n UNINDEXED, body, tokenize='trigram')")
    db.executemany("INSERT INTO docs VALUES (?, ?)", [(n, row["goal"]) for n, row in enumerate(recorded)])
    out: list[int | None] = []
    for g in goals:
        match = _fts_match(g, "trigram")
        hit = db.execute("SELECT n FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT 1",
                         (match,)).fetchone() if match else None
        out.append(int(hit[0]) if hit else None)
    db.close()
    return out


def _side(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    shown = [x for x in rows if x["shown"]]
    return {
        "coverage": r(len(shown) / n) if n else None,
        "right_app": r(sum(1 for x in rows if x["right_app"]) / n) if n else None,
        "right_app_when_shown": r(sum(1 for x in shown if x["right_app"]) / len(shown)) if shown else None,
        "path_closeness_when_shown": r(sum(x["closeness"] for x in shown) / len(shown)) if shown else None,
        "path_closeness": r(sum(x["closeness"] for x in shown) / n) if n else None,  # nothing shown counts 0
    }


def evaluate_split(rows: list[dict[str, Any]], workdir: Path, audit_store: bool = False) -> dict[str, Any]:
    """Record the goals of the 80% side, ask those of the 20% side whose app is known; ours beside FTS5.
    With ``audit_store``, also (a) (b) (c) of the recorded store, under ``recorded_store``."""
    from .._plane import MemoryPlane
    from .._retrieve_types import MemoryRetrieveRequest

    recorded = [row for row in rows if not asked(row["goal"])]
    questions = [row for row in rows if asked(row["goal"]) and row_app(row)]
    out: dict[str, Any] = {"recorded": len(recorded), "asked_goals": sum(1 for row in rows if asked(row["goal"])),
                           "asked_with_app": len(questions)}
    if not recorded or not (questions or audit_store):
        return out
    ours: list[dict[str, Any]] = []
    base: list[dict[str, Any]] = []
    with temp_root() as root:
        t0 = time.perf_counter()
        _import(root, recorded, workdir)
        out["import_s"] = r(time.perf_counter() - t0, 1)
        if audit_store:
            out["recorded_store"] = audit(root)
        with MemoryPlane.open(root) as plane:
            cat = plane.device.catalog
            t0 = time.perf_counter()
            for row in questions:
                want = cat.app_id_for(str(row_app(row)))
                person = action_tokens(row_actions(row))
                memory = plane.retrieve(MemoryRetrieveRequest(input=row["goal"]))
                hit = next((h for h in memory.common.procedures if type_of_id(h.id) == "procedure"), None)
                proc = plane.device.get(hit.id) if hit is not None else None
                if isinstance(proc, Procedure):
                    apps = {proc.app_id, cat.app_id_for(proc.app_name) if proc.app_name else None}
                    ours.append({"shown": True, "right_app": want in apps,
                                 "closeness": lcs_closeness(procedure_tokens(proc), person) or 0.0})
                else:
                    ours.append({"shown": False, "right_app": False, "closeness": 0.0})
            out["ours_ms_per_goal"] = r((time.perf_counter() - t0) * 1000 / len(questions), 1) if questions else None
            for row, n in zip(questions, _nearest(recorded, [q["goal"] for q in questions])):
                if n is None:
                    base.append({"shown": False, "right_app": False, "closeness": 0.0})
                    continue
                near = recorded[n]
                near_app = row_app(near)
                right = near_app is not None and cat.app_id_for(near_app) == cat.app_id_for(str(row_app(row)))
                base.append({"shown": True, "right_app": right,
                             "closeness": lcs_closeness(action_tokens(row_actions(near)),
                                                        action_tokens(row_actions(row))) or 0.0})
    out["ours_first_procedure"] = _side(ours)
    out["fts5_trigram_nearest_goal"] = _side(base)
    return out


# -- the benchmark -------------------------------------------------------------------------------


def audit(root: Path) -> dict[str, Any]:
    """(a) (b) (c) of a store: procedures, cross-task procedures, traced items per type."""
    from .._plane import MemoryPlane

    with MemoryPlane.open(root) as plane:
        procs = audit_procedures(plane)
        traces = audit_traces(plane)
    return {**procs, "traced": traced_summary(traces), "traced_by_type": traces}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Procedures, cross-task procedures, traced items, the split's closeness beside FTS5, and the blame scenario."""
    import tempfile

    from ._blame import run_scenario

    limit = getattr(args, "limit", None) or (SHORT_LIMIT if getattr(args, "short", False) else None)
    out: dict[str, Any] = {}
    data = data_dir(args)
    path = data.joinpath(*DATA_FILE) if data is not None else None
    if path is None or not path.is_file():
        out["androidcontrol"] = no_data("AndroidControl export (androidcontrol/android_control_evaluation_std.jsonl)")
    else:
        rows = read_rows(path, limit)
        short = bool(getattr(args, "short", False))
        with tempfile.TemporaryDirectory(prefix="memplane-lessons-") as tmp:
            full: dict[str, Any] = {"file": str(path), "episodes": len(rows)}
            if short:
                # One import only (`bench all` stays quick): (a) (b) (c) of the split's recorded side.
                full["split"] = evaluate_split(rows, Path(tmp), audit_store=True)
                full["audited"] = "the recorded side of the split (--short)"
                full.update(full["split"].pop("recorded_store", {}))
            else:
                with temp_root() as root:
                    t0 = time.perf_counter()
                    rep = _import(root, rows, Path(tmp))
                    full["import_s"] = r(time.perf_counter() - t0, 1)
                    full["items_created"] = rep["items_created"]
                    full.update(audit(root))
                full["audited"] = "every episode read"
                full["split"] = evaluate_split(rows, Path(tmp))
        out["androidcontrol"] = full
    out["blame"] = run_scenario(short=bool(getattr(args, "short", False)))
    return {**headline(out), **out}


def headline(out: dict[str, Any]) -> dict[str, Any]:
    """The figures the bars read, flat (for `bench all`'s table), and the bars themselves."""
    ac, blame = out.get("androidcontrol", {}), out.get("blame", {})
    split = ac.get("split", {})
    ours, base = split.get("ours_first_procedure", {}), split.get("fts5_trigram_nearest_goal", {})
    head: dict[str, Any] = {
        "procedures": ac.get("procedures"), "cross_task": ac.get("cross_task"),
        "items_traced": f"{ac['traced']['traced']}/{ac['traced']['items']}" if "traced" in ac else None,
        "right_app_ours": ours.get("right_app"), "right_app_fts5": base.get("right_app"),
        "path_closeness_ours": ours.get("path_closeness"), "path_closeness_fts5": base.get("path_closeness"),
        "sim_items_traced": f"{blame['traced']['traced']}/{blame['traced']['items']}" if "traced" in blame else None,
        "collateral_demotions": blame.get("collateral_demotions"),
        "led_demoted": f"{blame.get('led_demoted')}/{blame.get('led_to_failure')}",
        "restored_active": f"{blame.get('restored_active')}/{blame.get('demoted')}",
    }
    bars: dict[str, bool | None] = {
        "no_cross_task": ac["cross_task"] == 0 if "cross_task" in ac else None,
        "all_traced": all(part["traced"]["all_traced"] for part in (ac, blame) if "traced" in part)
        if "traced" in ac or "traced" in blame else None,
        "no_collateral_demotions": (blame["collateral_demotions"] == 0
                                    if blame.get("collateral_demotions") is not None else None),
        "closeness_at_least_fts5": (ours["path_closeness"] >= base["path_closeness"] - 1e-9
                                    if ours.get("path_closeness") is not None
                                    and base.get("path_closeness") is not None else None),
    }
    head["bars"] = bars
    return head
