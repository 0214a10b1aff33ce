"""Path lessons: procedures, navigation rules, calibration and UI anchors from the steps that worked."""

from __future__ import annotations

import logging
import statistics
from typing import Any

from memory_plane.device_memory import (
    Calibration,
    Navigation,
    Procedure,
    ProcedureStep,
    UiAnchor,
    cap_list,
    merge_unique,
    occurs,
    tools_digest,
)
from memory_plane.lifecycle import FileProblemError, UnsafePathError, content_hash, slug_id

from ._blame import restore_if_earned
from ._goal_slots import episode_view, identity_pattern, pattern_matcher, procedure_view, slot_of, step_slots
from ._lesson_conflicts import contradicted_navigation, negation, settle_navigation
from ._lesson_context import LessonContext
from ._lesson_writer import ExtractionResult, LessonWriter, goal_pattern, goal_title
from ._outcome_doubt import confirm, mark_new
from ._outcomes import clear_blame
from ._path_agreement import path_key, paths_agree
from ._steps import Step, effective_path, screen_label, step_action, step_note

log = logging.getLogger("memory_plane")


def learn_procedure(writer: LessonWriter, lesson: LessonContext, res: ExtractionResult) -> None:
    """The procedure of a successful episode's goal: its effective path, the goal's values as named slots,
    renewed when it is the same path (with any values in the slots)."""
    steps = effective_path([s for s in lesson.steps if not s.is_error])
    if not steps:
        return
    target = lesson.ep.normalized_goal.target
    first = next((s for s in lesson.steps if s.app_before and s.page_before), None)
    app_id = lesson.task_app
    page = first.page_before if first else None
    pattern = goal_pattern(lesson.ep)
    slots = step_slots(steps, lesson.ep.user_goal, target, lesson.ep.normalized_goal.intent)
    key = identity_pattern(lesson.ep, list(slots), goal_pattern)
    path = [episode_view(s, target, slots) for s in steps]
    # One procedure, one path: an existing procedure of this goal is renewed only when its steps are
    # this episode's path; a different path for the same kind of goal is a procedure of its own. The
    # goal's values are slots: the same task with other values is the same procedure.
    pid = _same_path(writer, lesson, app_id, pattern, key, path) or \
        f"proc_{content_hash(lesson.device_id, app_id, page, key, path_key(path))}"
    psteps = [ProcedureStep(tool=s.tool, action=step_action(s), description=screen_label(s), coords=s.coords,
                            text=s.text, app_name=s.app_before, page_name=s.page_before,
                            target_label=screen_label(s), outcome_note=step_note(s), narration=s.content,
                            slot=slot_of(s, slots))
              for s in steps]
    psteps = cap_list(psteps, "steps")
    slot_examples = {name: value for value, name in slots.items()
                     if any(st.slot == name for st in psteps)}
    pages = list(dict.fromkeys(p for s in steps for p in (s.page_before, s.page_after) if p))
    app_name = lesson.display(app_id)

    def merge(p: Procedure) -> None:
        if pid not in lesson.ep.retrieved_memory_refs:  # else the outcome update counted this success
            p.success_count += 1
            p.confidence = min(0.95, p.confidence + 0.05)
        p.goal_examples = merge_unique(p.goal_examples, [lesson.ep.user_goal[:200]], "goal_examples")
        p.targets = merge_unique(p.targets, [target] if target else [], "targets")
        p.entities = merge_unique(p.entities, [*pages, *lesson.ep.entities], "entities")
        lesson.resolve(p, app_id)
        confirm(p, lesson)  # an unverified procedure renewed by another episode is verified now
        p.refresh_summary()

    def create() -> Procedure:
        p = writer.device.new_item(
            Procedure, pid, app_id=app_id, app_name=app_name, page_name=page, device_id=lesson.device_id,
            goal_pattern=pattern, intent=lesson.ep.normalized_goal.intent,
            title=goal_title(lesson.ep, app_name, list(slots), device=writer.device, app_id=app_id,
                             pattern=pattern), confidence=0.75, priority=70,
            goal_examples=[lesson.ep.user_goal[:200]], targets=[target] if target else [], steps=psteps,
            steps_target=target, slots=slot_examples, scope="app" if app_id else "device",
            applicability=lesson.applicability(app_id),
            tags=[f"page:{p}" for p in pages[:5]] + ([lesson.ep.normalized_goal.intent]
                                                      if lesson.ep.normalized_goal.intent else []),
            entities=[*pages, *lesson.ep.entities][:20],
        )
        p.success_count = 1
        mark_new(p, lesson)  # a success without evidence of completion teaches an unverified procedure
        p.refresh_summary()
        return p

    proc = writer.upsert(lesson, res, "procedure", pid, create, merge, content_hash("procedure", pid),
                        evidence=steps)
    if isinstance(proc, Procedure):
        clear_blame(writer.device, proc)  # its whole path just worked
        negation(writer.device, lesson, app_id, pattern)


