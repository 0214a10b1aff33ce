"""Which values of an episode's path came from its goal (its slots), and the path seen with them masked.

A value is a slot when the goal holds it: text the episode typed that the goal contains (or the goal's
parsed target), and a tapped label the goal holds ("Follow the podcast Code Stories" taps ``Code Stories``),
or that is the target or a typed value. A label the goal holds that is part of the way is no value: the app's
name, a commit, a field typed into, the page the tap leads to (``Settings`` in "turn on dark mode in
Settings"), the verb a part of the goal starts with ("Add" in "Add a new entry"). A label that holds a value
(``Hotel Quito Centre`` after typing Quito) is that value's slot, its other words kept. With its slots
masked, two episodes of one task with different values have one path and one goal pattern: one procedure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from memory_plane.device_memory import (
    mask_values,
    normalize,
    occurs,
    occurs_inflected,
    role_of,
    slot_names,
    starts_clause,
)

from ._model import TaskEpisode
from ._path_agreement import TARGET_MASK, PathStep, of_procedure_step, of_step
from ._steps import Step, is_commit_label, is_typing, screen_label

MESSAGING_INTENTS = frozenset({"send_message", "call", "open_contact_chat"})
"""Intents whose goal names a recipient: there ``to X`` (``给X``) makes X a contact."""
_SEPARATORS = (":", "：")  # a "name: value" label (``Mood: Calm``, ``心情：平静``)


def _typed_value(text: str | None, goal: str, target: str | None, apps: set[str]) -> bool:
    if text is None or not text.strip():
        return False
    n = normalize(text)
    if len(n) < 2 and not n.isdigit():
        return False  # one letter in the goal is a word of it, not a value
    if n in apps:
        return False  # the app's name typed into a launcher's search opens the app: part of the way
    return occurs_inflected(text, goal) or bool(target and normalize(target) == n)


def _label_value(label: str, goal: str) -> str | None:
    """The part of a tapped label the goal holds: the whole label, else what follows a ``name: value``
    separator (the goal says "mood Calm", the screen "Mood: Calm")."""
    if occurs(label, goal):
        return label
    for sep in _SEPARATORS:
        if sep in label:
            tail = label.rsplit(sep, 1)[1].strip()
            if tail and occurs(tail, goal):
                return tail
    return None


def _of_the_way(s: Step, after: Step | None, value: str, goal: str, apps: set[str], messaging: bool) -> bool:
    """Whether a tapped label the goal holds is part of the way rather than a value the goal gives: the app's
    name, a commit (Save, Send, 发送), a field the next step types into on the same page (``To``, ``Subject``),
    the name of the page the tap leads to (``Settings``), or the verb a part of the goal starts with ("Add")."""
    n = normalize(value)
    if n in apps or is_commit_label(value):
        return True
    if not s.changed_page and after is not None and is_typing(after) and (
            after.text is None or normalize(after.text) != n):
        return True  # a field focused on its page, then typed into
    if s.changed_page and s.page_after and normalize(s.page_after) == n \
            and role_of(goal, value, messaging=messaging) is None:
        return True
    return starts_clause(goal, value)


def step_slots(steps: list[Step], goal: str, target: str | None, intent: str | None = None) -> dict[str, str]:
    """Each step value that came from the goal, with its slot name: typed text the goal holds (or the parsed
    target), and a tapped label (or its value part) that the goal holds, is the target or a typed value, unless
    it is part of the way (``_of_the_way``). The app's own name is never a value."""
    apps = {normalize(a) for s in steps for a in (s.app_before, s.app_after) if a}
    messaging = intent in MESSAGING_INTENTS
    typed = [s.text for s in steps if s.text is not None and _typed_value(s.text, goal, target, apps)]
    typed_norms = {normalize(t) for t in typed}
    values: list[str] = []
    for i, s in enumerate(steps):
        if s.text is not None and s.text in typed:
            values.append(s.text)
            continue
        label = screen_label(s)
        if not label:
            continue
        n = normalize(label)
        if n in apps:
            continue
        if (target and normalize(target) == n) or n in typed_norms:
            values.append(label)
            continue
        part = _label_value(label, goal)
        if part is not None and not _of_the_way(s, steps[i + 1] if i + 1 < len(steps) else None, part, goal,
                                                apps, messaging):
            values.append(part)
    return slot_names(goal, values, target, messaging=messaging)


def _held(text: str | None, slots: Mapping[str, str]) -> str | None:
    """The slot value a text is, else the longest one it holds word for word (``Hotel Quito Centre``)."""
    if not text:
        return None
    if text in slots:
        return text
    n = normalize(text)
    for v in sorted(slots, key=lambda v: -len(v)):
        if normalize(v) == n or occurs(v, text):
            return v
    return None


def slot_of(s: Step, slots: Mapping[str, str]) -> str | None:
    """The slot a step's typed text, else its label, is or holds."""
    v = _held(s.text, slots) if s.text is not None else None
    if v is None:
        v = _held(screen_label(s), slots)
    return slots[v] if v is not None else None


def _masked(text: str | None, values: list[str]) -> str | None:
    # A text that is a value is the mask; one that holds a value keeps its own words around the mask.
    if text is None or not values:
        return text
    norms = {normalize(v) for v in values}
    if normalize(text) in norms:
        return TARGET_MASK
    if any(occurs(v, text) for v in values):
        return " ".join(mask_values(text, values, TARGET_MASK).split())
    return None


def episode_view(s: Step, target: str | None, slots: Mapping[str, str]) -> PathStep:
    """The comparable view of an episode step, its target and its slot values masked."""
    view = of_step(s, target)
    values = list(slots)
    text = _masked(s.text, values) if s.text is not None else None
    label = _masked(s.target_label, values) if s.target_label else None
    return replace(view, text=text or view.text, label=label or view.label)


def procedure_view(st: Any, proc: Any) -> PathStep:
    """The comparable view of a stored procedure step, its target and its slot masked."""
    view = of_procedure_step(st, proc.steps_target)
    slots = getattr(proc, "slots", None) or {}
    if not slots.get(getattr(st, "slot", None) or ""):
        return view
    values = list(slots.values())
    text = _masked(st.text, values) if st.text is not None else None
    label = _masked(st.target_label, values) if st.target_label else None
    return replace(view, text=text or view.text, label=label or view.label)


def identity_pattern(ep: TaskEpisode, values: list[str], pattern_of: Any) -> str:
    """The goal pattern with the slot values masked (``pattern_of`` the goal pattern rule), so the same
    task with other values has the same pattern."""
    if not values:
        return str(pattern_of(ep))
    return str(pattern_of(ep.model_copy(update={"user_goal": mask_values(ep.user_goal, values)})))


def pattern_matcher(key: str, pattern: str) -> re.Pattern[str] | None:
    """A matcher of goal patterns that are ``key`` with other values where its masks stand (None when the key
    masks nothing of the pattern)."""
    if key == pattern or "…" not in key:
        return None
    return re.compile(".+?".join(re.escape(part) for part in key.split("…")))
