"""Lessons from a finished episode: device and app profiles, procedures, navigation rules,
calibration, failure modes and UI anchors, each merged into the item it repeats."""

from __future__ import annotations

import logging
import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from device_memory import (
    AppProfile,
    Calibration,
    DeviceMemory,
    DeviceProfile,
    Failure,
    Navigation,
    OpenMethod,
    Procedure,
    ProcedureStep,
    ScreenInfo,
    UiAnchor,
    cap_list,
    merge_unique,
)
from lifecycle import FileProblemError, UnsafePathError, content_hash, slug_id

from ._blame import blamed_procedure, declared_memories, note_demotion, procedure_failure_point, restore_if_earned
from ._causes import classify
from ._lesson_context import LessonContext
from ._model import TaskEpisode
from ._outcomes import apply_contradiction, clear_blame
from ._path_agreement import of_procedure_step, of_step, path_key, paths_agree
from ._steps import (
    TEXT_TOOLS,
    Step,
    coords_close,
    device_steps,
    effective_path,
    pair_steps,
    screen_label,
    step_action,
    step_note,
)
from ._store import TaskEpisodeStore

log = logging.getLogger("memory_plane")

EXTRACTOR_VERSION = 2
NON_ASCII_MODE = "keyboard_text_cannot_input_non_ascii"
NON_ASCII_LESSON = ("keyboard_text cannot type non-ASCII text on this device: type pinyin or an English alias, "
                    "then select the candidate or search result.")
PROFILE_RENEW_EVERY = timedelta(days=1)  # the device profile is re-validated at most daily


def goal_pattern(ep: TaskEpisode) -> str:
    """A goal with its specifics masked: the intent when a target is its variable part (send a message
    to anyone), else the intent plus the normalised text (dark mode and font size stay two lessons)."""
    intent = ep.normalized_goal.intent if ep.normalized_goal.intent not in (None, "unknown") else None
    if intent and ep.normalized_goal.target:
        return intent
    text = ep.user_goal.lower()
    text = re.sub(r"[\"“”'‘’「」『』][^\"“”'‘’「」『』]{0,40}[\"“”'‘’「」『』]", "…", text)
    text = re.sub(r"\d+(?:[.:]\d+)*", "#", text)
    text = re.sub(r"[^\w#…\s]+", " ", text)
    text = " ".join(text.split())[:120]
    return f"{intent}: {text}" if intent else text


@dataclass
class ExtractionResult:
    """What one extraction wrote: items created and updated by type, and what it skipped."""

    created: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    skipped_tombstoned: int = 0
    steps: int = 0
    errors: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # items this episode created or updated

    def bump(self, kind: str, item_type: str) -> None:
        """Count one created or updated item."""
        d = self.created if kind == "created" else self.updated
        d[item_type] = d.get(item_type, 0) + 1

    @property
    def duplicates_avoided(self) -> int:
        """Lessons that updated an existing item instead of adding a twin."""
        return sum(self.updated.values())


