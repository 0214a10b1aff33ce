"""Which memory an episode used, which one led it into its failure, and which failure it contradicted.

Being shown is not being used: a failed episode demotes a memory only when the events show that the
memory led into the failure (a memory merely shown cannot have caused it), and a success credits only the memories it
used. Per type:

- procedure: used when the episode executed all its steps, in order (a success through another path is
  another procedure's evidence); led into the failure when the episode executed its steps in order up to
  the failing step (the first error, else the last step) beyond the steps that only enter its app, at least
  one of them a step that names what it acted on (a label or typed text: an unlabelled tap agrees with any
  tap near it): the failing step was one of them, all were executed and the task still failed, the last of
  them was retried without effect until the failure, or the episode left it on the page of its next step
  (that step could not be taken there) and failed without coming back to it;
- navigation: used when the episode took its action on its page and arrived where the rule says; led
  elsewhere when it took the action and arrived somewhere else;
- calibration: used when a tap on a screenshot of its size changed the page; led into the failure when
  the failing tap lies off such a screenshot, or every tap (two or more) on one changed nothing;
- UI anchor: used when a tap near its point on its page had an effect; led into the failure when the
  failing step is such a tap that changed nothing;
- app profile: used when the episode worked in its app; a failed task in its app is counted
  (``failure_count``), never held against it (its facts are what the phone showed).

A demoted memory records what demoted it (``demotion``: rule, episode, event ids, when, its success count
then) and comes back to active after ``RESTORE_AFTER`` later successes that used it. A failure memory
about an action retires (``replaced``) after ``RETIRE_AFTER`` successes of that action under its
conditions (tool, app, input method); its ``success_count`` counts only those successes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory_plane.device_memory import AppProfile, Calibration, DeviceItem, Failure, Navigation, Procedure, UiAnchor

from ._causes import NEAR_PX, _unchanged, _visible, failing_step
from ._goal_slots import procedure_view
from ._path_agreement import (
    entry_length,
    followed,
    informative,
    mask,
    names_its_target,
    of_step,
    steps_agree,
)
from ._steps import TEXT_TOOLS, Step, coords_close

RESTORE_AFTER = 2
"""Successes that use a demoted memory before it is active again."""
RETIRE_AFTER = 3
"""Successes of the same action under the same conditions that retire a failure memory."""


def used_steps(item: DeviceItem, steps: list[Step], target: str | None, canon: Any) -> list[Step]:
    """The steps that show the episode used this memory (empty: it was at most shown)."""
    if isinstance(item, Procedure):
        path = [procedure_view(s, item) for s in item.steps]
        pairs = followed(path, steps, target, slot_free_pages(item))
        # Used: it executed every step of the procedure, in order; a demoted procedure is also used by a
        # success that executed every step from where it failed to the end.
        dem = (item.model_extra or {}).get("demotion")
        at = dem.get("at_step") if isinstance(dem, dict) else None
        done = {k for _, k in pairs}
        ok = bool(path) and len(pairs) == len(path)
        if not ok and isinstance(at, int) and not isinstance(at, bool) and 0 <= at < len(path):
            ok = all(k in done for k in range(at, len(path)))
        return [steps[i] for i, _ in pairs] if ok else []
    if isinstance(item, Navigation):
        return [s for s in steps if _took(item, s) and (s.app_after, s.page_after) == (item.to_app, item.to_page)]
    if isinstance(item, Calibration):
        return [s for s in steps if _on_screen(item, s) and s.point() is not None and s.changed_page]
    if isinstance(item, UiAnchor):
        return [s for s in steps if _near_anchor(item, s) and not _unchanged(s) and not s.is_error]
    if isinstance(item, AppProfile):
        return [s for s in steps if item.app_id and item.app_id in (canon(s.app_before), canon(s.app_after))][:40]
    return []


def slot_free_pages(item: Procedure) -> list[str | None]:
    """The page of each procedure step, None where the page is named after a value (a chat with one contact):
    such a page says nothing about where another value's step is done."""
    values = [v for v in (getattr(item, "slots", None) or {}).values() if v]
    return [None if not s.page_name or any(v in s.page_name for v in values) else s.page_name for s in item.steps]


def _started(item: Procedure, pairs: list[tuple[int, int]], entry: int, steps: list[Step]) -> bool:
    """Whether the run started the procedure: following one starts where it starts, so a run that took one of
    its later steps (the same field of a form, the same Pay button) on its own way to another task never
    followed it. A step it skipped counts as started only when its page never appeared in the run (a
    permission dialog shown the first time only)."""
    later = [(i, k) for i, k in pairs if k >= entry]
    if not later:
        return entry >= len(item.steps)
    i, first = min(later, key=lambda ik: ik[1])
    # Where it joined must be where the procedure does that step (a slot typed on another form is another task);
    # a page named after a value (a chat with one contact) says nothing.
    page = slot_free_pages(item)[first]
    if page and steps[i].page_before and page != steps[i].page_before:
        return False
    seen = {p for s in steps for p in (s.page_before, s.page_after) if p}
    return all(not item.steps[k].page_name or item.steps[k].page_name not in seen for k in range(entry, first))


