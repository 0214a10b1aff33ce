"""The records of judging: a scored candidate, what judging it needs of its index line, what it came to.

``Scorer`` (``_scoring``) makes them; the retriever routes, caps and shows the candidates; a generation's view
of an environment (``_generation.EnvView``) keeps the facts and settled verdicts while its index stays.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ._drops import DropCall
from ._features import Feat
from ._sources import Source


class Cand(NamedTuple):
    """A scored candidate, turned into a MemoryHit only if it makes its category's cut."""

    score: float
    src: Source
    i: int
    item_type: str
    sim: float
    app_match: float
    appl: float
    bonus: float
    # What decides between equal scores before the id: an episode's closeness on the nearest-goal scale. The
    # closest past goal gets the best word similarity by construction, which ties it with the best word match
    # whenever the two differ; the closest one leads then, not whichever id sorts first.
    closeness: float = 0.0
    item_id: str = ""  # the entry's id, which breaks the last ties of the ranking (see _budget.rank_key)


class EpisodeEvidence(NamedTuple):
    """What the episode search learned of the goal as a whole, shared by every episode it recalled."""

    target: str | None  # the app the goal is about (named, or made likely by the device's own goals)
    post: dict[str, float]  # P(app | goal)
    lead: int | None  # the closest past goal
    fused: dict[int, float]  # each hit's similarity on the calibrated scale of the nearest-goal search
    named: frozenset[str] = frozenset()  # the words of the app the goal names, if they say where (``named_app``)


Verdict = tuple[str, Cand]
"""The section a kept candidate goes to, and the candidate."""


class LongTermFacts(NamedTuple):
    """What judging a long-term memory needs that only its index line and the environment decide."""

    user_rule: bool
    feat: Feat
    status_ok: bool  # its status may be served (the clock still decides expiry)
    appl: float | None
    bonus: float
    section: str
    item_id: str


class EpisodeFacts(NamedTuple):
    """What judging an episode needs that only its index line and the environment decide."""

    feat: Feat
    appl: float | None
    intent: str | None
    specific: frozenset[str]  # the intents its goal names that are not broad
    asks: frozenset[str]  # every intent its goal names
    item_id: str


class DeviceFacts(NamedTuple):
    """What judging a device memory needs that only its index line and the environment decide."""

    feat: Feat
    status: str  # its status in this environment (a memory demoted for an environment the request is not in is active)
    intent: str | None
    status_ok: bool
    appl: float | None
    item_id: str


Facts = LongTermFacts | EpisodeFacts | DeviceFacts


class Settled(NamedTuple):
    """A long-term memory's verdict at similarity 0 for a goal that names nothing in it."""

    calls: tuple[DropCall, ...]  # the drops it counts, as made
    verdict: Verdict | None
    text: str | None  # the lowercase text a goal's names are looked for in (None: ``Source.rule_texts`` reads it)


class Rejudged(NamedTuple):
    """A candidate whose file changed since its index line: the record read now, its index line and features as
    they would be now, and the candidate scored on them."""

    record: Any
    entry: dict[str, Any]
    feat: Feat
    cand: Cand
