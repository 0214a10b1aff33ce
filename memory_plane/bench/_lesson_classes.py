"""`bench lessons`: each class of wrong lesson, counted from a tree's item files against a set's ground truth.

A set gives, per recorded episode id, an ``EpisodeTruth`` (what really happened); every counter here
reads the items as their files say (``plane.device`` collections, the episodes' events) and judges them
against that truth only, never against private state of the code that wrote them. Each counter returns
``{"count": n, "of": N, ...}`` where ``count`` is the class (0 is right) and ``of`` what could be judged.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memory_plane.device_memory import ITEM_TYPES, Failure, Navigation, Procedure, ProcedureStep, occurs
from memory_plane.episodes import pair_steps, step_action
from memory_plane.lifecycle import MemoryPlaneError

from ._lesson_paths import Token, lcs_closeness, procedure_tokens, same_token, token

EXAMPLES = 3  # ids named per class, for a person to look at
SAME_TASK = 0.5  # two goals of an inexact task key are one task when their real paths are this close
PARAPHRASE_MIN_WORDS = 10  # ... or when both keys are this long and differ only by words added or left out,
PARAPHRASE_SHARE = 0.2  # at most this share of the shorter one's words


@dataclass
class EpisodeTruth:
    """What really happened in one recorded episode (the set's ground truth)."""

    goal: str
    task: str  # which task it is (a template, or the goal with its values masked)
    apps: list[str]  # the apps the phone showed (system screens excluded)
    success: bool  # the person's verdict
    reported_success: bool  # what the agent reported
    finished: bool  # False: the record ends mid-task
    path: list[Token]  # the real path
    work: list[Token]  # its typing and commit steps
    cause: str | None = None  # a failure's cause, with the app and page it was met on
    values: list[str] = field(default_factory=list)  # the values that came from the goal
    quoted: list[str] = field(default_factory=list)  # the goal's quoted spans
    targets: list[str] = field(default_factory=list)  # whole stored targets (launch names, labels, typed text)


def truth_token(kind: str, value: str | None) -> Token:
    """A (kind, label/text) token of a real path, in the token space of ``lcs_closeness``."""
    if kind == "type":
        return token("keyboard_text", None, value, None, None)
    if kind == "open":
        return token("launch_app", value, None, None, None)
    if kind == "button":
        return token("system_button", value, None, None, None)
    if kind in ("swipe", "wait"):
        return token(kind, value or None, None, None, None)
    return token(kind, None, None, value, None)


# -- reading the tree ---------------------------------------------------------------------


def items(plane: Any, item_type: str) -> list[Any]:
    """Every item of a type as its file says (device profiles from their store)."""
    if item_type == "device_profile":
        return list(plane.device.profiles.all())
    return [read.record for read in plane.device.collection(item_type).iter_items() if read.record is not None]


def evidence(item: Any, truths: dict[str, EpisodeTruth]) -> list[EpisodeTruth]:
    """The truths of the episodes that taught an item (its ``episode`` evidence refs)."""
    return [truths[ref.id] for ref in item.evidence_refs if ref.type == "episode" and ref.id in truths]


def taught_by(procs: Iterable[Procedure],
              truths: dict[str, EpisodeTruth]) -> list[tuple[Procedure, list[EpisodeTruth]]]:
    """The procedures some episode of the set taught, each with the truths of its evidence episodes."""
    return [(p, ev) for p in procs for ev in [evidence(p, truths)] if ev]


def is_slot(step: ProcedureStep) -> bool:
    """Whether a step marks its value as the goal's (a slot): a ``slot``-named field, or a ``{name}`` value."""
    extra = {**(step.model_extra or {}), "slot": getattr(step, "slot", None)}
    if any("slot" in str(k).lower() and v for k, v in extra.items()):
        return True
    return any(isinstance(v, str) and re.search(r"\{[^{}\s]+\}", v) for v in (step.text, step.target_label))


def _kind_match(work: Token, step: Token) -> bool:
    # A typing step is kept when the procedure types there (its text may be a slot); a commit tap by its target.
    return step.kind == "type" if work.kind == "type" else same_token(work, step)


def subsequence(needles: Sequence[Token], hay: Sequence[Token]) -> bool:
    """Whether every needle appears in hay, in order (typing by kind, other steps by target)."""
    i = 0
    for t in hay:
        if i < len(needles) and _kind_match(needles[i], t):
            i += 1
    return i == len(needles)


def _ex(ids: list[str]) -> list[str]:
    return sorted(ids)[:EXAMPLES]


# -- procedures -------------------------------------------------------------------------------


def lost_work(procs: Iterable[Procedure], truths: dict[str, EpisodeTruth]) -> dict[str, Any]:
    """Procedures that lost a typing or commit step: no evidence episode has all its typing and commit steps
    among the procedure's steps, in order."""
    taught = taught_by(procs, truths)
    bad = [p.id for p, ev in taught if not any(subsequence(t.work, procedure_tokens(p)) for t in ev)]
    return {"count": len(bad), "of": len(taught), "examples": _ex(bad)}


def short_paths(procs: Iterable[Procedure], truths: dict[str, EpisodeTruth]) -> dict[str, Any]:
    """Procedures kept under half of every evidence episode's path; and those reduced to one step."""
    of, half, one = 0, [], []
    for p in procs:
        lengths = [len(t.path) for t in evidence(p, truths) if t.path]
        if not lengths:
            continue
        of += 1
        if all(len(p.steps) < n / 2 for n in lengths):
            half.append(p.id)
        if len(p.steps) == 1 and min(lengths) > 1:
            one.append(p.id)
    return {"under_half": {"count": len(half), "of": of, "examples": _ex(half)},
            "one_step": {"count": len(one), "of": of, "examples": _ex(one)}}


def other_task_text(procs: Iterable[Procedure], truths: dict[str, EpisodeTruth]) -> dict[str, Any]:
    """Procedures that would make an agent type or tap a goal's own value (another task's text) that no slot
    marks: a step whose typed text or label holds, word for word, a value one of the goals it was taught by
    gave (its evidence episodes, its goal examples). A fixed label that merely holds a short value of some other
    goal ("Momentum" and a goal that typed "mom", "Backup" on a page another goal switched off) is no value of
    this procedure's goals and is not counted."""
    by_goal: dict[str, list[str]] = {}
    for t in truths.values():
        by_goal.setdefault(t.goal, []).extend(t.values)
    of, bad = 0, []
    for p in procs:
        of += 1
        goals = {t.goal for t in evidence(p, truths)} | set(p.goal_examples)
        values = {v for g in goals for v in by_goal.get(g, []) if len(v.strip()) >= 2}
        for s in p.steps:
            if is_slot(s):
                continue
            said = [x for x in (s.text, s.target_label) if x]
            if any(occurs(v, x) for x in said for v in values):
                bad.append(p.id)
                break
    return {"count": len(bad), "of": of, "examples": _ex(bad)}


def cut_targets(procs: Iterable[Procedure], truths: dict[str, EpisodeTruth]) -> dict[str, Any]:
    """Procedures storing a target cut short: a launch name, label or text that is a strict head of the
    evidence's whole one."""
    of, bad = 0, []
    for p in procs:
        whole = [w for t in evidence(p, truths) for w in t.targets if len(w) > 12]
        if not whole:
            continue
        of += 1
        stored = [x for s in p.steps for x in (s.action, s.text, s.target_label) if x and len(x) >= 10]
        if any(w != x and w.startswith(x) for x in stored for w in whole):
            bad.append(p.id)
    return {"count": len(bad), "of": of, "examples": _ex(bad)}


def claimed_verified(procs: Iterable[Procedure], truths: dict[str, EpisodeTruth]) -> dict[str, Any]:
    """Procedures shown as verified (active, or set aside only for an environment the request may be in again,
    and not marked unverified) whose every evidence episode a person judged failed, at least one of them
    reported a success by the agent."""
    taught = taught_by(procs, truths)
    bad = []
    for p, ev in taught:
        # A procedure conflicted only because the UI language or screen changed is served as active again
        # under its own environment (retrieval reads its ``stale_key``): it is still shown as verified.
        served = p.status == "active" or (p.status == "conflicted" and bool((p.model_extra or {}).get("stale_key")))
        verified = served and getattr(p, "verified", True) is not False and "unverified" not in p.tags
        if verified and not any(t.success for t in ev) and any(t.reported_success for t in ev):
            bad.append(p.id)
    return {"count": len(bad), "of": len(taught), "examples": _ex(bad), "all": bad}


def _parsed_intents(text: str, catalog: Any) -> set[str]:
    from ..retrieval import parse_query

    q = parse_query(text, catalog)
    return {q.intent, *getattr(q, "intents", ())} - {"unknown", None}  # type: ignore[arg-type]


_LETTER = re.compile(r"\w")


def quoted_spans(goal: str, quoted: Iterable[str]) -> list[str]:
    """The spans a goal really quotes: each stands between two quote marks of which the opening one follows no
    letter and the closing one is followed by none (the apostrophes of "the app's settings, disable Bob's
    alarm" quote nothing, though a split on ``'`` finds a span between them)."""
    out = []
    for q in quoted:
        at = goal.find(q)
        while at != -1:
            before = goal[at - 2] if at >= 2 else ""
            after = goal[at + len(q) + 1] if at + len(q) + 1 < len(goal) else ""
            if at >= 1 and not _LETTER.match(before or " ") and not _LETTER.match(after or " "):
                out.append(q)
                break
            at = goal.find(q, at + 1)
    return out


_QUOTE_MARKS = "[\"'“”‘’「」『』«»]"


def title_from_quotes(procs: Iterable[Procedure], truths: dict[str, EpisodeTruth], catalog: Any) -> dict[str, Any]:
    """Procedures whose title or intent comes from a goal's quoted text: a title word found only inside the
    quotes, or an intent the quoted text names and the rest of the goal does not (the quotes as ``quoted_spans``
    reads them)."""
    of, bad = 0, []
    words = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]")
    for p in procs:
        ev = [replace(t, quoted=quoted_spans(t.goal, t.quoted)) for t in evidence(p, truths)]
        ev = [t for t in ev if t.quoted]
        if not ev:
            continue
        of += 1
        # The title's own words: not the app's name before it (a quoted app name is still the app) nor the
        # values it names in parentheses to stand apart from another task's title (values are quoted text).
        own = re.sub(r"\s*\([^()]*\)\s*$", "", (p.title or "").split(": ", 1)[-1])
        title = set(words.findall(own.lower()))
        for t in ev:
            outside = t.goal
            for q in t.quoted:
                # Only the quoted span goes: the same words said again outside the quotes are the goal's own.
                outside = re.sub(_QUOTE_MARKS + r"\s*" + re.escape(q) + r"\s*" + _QUOTE_MARKS, " ", outside)
            inside = {w for q in t.quoted for w in words.findall(q.lower()) if len(w) > 2}
            from_quotes = (title & inside) - set(words.findall(outside.lower()))
            intent_q = bool(p.intent) and p.intent in set().union(*(_parsed_intents(q, catalog) for q in t.quoted)) \
                and p.intent not in _parsed_intents(outside, catalog)
            if from_quotes or intent_q:
                bad.append(p.id)
                break
    return {"count": len(bad), "of": of, "examples": _ex(bad)}


