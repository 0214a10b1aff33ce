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
- ``split``: episodes split 80/20 by a sha256 of the episode's id; the 80% are imported, each of the 20% whose app
  is known (an ``open`` action names it) is asked through ``retrieve``: is the first procedure shown of
  the right app, and how close are its steps to what the person did (normalised longest common
  subsequence of (action type, target words) tokens), beside the action sequence of the recorded episode
  whose goal is nearest by SQLite FTS5 trigram, in the same run;
- ``blame``: the scripted blame scenario on the simulated phone (see ``_blame.py``).

Per trajectory set (``androidcontrol``, and ``trajectories``: the generated set of ``_trajectory_set.py``,
with pages, labels, failures, unfinished runs and claimed successes), every class of wrong lesson as a
count judged against the set's ground truth (``_lesson_classes.py``), the same episodes fed into two fresh
trees (a diff count), and for held-out goals the closeness of the top procedure's goal-filled steps to the
real path beside the nearest past goal's path. A set whose data is absent is skipped with a message.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memory_plane.device_memory import ITEM_TYPES, Procedure, type_of_id
from memory_plane.episodes import Step
from memory_plane.lifecycle import MemoryPlaneError

from ._lesson_classes import EpisodeTruth, count_classes, replay_diff, taught_by_unfinished, tree_snapshot
from ._lesson_paths import action_tokens, episode_path, lcs_closeness, shown_steps, steps_agree, steps_tokens
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


