"""Which values of an episode's path came from its goal (its slots), and the path seen with them masked.

A value is a slot when the goal holds it: text the episode typed that the goal contains (or the goal's
parsed target), and a tapped label that is the target, a typed value, or stands in the goal in a role
(quoted, after ``named``/``给``/``search`` ...). A label the goal merely mentions (``Settings`` in "turn on
dark mode in Settings") is part of the way, not a value. With its slots masked, two episodes of one task
with different values have one path and one goal pattern: they are one procedure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from memory_plane.device_memory import mask_values, normalize, occurs, role_of, slot_names

from ._model import TaskEpisode
from ._path_agreement import TARGET_MASK, PathStep, of_procedure_step, of_step
from ._steps import Step, screen_label


def _typed_value(text: str | None, goal: str, target: str | None) -> bool:
    if text is None or not text.strip():
        return False
    n = normalize(text)
    if len(n) < 2 and not n.isdigit():
        return False  # one letter in the goal is a word of it, not a value
    return occurs(text, goal) or bool(target and normalize(target) == n)


def step_slots(steps: list[Step], goal: str, target: str | None) -> dict[str, str]:
    """Each step value (typed text, tapped label) that came from the goal, with its slot name."""
    typed = [s.text for s in steps if s.text is not None and _typed_value(s.text, goal, target)]
    typed_norms = {normalize(t) for t in typed}
    values: list[str] = []
    for s in steps:
        if s.text is not None and s.text in typed:
            values.append(s.text)
            continue
        label = screen_label(s)
        if not label:
            continue
        n = normalize(label)
        if (target and normalize(target) == n) or n in typed_norms or (
                occurs(label, goal) and role_of(goal, label) is not None):
            values.append(label)
    return slot_names(goal, values, target)


def slot_of(s: Step, slots: Mapping[str, str]) -> str | None:
    """The slot a step's typed text, else its label, is."""
    if s.text is not None and s.text in slots:
        return slots[s.text]
    label = screen_label(s)
    return slots.get(label) if label else None


def episode_view(s: Step, target: str | None, slots: Mapping[str, str]) -> PathStep:
    """The comparable view of an episode step, its target and its slot values masked."""
    view = of_step(s, target)
    norms = {normalize(v) for v in slots}
    text = TARGET_MASK if s.text is not None and normalize(s.text) in norms else view.text
    label = TARGET_MASK if s.target_label and normalize(s.target_label) in norms else view.label
    return replace(view, text=text, label=label)


def procedure_view(st: Any, proc: Any) -> PathStep:
    """The comparable view of a stored procedure step, its target and its slot masked."""
    view = of_procedure_step(st, proc.steps_target)
    value = (getattr(proc, "slots", None) or {}).get(getattr(st, "slot", None) or "")
    if not value:
        return view
    n = normalize(value)
    if st.text is not None and normalize(st.text) == n:
        return replace(view, text=TARGET_MASK)
    if st.target_label and normalize(st.target_label) == n:
        return replace(view, label=TARGET_MASK)
    return view


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
