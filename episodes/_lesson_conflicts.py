"""Lessons that contradict each other: navigation rules that now lead elsewhere, a path against a failure."""

from __future__ import annotations

import logging
from typing import Any

from memory_plane.device_memory import DeviceMemory, Failure, Navigation, Procedure, led_by_line

from ._blame import note_demotion, procedure_failure_point
from ._lesson_context import LessonContext
from ._lesson_writer import setter_of
from ._steps import Step, coords_close, screen_label, step_action

log = logging.getLogger("memory_plane")


def contradicted_navigation(device: DeviceMemory, lesson: LessonContext, s: Step, app_id: str | None,
                             nid: str) -> list[Navigation]:
    """Conflict source 1: active rules saying the same action on the same page leads elsewhere."""
    out: list[Navigation] = []
    # The rules of this page (of this app; of any app when the app is not known).
    lines = (device.entries_where("navigation", app=app_id, page=s.page_before) if app_id
             else device.entries_where("navigation", page=s.page_before))
    for e in lines:
        if e["id"] == nid or e.get("status") != "active":
            continue
        n = device.collection("navigation").peek(e["id"])
        if not isinstance(n, Navigation) or n.tool != s.tool or n.from_app != s.app_before:
            continue
        if not same_action(n, s):
            continue
        if (n.to_app, n.to_page) != (s.app_after, s.page_after):
            out.append(n)
    return out


def same_action(n: Navigation, s: Step) -> bool:
    """Whether a rule's action is a step's: the same label, else the same button or key, else (neither
    labelled) a tap in the same place or the same typed text."""
    label, action = screen_label(s), step_action(s)
    if n.label and label:
        return n.label == label
    if n.action and action:
        return n.action.lower() == action.lower()
    return coords_close(n.coords, s.coords) or (n.text is not None and n.text == s.text)


def settle_navigation(device: DeviceMemory, lesson: LessonContext, new: Navigation,
                      old_rules: list[Navigation]) -> None:
    """A new rule against the rules it contradicts: a weakly supported one is superseded, else both conflicted."""
    coll = device.collection("navigation")
    for old in old_rules:
        if old.success_count <= 1:
            # More specific (newer, as well supported) evidence for the same fact supersedes the old rule.
            def replace(cur: Any, new_id: str = new.id) -> Any:
                if cur is None:
                    return None
                cur.status, cur.superseded_by, cur.updated_at = "replaced", new_id, device.clock()
                return cur

            coll.update(old.id, replace)
            coll.update(new.id, setter_of({"supersedes": old.id}))
            lesson.decide([old.id], "navigation_contradicted", "superseded",
                       f"{old.from_page} now leads to {new.to_page}, not {old.to_page}", against=[new.id])
        else:
            for nid in (old.id, new.id):
                coll.update(nid, lambda cur: cur and cur.model_copy(update={"status": "conflicted"}))
            lesson.decide([old.id, new.id], "navigation_contradicted", "conflicted",
                       f"{old.from_page}: {old.to_page} ({old.success_count}x) vs {new.to_page} (new)")


def negation(device: DeviceMemory, lesson: LessonContext, app_id: str | None, pattern: str | None) -> None:
    """Conflict source 2: a verified path and a failure mode of the same app and goal that an episode
    met by following that path (the failure names the procedures it was followed from, ``led_by``)."""
    if not app_id or not pattern:
        return
    procs = [e for e in device.entries_where("procedure", app=app_id, goal=pattern) if e.get("status") == "active"]
    # A failure mode is its cause, met by any goal: the procedures it was met on (``led_by``) tie it to a path.
    if not procs:
        return
    # Only the failures whose index line names one of these procedures are read (a line that does not say is
    # read too); a procedure no failure names has nothing to weigh and is not read either.
    ids = {str(e["id"]) for e in procs}
    fails: list[dict[str, Any]] = []
    named: set[str] | None = set()
    for e in device.entries_where("failure", app=app_id):
        if e.get("status") != "active":
            continue
        led_by = led_by_line(e) if device.line_is_current("failure", e) else None
        if led_by is None:
            fails.append(e)
            named = None
        elif ids.intersection(led_by):
            fails.append(e)
            if named is not None:
                named.update(ids.intersection(led_by))
    if not fails:
        return
    led: list[tuple[Failure, list[Any]]] | None = None
    for pe in procs:
        if named is not None and str(pe["id"]) not in named:
            continue
        proc = device.collection("procedure").peek(pe["id"])
        if not isinstance(proc, Procedure):
            continue
        if led is None:
            # Each failure read once for the whole goal group, not once per procedure: what is used of it
            # (its id, occurrences and led_by) no demotion below changes.
            led = _led_failures(device, fails)
        for fail, led_by in led:
            if proc.id not in led_by:
                continue
            ok, bad = proc.success_count, max(1, fail.occurrences)
            if ok >= 2 * bad and ok >= 2:
                losers, decision = [fail.id], "failure_outvoted"
            elif bad >= 2 * ok and bad >= 2:
                losers, decision = [proc.id], "procedure_outvoted"
            else:
                losers, decision = [proc.id, fail.id], "undecided"
            if not lesson.ep.outcome.success:
                # The failure just happened again: it is not what is in doubt, the path is.
                losers = [lid for lid in losers if lid != fail.id]
            for lid in losers:
                kind = "procedure" if lid.startswith("proc_") else "failure"
                ev = [i for st in lesson.steps for i in st.event_ids][-20:]

                def demote(cur: Any, rule: str = decision, ev: list[str] = ev) -> Any:
                    if cur is None:
                        return None
                    if cur.status != "conflicted":
                        hit = (procedure_failure_point(cur, lesson.steps, lesson.ep.normalized_goal.target)
                               if isinstance(cur, Procedure) and not lesson.ep.outcome.success else None)
                        note_demotion(cur, rule, lesson.ep.id, ev, device.clock(), hit[1] if hit else None)
                    cur.status = "conflicted"
                    return cur

                device.collection(kind).update(lid, demote)
            # The line names what was demoted; the other side of the conflict is named beside it.
            others = [i for i in (proc.id, fail.id) if i not in losers]
            lesson.decide(losers, "success_failure_negate", decision,
                       f"{ok} successes vs {bad} failures on the same path", against=others)


def _led_failures(device: DeviceMemory, entries: list[dict[str, Any]]) -> list[tuple[Failure, list[Any]]]:
    """The failures of these index lines that name the procedures they were met on (``led_by``), in order."""
    out: list[tuple[Failure, list[Any]]] = []
    for fe in entries:
        fail = device.collection("failure").peek(fe["id"])
        if not isinstance(fail, Failure):
            continue
        led_by = (fail.model_extra or {}).get("led_by")
        if isinstance(led_by, list):
            out.append((fail, led_by))
    return out