def procedure_failure_point(item: Procedure, steps: list[Step], target: str | None) -> tuple[list[Step], int] | None:
    """Where a failed episode that followed this procedure failed: the steps that show it followed it (beyond
    its app-entry steps, each naming what it acted on) and the index of the procedure step it failed at; None
    when it did not follow it into the failure."""
    fail = failing_step(steps)
    if fail is None or not item.steps:
        return None
    path = [procedure_view(s, item) for s in item.steps]
    pairs = [(i, k) for i, k in followed(path, steps, target, slot_free_pages(item)) if i <= fail]
    entry = entry_length(item.steps)
    # Agreement is a step beyond the way into the app that names what it did: opening the same app, or
    # tapping near the same unlabelled point, is what every task of the app shares.
    # A slot filled with another value agrees with any value: only a step done exactly as the procedure says it
    # shows the episode was following this procedure.
    shown = [steps[i] for i, k in pairs if k >= entry and informative(path[k]) and names_its_target(steps[i])
             and steps_agree(of_step(steps[i], target), path[k])]
    if not shown or not _started(item, pairs, entry, steps[:fail + 1]):
        return None
    last_i, last_k = pairs[-1]
    if last_i == fail or last_k == len(path) - 1:
        return shown, last_k  # the failing step was its step, or it was followed to the end and still failed
    # Its last step taken was retried without effect until the failure: the failure is at that step.
    retries = steps[last_i:fail + 1]
    if last_k >= entry and len(retries) > 1 and all(_no_effect(s) for s in retries) and all(
            steps_agree(of_step(s, target), path[last_k]) for s in retries[1:]):
        return [*shown, *retries[1:]], last_k
    # It was followed up to a step that could not be taken: the episode left it on the page where the
    # procedure's next step was to be done, and never came back to it before the failure.
    nxt = item.steps[last_k + 1]
    where = steps[last_i + 1].page_before if last_i + 1 <= fail else None
    same = nxt.page_name and where and mask(where, target) == mask(nxt.page_name, item.steps_target)
    return (shown, last_k + 1) if same else None


def _no_effect(s: Step) -> bool:
    """A step that changed nothing (or failed)."""
    return s.is_error or _unchanged(s) or (s.has_result and not s.changed_page and s.changed_screen is None)


def declared_memories(events: list[dict[str, Any]]) -> list[str]:
    """Ids the agent said it followed (``EpisodeRecorder.memory_used``), in order."""
    return list(dict.fromkeys(str(e["memory_id"]) for e in events
                              if e.get("type") == "memory_used" and isinstance(e.get("memory_id"), str)))


def blamed_procedure(procs: list[Procedure], steps: list[Step], target: str | None,
                     declared: list[str] | None = None) -> str | None:
    """The one active procedure a failed episode followed into its failure: of those its events fit, the
    one they fit best (most steps executed), on a tie the first the episode was shown (``procs`` order); when
    the agent said which memories it followed, only those are candidates.
    A procedure shown only as a conflict was a caution, not guidance, and is never blamed."""
    best: tuple[int, str] | None = None
    said = [p for p in procs if declared and p.id in declared]
    for p in said or procs:  # what the agent said it followed, when it said so (and only that)
        if p.status != "active":
            continue
        hit = procedure_failure_point(p, steps, target)
        if hit is not None and (best is None or len(hit[0]) > best[0]):
            best = (len(hit[0]), p.id)
    return best[1] if best else None


def led_to_failure(item: DeviceItem, steps: list[Step], target: str | None) -> list[Step]:
    """The steps that show this memory led the episode into its failure (empty: it did not)."""
    fail = failing_step(steps)
    if fail is None or item.status not in ("active", "expired"):
        return []  # a memory shown as a conflict was a caution, not guidance
    if isinstance(item, Procedure):
        hit = procedure_failure_point(item, steps, target)
        return hit[0] if hit else []
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


def on_trigger(trigger: dict[str, Any], s: Step) -> bool:
    """Whether a step is the action a failure memory's trigger describes (tool, non-ASCII text, app, page)."""
    tool = trigger.get("tool")
    if tool and s.tool != tool:
        return False
    if trigger.get("input_contains_non_ascii") and not (s.text and not s.text.isascii()):
        return False
    if trigger.get("app") and trigger["app"] not in (s.app_before, s.app_after):
        return False
    return not (trigger.get("page") and trigger["page"] not in (s.page_before, s.page_after))


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
        if s.is_error or not s.has_result or not on_trigger(trig, s):
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


def note_demotion(item: DeviceItem, rule: str, episode_id: str, event_ids: list[str], now: datetime,
                  at_step: int | None = None) -> None:
    """Record on the item what demoted it, so the demotion can be traced and later undone."""
    extra = item.model_extra if item.model_extra is not None else {}
    dem: dict[str, Any] = {"rule": rule, "episode": episode_id, "event_ids": event_ids[:20],
                           "at": now.isoformat().replace("+00:00", "Z"), "success_count": item.success_count}
    if at_step is not None:
        dem["at_step"] = at_step  # the procedure step it failed at (a success past it counts for restoring)
    extra["demotion"] = dem


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
    lift_demotion(item, after_successes=item.success_count - then)
    return True


def lift_demotion(item: DeviceItem, **why: Any) -> None:
    """Make a demoted memory active again, keeping on it what had demoted it and what restored it."""
    item.status = "active"
    extra = item.model_extra if item.model_extra is not None else {}
    dem = extra.pop("demotion", None)
    if isinstance(dem, dict):
        extra["restored"] = {**why, "demoted_by": dem.get("episode")}


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
