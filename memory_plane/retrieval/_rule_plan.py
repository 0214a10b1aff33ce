"""The long-term memories recalled for every goal (the user's rules and preferences), judged once per index
generation, environment and goal apps instead of once per retrieve.

A device may hold hundreds of rules and preferences, and each is a candidate for every goal: most share no
word with it (similarity 0), so their verdict, the drops they count and their place in the block's order
are the same on every retrieve while the index, the environment and the goal's apps stay. A ``RulePlan``
holds those, sorted once, in the generation's view of the environment (``EnvView.plans``); a retrieve takes
out the few the goal's words reach, names or excludes (they are judged as usual) and adds the rest as they
stand. ``drop.explain`` retrieves judge every one instead, so
each is named.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterator
from typing import Any

from ._budget import rank_key
from ._candidates import Cand, Settled, Verdict
from ._generation import EnvView
from ._goal_match import Query
from ._rules_said import RulesSaid
from ._scoring import Scorer
from ._sources import Source
from ._user_rules import GoalRules


class RulePlan:
    """What the always-recalled entries of one source come to at similarity 0, for one environment and goal apps."""

    def __init__(self, src: Source, settled: dict[int, Any], rules: GoalRules) -> None:
        self.src = src
        self.rules = rules
        self.n_always = 0
        self.said: RulesSaid | None = None  # the stances of its users, once a retrieve asked (see _rules_said)
        self.replay: dict[int, Settled] = {}  # entry -> its settled verdict (an entry whose verdict is clock-bound
        self.unsettled: list[int] = []  # is judged on every retrieve instead)
        # The lowercase text a goal's names are looked for in, of each replayed entry, and all of them for the
        # common case of a name none of them holds: made when a goal first names something.
        self._texts: list[tuple[int, str]] | None = None
        self._all_text = ""
        self.by_id: dict[str, list[int]] = {}
        self.users: list[Cand] = []  # the rules and preferences that apply, in their order in the block
        self.user_idx: set[int] = set()
        # Each section's other verdicts (conflicts, another app's rules, profiles) best first: a retrieve walks
        # only as far as its cap reaches (a device's profiles are picks of every goal, thousands in a large store).
        self.ranked: dict[str, list[Cand]] = {}
        self.counts: dict[str, int] = {}
        users, picks = self._add(src, settled, src.gen.always)
        self.users = sorted(users, key=rules.order)
        self.user_idx.update(c.i for c in users)
        for section, cand in picks:
            self.ranked.setdefault(section, []).append(cand)
        for cands in self.ranked.values():
            cands.sort(key=rank_key)

    @property
    def texts(self) -> list[tuple[int, str]]:
        """(entry, its lowercase text) of each replayed entry, in the order taken in."""
        if self._texts is None:
            order = list(self.replay)
            self._texts = list(zip(order, self.src.rule_texts(order, self.replay)))
            self._all_text = "\n".join(text for _, text in self._texts)
        return self._texts

    @property
    def all_text(self) -> str:
        """Every replayed entry's text, one per line."""
        self.texts  # noqa: B018  (made on first use)
        return self._all_text

    def _add(self, src: Source, settled: dict[int, Any], entries: list[int]) -> tuple[list[Cand], list[Verdict]]:
        """Take in ``entries`` (settled): replayed or judged on every retrieve, their drops counted; the rules that
        apply and the other verdicts among them, for the caller to place."""
        rules = self.rules
        users: list[Cand] = []
        picks: list[Verdict] = []
        for i in entries:
            known = settled[i]
            if known is False:
                self.unsettled.append(i)
                continue
            self.replay[i] = known
            self.by_id.setdefault(src.id_of(i), []).append(i)
            for call in known.calls:
                self.counts[call.reason] = self.counts.get(call.reason, 0) + 1
            verdict = known.verdict
            if verdict is None:
                continue
            if verdict[0] == "long_term" and rules.user_word_applies(verdict[1].i):
                users.append(verdict[1])
            else:
                picks.append(verdict)
        self.n_always += len(entries)
        return users, picks

    def extend(self, src: Source, settled: dict[int, Any]) -> None:
        """Take in the always-recalled entries appended to the generation since (a memory saved in this process):
        each placed where the whole plan made again would put it, the others left as they are."""
        new = src.gen.always[self.n_always:]
        before = len(self.replay)
        users, picks = self._add(src, settled, new)
        if self._texts is not None and len(self.replay) > before:
            added = list(self.replay)[before:]
            more = list(zip(added, src.rule_texts(added, self.replay)))
            self._texts += more
            self._all_text = "\n".join([self._all_text, *(t for _, t in more)] if before else [t for _, t in more])
        order = self.rules.order
        for c in users:
            insort(self.users, c, key=order)
            self.user_idx.add(c.i)
        for section, cand in picks:
            insort(self.ranked.setdefault(section, []), cand, key=rank_key)
        if users:
            self.said = None  # the rules that apply changed: their stances are worked out again when asked

    def holds(self, src: Source, rules: GoalRules) -> bool:
        """Whether the plan is still what its generation (entries appended since?) and the goal's rules make it."""
        return self.rules is rules and self.n_always == len(src.gen.always)

    def behind(self, src: Source, rules: GoalRules) -> bool:
        """Whether the plan is of these rules and misses only entries appended since (``extend`` takes them in)."""
        return self.rules is rules and self.n_always < len(src.gen.always)

    def named(self, ctx: Query) -> list[int]:
        """The entries whose text holds a name the goal gives (judged with the goal, not replayed)."""
        names = [n for n in ctx.names if n in self.all_text]  # a name in no text is in none of them
        if not names:
            return []
        return [i for i, text in self.texts if any(n in text for n in names)]

    def excluded(self, ctx: Query) -> set[int]:
        """The entries the caller asked to leave out."""
        return {i for x in ctx.exclude for i in self.by_id.get(x, ())}


