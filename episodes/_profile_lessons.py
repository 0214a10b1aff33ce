"""Profile lessons: what an episode shows about the device and about each app it worked in."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from memory_plane.device_memory import AppProfile, DeviceProfile, OpenMethod, ScreenInfo, cap_list, merge_unique
from memory_plane.lifecycle import content_hash, slug_id

from ._lesson_context import LessonContext
from ._lesson_writer import ExtractionResult, LessonWriter

log = logging.getLogger("memory_plane")

PROFILE_RENEW_EVERY = timedelta(days=1)  # the device profile is re-validated at most daily


def learn_device_profile(writer: LessonWriter, lesson: LessonContext, res: ExtractionResult) -> None:
    """The device profile renewed (at most daily unless something changed), and an environment change marked."""
    dev = lesson.device_id
    w, h = lesson.screen or (None, None)
    before: dict[str, str | None] = {}

    def change(cur: DeviceProfile | None) -> DeviceProfile | None:
        now = writer.device.clock()
        if cur is not None:
            sw, sh = cur.screen.screenshot_width, cur.screen.screenshot_height
            before.update(language=cur.language, screen=f"{sw}x{sh}" if sw and sh else None,
                          input_method=cur.input_method)
        if cur is not None:
            same_screen = not (w and h) or (cur.screen.screenshot_width, cur.screen.screenshot_height) == (w, h)
            same_lang = (not lesson.language or cur.language == lesson.language) and (
                not lesson.input_method or cur.input_method == lesson.input_method)
            last = cur.last_validated_at
            fresh = isinstance(last, datetime) and now - last < PROFILE_RENEW_EVERY
            if same_screen and same_lang and fresh:
                return None  # nothing new: no rewrite of the profile for every task
        p = cur or writer.device.new_item(DeviceProfile, slug_id(dev, prefix="device_"), device_id=dev,
                                        title=f"Device {dev}", confidence=0.6)
        if lesson.language:
            p.language = lesson.language
        if lesson.input_method:
            p.input_method = lesson.input_method
        if w and h:
            p.screen = ScreenInfo(screenshot_width=w, screenshot_height=h, density=p.screen.density)
        if cur is not None:
            p.confidence = min(0.95, p.confidence + 0.02)
        p.applicability = {"device_id": dev}
        shown = [s for s in lesson.steps if s.screen or (s.extra.get("observed") or {}).get("input_method")]
        p.add_evidence(lesson.evidence_of(shown[:2] or [s for s in lesson.steps if s.has_result][:1]))
        p.renew(now)
        res.bump("updated" if cur is not None else "created", "device_profile")
        return p

    writer.device.profiles.update(dev, change)
    # Conflict source 3: the device's environment changed; memories made under the old one are
    # demoted (not deleted) and those made under the new one come back.
    if before.get("language") and lesson.language:
        writer.device.mark_environment_change(dev, "language", before["language"], lesson.language)
    if before.get("screen") and lesson.screen_text:
        writer.device.mark_environment_change(dev, "screen", before["screen"], lesson.screen_text)
    if before.get("input_method") and lesson.input_method:
        # Typed text depends on the keyboard (a pinyin IME composes, another commits at once).
        writer.device.mark_environment_change(dev, "input_method", before["input_method"], lesson.input_method)


def learn_app_profile(writer: LessonWriter, lesson: LessonContext, app_id: str, res: ExtractionResult) -> None:
    """The profile of one app the episode worked in: names, pages, tools, how it was opened, what it showed."""
    names = lesson.app_names.get(app_id, [])
    pages = [p for p in lesson.pages_by_app.get(app_id, []) if p]
    tools = lesson.tools_by_app.get(app_id, [])
    packages = lesson.packages_by_app.get(app_id, [])
    opened = lesson.open_method(app_id)
    task_app = lesson.task_app in (app_id, None)  # the task's outcome counts for the app it was done in
    success = lesson.ep.outcome.success

    facts = lesson.app_facts(app_id)
    in_app = [s for s in lesson.steps if app_id in (lesson.canon(s.app_before), lesson.canon(s.app_after))]
    crashed = lesson.stopped or lesson.ep.outcome.failure_phase == "interrupted"
    raised = lesson.ep.outcome.failure_phase == "exception"

    def merge(p: AppProfile) -> None:
        p.display_names = merge_unique(p.display_names, names, "display_names")
        # Aliases: every name the app went by here (shown, package, as the goal wrote it).
        p.aliases = merge_unique(p.aliases, [a for a in [*names, *packages, *facts["goal_names"]]
                                             if a and a != p.app_name], "aliases")
        p.common_dialogs = merge_unique(p.common_dialogs, facts["dialogs"], "common_dialogs")
        if facts["login_state"]:
            p.login_state = facts["login_state"]
        for page, how in facts["entries"].items():
            p.note_entry(page, how)
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
        counted = p.id in lesson.ep.retrieved_memory_refs
        if task_app and not crashed and not raised:
            if success and not counted:
                p.success_count += 1
                p.confidence = min(0.95, p.confidence + 0.05)
            elif not success:
                # A failed task does not make what the phone showed of the app wrong: it is counted,
                # and its reason kept as a known issue, but the profile's confidence stays.
                if not counted:
                    p.failure_count += 1
                reason = lesson.failure_text()
                if reason:
                    p.known_issues = merge_unique(p.known_issues, [reason], "known_issues")
        # Where what it shows was seen (the design's app profile): its pages and labels are in the UI language,
        # its entries and dialogs on this screen; the profile follows the device's latest environment.
        p.applicability = {**p.applicability, **{k: v for k, v in {
            "device_id": lesson.device_id, "language": lesson.language, "screen": lesson.screen_text}.items() if v}}
        p.refresh_summary()

    def create() -> AppProfile:
        display = names[0] if names else (writer.device.catalog.get(app_id).display  # type: ignore[union-attr]
                                          if writer.device.catalog.get(app_id) else app_id)
        p = writer.device.new_item(AppProfile, f"app_{app_id}"[:80], app_id=app_id, app_name=display,
                                 device_id=lesson.device_id, title=f"App profile: {display}",
                                 confidence=0.3 if crashed else 0.6, applicability={"device_id": lesson.device_id})
        merge(p)
        return p

    writer.upsert(lesson, res, "app_profile", f"app_{app_id}"[:80], create, merge,
                 content_hash("app_profile", lesson.device_id, app_id), evidence=in_app or lesson.steps[:1])
