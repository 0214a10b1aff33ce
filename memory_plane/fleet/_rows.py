"""The rows a phone exports: one per episode, one per device lesson, one per tombstone; and the fleet lesson key."""

from __future__ import annotations

import json
import re
from typing import Any

from memory_plane.device_memory import DeviceItem, DeviceMemory, Failure, Navigation, Procedure, slot_mark
from memory_plane.episodes import REDACTED, TaskEpisode, TaskEpisodeStore, goal_pattern
from memory_plane.lifecycle import content_hash, format_ts

FORGOTTEN_MARK = "[forgotten]"
"""What a forget leaves where the forgotten text stood (the scrub's mark): such a text is never exported."""

FLEET_TYPES = ("app_profile", "procedure", "navigation", "failure", "ui_anchor")
"""The lessons a phone shares: calibration and the device profile describe one phone only and stay on it."""

_SCREEN = re.compile(r"^\s*(\d{2,5})\s*[x×*]\s*(\d{2,5})\s*$")


def screen_class(screen: Any) -> str | None:
    """A screen's class from its ``WxH``: ``compact`` (narrower than 720 px), ``medium`` (to 1200), ``expanded``;
    two phones of one class lay an app out alike, so a lesson of one holds on the other."""
    m = _SCREEN.match(str(screen)) if screen else None
    if not m:
        return None
    width = min(int(m.group(1)), int(m.group(2)))
    return "compact" if width < 720 else "medium" if width <= 1200 else "expanded"


def _step_shape(step: Any) -> list[Any]:
    # Coordinates differ between screens and the goal's values between goals: the step is its tool, action and
    # target, the value a slot holds (its text, else its label) as the slot's mark.
    label, text = step.target_label or step.description, step.text
    if step.slot:
        text, label = (slot_mark(step.slot), label) if text else (None, slot_mark(step.slot))
    return [step.tool, step.action, label, text]


def fleet_key(item: DeviceItem) -> str:
    """What makes two devices' lessons the same lesson, whatever their device ids: the lesson's type, app and
    the content that says what it teaches (a procedure's goal group and path, a transition, a failure's cause)."""
    if isinstance(item, Procedure):
        core: Any = [item.goal_pattern, [_step_shape(s) for s in item.steps]]
    elif isinstance(item, Navigation):
        core = [item.from_app, item.from_page, item.to_app, item.to_page, item.tool, item.action, item.label]
    elif isinstance(item, Failure):
        cause = {k: v for k, v in (item.cause or {}).items() if k != "device_id"}
        core = [cause or item.failure_mode, item.failure_phase if not cause else None]
    else:
        core = [item.page_name, getattr(item, "label", None)]
    return "fk_" + content_hash(item.type, item.app_id, json.dumps(core, ensure_ascii=False, sort_keys=True,
                                                                     default=str), length=24)


PERSONAL_MARK = "…"
"""What stands in a shared lesson where a value of the user's own tasks stood (a contact, a shop, a typed text)."""
_KEPT = frozenset({"id", "type", "app_id", "device_id", "lesson_key", "status", "ttl", "applicability"})


def personal_values(device: DeviceMemory, episodes: TaskEpisodeStore | None = None) -> frozenset[str]:
    """The values of the user's own tasks a tree holds: the goals' targets and entities, the procedures' slot values
    and targets (two characters or more: a shorter one would mask inside other words)."""
    found: set[str] = set()
    if episodes is not None:
        for read in episodes.iter_items():
            ep = read.record
            if isinstance(ep, TaskEpisode):
                found.update([ep.normalized_goal.target or "", *ep.entities])
    for read in device.collection("procedure").iter_items():
        p = read.record
        if isinstance(p, Procedure):
            found.update([*p.targets, *p.slots.values(), p.steps_target or ""])
    return frozenset(v.strip() for v in found if len(v.strip()) >= 2)


def mask(text: str, personal: frozenset[str]) -> str:
    """A text with every value of the user's tasks as ``…``."""
    return _swap(text, {v: PERSONAL_MARK for v in personal})  # type: ignore[no-any-return]


def shareable(item: DeviceItem, personal: frozenset[str]) -> DeviceItem:
    """The lesson as another phone may see it: a procedure's goal values as its slots' marks (``{name}``), every
    other value of the user's tasks as ``…`` (a page named after a contact is the same page for every contact)."""
    data = item.to_yaml_dict()
    if isinstance(item, Procedure):
        data.update(_slotted(item))
    swap = {v: PERSONAL_MARK for v in personal}
    data = {k: (v if k in _KEPT else _swap(v, swap)) for k, v in data.items()}
    return type(item).model_validate(data)


def _unsafe(text: str) -> bool:
    return REDACTED in text or FORGOTTEN_MARK in text


def _clean(value: Any) -> Any:
    """A value with every redacted or forgotten text taken out (the string becomes the redaction mark)."""
    if isinstance(value, str):
        return REDACTED if _unsafe(value) else value
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


