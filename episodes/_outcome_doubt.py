"""Outcome doubt: whether a success the runtime reported shows that the task was done.

A runtime may say "success" for a task a person would judge failed. A procedure taught by such a claim would
lead the next task down a path nobody saw finish. So a reported success counts as evidence of completion only
when the episode shows one of:

- a verifier decision that the observation proves completion (``verifier_decision`` with ``can_finish``);
- a completion reason (the runtime's own account of why it stopped, ``outcome.completion_reason``);
- a change the goal asked for, visible after the last action: the goal's target (``normalized_goal.target``),
  a quoted value of the goal or a value of it the agent typed, found in what the last observation showed
  (its visible text, elements, page, title), that the screen before the path's work did not show, and that
  is more than the echo of the agent's own typing (text it typed on the page the task still is on). The
  goal's app stands for its target only when the goal asks to open it.

A value on the screen from the start proves nothing, and neither does a field holding what the agent typed
into it: a run that typed the values and stopped before Save shows both.

Without any, the procedure it teaches is **unverified** (``verified: false`` on the item, the reason beside it)
at a lower confidence, and is shown as unverified; a second episode that renews the same procedure (the same
goal group, the same path), or one with evidence, makes it verified.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_plane.device_memory import DeviceItem

from ._lesson_context import LessonContext
from ._store import TaskEpisodeStore

UNVERIFIED_CONFIDENCE = 0.45
"""The confidence of a procedure taught by a success without evidence (a verified one starts at 0.75)."""
VERIFIED_CONFIDENCE = 0.75
"""The confidence a procedure gets back, at least, when a second episode or a verifier confirms it."""

# Paired quotation marks of the scripts goals come in (ASCII, typographic, CJK corner and title brackets,
# guillemets): what a goal quotes is a value the screen should show.
_QUOTED = re.compile(r'"([^"]{1,80})"|“([^”]{1,80})”|‘([^’]{1,80})’|「([^」]{1,80})」|『([^』]{1,80})』'
                     r"|《([^》]{1,80})》|«([^»]{1,80})»|(?<![\w])'([^']{1,80})'(?![\w])")
_OPEN = "open_app"  # the intent of a goal that asks only for an app to be opened
_SCREEN_CHARS = 20_000  # what is read of one observation (a huge element dump costs no more than this)


@dataclass(frozen=True)
class OutcomeEvidence:
    """Whether an episode's reported success shows completion, and why (the event it rests on, when one)."""

    evidenced: bool
    why: str
    event_id: str | None = None


def goal_targets(lesson: LessonContext) -> list[str]:
    """What the goal says the end screen should show: its target, the values it quotes and the values of it the
    agent typed (its app when it asks for nothing but opening it)."""
    ep = lesson.ep
    out = [m for g in _QUOTED.findall(ep.user_goal or "") for m in g if m.strip()]
    if ep.normalized_goal.target:
        out.insert(0, ep.normalized_goal.target)
    # What the agent typed that the goal gave (a title, a name, a message): the goal's own values.
    goal = _norm(ep.user_goal or "")
    out += [s.text for s in lesson.steps if s.text and len(_norm(s.text)) >= 2 and _norm(s.text) in goal]
    if not out and ep.normalized_goal.app and ep.normalized_goal.intent == _OPEN:
        out.append(ep.normalized_goal.app)
    return list(dict.fromkeys(_norm(t) for t in out if _norm(t)))


def _norm(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def _strings(value: Any, budget: list[int]) -> Iterable[str]:
    """Every text an observation holds, wherever its runtime put it (bounded)."""
    if budget[0] <= 0:
        return
    if isinstance(value, str):
        budget[0] -= len(value)
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v, budget)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v, budget)


def _screen_text(obs: Mapping[str, Any]) -> str:
    return _norm(" \n ".join(_strings(obs, [_SCREEN_CHARS])))


def last_screen(lesson: LessonContext) -> tuple[str, str | None] | None:
    """The text of the last observation the episode recorded (visible text, elements, page, app), and the
    event it came from; None when no step observed the screen."""
    for s in reversed(lesson.steps):
        obs = s.extra.get("observed")
        if isinstance(obs, Mapping) and obs:
            return _screen_text(obs), s.result_event
        if s.app_after or s.page_after:
            return _norm(f"{s.app_after or ''} {s.page_after or ''}"), s.result_event
    return None


