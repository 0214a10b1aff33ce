"""Which memory an episode used, which one led it into its failure, and which failure it contradicted.

Being shown is not being used: a failed episode demotes a memory only when the events show that the
memory led into the failure (design 004, conflict source 4), and a success credits only the memories it
used. Per type:

- procedure: used when the episode executed all of its steps in order; led into the failure when the
  episode executed its steps from the first up to the failing step (the first error, else the last step);
- navigation: used when the episode took its action on its page and arrived where the rule says; led
  elsewhere when it took the action and arrived somewhere else;
- calibration: used when a tap on a screenshot of its size changed the page; led into the failure when
  the failing tap lies off such a screenshot, or every tap (two or more) on one changed nothing;
- UI anchor: used when a tap near its point on its page had an effect; led into the failure when the
  failing step is such a tap that changed nothing;
- app profile: used when the episode worked in its app; never blamed (its facts are what the phone showed).

A demoted memory records what demoted it (``demotion``: rule, episode, event ids, when, its success count
then) and comes back to active after ``RESTORE_AFTER`` later successes that used it. A failure memory
about an action retires (``replaced``) after ``RETIRE_AFTER`` successes of that action under its
conditions (tool, app, input method); its ``success_count`` counts only those successes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from device_memory import AppProfile, Calibration, DeviceItem, Failure, Navigation, Procedure, UiAnchor

from ._causes import NEAR_PX, _unchanged, _visible
from ._path_agreement import followed_prefix, of_procedure_step
from ._steps import TEXT_TOOLS, Step, coords_close

RESTORE_AFTER = 2
"""Successes that use a demoted memory before it is active again."""
RETIRE_AFTER = 3
"""Successes of the same action under the same conditions that retire a failure memory."""


def failing_step(steps: list[Step]) -> int | None:
    """Index of the step the failure happened at: the first error, else the last step."""
    for i, s in enumerate(steps):
        if s.is_error:
            return i
    return len(steps) - 1 if steps else None


def used_steps(item: DeviceItem, steps: list[Step], target: str | None, canon: Any) -> list[Step]:
    """The steps that show the episode used this memory (empty: it was at most shown)."""
    if isinstance(item, Procedure):
        path = [of_procedure_step(s, item.steps_target) for s in item.steps]
        idx = followed_prefix(path, steps, target)
        return [steps[i] for i in idx] if path and len(idx) == len(path) else []
    if isinstance(item, Navigation):
        return [s for s in steps if _took(item, s) and (s.app_after, s.page_after) == (item.to_app, item.to_page)]
    if isinstance(item, Calibration):
        return [s for s in steps if _on_screen(item, s) and s.point() is not None and s.changed_page]
    if isinstance(item, UiAnchor):
        return [s for s in steps if _near_anchor(item, s) and not _unchanged(s) and not s.is_error]
    if isinstance(item, AppProfile):
        return [s for s in steps if item.app_id and item.app_id in (canon(s.app_before), canon(s.app_after))][:40]
    return []


def led_to_failure(item: DeviceItem, steps: list[Step], target: str | None) -> list[Step]:
    """The steps that show this memory led the episode into its failure (empty: it did not)."""
    fail = failing_step(steps)
    if fail is None:
        return []
    if isinstance(item, Procedure):
        path = [of_procedure_step(s, item.steps_target) for s in item.steps]
        idx = followed_prefix(path, steps, target)
        # Followed from its first step up to the step that failed (or all of it, and still failed).
        return [steps[i] for i in idx] if idx and (fail in idx or (len(idx) == len(path) and idx[-1] <= fail)) else []
    if isinstance(item, Navigation):
        return [s for s in steps if _took(item, s) and s.has_result and s.page_after
                and (s.app_after, s.page_after) != (item.to_app, item.to_page)]
    s = steps[fail]
    if isinstance(item, Calibration):
        # One tap without effect says the target was elsewhere; a calibration is wrong when taps on its
        # screen miss systematically: the failing tap lies off the screenshot, or every tap (two or more)
        # on that screen changed nothing.
        taps = [t for t in steps if _on_screen(item, t) and t.point() is not None]
        pt = s.point()
        off = pt is not None and s.screen is not None and not (0 <= pt[0] <= s.screen[0] and 0 <= pt[1] <= s.screen[1])
        if _on_screen(item, s) and off:
            return [s]
        return taps if len(taps) >= 2 and all(_unchanged(t) for t in taps) else []
    if isinstance(item, UiAnchor):
        return [s] if _near_anchor(item, s) and (_unchanged(s) or s.is_error) else []
    return []


def contradicting_steps(fail: Failure, steps: list[Step], input_method: str | None) -> list[Step]:
    """Steps that did what a failure memory about an action warns against, under its conditions, and
    worked: the caution is contradicted by them."""
    trig = fail.trigger or {}
    tool = trig.get("tool")
    if not tool:
        return []
    want_ime = (fail.applicability or {}).get("input_method") or trig.get("input_method")
    if want_ime and input_method and want_ime != input_method:
        return []  # another keyboard: not the same conditions
    out = []
    for s in steps:
        if s.tool != tool or s.is_error or not s.has_result:
            continue
        if trig.get("input_contains_non_ascii") and not (s.text and not s.text.isascii()):
            continue
        if trig.get("app") and trig["app"] not in (s.app_before, s.app_after):
            continue
        if trig.get("page") and trig["page"] not in (s.page_before, s.page_after):
            continue
        if s.tool in TEXT_TOOLS and s.text:
            visible = _visible(s)
            arrived = (visible is not None and s.text in visible) or (visible is None and not _unchanged(s))
            if not arrived:
                continue
        elif _unchanged(s):
            continue
        out.append(s)
    return out


def note_demotion(item: DeviceItem, rule: str, episode_id: str, event_ids: list[str], now: datetime) -> None:
    """Record on the item what demoted it, so the demotion can be traced and later undone."""
    extra = item.model_extra if item.model_extra is not None else {}
    extra["demotion"] = {"rule": rule, "episode": episode_id, "event_ids": event_ids[:20],
                         "at": now.isoformat().replace("+00:00", "Z"), "success_count": item.success_count}


def restore_if_earned(item: DeviceItem) -> bool:
    """Bring a demoted memory back to active once enough later successes used it; True when it did."""
    extra = item.model_extra if item.model_extra is not None else {}
    dem = extra.get("demotion")
    if item.status != "conflicted" or not isinstance(dem, dict):
        return False
    then = dem.get("success_count")
    then = then if isinstance(then, int) and not isinstance(then, bool) else item.success_count
    if item.success_count - then < RESTORE_AFTER:
        return False
    item.status = "active"
    extra.pop("demotion", None)
    extra["restored"] = {"after_successes": item.success_count - then, "demoted_by": dem.get("episode")}
    return True


def _took(n: Navigation, s: Step) -> bool:
    if (s.app_before, s.page_before) != (n.from_app, n.from_page) or s.tool != n.tool:
        return False
    return coords_close(n.coords, s.coords) or (n.text is not None and n.text == s.text) or (
        n.coords is None and n.text is None)


def _on_screen(c: Calibration, s: Step) -> bool:
    return bool(s.screen and c.screenshot_width and (c.screenshot_width, c.screenshot_height) == s.screen)


def _near_anchor(a: UiAnchor, s: Step) -> bool:
    pt = s.point()
    if pt is None or not s.screen or (s.app_before, s.page_before) != (a.app_name, a.page_name):
        return False
    w, h = s.screen
    return abs(pt[0] - a.point.nx * w) <= NEAR_PX and abs(pt[1] - a.point.ny * h) <= NEAR_PX