def said_otherwise(a: str, b: str) -> bool:
    """Whether two long task keys are one request worded twice: one is the other with a few words (a fifth of
    its words at most) added or left out ("so I want to use Maps" and "so I use Maps"), none changed for another
    ("turn on" and "turn off" are two tasks)."""
    wa, wb = a.split(), b.split()
    if min(len(wa), len(wb)) < PARAPHRASE_MIN_WORDS:
        return False
    ops = difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes()
    if any(tag == "replace" for tag, *_ in ops):
        return False
    changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")
    return changed <= PARAPHRASE_SHARE * min(len(wa), len(wb))


def _clusters(tasks: dict[str, list[Token]]) -> int:
    reps: list[tuple[str, list[Token]]] = []
    for key, path in tasks.items():
        if not any(said_otherwise(rk, key) or (lcs_closeness(rp, path) or 0.0) >= SAME_TASK for rk, rp in reps):
            reps.append((key, path))
    return len(reps)


def shared_titles(procs: Iterable[Procedure], truths: dict[str, EpisodeTruth], exact_tasks: bool) -> dict[str, Any]:
    """Distinct tasks sharing one title: per title, the tasks of all its procedures' evidence beyond the first.
    With inexact task keys (a masked goal), two keys are one task when their real paths are close or one key is
    the other worded with a few words more or less (``said_otherwise``)."""
    by_title: dict[str, dict[str, list[Token]]] = {}
    for p in procs:
        for t in evidence(p, truths):
            by_title.setdefault((p.title or p.id).strip().lower(), {}).setdefault(t.task, t.path)
    count, bad = 0, []
    for title, tasks in by_title.items():
        n = len(tasks) if exact_tasks else _clusters(tasks)
        if n > 1:
            count += n - 1
            bad.append(title)
    return {"count": count, "of": len(by_title), "examples": _ex(bad)}


