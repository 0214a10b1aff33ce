"""One index generation: everything retrieval derives from one source's index, built once and dropped whole.

An index reader hands back the same list of entries until its file changes (its mtime, size or inode), and
extends that list in place when lines are only appended. A ``Generation`` lives exactly as long as that list:
its entries' texts, features, postings and trigram statistics, the episodes' app prior, the entries by app,
the always-recalled ones, and what judging them under one environment decides (``EnvView``: facts, settled
verdicts, rule plans, the hits of replayed rules). When the reader hands back another list (the file was
rewritten) or a shorter one, the source starts a new generation and the old one goes with everything in it;
appends extend the current one, and what depends on how many entries there are is keyed by that count.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from .._inverted_index import InvertedIndex
from ._app_prior import AppPrior

if TYPE_CHECKING:
    from .._retrieve_types import MemoryHit
    from ._candidates import Cand, Facts, Settled
    from ._features import Feat
    from ._line_entries import IndexLines, LazyTexts
    from ._rule_plan import RulePlan
    from ._snapshot import LineFacts, Snapshot
    from ._user_rules import GoalRules

ENV_VIEWS = 64
"""Environments whose views a generation keeps (the least recently used goes first): the environment holds the
goal's app, and a device sees a few dozen apps in a day's use."""

FREE_PLANS = 8
"""Rule plans a generation shares between its views (see ``Generation.free_plans``)."""

Env = tuple[str | None, ...]


class StatKey(NamedTuple):
    """What tells one version of a file from another without reading it."""

    mtime_ns: int
    size: int
    inode: int


class HitFields(NamedTuple):
    """What an index line alone decides of the hit a memory is shown as."""

    type: str
    text: str
    title: str | None
    path: str
    page: str | None


class Loaded(NamedTuple):
    """An item file's record as loaded, with the version of the file it was loaded from."""

    stat: StatKey
    record: Any


class IndexedFile(NamedTuple):
    """An entry's file, found as its index line says."""

    index_file: Path  # the index file the line is in (its mtime tells whether the file is still as indexed)
    path: str  # the item file


class ShownRule(NamedTuple):
    """A replayed rule's candidate and the hit made of it (copied for every retrieve that shows it again)."""

    cand: Cand
    hit: MemoryHit


@dataclass
class EnvView:
    """What judging one generation's entries under one request environment decides (the environment holds the
    device, language, screen, goal app and input method the memories' applicability is matched against)."""

    facts: dict[int, Facts] = field(default_factory=dict)  # entry -> what its index line and the environment decide
    settled: dict[int, Settled | Literal[False]] = field(default_factory=dict)  # entry -> its verdict at similarity 0
    plans: dict[frozenset[str], RulePlan] = field(default_factory=dict)  # goal apps -> the rule plan
    rule_hits: dict[int, ShownRule] = field(default_factory=dict)  # entry -> a replayed rule's hit


class Generation:
    """What retrieval derives from one generation of one source's index (see the module docstring)."""

    def __init__(self, entries: Sequence[dict[str, Any]]) -> None:
        self.entries = entries  # the reader's list: this generation lives as long as the reader returns it
        # What each entry's postings were made from (and what the cache hashes).
        self.texts: list[str] | LazyTexts = []
        self.feats: list[Feat | None] = []  # parsed on first use: a cold query touches few entries
        self.inv = InvertedIndex()
        self.apps: list[Any] = []  # each entry's "app" field as its index line holds it
        self.by_app: dict[str, list[int]] = {}
        self.not_active: set[int] = set()  # entries whose status field is anything but "active" (see app_bound)
        self.always: list[int] = []  # candidates for every query (calibration, device-wide failures, user rules)
        self.always_set: set[int] = set()  # the same, for membership
        # Episodes only: each entry's canonical app, and a model of which goal words go with which app.
        self.canon: list[str | None] = []
        self.by_canon: dict[str, list[int]] = {}
        self.prior = AppPrior()
        self.stale_app = False  # whether an entry was demoted because of its app (facts then depend on the goal's)
        # The entries that may be about a goal of some apps (``Source.app_bound``), for ``bound_at`` entries.
        self.bound: dict[frozenset[Any], frozenset[int]] = {}
        self.bound_at = 0
        # Entry -> (its index file, its item file) once the file was found as indexed (see Retriever._current).
        self.indexed_at: dict[int, IndexedFile] = {}
        self.hit_fields: dict[int, HitFields] = {}  # entry -> what its index line decides of its hit
        self.rule_apps: dict[int, frozenset[str]] = {}  # entry -> the apps a rule names (``RuleScope.apps``)
        self.goal_rules: dict[frozenset[str], GoalRules] = {}  # goal apps -> the rules seen from them
        self.records: dict[str, Loaded] = {}  # item file -> its record, read when it changed after the index
        # Always-recalled entries of no environment: their verdict at similarity 0 is the same in every view, so a
        # new environment (a goal in another app) settles only the entries whose applicability names one.
        self.settled_free: dict[int, Settled | Literal[False]] = {}
        self.free_at = 0  # the always-recalled entries looked at for ``settled_free`` so far
        # Goal apps -> the rule plan, while every always-recalled entry is of no environment: the plan is then the
        # same in every view (the least recently used goes first: a plan of a large store is megabytes).
        self.free_plans: OrderedDict[frozenset[str], RulePlan] = OrderedDict()
        # A generation started from a snapshot (``_snapshot_source``): its entries are the index file's lines, parsed
        # on first use; the file version they are of, the facts the snapshot keeps of each line it covers, and the
        # snapshot its postings and texts are read from. ``stale``: that snapshot was written anew meanwhile.
        self.version: tuple[int, int, int] | None = None
        self.lines: IndexLines | None = None
        self.line_facts: LineFacts | None = None
        self.snap: Snapshot | None = None
        self.stale = False
        self.snap_texts: dict[int, str] | None = None  # the snapshot's rule texts, once a goal named something
        self.snap_apps: dict[int, frozenset[str]] | None = None  # the apps its rules name, once a goal named an app
        self._views: OrderedDict[Env, EnvView] = OrderedDict()

    def view(self, env: Env) -> EnvView:
        """What judging this generation's entries under ``env`` has decided so far."""
        views = self._views
        found = views.get(env)
        if found is None:
            found = views[env] = EnvView()
            if len(views) > ENV_VIEWS:
                views.popitem(last=False)
        else:
            views.move_to_end(env)
        return found

    def free_plan(self, goal_apps: frozenset[str]) -> RulePlan | None:
        """The shared rule plan of ``goal_apps``, if one was made (see ``free_plans``)."""
        plan = self.free_plans.get(goal_apps)
        if plan is not None:
            self.free_plans.move_to_end(goal_apps)
        return plan

    def keep_free_plan(self, goal_apps: frozenset[str], plan: RulePlan) -> None:
        """Share ``plan`` between the views of this generation (the least recently used one goes past the cap)."""
        self.free_plans[goal_apps] = plan
        self.free_plans.move_to_end(goal_apps)
        if len(self.free_plans) > FREE_PLANS:
            self.free_plans.popitem(last=False)

    def record(self, path: Path | str, stat: StatKey, load: Callable[[], Any]) -> Any:
        """An item file's record, loaded again only when the file is another version than the one loaded."""
        known = self.records.get(str(path))
        if known is not None and known.stat == stat:
            return known.record
        record = load()
        self.records[str(path)] = Loaded(stat, record)
        return record