class PlanShare:
    """What a plan adds to one retrieve: its drops, its picks and its rules, less the entries judged apart."""

    def __init__(self, plan: RulePlan, apart: set[int]) -> None:
        self.plan = plan
        self.apart = apart  # replayed entries this retrieve judges (or leaves out) instead
        self.n_users = len(plan.users) - len(apart & plan.user_idx)

    def counts(self) -> dict[str, int]:
        """The drops the replayed entries count (each reason once, in the order first counted)."""
        counts = dict(self.plan.counts)
        for i in self.apart:
            for call in self.plan.replay[i].calls:
                counts[call.reason] -= 1
        return {k: n for k, n in counts.items() if n}

    def ranked(self) -> dict[str, Iterator[Cand]]:
        """The replayed verdicts of the other sections, each section's best first (``rank_key``)."""
        apart = self.apart
        return {section: ((c for c in cands if c.i not in apart) if apart else iter(cands))
                for section, cands in self.plan.ranked.items()}

    def users(self) -> Iterator[Cand]:
        """The replayed rules and preferences that apply, in their order in the block."""
        apart = self.apart
        return (c for c in self.plan.users if c.i not in apart) if apart else iter(self.plan.users)


def rule_plan(scorer: Scorer, src: Source, view: EnvView, ctx: Query, rules: GoalRules) -> RulePlan:
    """The plan of ``src`` for this request's environment (``view``) and goal apps (made now if it is missing or
    the generation grew since)."""
    plan = view.plans.get(rules.goal_apps)
    if plan is not None and plan.holds(src, rules):
        return plan
    scorer.settle_always(src, view, ctx)
    gen = src.gen
    if len(gen.settled_free) == len(gen.always):
        # No rule names an environment: every view settles them alike, and one plan serves them all.
        plan = gen.free_plan(rules.goal_apps)
        if plan is not None and plan.behind(src, rules):
            plan.extend(src, view.settled)
        elif plan is None or not plan.holds(src, rules):
            plan = RulePlan(src, view.settled, rules)
            gen.keep_free_plan(rules.goal_apps, plan)
    elif plan is not None and plan.behind(src, rules) and plan not in gen.free_plans.values():
        plan.extend(src, view.settled)  # this view's own plan (one shared before is not changed for one view)
    else:
        plan = RulePlan(src, view.settled, rules)
    view.plans[rules.goal_apps] = plan
    return plan