class LessonExtractor:
    """The writer's background job that turns an episode into device memories."""

    def __init__(self, device: DeviceMemory, episodes: TaskEpisodeStore) -> None:
        self.device = device
        self.episodes = episodes
        self.__name__ = "extract_lessons"

    def __call__(self, ep: TaskEpisode) -> ExtractionResult:
        """Extract from a committed episode, reading its events from disk; the episode then names what it
        taught (``reusable_lessons``), why it failed (``failure_causes``) and the conflicts it decided."""
        events = self.episodes.events(ep.id).records
        before = (list(ep.reusable_lessons), list(ep.failure_causes), list(ep.conflicts))
        res = self.extract(ep, events)
        ep.reusable_lessons = list(dict.fromkeys([*ep.reusable_lessons, *res.ids]))[:50]
        if (ep.reusable_lessons, ep.failure_causes, ep.conflicts) != before:
            self.episodes.write(ep)
        return res

    # -- main ---------------------------------------------------------------------

    def extract(self, ep: TaskEpisode, events: list[dict[str, Any]]) -> ExtractionResult:
        """Write every lesson this episode teaches; returns counts."""
        res = ExtractionResult()
        # Only the phone teaches device lessons: the model's memory tools are not steps on the device.
        steps = device_steps(pair_steps(events))
        res.steps = len(steps)
        ctx = LessonContext(ep, steps, self.device)
        ctx.declared = declared_memories(events)
        phase = ep.outcome.failure_phase
        if phase == "exception" and not ep.outcome.success:
            # The runtime raised: the episode records it, but nothing the phone did is known to have
            # caused it, so it teaches no failure; the app facts its paired calls showed still hold.
            ep.failure_causes = list(dict.fromkeys([*ep.failure_causes, _phase_cause(ctx)]))
        writers: list[tuple[str, Any]] = []
        if any(s.has_result for s in steps):  # nothing done, nothing learned about the device or apps
            writers.append(("device_profile", lambda: self._device_profile(ctx, res)))
            writers += [(f"app_profile:{a}", lambda a=a: self._app_profile(ctx, a, res)) for a in ctx.apps]
        if steps and phase != "interrupted":
            # A crashed episode (the recorder stopped before finish) teaches only its app facts, at low
            # confidence: its path and its end are not known.
            if ep.outcome.success:
                writers.append(("procedure", lambda: self._procedure(ctx, res)))
            writers += [("navigation", lambda: self._navigation(ctx, res)),
                        ("calibration", lambda: self._calibration(ctx, res)),
                        ("failure", lambda: self._failures(ctx, res)),
                        ("ui_anchor", lambda: self._ui_anchors(ctx, res))]
        for name, write in writers:
            try:
                write()
            except (UnsafePathError, FileProblemError) as exc:
                # A refused write (a symlink planted in the tree) or a file a person broke loses that
                # lesson only, never the others; verify names the file.
                res.errors.append(f"{name}: {exc}")
                log.error("memory: lesson %s of %s not written: %s", name, ep.id, exc)
        for ids, rule, decision, detail, against in ctx.decisions:
            evidence: dict[str, Any] = {"episode": ctx.ep.id}
            if against:
                evidence["against"] = against
            self.device.conflicts.add(ids, rule=rule, decision=decision, evidence=evidence, detail=detail)
            ep.conflicts = list(dict.fromkeys([*ep.conflicts, *(i for i in ids if i)]))[:50]
        return res

    def _upsert(self, ctx: LessonContext, res: ExtractionResult, item_type: str, item_id: str, create: Any,
                merge: Any, lesson_key: str, *, evidence: list[Step]) -> Any:
        state: dict[str, str | None] = {"kind": None}
        ref = ctx.evidence_of(evidence)  # the calls and results that show this lesson

        def change(cur: Any) -> Any:
            now = self.device.clock()
            if cur is None:
                item = create()
                item.lesson_key = lesson_key
                item.add_evidence(ref)
                item.renew(now)
                state["kind"] = "created"
                return item
            if any(r.id == ctx.ep.id and r.type == "episode" for r in cur.evidence_refs):
                return None  # this episode was already applied (a retried job): apply once
            merge(cur)
            cur.add_evidence(ref)
            cur.updated_at = now
            if cur.status in ("active", "expired"):
                cur.status = "active"
                cur.renew(now)
            state["kind"] = "updated"
            return cur

        try:
            out = self.device.upsert(item_type, item_id, change)
        except FileProblemError as exc:
            # This item's file is broken (a hand edit verify will name): skip this one lesson only; the
            # other items of the same kind (further steps, other anchors) are still written.
            res.errors.append(f"{item_type} {item_id}: {exc}")
            log.error("memory: lesson %s of %s skipped, its file is unreadable: %s", item_id, ctx.ep.id, exc)
            return None
        if out is None and state["kind"] is None:
            res.skipped_tombstoned += 1
        elif state["kind"]:
            res.bump(str(state["kind"]), item_type)
            if item_id not in res.ids:
                res.ids.append(item_id)
        return out

    # -- each lesson ----------------------------------------------------------------

    def _device_profile(self, ctx: LessonContext, res: ExtractionResult) -> None:
        dev = ctx.device_id
        w, h = ctx.screen or (None, None)
        before: dict[str, str | None] = {}

        def change(cur: DeviceProfile | None) -> DeviceProfile | None:
            now = self.device.clock()
            if cur is not None:
                sw, sh = cur.screen.screenshot_width, cur.screen.screenshot_height
                before.update(language=cur.language, screen=f"{sw}x{sh}" if sw and sh else None,
                              input_method=cur.input_method)
            if cur is not None:
                same_screen = not (w and h) or (cur.screen.screenshot_width, cur.screen.screenshot_height) == (w, h)
                same_lang = (not ctx.language or cur.language == ctx.language) and (
                    not ctx.input_method or cur.input_method == ctx.input_method)
                last = cur.last_validated_at
                fresh = isinstance(last, datetime) and now - last < PROFILE_RENEW_EVERY
                if same_screen and same_lang and fresh:
                    return None  # nothing new: no rewrite of the profile for every task
            p = cur or self.device.new_item(DeviceProfile, slug_id(dev, prefix="device_"), device_id=dev,
                                            title=f"Device {dev}", confidence=0.6)
            if ctx.language:
                p.language = ctx.language
            if ctx.input_method:
                p.input_method = ctx.input_method
            if w and h:
                p.screen = ScreenInfo(screenshot_width=w, screenshot_height=h, density=p.screen.density)
            if cur is not None:
                p.confidence = min(0.95, p.confidence + 0.02)
            p.applicability = {"device_id": dev}
            shown = [s for s in ctx.steps if s.screen or (s.extra.get("observed") or {}).get("input_method")]
            p.add_evidence(ctx.evidence_of(shown[:2] or [s for s in ctx.steps if s.has_result][:1]))
            p.renew(now)
            res.bump("updated" if cur is not None else "created", "device_profile")
            return p

        self.device.profiles.update(dev, change)
        # Conflict source 3: the device's environment changed; memories made under the old one are
        # demoted (not deleted) and those made under the new one come back.
        if before.get("language") and ctx.language:
            self.device.mark_environment_change(dev, "language", before["language"], ctx.language)
        if before.get("screen") and ctx.screen_text:
            self.device.mark_environment_change(dev, "screen", before["screen"], ctx.screen_text)
        if before.get("input_method") and ctx.input_method:
            # Typed text depends on the keyboard (a pinyin IME composes, another commits at once).
            self.device.mark_environment_change(dev, "input_method", before["input_method"], ctx.input_method)

    def _app_profile(self, ctx: LessonContext, app_id: str, res: ExtractionResult) -> None:
        names = ctx.app_names.get(app_id, [])
        pages = [p for p in ctx.pages_by_app.get(app_id, []) if p]
        tools = ctx.tools_by_app.get(app_id, [])
        packages = ctx.packages_by_app.get(app_id, [])
        opened = ctx.open_method(app_id)
        goal_app = ctx.goal_app == app_id or ctx.goal_app is None
        success = ctx.ep.outcome.success

        facts = ctx.app_facts(app_id)
        in_app = [s for s in ctx.steps if app_id in (ctx.canon(s.app_before), ctx.canon(s.app_after))]
        crashed = ctx.ep.outcome.failure_phase == "interrupted"
        raised = ctx.ep.outcome.failure_phase == "exception"

        def merge(p: AppProfile) -> None:
            p.display_names = merge_unique(p.display_names, names, "display_names")
            # Aliases: every name the app went by here (shown, package, as the goal wrote it).
            p.aliases = merge_unique(p.aliases, [a for a in [*names, *packages, *facts["goal_names"]]
                                                 if a and a != p.app_name], "aliases")
            p.common_dialogs = merge_unique(p.common_dialogs, facts["dialogs"], "common_dialogs")
            if facts["login_state"]:
                p.login_state = facts["login_state"]
            for page, how in facts["entries"].items():
                p.known_entries[page] = how
            p.pages_seen = merge_unique(p.pages_seen, pages, "pages_seen")
            p.tools_used = merge_unique(p.tools_used, tools, "tools_used")
            p.packages = merge_unique(p.packages, packages, "packages")
            if opened is not None:
                method, query, ok = opened
                om = next((m for m in p.open_methods if m.method == method and m.query == query), None)
                if om is None:
                    om = OpenMethod(method=method, query=query)
                    p.open_methods.append(om)
                    p.open_methods = cap_list(p.open_methods, "open_methods")
                om.success_count += 1 if ok else 0
                om.failure_count += 0 if ok else 1
            # A profile the agent was shown is credited by the outcome update: each episode counts once.
            counted = p.id in ctx.ep.retrieved_memory_refs
            if goal_app and not crashed and not raised:
                if success and not counted:
                    p.success_count += 1
                    p.confidence = min(0.95, p.confidence + 0.05)
                elif not success:
                    # A failed task does not make what the phone showed of the app wrong: it is counted,
                    # and its reason kept as a known issue, but the profile's confidence stays.
                    if not counted:
                        p.failure_count += 1
                    reason = ctx.failure_text()
                    if reason:
                        p.known_issues = merge_unique(p.known_issues, [reason], "known_issues")
            p.summary = p.body()

        def create() -> AppProfile:
            display = names[0] if names else (self.device.catalog.get(app_id).display  # type: ignore[union-attr]
                                              if self.device.catalog.get(app_id) else app_id)
            p = self.device.new_item(AppProfile, f"app_{app_id}"[:80], app_id=app_id, app_name=display,
                                     device_id=ctx.device_id, title=f"App profile: {display}",
                                     confidence=0.3 if crashed else 0.6, applicability={"device_id": ctx.device_id})
            merge(p)
            return p

        self._upsert(ctx, res, "app_profile", f"app_{app_id}"[:80], create, merge,
                     content_hash("app_profile", ctx.device_id, app_id), evidence=in_app or ctx.steps[:1])

    def _procedure(self, ctx: LessonContext, res: ExtractionResult) -> None:
        steps = effective_path([s for s in ctx.steps if not s.is_error])
        if not steps:
            return
        target = ctx.ep.normalized_goal.target
        first = next((s for s in ctx.steps if s.app_before and s.page_before), None)
        app_id = ctx.goal_app or (ctx.canon(first.app_before) if first else None) or ctx.first_app
        page = first.page_before if first else None
        pattern = goal_pattern(ctx.ep)
        path = [of_step(s, target) for s in steps]
        # One procedure, one path: an existing procedure of this goal is renewed only when its steps are
        # this episode's path; a different path for the same kind of goal is a procedure of its own.
        pid = self._same_path(ctx, app_id, pattern, path) or \
            f"proc_{content_hash(ctx.device_id, app_id, page, pattern, path_key(path))}"
        psteps = [ProcedureStep(tool=s.tool, action=step_action(s), description=screen_label(s), coords=s.coords,
                                text=s.text, app_name=s.app_before, page_name=s.page_before,
                                target_label=screen_label(s), outcome_note=step_note(s), narration=s.content)
                  for s in steps]
        psteps = cap_list(psteps, "steps")
        pages = list(dict.fromkeys(p for s in steps for p in (s.page_before, s.page_after) if p))
        app_name = ctx.display(app_id)

        def merge(p: Procedure) -> None:
            if pid not in ctx.ep.retrieved_memory_refs:  # else the outcome update counted this success
                p.success_count += 1
                p.confidence = min(0.95, p.confidence + 0.05)
            p.goal_examples = merge_unique(p.goal_examples, [ctx.ep.user_goal[:200]], "goal_examples")
            p.targets = merge_unique(p.targets, [target] if target else [], "targets")
            p.entities = merge_unique(p.entities, [*pages, *ctx.ep.entities], "entities")
            ctx.resolve(p, app_id)
            p.summary = p.body()

        def create() -> Procedure:
            p = self.device.new_item(
                Procedure, pid, app_id=app_id, app_name=app_name, page_name=page, device_id=ctx.device_id,
                goal_pattern=pattern, intent=ctx.ep.normalized_goal.intent,
                title=f"{app_name or 'Device'}: {pattern}"[:120], confidence=0.75, priority=70,
                goal_examples=[ctx.ep.user_goal[:200]], targets=[target] if target else [], steps=psteps,
                steps_target=target,
                applicability=ctx.applicability(app_id),
                tags=[f"page:{p}" for p in pages[:5]] + ([ctx.ep.normalized_goal.intent]
                                                          if ctx.ep.normalized_goal.intent else []),
                entities=[*pages, *ctx.ep.entities][:20],
            )
            p.success_count = 1
            p.summary = p.body()
            return p

        proc = self._upsert(ctx, res, "procedure", pid, create, merge, content_hash("procedure", pid), evidence=steps)
        if isinstance(proc, Procedure):
            clear_blame(self.device, proc)  # its whole path just worked
            self._negation(ctx, app_id, pattern)

    def _same_path(self, ctx: LessonContext, app_id: str | None, pattern: str, path: list[Any]) -> str | None:
        """The id of a procedure for this goal whose steps are this path (taps within the closeness rule)."""
        coll = self.device.collection("procedure")
        for e in self.device.entries("procedure", app_id):
            if e.get("goal") != pattern or e.get("status") not in ("active", "expired", "conflicted"):
                continue
            try:
                p = coll.get(str(e["id"]))
            except (FileProblemError, UnsafePathError, KeyError):
                continue
            if isinstance(p, Procedure) and p.device_id in (None, ctx.device_id) and paths_agree(
                    [of_procedure_step(st, p.steps_target) for st in p.steps], path):
                return p.id
        return None

    def _navigation(self, ctx: LessonContext, res: ExtractionResult) -> None:
        seen: set[str] = set()
        for s in ctx.steps:
            if s.is_error or not s.has_result or not s.changed_page or not s.page_before or not s.app_before:
                continue
            fa, ta = ctx.canon(s.app_before), ctx.canon(s.app_after)
            nid = f"nav_{content_hash(ctx.device_id, fa, s.page_before, ta, s.page_after)}"
            if nid in seen:
                continue
            seen.add(nid)

            def merge(n: Navigation, s: Step = s, nid: str = nid, fa: str | None = fa) -> None:
                if nid not in ctx.ep.retrieved_memory_refs:
                    n.success_count += 1
                    n.confidence = min(0.95, n.confidence + 0.05)
                n.coords, n.text, n.tool = s.coords or n.coords, s.text or n.text, s.tool
                if n.status == "replaced" and ctx.ep.outcome.success and not s.is_error:
                    # The transition it names happened again: the rule that replaced it is now the one
                    # contradicted (settled below), and this one holds again.
                    n.status, n.superseded_by = "active", None
                    ctx.decide([n.id], "reinstated_by_new_evidence", "active", f"{n.from_page} → {n.to_page} again")
                ctx.resolve(n, fa)
                n.summary = n.body()

            def create(s: Step = s, fa: str | None = fa, ta: str | None = ta, nid: str = nid) -> Navigation:
                n = self.device.new_item(
                    Navigation, nid, app_id=fa, app_name=s.app_before, page_name=s.page_before,
                    device_id=ctx.device_id, from_app=s.app_before, from_page=s.page_before, to_app=s.app_after,
                    to_page=s.page_after, tool=s.tool, coords=s.coords, text=s.text, description=screen_label(s),
                    title=f"{s.app_before}/{s.page_before} → {s.app_after}/{s.page_after}", confidence=0.7,
                    priority=65, applicability=ctx.applicability(fa), entities=[s.page_before, s.page_after],
                )
                n.success_count = 1
                n.summary = n.body()
                return n

            contradicted = self._contradicted_navigation(ctx, s, fa, nid)
            new = self._upsert(ctx, res, "navigation", nid, create, merge, content_hash("navigation", nid),
                               evidence=[s])
            if isinstance(new, Navigation) and contradicted:
                self._settle_navigation(ctx, new, contradicted)

    def _calibration(self, ctx: LessonContext, res: ExtractionResult) -> None:
        normalized = any(str(s.tool_input.get("coord_space", "")).lower() == "normalized" for s in ctx.steps)
        waits = [float(v) for s in ctx.steps if "wait" in s.tool.lower()
                 for v in [s.tool_input.get("seconds", s.tool_input.get("time", s.tool_input.get("duration")))]
                 if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 120]
        seen = ctx.observed_screen  # a screenshot's real size, not the runtime's hint
        scale: str | None = None
        if seen is not None and not normalized:
            # Taps and screenshots share a space only when the taps fall on the screenshot; taps outside
            # it (720x1280 taps on a 72x128 screenshot) are in another space, known only when the runtime
            # said the screen's size and the taps fall on that.
            pts = [p for p in (s.point() for s in ctx.steps) if p is not None]
            if any(not (0 <= x <= seen[0] and 0 <= y <= seen[1]) for x, y in pts):
                hint = ctx.screen if ctx.screen != seen else None
                if hint and all(0 <= x <= hint[0] and 0 <= y <= hint[1] for x, y in pts):
                    scale = f"{hint[0]}x{hint[1]}"
                else:
                    seen = None  # the space of the taps is not known: no pixel lesson
        if seen is None and not normalized and not waits:
            return  # calibration without evidence is not a lesson
        w, h = seen or (None, None)
        space = "normalized" if normalized else (f"device pixels {scale}" if scale else "pixels" if seen else None)
        cid = ("cal_normalized_coordinates" if normalized and not seen
               else f"cal_{slug_id(ctx.device_id)}_{w}x{h}" if seen else f"cal_{slug_id(ctx.device_id)}_waits")
        shown = [s for s in ctx.steps if s.changed_page and s.point()]
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
                    ctx.decide([c.id], "restored_by_success", "active", f"{c.success_count} successes")
            c.summary = c.body()

        def create() -> Calibration:
            c = self.device.new_item(
                Calibration, cid[:80], device_id=ctx.device_id, coord_space=space, screenshot_width=w,
                screenshot_height=h, title=f"Calibration {ctx.device_id} {w}x{h}" if w else "Calibration",
                confidence=0.8, priority=75,
                applicability={k: v for k, v in {"device_id": ctx.device_id,
                                                 "screen": f"{w}x{h}" if w else None}.items() if v},
            )
            if verified:
                where = f"device pixels ({scale}; screenshots are {w}x{h})" if scale else "screenshot pixels"
                c.notes = [f"a tap at {where} changed the page ({ctx.ep.id})"]
            merge(c)
            return c

        wait_steps = [s for s in ctx.steps if "wait" in s.tool.lower()]
        self._upsert(ctx, res, "calibration", cid[:80], create, merge, content_hash("calibration", cid),
                     evidence=(shown or [s for s in ctx.steps if s.screen][:1]) + wait_steps[:3])

    def _failures(self, ctx: LessonContext, res: ExtractionResult) -> None:
        ep = ctx.ep
        raised = ep.outcome.failure_phase == "exception"
        for s in ctx.steps:
            # A runtime exception says nothing about the keyboard: only the tool's own error does then.
            if s.tool in TEXT_TOOLS and s.text and not s.text.isascii() and (
                    s.is_error or (not ep.outcome.success and not raised and not s.changed_page)):
                trig = {"tool": s.tool, "input_contains_non_ascii": True, "input_method": ctx.input_method}
                self._failure(ctx, res, NON_ASCII_MODE, {k: v for k, v in trig.items() if v is not None},
                              NON_ASCII_LESSON, s, scope_app=False)
                break
        self._contradictions(ctx)
        if ep.outcome.success or raised:
            return
        # What the events show (the screen did not change, a dialog was open, typed text did not arrive,
        # taps without effect): each a typed failure memory, and the episode's failure_causes.
        for cause in classify(ctx.steps):
            self._failure(ctx, res, cause.label(), cause.trigger(), cause.lesson, cause.steps[-1], scope_app=True,
                          evidence=cause.steps)
            ep.failure_causes = list(dict.fromkeys([*ep.failure_causes, cause.label()]))
        last = ctx.steps[-1]
        phase = ep.outcome.failure_phase or "unknown"
        reason = ctx.failure_text() or phase
        mode = _phase_cause(ctx)
        # The phase and reason the runtime gave are a cause too (a tool error names no screen change).
        ep.failure_causes = list(dict.fromkeys([*ep.failure_causes, mode]))
        trigger = {k: v for k, v in {"tool": last.tool, "app": ctx.display(ctx.goal_app or ctx.canon(last.app_after)),
                                     "page": last.page_before or last.page_after}.items() if v}
        lesson = (f"Goal {ep.user_goal[:80]!r} failed at {phase}: {reason[:160]}. "
                  "Check the current observation before repeating this path; completion needs fresh evidence.")
        self._failure(ctx, res, mode, trigger, lesson, last, scope_app=True)

    def _contradictions(self, ctx: LessonContext) -> None:
        """Failures retire: a failure memory about an action (the keyboard cannot type non-ASCII) is
        contradicted by a step that did that action under its conditions and worked, shown or not."""
        if not ctx.ep.outcome.success:
            return
        fid = f"fail_{content_hash(ctx.device_id, None, None, NON_ASCII_MODE)}"
        if fid in ctx.ep.retrieved_memory_refs:
            return  # the outcome update weighs a failure memory the episode was shown
        rule: dict[str, str] = {}

        def change(cur: Any) -> Any:
            if not isinstance(cur, Failure):
                return None
            counted, decision = apply_contradiction(cur, ctx.ep, ctx.steps, self.device.clock())
            if decision:
                rule["decision"] = decision
            return cur if counted else None

        try:
            if self.device.collection("failure").get(fid) is None:
                return
            self.device.collection("failure").update(fid, change)
        except (FileProblemError, UnsafePathError, KeyError) as exc:
            log.error("memory: failure %s not weighed against %s: %s", fid, ctx.ep.id, exc)
            return
        if rule:
            ctx.decide([fid], "success_contradicts_failure" if rule["decision"] == "conflicted" else "failure_retired",
                       rule["decision"], "the same action worked under the same conditions")

    def _failure(self, ctx: LessonContext, res: ExtractionResult, mode: str, trigger: dict[str, Any], lesson: str,
                 step: Step, *, scope_app: bool, evidence: list[Step] | None = None) -> None:
        app_id = (ctx.goal_app or ctx.canon(step.app_after) or ctx.canon(step.app_before)) if scope_app else None
        pattern = goal_pattern(ctx.ep) if scope_app else None
        fid = f"fail_{content_hash(ctx.device_id, app_id, pattern, mode)}"
        # The procedures this episode followed into the failure: only they are weighed against it.
        led = self._followed_into_failure(ctx, app_id, pattern) if scope_app else []

        def note_led(f: Failure) -> None:
            extra = f.model_extra if f.model_extra is not None else {}
            prev = extra.get("led_by")
            old: list[str] = [str(x) for x in prev] if isinstance(prev, list) else []
            if led or old:
                extra["led_by"] = list(dict.fromkeys([*old, *led]))[-10:]

        def merge(f: Failure) -> None:
            note_led(f)
            f.occurrences += 1
            f.confidence = min(0.98, f.confidence + 0.05)
            if f.status == "conflicted":
                f.status = "active"  # the failure happened again: the doubt is resolved in its favour
                ctx.decide([f.id], "failure_reconfirmed", "active")
            f.summary = f.body()

        def create() -> Failure:
            f = self.device.new_item(
                Failure, fid, device_id=ctx.device_id, app_id=app_id, app_name=ctx.display(app_id),
                page_name=trigger.get("page"), failure_mode=mode, failure_phase=ctx.ep.outcome.failure_phase,
                trigger=trigger, lesson=lesson, goal_pattern=pattern, title=mode[:120], confidence=0.8,
                priority=80, occurrences=1,
                applicability={k: v for k, v in {"device_id": ctx.device_id, "app": app_id}.items() if v},
            )
            note_led(f)
            f.summary = f.body()
            return f

        fail = self._upsert(ctx, res, "failure", fid, create, merge, content_hash("failure", fid),
                            evidence=evidence or [step])
        if isinstance(fail, Failure) and scope_app and app_id and pattern:
            self._negation(ctx, app_id, pattern)

    # -- conflicts -------------------------------------------------------------------

    def _contradicted_navigation(self, ctx: LessonContext, s: Step, app_id: str | None, nid: str) -> list[Navigation]:
        """Conflict source 1: active rules saying the same action on the same page leads elsewhere."""
        out: list[Navigation] = []
        for e in self.device.entries("navigation", app_id):
            if e["id"] == nid or e.get("status") != "active" or e.get("page") != s.page_before:
                continue
            n = self.device.collection("navigation").get(e["id"])
            if not isinstance(n, Navigation) or n.tool != s.tool or n.from_app != s.app_before:
                continue
            same_action = coords_close(n.coords, s.coords) or (n.text is not None and n.text == s.text)
            if same_action and (n.to_app, n.to_page) != (s.app_after, s.page_after):
                out.append(n)
        return out

    def _settle_navigation(self, ctx: LessonContext, new: Navigation, old_rules: list[Navigation]) -> None:
        coll = self.device.collection("navigation")
        for old in old_rules:
            if old.success_count <= 1:
                # More specific (newer, as well supported) evidence for the same fact supersedes the old rule.
                def replace(cur: Any, new_id: str = new.id) -> Any:
                    if cur is None:
                        return None
                    cur.status, cur.superseded_by, cur.updated_at = "replaced", new_id, self.device.clock()
                    return cur

                coll.update(old.id, replace)
                coll.update(new.id, _setter_of({"supersedes": old.id}))
                ctx.decide([old.id], "navigation_contradicted", "superseded",
                           f"{old.from_page} now leads to {new.to_page}, not {old.to_page}", against=[new.id])
            else:
                for nid in (old.id, new.id):
                    coll.update(nid, lambda cur: cur and cur.model_copy(update={"status": "conflicted"}))
                ctx.decide([old.id, new.id], "navigation_contradicted", "conflicted",
                           f"{old.from_page}: {old.to_page} ({old.success_count}x) vs {new.to_page} (new)")

    def _followed_into_failure(self, ctx: LessonContext, app_id: str | None, pattern: str | None) -> list[str]:
        """Ids of this goal's procedures that the failed episode followed into its failure."""
        if not app_id or not pattern:
            return []
        key = f"{app_id}\n{pattern}"
        if key in ctx.blamed:
            return ctx.blamed[key]  # decided once, before this episode's own lessons changed any status
        procs: list[Procedure] = []
        for e in self.device.entries("procedure", app_id):
            if e.get("goal") != pattern:
                continue
            try:
                p = self.device.collection("procedure").get(str(e["id"]))
            except (FileProblemError, UnsafePathError, KeyError):
                continue
            if isinstance(p, Procedure):
                procs.append(p)
        refs = ctx.ep.retrieved_memory_refs
        procs.sort(key=lambda p: refs.index(p.id) if p.id in refs else len(refs))  # shown first wins a tie
        blamed = blamed_procedure(procs, ctx.steps, ctx.ep.normalized_goal.target, ctx.declared)
        ctx.blamed[key] = [blamed] if blamed else []
        return ctx.blamed[key]

    def _negation(self, ctx: LessonContext, app_id: str | None, pattern: str | None) -> None:
        """Conflict source 2: a verified path and a failure mode of the same app and goal that an episode
        met by following that path (the failure names the procedures it was followed from, ``led_by``)."""
        if not app_id or not pattern:
            return
        procs = [e for e in self.device.entries("procedure", app_id)
                 if e.get("goal") == pattern and e.get("status") == "active"]
        fails = [e for e in self.device.entries("failure", app_id)
                 if e.get("goal") == pattern and e.get("status") == "active"]
        for pe in procs:
            proc = self.device.collection("procedure").get(pe["id"])
            if not isinstance(proc, Procedure):
                continue
            for fe in fails:
                fail = self.device.collection("failure").get(fe["id"])
                if not isinstance(fail, Failure):
                    continue
                led_by = (fail.model_extra or {}).get("led_by")
                if not isinstance(led_by, list) or proc.id not in led_by:
                    continue
                ok, bad = proc.success_count, max(1, fail.occurrences)
                if ok >= 2 * bad and ok >= 2:
                    losers, decision = [fail.id], "failure_outvoted"
                elif bad >= 2 * ok and bad >= 2:
                    losers, decision = [proc.id], "procedure_outvoted"
                else:
                    losers, decision = [proc.id, fail.id], "undecided"
                if not ctx.ep.outcome.success:
                    # The failure just happened again: it is not what is in doubt, the path is.
                    losers = [lid for lid in losers if lid != fail.id]
                for lid in losers:
                    kind = "procedure" if lid.startswith("proc_") else "failure"
                    ev = [i for st in ctx.steps for i in st.event_ids][-20:]

                    def demote(cur: Any, rule: str = decision, ev: list[str] = ev) -> Any:
                        if cur is None:
                            return None
                        if cur.status != "conflicted":
                            hit = (procedure_failure_point(cur, ctx.steps, ctx.ep.normalized_goal.target)
                                   if isinstance(cur, Procedure) and not ctx.ep.outcome.success else None)
                            note_demotion(cur, rule, ctx.ep.id, ev, self.device.clock(), hit[1] if hit else None)
                        cur.status = "conflicted"
                        return cur

                    self.device.collection(kind).update(lid, demote)
                # The line names what was demoted; the other side of the conflict is named beside it.
                others = [i for i in (proc.id, fail.id) if i not in losers]
                ctx.decide(losers, "success_failure_negate", decision,
                           f"{ok} successes vs {bad} failures on the same path", against=others)

    def _ui_anchors(self, ctx: LessonContext, res: ExtractionResult) -> None:
        if ctx.screen is None:
            return
        w, h = ctx.screen
        # Only taps on the effective path: a detour's taps say where things are, not what matters.
        for s in effective_path([s for s in ctx.steps if not s.is_error]):
            pt = s.point()
            label = screen_label(s)  # what the phone showed there, never the runtime's narration
            if pt is None or not label or s.is_error or not (s.changed_page or ctx.ep.outcome.success):
                continue
            if not s.app_before or not s.page_before:
                continue
            app_id = ctx.canon(s.app_before)
            # Screen text and coordinates hold for the UI language and screen they were seen under: an
            # English tab bar sits elsewhere than the Chinese one, so each environment has its own anchor.
            uid = f"ui_{content_hash(ctx.device_id, app_id, s.page_before, label, ctx.language, ctx.screen_text)}"
            nx, ny = round(pt[0] / w, 4), round(pt[1] / h, 4)
            if not (0 <= nx <= 1 and 0 <= ny <= 1):
                continue

            def merge(a: UiAnchor, s: Step = s, nx: float = nx, ny: float = ny) -> None:
                a.point.add(nx, ny)
                a.screens = merge_unique(a.screens, [ctx.screen_text], "screens")
                a.last_coords = s.coords
                a.summary = a.body()

            def create(s: Step = s, uid: str = uid, label: str = label, app_id: str | None = app_id) -> UiAnchor:
                a = self.device.new_item(
                    UiAnchor, uid, device_id=ctx.device_id, app_id=app_id, app_name=s.app_before,
                    page_name=s.page_before, label=label, title=f"{label} on {s.app_before}/{s.page_before}",
                    confidence=0.6, applicability=ctx.applicability(app_id), entities=[label],
                )
                return a

            def create_and_merge(create: Any = create, merge: Any = merge) -> UiAnchor:
                a = create()
                merge(a)
                return a

            self._upsert(ctx, res, "ui_anchor", uid, create_and_merge, merge, content_hash("ui_anchor", uid),
                         evidence=[s])


def _setter_of(fields: dict[str, Any]) -> Any:
    """A change function for YamlCollection.update that sets fields on an existing item."""

    def change(cur: Any) -> Any:
        return cur.model_copy(update=fields) if cur is not None else None

    return change



def _phase_cause(ctx: LessonContext) -> str:
    """``phase: reason``: the failure as the runtime named it."""
    phase = ctx.ep.outcome.failure_phase or "unknown"
    reason = ctx.failure_text() or phase
    return f"{phase}: {' '.join(reason.split())[:80]}"