def _events(lesson: LessonContext) -> Sequence[Mapping[str, Any]]:
    if lesson.events is not None:
        return lesson.events  # the extractor's read
    store = TaskEpisodeStore(lesson.device.root, clock=lesson.device.clock)
    try:
        return list(store.events(lesson.ep.id).records)
    except (OSError, ValueError):
        return []


def _first_screen(events: Sequence[Mapping[str, Any]]) -> str:
    """The text of the screen before the path's work: the first observation, before any action's result."""
    for ev in events:
        obs = ev.get("observed_state")
        if isinstance(obs, Mapping) and obs:
            return _screen_text(obs)
        if ev.get("type") == "tool_call":
            return ""  # the first action came before any observation
    return ""


def _verifier(events: Sequence[Mapping[str, Any]]) -> str | None:
    """The id of the last verifier decision that the observation proves completion."""
    found = None
    for ev in events:
        if ev.get("type") == "verifier_decision":
            found = str(ev.get("event_id") or "verifier_decision") if ev.get("can_finish") else None
    return found


def _typed_here(target: str, lesson: LessonContext) -> bool:
    """Whether the target is on the last screen only as the agent's own typing: it typed it, and the page never
    changed after (the field still holds it; nothing the typing was for has happened yet)."""
    steps = lesson.steps
    for k in range(len(steps) - 1, -1, -1):
        typed = steps[k].text
        if typed and target in _norm(typed):
            return not any(s.changed_page for s in steps[k + 1:])
    return False


def judge_outcome(lesson: LessonContext) -> OutcomeEvidence:
    """Whether the episode's reported success shows completion (see the module's rules)."""
    o = lesson.ep.outcome
    if o.completion_reason and o.completion_reason.strip():
        return OutcomeEvidence(True, f"completion reason: {' '.join(o.completion_reason.split())[:120]}")
    events = _events(lesson)
    targets = goal_targets(lesson)
    screen = last_screen(lesson)
    if screen is not None and targets:
        text, event = screen
        before = _first_screen(events)
        seen = next((t for t in targets if t in text and t not in before and not _typed_here(t, lesson)), None)
        if seen is not None:
            return OutcomeEvidence(True, f"the last screen shows {seen!r}", event)
    verifier = _verifier(events)
    if verifier is not None:
        return OutcomeEvidence(True, "a verifier decided the observation proves completion", verifier)
    shown = ", ".join(repr(t) for t in targets[:3]) or "the goal's target"
    where = "the last screen shows no change to" if screen is not None else "no screen was observed to show"
    return OutcomeEvidence(False, f"reported success without a verifier or a completion reason, and {where} "
                                  f"{shown}")


def mark_new(item: DeviceItem, lesson: LessonContext) -> None:
    """A procedure just taught: unverified, at a lower confidence, when its success showed no completion."""
    evidence = judge_outcome(lesson)
    if evidence.evidenced:
        return
    extra = item.model_extra if item.model_extra is not None else {}
    extra["verified"] = False
    extra["unverified_reason"] = evidence.why
    item.confidence = min(item.confidence, UNVERIFIED_CONFIDENCE)


def confirm(item: DeviceItem, lesson: LessonContext) -> None:
    """A procedure renewed by another episode: an unverified one is verified now (a second agreeing episode, or
    one with evidence), and says by what."""
    extra = item.model_extra if item.model_extra is not None else {}
    if extra.get("verified") is not False:
        return
    evidence = judge_outcome(lesson)
    extra.pop("verified", None)
    extra.pop("unverified_reason", None)
    how = evidence.why if evidence.evidenced else "a second episode of the same goal took the same path"
    extra["verified_by"] = {"episode": lesson.ep.id, "how": how[:200]}
    item.confidence = max(item.confidence, VERIFIED_CONFIDENCE)


def is_unverified(item: DeviceItem) -> bool:
    """Whether a memory was taught by a success nothing confirmed yet."""
    return (item.model_extra or {}).get("verified") is False