# -- apps ----------------------------------------------------------------------------------------


def _item_apps(item: Any, catalog: Any) -> set[str]:
    names = [getattr(item, "app_id", None), getattr(item, "app_name", None), *getattr(item, "display_names", [])]
    out = set()
    for n in names:
        if isinstance(n, str) and n.strip():
            out.add(catalog.app_id_for(n))
    if getattr(item, "app_id", None):
        out.add(item.app_id)
    return out


def wrong_app(plane: Any, truths: dict[str, EpisodeTruth]) -> dict[str, Any]:
    """Items (procedures, app profiles, failures) filed under an app none of their evidence episodes showed."""
    cat = plane.device.catalog
    out: dict[str, Any] = {"count": 0, "of": 0, "by_type": {}, "evidence_showed_no_app": 0, "examples": []}
    for t in ("procedure", "app_profile", "failure"):
        n = bad = 0
        for item in items(plane, t):
            ev = evidence(item, truths)
            apps = _item_apps(item, cat)
            if not ev or not apps:
                continue
            n += 1
            shown = {cat.app_id_for(a) for e in ev for a in e.apps}
            if not apps & shown:
                bad += 1
                out["evidence_showed_no_app"] += 0 if shown else 1  # the app can only have come from words
                if len(out["examples"]) < EXAMPLES:
                    out["examples"].append(f"{item.id} ({', '.join(sorted(apps))})")
        out["by_type"][t] = {"count": bad, "of": n}
        out["count"] += bad
        out["of"] += n
    return out


