"""Query-side variants of a task set's goals: typos, inflections, and the app's name left out.

The held-out sets the retrieval is judged on have goals written by other people: typos, other word forms, and
goals that do not name their app. These variants make such goals from the shared ones, deterministically
(one seed per set and variant), so that ours and FTS5 are asked the same altered text while the device keeps
the original goals it recorded.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

VARIANTS = ("typo", "inflection", "no_app_name")


def typo(goal: str, rng: random.Random) -> str:
    """About one Latin word in three of five letters or more gets one edit: a letter dropped, swapped or doubled."""
    def edit(word: str) -> str:
        if len(word) < 5 or not (word.isascii() and word.isalpha()) or rng.random() >= 1 / 3:
            return word
        i = rng.randrange(1, len(word) - 1)
        kind = rng.randrange(3)
        if kind == 0:
            return word[:i] + word[i + 1:]
        if kind == 1:
            return word[:i] + word[i + 1] + word[i] + word[i + 2:]
        return word[:i] + word[i] + word[i:]
    return " ".join(map(edit, goal.split(" ")))


def inflection(goal: str, rng: random.Random) -> str:
    """About half the Latin words of four letters or more change form (-ing to -s, a plural to its singular,
    -e to -ed, else -s added)."""
    def change(word: str) -> str:
        if len(word) < 4 or not (word.isascii() and word.isalpha()) or rng.random() >= 0.5:
            return word
        low = word.lower()
        if low.endswith("ing"):
            return word[:-3] + "s"
        if low.endswith("s"):
            return word[:-1]
        return word + ("d" if low.endswith("e") else "s")
    return " ".join(map(change, goal.split(" ")))


def no_app_name(goal: str, app: str) -> str:
    """The goal without the words of its app's name (the goal itself when nothing else is left)."""
    out = goal
    for word in sorted((w for w in app.split() if w), key=len, reverse=True):
        out = re.sub(re.escape(word), "", out, flags=re.IGNORECASE)
    out = " ".join(out.split())
    return out or goal


def variant_goals(goals: list[str], apps: list[str], variant: str, seed: int = 7) -> list[str]:
    """Each goal as the variant asks it (the same text for the same goals, variant and seed)."""
    rng = random.Random(f"{variant}:{seed}")
    edits: dict[str, Callable[[str, str], str]] = {
        "typo": lambda g, _: typo(g, rng), "inflection": lambda g, _: inflection(g, rng), "no_app_name": no_app_name}
    if variant not in edits:
        raise ValueError(f"unknown variant {variant!r} (one of {', '.join(VARIANTS)})")
    return [edits[variant](g, a) for g, a in zip(goals, apps)]
