"""The user's rules and preferences in the prompt block: which apply to a goal, and their share of the block.

A rule or preference applies to a goal when it names no app (global) or names the goal's app (by its
``applicability``, its entities, or a name in its text: a CJK name, or a Latin one written as a proper
noun); when the goal names no app at all, an app's rule applies too (the task may well end up in that
app, and a payment rule left out costs more than one line of the block). Those that apply are placed
before any automatic experience and are never trimmed for it; only when they alone would fill more
than ``RULE_SHARE`` of the block are the last of them left out, and the block says how many and how to
list them.
"""

from __future__ import annotations

from typing import Any

from memory_plane.device_memory import GENERIC_NAMES, AppCatalog
from memory_plane.lifecycle import field_num, field_str, field_text, field_words

from .._long_term import USER_WORD_TYPES
from ._candidates import Cand
from ._generation import Generation
from ._query import ParsedQuery
from ._sources import Source

RULE_SHARE = 0.5
"""At most this share of the block's characters goes to the user's rules and preferences."""


class RuleScope:
    """The apps each long-term memory names, and the rules of a source's generation seen from a goal's apps."""

    def __init__(self, catalog: AppCatalog) -> None:
        self.catalog = catalog

    def apps(self, e: dict[str, Any]) -> frozenset[str]:
        """Canonical apps a memory's index line names: its applicability app, its entities, its words."""
        text = " ".join(x for x in (field_text(e.get("title")), field_text(e.get("summary"))) if x)
        raw = e.get("applicability")
        appl: dict[str, Any] = raw if isinstance(raw, dict) else {}
        app = field_str(appl.get("app")) or field_str(appl.get("app_id")) or field_str(appl.get("app_name"))
        found: set[str] = set()
        if app:
            found.add(self.catalog.app_id_for(app))
        for name in field_words(e.get("entities")):
            canon = self.catalog.canonical(name)
            if canon and name.lower() not in GENERIC_NAMES:
                found.add(canon)
        for a, pos, name in self.catalog.find_in_text(text):
            # A generic word ("settings", "信息") may name an app or not: it does not narrow a rule to one app;
            # nor does a Latin name written in lower case ("red packets" is not the app RED): in English an
            # app's name is a proper noun. A rule left unnarrowed applies everywhere: the safe side.
            if name.lower() in GENERIC_NAMES:
                continue
            if name.isascii() and not text[pos:pos + 1].isupper():
                continue
            found.add(a)
        return frozenset(found)

    def entry_apps(self, gen: Generation, i: int, src: Source | None = None) -> frozenset[str]:
        """``apps`` of entry ``i`` of an index generation (worked out once: a few rules, every retrieve; what its
        source's snapshot kept, when it did, under the catalog as it is)."""
        known = gen.rule_apps
        apps = known.get(i)
        if apps is None:
            kept = src.snapshot_apps(self.catalog.fingerprint) if src is not None else None
            apps = kept.get(i) if kept else None
            if apps is None:
                apps = self.apps(gen.entries[i])
            known[i] = apps
        return apps

    def applies(self, e: dict[str, Any], q: ParsedQuery) -> bool:
        """Whether a rule or preference applies to the goal: global, the goal's app, or a goal of no app."""
        return self.applies_to(e, goal_apps_of(q))

    def applies_to(self, e: dict[str, Any], goal_apps: frozenset[str]) -> bool:
        """``applies`` for a goal about ``goal_apps``."""
        return _applies(self.apps(e), goal_apps)

    def for_goal(self, src: Source, q: ParsedQuery) -> GoalRules:
        """The rules of a source's generation seen from the goal's apps (the same object while both stay)."""
        goal_apps = goal_apps_of(q)
        known = src.gen.goal_rules
        hit = known.get(goal_apps)
        if hit is None:
            hit = known[goal_apps] = GoalRules(self, src.gen, goal_apps, src)
        return hit


RuleKey = tuple[bool, bool, float, float, str]
"""(a model's word, not naming the goal's app, minus priority, minus score, id): the order of the user's word."""


def _applies(apps: frozenset[str], goal_apps: frozenset[str]) -> bool:
    """Whether a rule naming ``apps`` applies to a goal about ``goal_apps`` (global, the goal's app, or a goal of
    no app)."""
    return not apps or not goal_apps or bool(apps & goal_apps)


def goal_apps_of(q: ParsedQuery) -> frozenset[str]:
    """The canonical apps a goal is about (the one it names or is in, and any others it names)."""
    return frozenset(a for a in (q.app, *q.apps) if a)


class GoalRules:
    """One index generation's rules and preferences seen from one goal's apps: which apply, and the fixed part of their
    order in the block (memoised per entry: the same rules are asked about on every retrieve)."""

    def __init__(self, scope: RuleScope, gen: Generation, goal_apps: frozenset[str], src: Source | None = None) -> None:
        self.scope = scope
        self.gen = gen
        self.src = src  # whose snapshot may know the apps each rule names
        self.entries = gen.entries
        self.goal_apps = goal_apps
        self._applies: dict[int, bool] = {}
        self._prefix: dict[int, tuple[bool, bool, float]] = {}

    def user_word_applies(self, i: int) -> bool:
        """Whether entry ``i`` is the user's word (a rule or preference) that applies to the goal."""
        hit = self._applies.get(i)
        if hit is None:
            facts = self.gen.line_facts
            kind = facts.types[i] if facts is not None and i < len(facts.types) else field_str(
                self.entries[i].get("type"))
            # A goal of no app takes every rule: the apps a rule names are not looked for then.
            hit = kind in USER_WORD_TYPES and (
                not self.goal_apps or _applies(self.scope.entry_apps(self.gen, i, self.src), self.goal_apps))
            self._applies[i] = hit
        return hit

    def order(self, c: Cand) -> RuleKey:
        """The order of the rules and preferences that apply in the block: the user's own first, then those
        naming the goal's app, then by priority, then by score (ties by id)."""
        prefix = self._prefix.get(c.i)
        if prefix is None:
            goal_apps = self.goal_apps
            facts = self.gen.line_facts
            if facts is not None and c.i < len(facts.ids):  # what the snapshot keeps of the line: not parsed
                model, priority = facts.models[c.i], facts.priorities[c.i]
            else:
                e = self.entries[c.i]
                model, priority = e.get("source") == "model", field_num(e.get("priority"), 0)
            prefix = (model, not (goal_apps and self.scope.entry_apps(self.gen, c.i, self.src) & goal_apps), -priority)
            self._prefix[c.i] = prefix
        return (*prefix, -c.score, c.item_id or self.entries[c.i]["id"])