def _same_path(writer: LessonWriter, lesson: LessonContext, app_id: str | None, pattern: str, key: str,
               path: list[Any]) -> str | None:
    """The id of a procedure for this goal whose steps are this path (taps within the closeness rule, slot
    values masked); a goal pattern with other values where this one's slots stand is this goal."""
    coll = writer.device.collection("procedure")
    same_goal = pattern_matcher(key, pattern)
    tools = tools_digest(v.tool for v in path)
    # The goal's own lines when only its own pattern is this goal, else every line of the app (None: of no app).
    lines = (writer.device.entries_where("procedure", app=app_id, goal=pattern) if same_goal is None
             else writer.device.entries_where("procedure", app=app_id))
    for e in lines:
        goal = e.get("goal")
        if e.get("status") not in ("active", "expired", "conflicted"):
            continue
        if goal != pattern and not (same_goal and isinstance(goal, str) and same_goal.fullmatch(goal)):
            continue
        if (isinstance(e.get("path_tools"), str) and e["path_tools"] != tools
                and writer.device.line_is_current("procedure", e)):
            continue  # its line says its path has other tools (a line without it: the file decides)
        try:
            p = coll.peek(str(e["id"]))
        except (FileProblemError, UnsafePathError, KeyError):
            continue
        if isinstance(p, Procedure) and p.device_id in (None, lesson.device_id) and paths_agree(
                [procedure_view(st, p) for st in p.steps], path):
            return p.id
    return None


def navigation_action(s: Step, goal: str) -> tuple[str, str | None, str | None, str | None]:
    """What a rule's action is, whole: the tool, the button or key it was given, the label it targeted (an
    unlabelled tap: its place on a coarse grid, as a path's key keeps it), and the text it typed unless the goal
    gave that text (a query typed into a search box: any query leads on, and the value is the goal's own)."""
    action, label = step_action(s), screen_label(s)
    if action is None and label is None and s.point() is not None:
        x, y = s.point() or (0.0, 0.0)
        action = f"@{round(x / 96)},{round(y / 96)}"
    text = s.text if s.text is not None and s.text.strip() and not occurs(s.text, goal) else None
    return s.tool, action, label, text


