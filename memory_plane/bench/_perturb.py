"""Query-side variants of a task set's goals: typos, inflections, and the app's name left out.

The held-out sets the retrieval is judged on have goals written by other people: typos, other word forms, and
goals that do not name their app. These variants make such goals from the shared ones, deterministically
(a seed per variant, a fresh generator for each set), so that ours and FTS5 are asked the same altered text
while the device keeps the original goals it recorded. Typos and word forms touch Latin words only: on the
Chinese sets those two variants ask the original goals.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

VARIANTS = ("typo", "inflection", "no_app_name")


_LATIN_WORD = re.compile(r"[A-Za-z]+")


def typo(goal: str, rng: random.Random) -> str:
    """About one Latin word in three of five letters or more gets one edit: a letter dropped, swapped or doubled."""
    def edit(m: re.Match[str]) -> str:
        word = m.group()
        if len(word) < 5 or rng.random() >= 1 / 3:
            return word
        i = rng.randrange(1, len(word) - 1)
        kind = rng.randrange(3)
        if kind == 0:
            return word[:i] + word[i + 1:]
        if kind == 1:
            return word[:i] + word[i + 1] + word[i] + word[i + 2:]
        return word[:i] + word[i] + word[i:]
    return _LATIN_WORD.sub(edit, goal)


def inflection(goal: str, rng: random.Random) -> str:
    """About half the Latin words of four letters or more change form (-ing to -s, a plural to its singular,
    -e to -ed, else -s added)."""
    def change(m: re.Match[str]) -> str:
        word = m.group()
        if len(word) < 4 or rng.random() >= 0.5:
            return word
        low = word.lower()
        if low.endswith("ing"):
            return word[:-3] + "s"
        if low.endswith("s"):
            return word[:-1]
        return word + ("d" if low.endswith("e") else "s")
    return _LATIN_WORD.sub(change, goal)


def no_app_name(goal: str, app: str) -> str:
    """The goal without its app's name: a Latin name as a whole phrase between word boundaries (with an "app"
    after it), a name in another script wherever it stands; the goal itself when nothing else is left."""
    name = " ".join(app.split())
    if not name:
        return goal
    if name.isascii():
        pattern = r"(?<!\w)" + r"\s+".join(map(re.escape, name.split())) + r"(?:\s+app)?(?!\w)"
    else:
        pattern = re.escape(name)
    out, before = " ".join(goal.split()), None
    while out != before:  # until no name is left, even one that leaving another out joined ("Moon [Moon Phase] Phase")
        before, out = out, " ".join(re.sub(pattern, "", out, flags=re.IGNORECASE).split())
    return out or goal


def variant_goals(goals: list[str], apps: list[str], variant: str, seed: int = 7) -> list[str]:
    """Each goal as the variant asks it (the same text for the same goals, variant and seed)."""
    rng = random.Random(f"{variant}:{seed}")
    edits: dict[str, Callable[[str, str], str]] = {
        "typo": lambda g, _: typo(g, rng), "inflection": lambda g, _: inflection(g, rng), "no_app_name": no_app_name}
    if variant not in edits:
        raise ValueError(f"unknown variant {variant!r} (one of {', '.join(VARIANTS)})")
    return [edits[variant](g, a) for g, a in zip(goals, apps)]