_PERSONAL = ("goal_examples", "targets", "steps_target", "entities", "goals", "reasons", "summary",
             "pages_seen", "known_entries")
"""Fields that hold what the user asked (names, messages): exported only with ``include_text``."""


def item_row_body(item: DeviceItem, shared: DeviceItem, *, include_text: bool) -> dict[str, Any]:
    """The item as its YAML file holds it, with redacted and forgotten text out; without ``include_text`` as
    ``shared`` (its ``shareable`` form) without the fields that hold the user's own words."""
    if include_text:
        return _clean(item.to_yaml_dict())  # type: ignore[no-any-return]
    data = shared.to_yaml_dict()
    for key in _PERSONAL:
        data.pop(key, None)
    if isinstance(shared, Procedure):
        data["goal_examples"] = shared.goal_examples  # their values are slot marks now
    data.pop("evidence_refs", None)  # episode ids of this phone: they say nothing to another one
    return _clean(data)  # type: ignore[no-any-return]


def _swap(value: Any, swap: dict[str, str]) -> Any:
    if isinstance(value, str):
        for old in sorted(swap, key=len, reverse=True):
            value = value.replace(old, swap[old])
        return value
    if isinstance(value, dict):
        return {k: _swap(v, swap) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, swap) for v in value]
    return value


def _slotted(proc: Procedure) -> dict[str, Any]:
    """A procedure's goal examples, slots, steps and title with the goal's values as their slot's mark
    (``{name}``): another phone fills the marks from its own goal, and no name or message leaves the phone."""
    examples = []
    for example in proc.goal_examples:
        values = {v: slot_mark(n) for n, v in proc.slot_values(example).items() if v and v != slot_mark(n)}
        examples.append(_swap(example, values))
    swap = {v: slot_mark(n) for n, v in proc.slots.items() if v}
    steps = [_swap(s.model_dump(mode="json", exclude_none=True), swap) for s in proc.steps]
    return {"goal_examples": examples, "slots": {n: slot_mark(n) for n in proc.slots}, "steps": steps,
            "title": _swap(proc.title, swap) if proc.title else None}


def lesson_row(item: DeviceItem, device: str, export_id: str, *, personal: frozenset[str],
               include_text: bool) -> dict[str, Any]:
    """One device lesson as a row of the ``lessons`` table (``personal``: the tree's ``personal_values``)."""
    appl = item.applicability or {}
    extra = item.model_extra or {}
    shared = shareable(item, personal)
    return {
        "id": item.id, "device": device, "export_id": export_id, "type": item.type, "app": item.app_id,
        "lesson_key": fleet_key(shared), "status": item.status, "verified": extra.get("verified") is not False,
        "source": str(extra.get("source") or "device"),
        "confidence": round(float(item.confidence), 3), "success_count": item.success_count,
        "failure_count": item.failure_count, "evidence_count": max(item.evidence_count, len(item.evidence_refs)),
        "language": str(appl["language"]) if appl.get("language") else None,
        "app_version": str(appl["app_version"]) if appl.get("app_version") else None,
        "screen_class": screen_class(appl.get("screen")), "screen": str(appl["screen"]) if appl.get("screen") else None,
        "applicability": {k: v for k, v in appl.items() if k != "device_id"},
        "item": item_row_body(item, shared, include_text=include_text),
    }


def _outcome(ep: TaskEpisode) -> str:
    if ep.status == "interrupted" or ep.outcome.failure_phase == "interrupted":
        return "interrupted"
    return "success" if ep.outcome.success else "failure"


def episode_row(ep: TaskEpisode, device: str, export_id: str, *, followed: bool, cause: str | None,
                include_text: bool) -> dict[str, Any]:
    """One episode as a row of the ``episodes`` table (``followed``: it followed a memory it was shown;
    ``cause``: the failure mode it met, as the fleet names it)."""
    started = ep.started_at if not isinstance(ep.started_at, str) else None
    row: dict[str, Any] = {
        "episode_id": ep.id, "device": device, "export_id": export_id,
        "started_at": format_ts(started) if started else None,
        "ended_at": format_ts(ep.ended_at) if ep.ended_at and not isinstance(ep.ended_at, str) else None,
        "date": started.strftime("%Y-%m-%d") if started else "unknown",
        "app": ep.app(), "intent": ep.normalized_goal.intent,
        "goal_key": "gk_" + content_hash(goal_pattern(ep), length=16),
        "outcome": _outcome(ep), "failure_phase": ep.outcome.failure_phase, "failure_cause": cause,
        "steps": int(ep.metrics.tool_steps), "language": ep.device_scope.language, "screen": ep.device_scope.screen,
        "memory_shown": bool(ep.retrieved_memory_refs), "memory_followed": followed,
        "lessons_written": len(ep.reusable_lessons),
    }
    if include_text and not _unsafe(ep.user_goal):
        row["goal"] = ep.user_goal
    return row