def learn_navigation(writer: LessonWriter, lesson: LessonContext, res: ExtractionResult) -> None:
    """A navigation rule for each (page, action, page) a working step made, settled against the rules it
    contradicts: Done, Navigate up and back between the same two pages are three rules. The rule's action is the
    step's, whole; a text the goal gave is no part of it (typing any query on a search page is one rule)."""
    seen: set[str] = set()
    for s in lesson.steps:
        if s.is_error or not s.has_result or not s.changed_page or not s.page_before or not s.app_before:
            continue
        fa, ta = lesson.canon(s.app_before), lesson.canon(s.app_after)
        tool, action, label, text = navigation_action(s, lesson.ep.user_goal)
        keyed = [tool, action, label, *([text] if text is not None else [])]
        nid = f"nav_{content_hash(lesson.device_id, fa, s.page_before, ta, s.page_after, *keyed)}"
        if nid in seen:
            continue
        seen.add(nid)

        def merge(n: Navigation, s: Step = s, nid: str = nid, fa: str | None = fa, text: str | None = text) -> None:
            if nid not in lesson.ep.retrieved_memory_refs:
                n.success_count += 1
                n.confidence = min(0.95, n.confidence + 0.05)
            # The action is one step's, whole: never this step's tool with another step's place or label.
            n.tool, n.action, n.label = s.tool, step_action(s), screen_label(s)
            n.coords, n.text, n.description = s.coords, text, screen_label(s)
            if n.status == "replaced" and lesson.ep.outcome.success and not s.is_error:
                # The transition it names happened again: the rule that replaced it is now the one
                # contradicted (settled below), and this one holds again.
                n.status, n.superseded_by = "active", None
                lesson.decide([n.id], "reinstated_by_new_evidence", "active", f"{n.from_page} → {n.to_page} again")
            lesson.resolve(n, fa)
            n.refresh_summary()

        def create(s: Step = s, fa: str | None = fa, ta: str | None = ta, nid: str = nid,
                   text: str | None = text) -> Navigation:
            n = writer.device.new_item(
                Navigation, nid, app_id=fa, app_name=s.app_before, page_name=s.page_before,
                device_id=lesson.device_id, from_app=s.app_before, from_page=s.page_before, to_app=s.app_after,
                to_page=s.page_after, tool=s.tool, action=step_action(s), label=screen_label(s), coords=s.coords,
                text=text, description=screen_label(s),
                title=f"{s.app_before}/{s.page_before} → {s.app_after}/{s.page_after}", confidence=0.7,
                priority=65, applicability=lesson.applicability(fa), entities=[s.page_before, s.page_after],
            )
            n.title = f"{n.title} via {n.how()}"[:200]
            n.success_count = 1
            n.refresh_summary()
            return n

        contradicted = contradicted_navigation(writer.device, lesson, s, fa, nid)
        new = writer.upsert(lesson, res, "navigation", nid, create, merge, content_hash("navigation", nid),
                           evidence=[s])
        if isinstance(new, Navigation) and contradicted:
            settle_navigation(writer.device, lesson, new, contradicted)


NORMALIZED_SPACES = ("normalized", "normalised")
"""The ``coord_space`` values that say taps are fractions of the screen."""


def learn_calibration(writer: LessonWriter, lesson: LessonContext, res: ExtractionResult) -> None:
    """The device's coordinate space and waits, when the episode shows them."""
    pts = [p for p in (s.point() for s in lesson.steps) if p is not None]
    # Normalized when the runtime says so, or when every tap is a fraction of the screen (0..1, one of them not a
    # whole number): a tap at (0.5, 0.9) is the screen's lower middle, never the top-left pixel.
    normalized = any(str(s.tool_input.get("coord_space", "")).lower() in NORMALIZED_SPACES for s in lesson.steps) or (
        bool(pts) and all(0 <= x <= 1 and 0 <= y <= 1 for x, y in pts) and any(x % 1 or y % 1 for x, y in pts))
    waits = [float(v) for s in lesson.steps if "wait" in s.tool.lower()
             for v in [s.tool_input.get("seconds", s.tool_input.get("time", s.tool_input.get("duration")))]
             if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 120]
    seen = lesson.observed_screen  # a screenshot's real size, not the runtime's hint
    scale: str | None = None
    # Taps and screenshots share a space only when the taps fall on the screenshot; taps outside it (720x1280 taps
    # on a 72x128 screenshot) are in another space, known only when the runtime said the screen's size and the taps
    # fall on that.
    if seen is not None and not normalized and any(not (0 <= x <= seen[0] and 0 <= y <= seen[1]) for x, y in pts):
        hint = lesson.screen if lesson.screen != seen else None
        if hint and all(0 <= x <= hint[0] and 0 <= y <= hint[1] for x, y in pts):
            scale = f"{hint[0]}x{hint[1]}"
        else:
            seen = None  # the space of the taps is not known: no pixel lesson
    if seen is None and not normalized and not waits:
        return  # calibration without evidence is not a lesson
    w, h = seen or (None, None)
    space = "normalized" if normalized else (f"device pixels {scale}" if scale else "pixels" if seen else None)
    cid = ("cal_normalized_coordinates" if normalized and not seen
           else f"cal_{slug_id(lesson.device_id)}_{w}x{h}" if seen else f"cal_{slug_id(lesson.device_id)}_waits")
    shown = [s for s in lesson.steps if s.changed_page and s.point()]
    verified = bool(shown) and space is not None

    def merge(c: Calibration) -> None:
        if waits:
            c.waits["wait_step"] = round(statistics.median([*waits, c.waits.get("wait_step", waits[0])]), 2)
        if scale and c.coord_space != space:
            c.coord_space = space
        if verified:
            c.success_count += 1
            c.confidence = min(0.95, c.confidence + 0.03)
            if restore_if_earned(c):
                lesson.decide([c.id], "restored_by_success", "active", f"{c.success_count} successes")
        c.refresh_summary()

    def create() -> Calibration:
        c = writer.device.new_item(
            Calibration, cid[:80], device_id=lesson.device_id, coord_space=space, screenshot_width=w,
            screenshot_height=h, title=f"Calibration {lesson.device_id} {w}x{h}" if w else "Calibration",
            confidence=0.8, priority=75,
            applicability={k: v for k, v in {"device_id": lesson.device_id,
                                             "screen": f"{w}x{h}" if w else None}.items() if v},
        )
        if verified:
            # Said in the space the taps were given in: a tap in normalized coordinates proves nothing of pixels.
            where = ("normalized coordinates (fractions of the screen)" if normalized
                     else f"device pixels ({scale}; screenshots are {w}x{h})" if scale else "screenshot pixels")
            c.notes = [f"a tap at {where} changed the page ({lesson.ep.id})"]
        merge(c)
        return c

    wait_steps = [s for s in lesson.steps if "wait" in s.tool.lower()]
    writer.upsert(lesson, res, "calibration", cid[:80], create, merge, content_hash("calibration", cid),
                 evidence=(shown or [s for s in lesson.steps if s.screen][:1]) + wait_steps[:3])


