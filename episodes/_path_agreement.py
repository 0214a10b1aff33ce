"""When two paths are the same path: an episode's steps against a procedure's, step by step.

A procedure holds one path, the effective path of the episodes that are its evidence. Two episodes renew
the same procedure only when their paths agree: the same tools in the same order, the same typed text and
labels once each episode's own target is masked (any contact, any shop), taps within the closeness rule.
The same comparison tells whether a failed episode followed a procedure into its failure, and whether a
later success used it again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_plane.lifecycle import content_hash

from ._steps import Step, coords_close, is_system_screen, screen_label, step_action

TARGET_MASK = "{target}"
LAUNCH_WORDS = ("launch", "open_app", "start_app")
"""Words of a tool that opens an app (a step that only enters it)."""


@dataclass(frozen=True)
class PathStep:
    """The comparable part of one step: tool, action word, tap position, typed text and label (masked)."""

    tool: str
    action: str | None = None
    coords: str | None = None
    text: str | None = None
    label: str | None = None


def mask(value: str | None, target: str | None) -> str | None:
    """A text with the episode's own target replaced by a placeholder (one path over any contact)."""
    if value is None:
        return None
    value = " ".join(value.split())
    if target and target.strip() and target.strip() in value:
        return value.replace(target.strip(), TARGET_MASK)
    return value


def of_step(s: Step, target: str | None) -> PathStep:
    """The comparable view of an episode step, its target masked."""
    return PathStep(tool=s.tool, action=step_action(s), coords=s.coords, text=mask(s.text, target),
                    label=mask(s.target_label, target))


def of_procedure_step(s: Any, target: str | None) -> PathStep:
    """The comparable view of a stored procedure step, masked with the target its steps were recorded for."""
    return PathStep(tool=str(s.tool), action=s.action, coords=s.coords, text=mask(s.text, target),
                    label=mask(s.target_label, target))


def steps_agree(a: PathStep, b: PathStep) -> bool:
    """Whether two steps are the same action: same tool and, where both say, the same action word, text,
    label and tap position (within the closeness rule)."""
    if a.tool != b.tool:
        return False
    if a.action and b.action and a.action.lower() != b.action.lower():
        return False
    if (a.text is None) != (b.text is None) or (a.text is not None and a.text != b.text):
        return False
    if a.label and b.label and a.label != b.label:
        return False
    if a.label == b.label == TARGET_MASK:
        return True  # the target itself: its place in a list moves with the target, its label does not
    if a.coords and b.coords:
        if ("->" in a.coords) != ("->" in b.coords):
            return False
        if "->" in a.coords:
            return _swipes_close(a.coords, b.coords)
        return coords_close(a.coords, b.coords)
    return (a.coords is None) == (b.coords is None) or bool(a.label and b.label)


def _swipes_close(a: str, b: str) -> bool:
    a0, _, a1 = a.partition("->")
    b0, _, b1 = b.partition("->")
    return coords_close(a0.strip(), b0.strip(), 96.0) and coords_close(a1.strip(), b1.strip(), 96.0)


def fills_slot(step: PathStep, slot: PathStep) -> bool:
    """Whether an episode step is a procedure step whose value is a slot (masked on the procedure's side), done
    with this episode's own value: the same tool and action, any typed text where the procedure types its slot,
    any label where it taps its slot (a value's place in a list moves with the value)."""
    if step.tool != slot.tool or TARGET_MASK not in (slot.text, slot.label):
        return False
    if step.action and slot.action and step.action.lower() != slot.action.lower():
        return False
    if slot.text == TARGET_MASK:
        return step.text is not None
    return bool(step.label) and (slot.text is None) == (step.text is None)


def paths_agree(a: Sequence[PathStep], b: Sequence[PathStep]) -> bool:
    """Whether two paths are the same path: equally long, every step the same action."""
    return len(a) == len(b) and all(steps_agree(x, y) for x, y in zip(a, b))


def informative(p: PathStep) -> bool:
    """Whether a step names what it acted on (a label or typed text): only such steps show that two paths agree;
    an unlabelled tap agrees with any tap near it, whatever it was for."""
    return bool(p.label or p.text)


def names_its_target(s: Step) -> bool:
    """Whether an episode step names what it acted on: typed text, or a label the screen showed there."""
    return bool(s.text or screen_label(s))


def entry_length(steps: Sequence[Any]) -> int:
    """How many leading steps of a stored path only enter its app: a launch, and the steps taken before any app
    was on screen (no app, or a system screen such as the launcher). Sharing them says nothing about the task."""
    named = any(getattr(s, "app_name", None) for s in steps)
    n = 0
    for s in steps:
        app = getattr(s, "app_name", None)
        launch = any(w in str(s.tool).lower() for w in LAUNCH_WORDS)
        outside = named and (not app or is_system_screen(app))
        if not (launch or outside):
            break
        n += 1
    return n


def path_key(path: Sequence[PathStep]) -> str:
    """A short content key of a path (tools, actions, texts and labels; taps to a coarse grid)."""
    parts = []
    for p in path:
        coords: tuple[int, int] | str | None = None
        if p.coords and "->" not in p.coords:
            try:
                xs, ys = p.coords.split(",")
                # A coarse grid: a tap a few pixels off gives the same key more often than not; the
                # closeness rule (paths_agree) decides the rest.
                coords = (round(float(xs.split("=")[1]) / 96), round(float(ys.split("=")[1]) / 96))
            except (ValueError, IndexError):
                coords = None
        elif p.coords:
            coords = "swipe"
        parts.append([p.tool, (p.action or "").lower(), p.text, p.label, coords])
    return content_hash(json.dumps(parts, ensure_ascii=False))


def followed(proc_path: Sequence[PathStep], steps: Sequence[Step], target: str | None,
             pages: Sequence[str | None] | None = None) -> list[tuple[int, int]]:
    """The procedure steps the episode executed, in order: (episode step index, procedure step index)
    pairs. Procedure steps may be skipped (a screen that did not appear this time, an app opened another
    way), never reordered. A slot's step done with another value counts only on the page the procedure does
    it on, when ``pages`` (the procedure steps' pages) says it (typing an app's name into the phone's search
    is not typing the city into the app's form)."""
    out: list[tuple[int, int]] = []
    j = 0

    def slot_here(s: Step, view: PathStep, k: int) -> bool:
        if not fills_slot(view, proc_path[k]):
            return False
        page = pages[k] if pages is not None and k < len(pages) else None
        return not page or not s.page_before or page == s.page_before

    for i, s in enumerate(steps):
        view = of_step(s, target)
        k = next((k for k in range(j, len(proc_path))
                  if steps_agree(view, proc_path[k]) or slot_here(s, view, k)), None)
        if k is not None:
            out.append((i, k))
            j = k + 1
    return out