def asked(key: str) -> bool:
    """Whether an episode (by its id, or any stable key) is on the asked side of the fixed split (a stable hash,
    not Python's ``hash``)."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) % 100 < ASKED_SHARE


def row_asked(row: dict[str, Any]) -> bool:
    """Whether a source episode is asked (the split is by episode: its stable import id)."""
    from .._androidcontrol import source_episode_id

    return asked(source_episode_id(row))


# Words of a tap that commits (a confirm, save, send, log-in): generic, English and Chinese. Only for a set
# whose ground truth does not mark commits (AndroidControl names each step in words).
COMMIT_WORDS = re.compile(r"\b(save|ok|okay|done|confirm|send|submit|apply|post|publish|log ?in|sign ?in)\b|"
                          r"保存|确定|确认|发送|完成|提交|登录|发布", re.IGNORECASE)
QUOTED = re.compile(r"(?:^|[\s(:])['\"“‘]([^'\"”’]+)['\"”’](?=$|[\s.,;:!?)])")


def goal_span(typed: str, goal: str) -> tuple[int, int] | None:
    """Where a goal (casefolded, spaces folded) says what was typed, widened to whole words: the same words from
    a word's start, or
    (the goal's typing slips and plurals: "Mediterraneam" typed "Mediterranean", "Salads" typed "salad") a
    span at least 90% alike for a value of 5 or more characters. None when the goal does not say it."""
    from rapidfuzz import fuzz

    value = " ".join(typed.casefold().split())
    if len(value) < 2:
        return None
    at = next((m.start() for m in re.finditer(re.escape(value), goal)
               if m.start() == 0 or not (_spaced(goal[m.start() - 1]) and _spaced(value[0]))), -1)
    if at >= 0:
        start, end = at, at + len(value)
    elif len(value) >= 5:
        found = fuzz.partial_ratio_alignment(value, goal, score_cutoff=90)
        if found is None:
            return None
        start, end = found.dest_start, found.dest_end
    else:
        return None
    while start > 0 and _spaced(goal[start - 1]) and _spaced(goal[start]):
        start -= 1
    while end < len(goal) and _spaced(goal[end]) and _spaced(goal[end - 1]):
        end += 1
    return start, end


def _spaced(ch: str) -> bool:
    """A letter or digit of a script that separates words by spaces (a CJK character is a word of its own)."""
    return ch.isalnum() and ord(ch) < 0x2E80


def row_truth(row: dict[str, Any]) -> EpisodeTruth:
    """An AndroidControl episode's ground truth: its actions are the real path, its app the one it opens, the
    values from the goal are the typed texts the goal contains, every episode finished and succeeded."""
    actions = row_actions(row)
    path = action_tokens(actions)
    goal = str(row["goal"])
    typed = [str(a["input"]["text"]) for a in actions if a["tool"] == "keyboard_text"]
    task = " ".join(goal.casefold().split())
    values = []
    for t in typed:
        span = goal_span(t, task)
        if span is not None:
            values.append(t)
        for _ in range(8):  # every place the goal says it ("directions to Tiffins" after "named Tiffins")
            if span is None:
                break
            task = f"{task[:span[0]]}\0{task[span[1]:]}"  # a mark no typed text can match
            span = goal_span(t, task)
    task = task.replace("\0", "{value}")
    work = [tok for a, tok in zip(actions, path) if tok.kind == "type"
            or (tok.kind == "tap" and COMMIT_WORDS.search(a["description"] or ""))]
    task = re.sub(r"\d+", "{n}", task)
    task = " ".join(re.sub(r"[^\w{}\s]+", " ", task).split())  # "Do X." and "do x" are one task
    app = row_app(row)
    launches = [str(a["input"]["app"]) for a in actions if a["tool"] == "launch_app"]
    return EpisodeTruth(goal=goal, task=task, apps=[app] if app else [], success=bool(row.get("is_successful", True)),
                        reported_success=bool(row.get("is_successful", True)), finished=True, path=path, work=work,
                        values=values, quoted=QUOTED.findall(goal), targets=[*launches, *typed])


def row_truths(rows: list[dict[str, Any]]) -> dict[str, EpisodeTruth]:
    """The truth of each source episode, by the id the importer gives it."""
    from .._androidcontrol import source_episode_id

    return {source_episode_id(row): row_truth(row) for row in rows}


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


def nearest_goals(past: list[str], goals: list[str]) -> list[int | None]:
    """For each goal, the index of the past goal that is the FTS5 trigram (BM25) top hit."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(n UNINDEXED, body, tokenize='trigram')")
    db.executemany("INSERT INTO docs VALUES (?, ?)", list(enumerate(past)))
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

    recorded = [row for row in rows if not row_asked(row)]
    questions = [row for row in rows if row_asked(row) and row_app(row)]
    out: dict[str, Any] = {"recorded": len(recorded), "asked_goals": sum(1 for row in rows if row_asked(row)),
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
            out["recorded_store"] = audit(root, row_truths(recorded))
        truths = row_truths(recorded)
        unfinished = 0
        with MemoryPlane.open(root) as plane:
            cat = plane.device.catalog
            t0 = time.perf_counter()
            for row in questions:
                want = cat.app_id_for(str(row_app(row)))
                person = action_tokens(row_actions(row))
                memory = plane.retrieve(MemoryRetrieveRequest(input=row["goal"]))
                if any(taught_by_unfinished(plane, h.id, truths) for h in memory.hits()
                       if h.caution or type_of_id(h.id) == "failure"):
                    unfinished += 1
                hit = next((h for h in memory.common.procedures if type_of_id(h.id) == "procedure"), None)
                proc = plane.device.get(hit.id) if hit is not None else None
                if isinstance(proc, Procedure):
                    apps = {proc.app_id, cat.app_id_for(proc.app_name) if proc.app_name else None}
                    ours.append({"shown": True, "right_app": want in apps,
                                 "closeness": lcs_closeness(steps_tokens(shown_steps(proc, row["goal"])),
                                                            person) or 0.0})
                else:
                    ours.append({"shown": False, "right_app": False, "closeness": 0.0})
            out["unfinished_cautions"] = {"count": unfinished, "of": len(questions)}
            out["ours_ms_per_goal"] = r((time.perf_counter() - t0) * 1000 / len(questions), 1) if questions else None
            for row, n in zip(questions, nearest_goals([x["goal"] for x in recorded], [q["goal"] for q in questions])):
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


def audit(root: Path, truths: dict[str, EpisodeTruth] | None = None) -> dict[str, Any]:
    """(a) (b) (c) of a store: procedures, cross-task procedures, traced items per type; with the truth of its
    episodes, every class of wrong lesson (``classes``)."""
    from .._plane import MemoryPlane

    with MemoryPlane.open(root) as plane:
        procs = audit_procedures(plane)
        traces = audit_traces(plane)
        classes = count_classes(plane, truths, exact_tasks=False) if truths is not None else None
    out = {**procs, "traced": traced_summary(traces), "traced_by_type": traces}
    if classes is not None:
        out["classes"] = classes
    return out


def _androidcontrol(path: Path, limit: int | None, short: bool) -> dict[str, Any]:
    """The AndroidControl set: the import's figures and classes, the split, and the same slice imported twice."""
    import tempfile

    rows = read_rows(path, limit)
    with tempfile.TemporaryDirectory(prefix="memplane-lessons-") as tmp:
        full: dict[str, Any] = {"file": str(path), "episodes": len(rows)}
        if short:
            # One import only (`bench all` stays quick): (a) (b) (c) and the classes of the split's recorded side.
            full["split"] = evaluate_split(rows, Path(tmp), audit_store=True)
            full["audited"] = "the recorded side of the split (--short)"
            full.update(full["split"].pop("recorded_store", {}))
        else:
            with temp_root() as root:
                t0 = time.perf_counter()
                rep = _import(root, rows, Path(tmp))
                full["import_s"] = r(time.perf_counter() - t0, 1)
                full["items_created"] = rep["items_created"]
                full.update(audit(root, row_truths(rows)))
            full["audited"] = "every episode read"
            full["split"] = evaluate_split(rows, Path(tmp))
        full["replay_diff"] = _imported_twice(rows[:TWICE_SHORT if short else TWICE], Path(tmp))
    split = full["split"]
    if "claimed_verified" in full.get("classes", {}):
        full["classes"]["claimed_verified"].pop("all", None)
    full["classes"] = {**full.get("classes", {}),
                       "unfinished_cautions": split.get("unfinished_cautions"),
                       "cross_goal_demotions": {"count": None, "of": None, "note": "the import runs no outcome "
                                                "job, and every episode of the file succeeded"},
                       "replay_diff": full["replay_diff"]}
    ours, base = split.get("ours_first_procedure", {}), split.get("fts5_trigram_nearest_goal", {})
    full["held_out"] = {"asked": split.get("asked_with_app"), "closeness_ours": ours.get("path_closeness"),
                        "closeness_nearest_goal": base.get("path_closeness")}
    return full


TWICE = 300  # source episodes imported into two fresh trees (the diff of the lessons they teach)
TWICE_SHORT = 40


def _imported_twice(rows: list[dict[str, Any]], workdir: Path) -> dict[str, Any]:
    from .._plane import MemoryPlane

    snaps = []
    for _ in range(2):
        with temp_root() as root:
            _import(root, rows, workdir)
            with MemoryPlane.open(root) as plane:
                snaps.append(tree_snapshot(plane))
    return {**replay_diff(snaps[0], snaps[1]), "episodes": len(rows)}


GOALS_PER_TASK = 8  # goals of each task that succeeds (about one in five held out)
GOALS_PER_TASK_SHORT = 3
FAILURES_PER_TASK = 3  # failed runs of each (cause, task)
FAILURES_PER_TASK_SHORT = 2


def _trajectories(seed: int, short: bool) -> dict[str, Any]:
    """The generated set: fed twice (settled after each task, then back to back), its classes judged on the
    first tree, the held-out goals asked of it."""
    from .._plane import MemoryPlane
    from ._trajectory_feed import StepClock, ask_held_out, feed
    from ._trajectory_set import generate

    trajs = generate(seed, goals_per_task=GOALS_PER_TASK_SHORT if short else GOALS_PER_TASK,
                     failures_per_cause_task=FAILURES_PER_TASK_SHORT if short else FAILURES_PER_TASK)
    out: dict[str, Any] = {"seed": seed, "trajectories": len(trajs),
                           "recorded": sum(1 for t in trajs if not t.held_out),
                           "held_out_goals": sum(1 for t in trajs if t.held_out)}
    snaps = []
    for settle in (True, False):
        clock = StepClock()
        with temp_root() as root, MemoryPlane.open(root, clock=clock) as plane:
            t0 = time.perf_counter()
            fed = feed(plane, trajs, clock, settle_each=settle)
            snaps.append(tree_snapshot(plane))
            if not settle:
                break
            out["feed_s"] = r(time.perf_counter() - t0, 1)
            out["episodes"] = {"recorded": len(fed.truths),
                               "failed": sum(1 for t in fed.truths.values() if t.finished and not t.reported_success),
                               "unfinished": sum(1 for t in fed.truths.values() if not t.finished),
                               "claimed_successes": sum(1 for t in fed.truths.values()
                                                        if t.reported_success and not t.success)}
            out["items"] = {t: n for t, n in _by_type(snaps[0]).items()}
            classes = count_classes(plane, fed.truths, exact_tasks=True)
            asked_rep = ask_held_out(plane, trajs, fed)
            procs = sum(1 for v in snaps[0].values() if v[0] == "procedure")
            classes["unfinished_cautions"] = asked_rep.pop("unfinished_cautions")
            at_end = classes["claimed_verified"]
            classes["claimed_verified"] = {
                "count": len(fed.claimed_taught | set(at_end.pop("all"))), "of": procs,
                "at_end": at_end["count"], "examples": sorted(fed.claimed_taught)[:3],
                "how": "verified as taught by a claimed success, or still verified at the end"}
            classes["cross_goal_demotions"] = {"count": len(fed.cross_goal_demoted), "of": procs,
                                               "demoted_by_failures": len(fed.demoted_by_failures),
                                               "examples": sorted(fed.cross_goal_demoted)[:3]}
            out["classes"] = classes
            out["held_out"] = asked_rep
    out["replay_diff"] = {**replay_diff(snaps[0], snaps[1]),
                          "how": "settled after each task, then back to back (the worker may lag)"}
    out["classes"]["replay_diff"] = out["replay_diff"]
    return out


def _by_type(snap: dict[str, tuple[str, str, float]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t, _, _ in snap.values():
        out[t] = out.get(t, 0) + 1
    return dict(sorted(out.items()))


SETS = ("androidcontrol", "trajectories")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Per set, every class as a count and the held-out closeness beside the nearest past goal; AndroidControl's
    procedures, cross-task procedures and traced items; and the blame scenario."""
    from memory_plane.lifecycle import UsageError

    from ._blame import run_scenario

    short = bool(getattr(args, "short", False))
    limit = getattr(args, "limit", None) or (SHORT_LIMIT if short else None)
    chosen = [x.strip() for x in (getattr(args, "set", None) or ",".join(SETS)).split(",") if x.strip()]
    unknown = [x for x in chosen if x not in SETS]
    if unknown:
        raise UsageError(f"bench lessons: unknown set {', '.join(unknown)}; known: {', '.join(SETS)}")
    out: dict[str, Any] = {}
    if "androidcontrol" in chosen:
        data = data_dir(args)
        path = data.joinpath(*DATA_FILE) if data is not None else None
        if path is None or not path.is_file():
            out["androidcontrol"] = no_data(
                "AndroidControl export (androidcontrol/android_control_evaluation_std.jsonl)")
        else:
            out["androidcontrol"] = _androidcontrol(path, limit, short)
    if "trajectories" in chosen:
        out["trajectories"] = _trajectories(int(getattr(args, "seed", 0) or 0), short)
    out["blame"] = run_scenario(short=short)
    return {**headline(out), **out}


def _class_counts(part: dict[str, Any]) -> dict[str, int | None]:
    return {k: (v.get("count") if isinstance(v, dict) else None) for k, v in part.get("classes", {}).items()}


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
    for name in SETS:
        part = out.get(name, {})
        if "classes" not in part:
            continue
        counts = _class_counts(part)
        head[f"{name}_classes"] = counts
        measured = [c for c in counts.values() if c is not None]
        bars[f"{name}_every_class_0"] = all(c == 0 for c in measured) if measured else None
        held = part.get("held_out", {})
        a, b = held.get("closeness_ours"), held.get("closeness_nearest_goal")
        head[f"{name}_closeness"] = {"ours": a, "nearest_goal": b}
        bars[f"{name}_closeness_at_least_nearest_goal"] = a >= b - 1e-9 if a is not None and b is not None else None
    head["bars"] = bars
    return head