# -- navigation ------------------------------------------------------------------------------------


def _steps_of(plane: Any, eid: str, cache: dict[str, list[Any]]) -> list[Any]:
    if eid not in cache:
        try:
            cache[eid] = pair_steps(plane.episodes.events(eid).records)
        except (MemoryPlaneError, OSError):
            cache[eid] = []
    return cache[eid]


def _action(s: Any, values: Iterable[str] = ()) -> tuple[str, str]:
    # A text the goal gave (a query typed into a search box) is that episode's value, not the rule's action.
    text = s.text if s.text and not any(occurs(v, s.text) for v in values if len(v.strip()) >= 2) else None
    return (s.tool, s.target_label or step_action(s) or text or "")


def navigation_actions(plane: Any, truths: dict[str, EpisodeTruth]) -> dict[str, Any]:
    """Navigation rules whose evidence (the events they cite, else their episodes' steps between their two
    pages) shows several different actions (a text the episode's goal gave is no part of its action); and rules
    naming a button tool without naming the button."""
    cache: dict[str, list[Any]] = {}
    of, mixed, unnamed = 0, [], []
    for nav in items(plane, "navigation"):
        if not isinstance(nav, Navigation):
            continue
        refs = [ref for ref in nav.evidence_refs if ref.type == "episode" and ref.id in truths]
        if not refs:
            continue
        of += 1
        seen: set[tuple[str, str]] = set()
        for ref in refs:
            for s in _steps_of(plane, ref.id, cache):
                cited = bool(ref.event_ids) and bool(set(s.event_ids) & set(ref.event_ids))
                between = (s.app_before, s.page_before, s.app_after, s.page_after) == (
                    nav.from_app, nav.from_page, nav.to_app, nav.to_page)
                if cited if ref.event_ids else between:
                    seen.add(_action(s, truths[ref.id].values))
        if len(seen) > 1:
            mixed.append(nav.id)
        if nav.tool == "system_button":
            said = " ".join(str(v) for k, v in nav.model_dump(mode="json").items()
                            if k not in ("evidence_refs", "id") and isinstance(v, str)).lower()
            buttons = {a for tool, a in seen if tool == "system_button" and a}
            if not buttons or not any(b.lower() in said for b in buttons):
                unnamed.append(nav.id)
    return {"several_actions": {"count": len(mixed), "of": of, "examples": _ex(mixed)},
            "button_unnamed": {"count": len(unnamed), "of": of, "examples": _ex(unnamed)}}


# -- failures ---------------------------------------------------------------------------------------