def learn_ui_anchors(writer: LessonWriter, lesson: LessonContext, res: ExtractionResult) -> None:
    """Where labelled things are on screen: one anchor per tap of the effective path, per UI language and screen."""
    if lesson.screen is None:
        return
    w, h = lesson.screen
    # Only taps on the effective path: a detour's taps say where things are, not what matters.
    for s in effective_path([s for s in lesson.steps if not s.is_error]):
        pt = s.point()
        label = screen_label(s)  # what the phone showed there, never the runtime's narration
        if pt is None or not label or s.is_error or not (s.changed_page or lesson.ep.outcome.success):
            continue
        if not s.app_before or not s.page_before:
            continue
        app_id = lesson.canon(s.app_before)
        # Screen text and coordinates hold for the UI language and screen they were seen under: an
        # English tab bar sits elsewhere than the Chinese one, so each environment has its own anchor.
        env = (lesson.language, lesson.screen_text)
        uid = f"ui_{content_hash(lesson.device_id, app_id, s.page_before, label, *env)}"
        nx, ny = round(pt[0] / w, 4), round(pt[1] / h, 4)
        if not (0 <= nx <= 1 and 0 <= ny <= 1):
            continue

        def merge(a: UiAnchor, s: Step = s, nx: float = nx, ny: float = ny) -> None:
            a.point.add(nx, ny)
            a.screens = merge_unique(a.screens, [lesson.screen_text], "screens")
            a.last_coords = s.coords
            a.refresh_summary()

        def create(s: Step = s, uid: str = uid, label: str = label, app_id: str | None = app_id) -> UiAnchor:
            a = writer.device.new_item(
                UiAnchor, uid, device_id=lesson.device_id, app_id=app_id, app_name=s.app_before,
                page_name=s.page_before, label=label, title=f"{label[:80]} on {s.app_before}/{s.page_before}",
                confidence=0.6, applicability=lesson.applicability(app_id), entities=[label],
            )
            return a

        def create_and_merge(create: Any = create, merge: Any = merge) -> UiAnchor:
            a = create()
            merge(a)
            return a

        writer.upsert(lesson, res, "ui_anchor", uid, create_and_merge, merge, content_hash("ui_anchor", uid),
                     evidence=[s])
