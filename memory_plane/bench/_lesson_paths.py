"""`bench lessons`: a path as steps and as tokens, and how close two paths are (normalised LCS)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memory_plane.device_memory import CAPS, Procedure, ProcedureStep
from memory_plane.episodes import Step, coords_close, effective_path, pair_steps, step_action, tool_coords, tool_text

# Words that carry no target: articles, prepositions, pronouns, and verbs that only restate the action
# type (the token's other half). Generic English, not taken from any data set.
_FUNCTION_TEXT = ("a an the on in at to of for and or with from into onto by it its this that these those my your "
                  "me i is are be then there here now please click tap press select choose open go type enter "
                  "swipe scroll long button")
FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())
WORD_MATCH = 0.5  # two target-word sets name the same target at this Jaccard similarity or more
KINDS = {"mouse_click": "tap", "touch_gesture": "tap", "click": "tap", "keyboard_text": "type", "input_text": "type",
         "type_text": "type", "enter_text": "type", "launch_app": "open", "system_button": "button", "back": "button",
         "home": "button"}


# -- paths ----------------------------------------------------------------------------


def episode_path(events: Iterable[dict[str, Any]]) -> list[Step]:
    """An episode's effective path as the extractor takes it: its paired steps without errors, detours cut."""
    return effective_path([s for s in pair_steps(list(events)) if not s.is_error])


def _masked(text: str | None, target: str | None) -> str | None:
    # A variable target (a contact, a shop) masked: two paths that differ only there are one path.
    if text is None:
        return None
    return text.replace(target, "{target}") if target else text


def steps_agree(shown: Sequence[ProcedureStep], shown_target: str | None, path: Sequence[Step],
                path_target: str | None) -> bool:
    """Whether a procedure's steps are an episode's effective path: same tools in order, same action word
    and typed text (the targets masked), taps within the closeness rule (descriptions are narration and
    are not compared). A path longer than the steps cap is compared by its kept tail."""
    cap = CAPS.get("steps")
    tail = list(path)[-cap:] if cap and len(path) > cap else list(path)
    if len(shown) != len(tail):
        return False
    for a, b in zip(shown, tail):
        if a.tool != b.tool or (a.action or None) != (step_action(b) or None):
            return False
        if _masked(a.text, shown_target) != _masked(b.text, path_target):
            return False
        if a.coords != b.coords and not coords_close(a.coords, b.coords):
            return False
    return True


# -- tokens of a path (for closeness) ----------------------------------------------------------


@dataclass(frozen=True)
class Token:
    """One action of a path: its type and the words naming its target (and a tap's point, if any)."""

    kind: str
    words: frozenset[str]
    coords: str | None = None


def _words(text: str | None) -> frozenset[str]:
    if not text:
        return frozenset()
    found = re.findall(r"[a-z0-9]+|[\u3400-\u9fff]", text.lower())
    return frozenset(w for w in found if w not in FUNCTION_WORDS)


def _swipe_direction(coords: str | None) -> str | None:
    m = re.fullmatch(r"x=([-\d.]+),y=([-\d.]+) -> x=([-\d.]+),y=([-\d.]+)", coords or "")
    if not m:
        return None
    x0, y0, x1, y1 = (float(v) for v in m.groups())
    dx, dy = x1 - x0, y1 - y0
    if abs(dy) >= abs(dx):
        return "up" if dy < 0 else "down"
    return "left" if dx < 0 else "right"


def token(tool: str, action: str | None, text: str | None, description: str | None, coords: str | None) -> Token:
    """The (action type, target words) token of one action."""
    kind = KINDS.get(tool, tool)
    if kind == "type":
        return Token(kind, _words(text))
    if kind in ("open", "button"):
        return Token(kind, _words(action or text or tool))
    if kind == "swipe":
        way = action or _swipe_direction(coords)
        return Token(kind, frozenset([way.lower()]) if way else frozenset())
    if kind == "wait":
        return Token(kind, frozenset())
    return Token(kind, _words(description), coords if kind in ("tap", "long_press") else None)


def same_token(a: Token, b: Token) -> bool:
    """Same action type and the same target: target words alike, or (when a side has none) taps close."""
    if a.kind != b.kind:
        return False
    if a.words and b.words:
        return len(a.words & b.words) / len(a.words | b.words) >= WORD_MATCH
    if not a.words and not b.words and not (a.coords and b.coords):
        return True
    return bool(a.coords and b.coords and coords_close(a.coords, b.coords))


def lcs_closeness(a: Sequence[Token], b: Sequence[Token]) -> float | None:
    """Longest common subsequence of two token paths over the longer length (None when both are empty)."""
    if not a and not b:
        return None
    prev = [0] * (len(b) + 1)
    for ta in a:
        cur = [0]
        for j, tb in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if same_token(ta, tb) else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1] / max(len(a), len(b))


def step_words_source(s: ProcedureStep) -> str | None:
    """The text that names a procedure step's target: the recorded narration when the step keeps it apart
    (the same kind of text as the person's instruction), else its description, else the screen's label."""
    narration = getattr(s, "narration", None)
    return (narration if isinstance(narration, str) and narration else None) or s.description or s.target_label


def procedure_tokens(proc: Procedure) -> list[Token]:
    """A procedure's steps as tokens."""
    return steps_tokens(proc.steps)


def steps_tokens(steps: Iterable[ProcedureStep]) -> list[Token]:
    """Procedure steps as tokens."""
    return [token(s.tool, s.action, s.text, step_words_source(s), s.coords) for s in steps]


def action_tokens(actions: list[dict[str, Any]]) -> list[Token]:
    """A source episode's mapped actions as tokens (what the person did)."""
    out = []
    for a in actions:
        ti = a["input"]
        action = next((str(ti[k]) for k in ("button", "direction", "app") if isinstance(ti.get(k), str)), None)
        out.append(token(a["tool"], action, tool_text(ti), a["description"], tool_coords(ti)))
    return out


def shown_steps(proc: Procedure, goal: str) -> list[ProcedureStep]:
    """The steps a procedure shows for a goal: its goal-filled steps (``steps_for_goal``) when it can fill
    them, else its steps."""
    fill = getattr(proc, "steps_for_goal", None)
    steps = fill(goal) if callable(fill) else proc.steps
    return [s if isinstance(s, ProcedureStep) else ProcedureStep.model_validate(s) for s in steps]