def failure_modes(plane: Any, truths: dict[str, EpisodeTruth]) -> dict[str, Any]:
    """Failure memories against failures: modes for the N finished failed episodes; a cause whose episodes are
    spread over several modes, or a mode mixing causes, is counted (the class); modes taught by unfinished runs."""
    failed = {eid: t for eid, t in truths.items() if t.finished and not t.reported_success}
    modes = [f for f in items(plane, "failure") if isinstance(f, Failure)]
    holders: dict[str, set[str]] = {}  # cause -> the modes that hold its episodes
    mixing, unfinished, by_two = [], [], 0
    for f in modes:
        ev = [(ref.id, truths[ref.id]) for ref in f.evidence_refs if ref.type == "episode" and ref.id in truths]
        causes = {t.cause for _, t in ev if t.cause}
        for c in causes:
            holders.setdefault(c, set()).add(f.id)
        if len(causes) > 1:
            mixing.append(f.id)
        if any(not t.finished for _, t in ev):
            unfinished.append(f.id)
        if len({t.goal for _, t in ev if t.finished}) >= 2:
            by_two += 1
    causes = {t.cause for t in failed.values() if t.cause}
    split = sorted(c for c, ids in holders.items() if len(ids) > 1)
    return {"count": len(split) + len(mixing), "of": len(causes), "failed_episodes": len(failed),
            "modes": len(modes), "causes": len(causes), "modes_met_by_2_goals": by_two,
            "causes_split": len(split), "modes_mixing_causes": len(mixing),
            "causes_without_mode": len(causes - set(holders)),
            "modes_from_unfinished": {"count": len(unfinished), "of": len(modes), "examples": _ex(unfinished)},
            "examples": _ex(split + mixing)}


def taught_by_unfinished(plane: Any, item_id: str, truths: dict[str, EpisodeTruth]) -> bool:
    """Whether a shown memory (a device item, or an episode shown as similar) comes from an unfinished run."""
    if item_id in truths:
        return not truths[item_id].finished
    item = plane.device.get(item_id)
    return item is not None and any(not t.finished for t in evidence(item, truths))


# -- the same episodes, twice -------------------------------------------------------------------------


def tree_snapshot(plane: Any) -> dict[str, tuple[str, str, float]]:
    """Every device item as its file says: id -> (type, status, confidence)."""
    out: dict[str, tuple[str, str, float]] = {}
    for t in ITEM_TYPES:
        for item in items(plane, t):
            out[item.id] = (t, item.status, round(float(item.confidence), 3))
    return out


def replay_diff(a: dict[str, tuple[str, str, float]], b: dict[str, tuple[str, str, float]]) -> dict[str, Any]:
    """How two trees fed the same episodes differ: the items that differ (in one only, or another status or
    confidence), with each kind of difference, and the counts per type."""
    both = set(a) & set(b)
    per_type: dict[str, list[int]] = {}
    for snap, i in ((a, 0), (b, 1)):
        for t, _, _ in snap.values():
            per_type.setdefault(t, [0, 0])[i] += 1
    status = {k for k in both if a[k][1] != b[k][1]}
    confidence = {k for k in both if a[k][2] != b[k][2]}
    only = set(a) ^ set(b)
    return {"count": len(only | status | confidence), "of": len(set(a) | set(b)), "ids_only_in_one": len(only),
            "status_differs": len(status), "confidence_differs": len(confidence),
            "count_differs": sum(abs(x - y) for x, y in per_type.values()),
            "demoted_differs": len({k for k in a if a[k][1] != "active"} ^ {k for k in b if b[k][1] != "active"})}


def count_classes(plane: Any, truths: dict[str, EpisodeTruth], *, exact_tasks: bool) -> dict[str, Any]:
    """Every class the tree's items can be judged on against the truth of the episodes that taught them."""
    procs = [p for p in items(plane, "procedure") if isinstance(p, Procedure)]
    short = short_paths(procs, truths)
    nav = navigation_actions(plane, truths)
    modes = failure_modes(plane, truths)
    return {
        "lost_work_step": lost_work(procs, truths),
        "under_half_path": short["under_half"],
        "one_step": short["one_step"],
        "other_task_text": other_task_text(procs, truths),
        "targets_cut_short": cut_targets(procs, truths),
        "wrong_app": wrong_app(plane, truths),
        "title_from_quotes": title_from_quotes(procs, truths, plane.device.catalog),
        "shared_titles": shared_titles(procs, truths, exact_tasks),
        "nav_several_actions": nav["several_actions"],
        "nav_button_unnamed": nav["button_unnamed"],
        "failure_modes_by_cause": modes,
        "modes_from_unfinished": modes.pop("modes_from_unfinished"),
        "claimed_verified": claimed_verified(procs, truths),
    }
