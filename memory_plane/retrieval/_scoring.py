"""Filters and the design's weighted score: what a candidate memory is worth to a goal.

Everything here looks at one candidate at a time (its features, the parsed goal and the request's
environment): ``Scorer.judge`` applies each kind's filters in their order, counts why a candidate is
turned away (``DropLog``, in ``_drops``) and names the section it belongs to; recall, the caps and the
prompt block are the retriever's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

from memory_plane.episodes import UNFINISHED_PHASES
from memory_plane.lifecycle import STATUSES, field_str, field_text

from .._long_term import PROFILE_TYPES
from ._candidates import (
    Cand,
    DeviceFacts,
    EpisodeEvidence,
    EpisodeFacts,
    Facts,
    LongTermFacts,
    Rejudged,
    Settled,
    Verdict,
)
from ._config import ROUTE, RetrieveConfig
from ._drops import CallLog, DropLog, mismatch
from ._features import BAD_TIME, ENV_KEYS, NO_ENV, Feat
from ._generation import EnvView
from ._goal_match import Query, app_match_of, goal_closeness, intent_sim, tools_available
from ._query import BROAD_INTENTS, ParsedQuery, detect_intents
from ._sources import Source

WEIGHTS = {"goal_similarity": 0.35, "entity_or_app_match": 0.20, "applicability": 0.15, "confidence": 0.10,
           "recency": 0.10, "validation": 0.10, "conflict_or_stale_penalty": -0.30}
"""The design's score: each factor of a hit (its ``factors``, the columns ``retrieve --explain`` prints) times
its weight, summed; a penalty weighs against."""
_W_SIM, _W_APP, _W_APPL, _W_CONF, _W_REC, _W_VALID, _W_PEN = WEIGHTS.values()
_NO_GOAL = ParsedQuery("")  # a rule settled at similarity 0 is judged of no goal's words (``Scorer.settle_free``)
PENALTY_WEIGHT = -_W_PEN


@lru_cache(maxsize=4096)
def applicability(appl: tuple[str | None, ...], env: tuple[str | None, ...], app_bound: bool) -> float | None:
    """1.0 all keys known and matching, lower when the request does not know some; None on a mismatch (the
    app key counts only for a memory ``app_bound`` in applicability)."""
    total = known = 0
    for i, (have, want) in enumerate(zip(appl, env)):
        if have is None or (i == 3 and not app_bound):
            continue
        total += 1
        if want is None:
            continue
        known += 1
        if have != want:
            return None
    return 0.6 if total == 0 else (1.0 if known == total else 0.6 + 0.4 * known / total)


class Scorer:
    """The filters and the weighted score under one RetrieveConfig (applicability memoised)."""

    def __init__(self, config: RetrieveConfig) -> None:
        self.config = config
        # The recency of each time memories carry, for one ``now`` (one retrieve): memories share their times.
        self._recency_at: datetime | None = None
        self._recency: dict[datetime, float] = {}

    @staticmethod
    def applicability(appl: tuple[str | None, ...], env: tuple[str | None, ...], app_bound: bool) -> float | None:
        """1.0 all keys known and matching, lower when the request does not know some; None on a mismatch."""
        return applicability(appl, env, app_bound)

    def live(self, f: Feat, now: datetime, drop: DropLog, item_id: str) -> bool:
        """Whether a memory may be served at all (status and expiry); the reason is counted otherwise."""
        if f.status not in ("active", "conflicted"):
            # replaced, deleted, expired, and inactive or any status a person typed: not served.
            drop(f.status if f.status in STATUSES else "inactive", item_id, f"status {f.status}")
            return False
        if f.expires is not None and (f.expires is BAD_TIME or f.expires <= now):
            drop("expired", item_id, "expires_at unreadable" if f.expires is BAD_TIME else "past expires_at")
            return False
        return True

    def recency(self, when: datetime | None, now: datetime) -> float:
        """1.0 for a memory of now, falling with age (0.5 when its time is unknown)."""
        if when is None or when is BAD_TIME:
            return 0.5
        if now is not self._recency_at:
            self._recency_at, self._recency = now, {}
        r = self._recency.get(when)
        if r is None:
            age = max(0.0, (now - when).total_seconds() / 86400)
            r = self._recency[when] = math.exp(-age / self.config.recency_days)
        return r

    def score(self, f: Feat, sim: float, app_match: float, appl: float, now: datetime) -> float:
        """The design's weighted score."""
        return (_W_SIM * sim + _W_APP * app_match + _W_APPL * appl + _W_CONF * f.confidence
                + _W_REC * self.recency(f.when, now) + _W_VALID * f.validation - PENALTY_WEIGHT * f.penalty)

    def relevant(self, item_type: str, sim: float, q: ParsedQuery, app: Any, status: str) -> bool:
        """Whether a recalled memory is about this goal at all (tested before the hard filters)."""
        # "The goal names this memory's app" (an app match of 0.8 or more) is the only app evidence used.
        named = bool(q.app) and app == q.app and not q.app_generic
        if item_type == "calibration":
            return True
        if status == "conflicted":
            return named or sim >= 0.3
        if item_type == "app_profile":
            return app is not None and (app == q.app or app in q.apps)
        if item_type == "failure":
            if not app:
                return True  # a device-wide failure mode (e.g. the input method) is always a caution
            return named or sim >= 0.4
        if item_type in ("navigation", "ui_anchor"):
            return q.app is not None and app == q.app
        if q.app and app and app != q.app:
            return False
        if q.app and app == q.app:
            return sim >= 0.1
        return sim >= self.config.min_similarity + 0.05

    # -- judging one candidate: the filters of its kind in their order, then its score ----------------

    def judge(self, src: Source, i: int, item_type: str, sim: float, ctx: Query, drop: DropLog,
              evidence: EpisodeEvidence | None = None) -> Verdict | None:
        """The section a recalled candidate belongs to, with its score; None (the reason counted, or no reason
        when it is merely not relevant) when a filter turns it away. Episodes need the search's ``evidence``."""
        return src.judge(self, i, item_type, sim, ctx, drop, evidence)

    def judge_all(self, src: Source, found: dict[int, float], item_type: str, ctx: Query, drop: DropLog,
                  evidence: EpisodeEvidence | None = None) -> Iterator[Verdict]:
        """``judge`` over one source's recalled candidates in recall order: the kept ones, with their section."""
        # Hundreds of device memories and rules are candidates for every goal of an app (and every rule for
        # every goal): what their index lines decide is judged once per generation and environment.
        return src.judge_all(self, found, item_type, ctx, drop, evidence)

    def judge_device(self, src: Source, i: int, item_type: str, sim: float, ctx: Query, drop: DropLog,
                     facts: dict[int, Facts] | None = None) -> Verdict | None:
        """``judge`` for a device memory (``facts``: the generation's memo for the environment, if any)."""
        row = facts.get(i) if facts is not None else None  # the memo's facts, made on first use
        if row is None:
            row = self._device_facts(src, i, ctx.env)
            if facts is not None:
                facts[i] = row
        assert isinstance(row, DeviceFacts)
        f, status, intent, status_ok, appl, item_id = row
        q = ctx.q
        e = src.entries[i]
        shapes = e.get("goal_shapes") if item_type == "procedure" else None
        if isinstance(shapes, list) and shapes:
            # A procedure is for goals like its examples: how close the goal is to them, their values masked,
            # not the words its title and steps share with the goal, nor its intent (another task of the app
            # shares those: "change the title" and "change a setting" are one intent).
            sim = goal_closeness(q.tokens, [str(x) for x in shapes if isinstance(x, str)][:8])
        else:
            sim = intent_sim(q, intent, sim)
        # Relevance first: it is the cheap test that most recalled items fail (the hard filters
        # below then count what they drop among memories that would otherwise have been shown).
        if not self.relevant(item_type, sim, q, f.app, status):
            return None
        if not self._servable(f, status_ok, appl, ctx, drop, item_id):
            return None
        assert appl is not None  # _servable turned away a memory that does not apply
        if item_type == "calibration" and not f.has_evidence:
            drop("calibration_without_evidence", item_id, "no evidence_refs")
            return None
        if ctx.tools and not tools_available(e, ctx.tools):
            # A path the agent could not follow with the tools it has now.
            drop("tool_unavailable", item_id, f"needs {field_text(e.get('tools'))}")
            return None
        app_match = app_match_of(ctx, f.app, e, "summary")
        cand = Cand(self.score(f, sim, app_match, appl, ctx.now), src, i, item_type, sim, app_match, appl, 0.0, 0.0,
                    item_id)
        return ("conflicts" if status == "conflicted" else ROUTE[item_type]), cand

    def _servable(self, f: Feat, status_ok: bool, appl: float | None, ctx: Query, drop: DropLog, item_id: str) -> bool:
        """Status, expiry, then applicability, each drop counted (status and applicability memoised; the clock
        asked each time)."""
        if (not status_ok or f.expires is not None) and not self.live(f, ctx.now, drop, item_id):
            return False
        if appl is None:
            drop("inapplicable", item_id, mismatch(f.appl, ctx.env) if drop.explain else None)
            return False
        return True

    def _device_facts(self, src: Source, i: int, env: tuple[str | None, ...]) -> DeviceFacts:
        """What judging a device memory needs that only its index line and the environment decide."""
        f = src.feat(i)
        e = src.entries[i]
        status = f.status
        stale = e.get("stale")
        if status == "conflicted" and stale in ENV_KEYS:
            # Demoted only because the device's environment changed; the request's own hints are
            # fresher: if they match what the memory was made under, it applies again.
            k = ENV_KEYS.index(stale)
            if env[k] is not None and f.appl[k] == env[k]:
                status = "active"
        return DeviceFacts(f, status, field_str(e.get("intent")), f.status in ("active", "conflicted"),
                           applicability(f.appl, env, False), e["id"])

    def judge_devices(self, src: Source, found: dict[int, float], item_type: str, ctx: Query,
                      drop: DropLog) -> Iterator[Verdict]:
        """``judge_all`` for a device collection: what the index lines decide memoised per environment."""
        if ctx.exclude:
            found = {i: sim for i, sim in found.items() if src.entries[i]["id"] not in ctx.exclude}
        # Device memories are not app-bound in applicability: their facts do not depend on the goal's app
        # (unless one was demoted for its app), so one memo serves every app.
        env = ctx.env
        facts = src.gen.view(env if src.gen.stale_app else (*env[:3], None, *env[4:])).facts
        for i, sim in found.items():
            verdict = self.judge_device(src, i, item_type, sim, ctx, drop, facts)
            if verdict is not None:
                yield verdict

    def judge_episode(self, src: Source, i: int, sim: float, ctx: Query, drop: DropLog, ev: EpisodeEvidence,
                      facts: dict[int, Facts] | None = None) -> Verdict | None:
        """``judge`` for an episode, with what the search learned of the goal (``ev``)."""
        row = facts.get(i) if facts is not None else None  # the memo's facts, made on first use
        if row is None:
            row = self._episode_facts(src, i, ctx.env)
            if facts is not None:
                facts[i] = row
        assert isinstance(row, EpisodeFacts)
        f, appl, intent, specific, asks, item_id = row
        q, now = ctx.q, ctx.now
        floor = self.config.min_similarity
        if f.status not in ("active", "interrupted"):
            drop(f.status, item_id, f"status {f.status}")
            return None
        if f.validation != 1.0 and (f.status == "interrupted" or src.entries[i].get("unfinished") is True
                                    or src.entries[i].get("failure_phase") in UNFINISHED_PHASES):
            # A run that stopped (the recorder died, the runtime raised, the record ends mid-task: its index
            # line says ``unfinished``) did not fail: it is no caution.
            drop("unfinished", item_id, f"stopped: {src.entries[i].get('failure_phase') or f.status}")
            return None
        if f.when and f.when is not BAD_TIME and (now - f.when).days > self.config.episode_max_age_days:
            drop("expired", item_id, f"older than {self.config.episode_max_age_days:g} days")
            return None
        if appl is None:
            drop("inapplicable", item_id, mismatch(f.appl, ctx.env) if drop.explain else None)
            return None
        gen = src.gen
        app = gen.canon[i]
        sim = intent_sim(q, intent, max(sim, ev.fused.get(i, 0.0)), specific, asks)
        success = f.validation == 1.0
        if success:
            # Under the floor, the app the device's goals make likely is still admitted; when none is, the
            # closest past goal is, for a block that would show no episode otherwise (``last_resort``).
            if sim < floor and not (app == ev.target if ev.target is not None else i == ev.lead):
                return None
        elif sim < floor + 0.1:
            return None
        app_match = app_match_of(ctx, app, gen.entries[i], "goal")
        named = ev.named
        if not (named and app not in q.apps and not named <= gen.inv.doc(i)):
            # What the device's goals make likely counts, and the closest past goal leads (a near-duplicate task
            # is the strongest evidence there is); neither against the app the goal names (``named_app``).
            if app:
                app_match = max(app_match, ev.post.get(app, 0.0))
            if i == ev.lead:
                app_match = 1.0
        score = self.score(f, sim, app_match, appl, now)
        cand = Cand(score, src, i, "task_episode", sim, app_match, appl, 0.0, ev.fused.get(i, 0.0), item_id)
        return ("similar_episodes" if success else "failure_modes"), cand

    def last_resort(self, cands: list[Cand], ev: EpisodeEvidence) -> list[Cand]:
        """The similar episodes to show: the closest past goal under the floor only when no other is shown (a
        goal with typos shares little text with its nearest, and an empty block is worse than a weak hit)."""
        if ev.target is not None or len(cands) < 2:
            return cands
        floor = self.config.min_similarity
        return [c for c in cands if not (c.i == ev.lead and c.sim < floor)]

    def _episode_facts(self, src: Source, i: int, env: tuple[str | None, ...]) -> EpisodeFacts:
        """What judging an episode needs that only its index line and the environment decide."""
        f = src.feat(i)
        e = src.entries[i]
        goal = e.get("goal")
        asks = detect_intents(goal) if isinstance(goal, str) else frozenset()
        return EpisodeFacts(f, applicability(f.appl, env, False), field_str(e.get("intent")), asks - BROAD_INTENTS,
                            asks, e["id"])

    def judge_episodes(self, src: Source, found: dict[int, float], ctx: Query, drop: DropLog,
                       evidence: EpisodeEvidence) -> Iterator[Verdict]:
        """``judge_all`` for the episodes (the excluded ones were left out before recall, and of the app prior)."""
        env = ctx.env
        # Episodes are not app-bound in applicability: one memo serves every app.
        facts = src.gen.view((*env[:3], None, *env[4:])).facts
        for i, sim in found.items():
            verdict = self.judge_episode(src, i, sim, ctx, drop, evidence, facts)
            if verdict is not None:
                yield verdict

    def judge_long_term(self, src: Source, i: int, sim: float, ctx: Query, drop: DropLog,
                        facts: dict[int, Facts] | None = None) -> Verdict | None:
        """``judge`` for a long-term memory."""
        row = facts.get(i) if facts is not None else None  # the memo's facts, made on first use
        if row is None:
            row = self._long_term_facts(src, i, ctx.env)
            if facts is not None:
                facts[i] = row
        assert isinstance(row, LongTermFacts)
        user_rule, f, status_ok, appl, bonus, section, item_id = row
        if not user_rule and sim < self.config.min_similarity:
            return None
        if not self._servable(f, status_ok, appl, ctx, drop, item_id):
            return None
        assert appl is not None  # _servable turned away a memory that does not apply
        # User rules outrank automatic experience: full validation (set in features) and a bonus.
        # (A memory of no app matches a goal that names nothing at 0.3: app_match_of is asked only for names.)
        app_match = app_match_of(ctx, None, src.entries[i], "summary") if ctx.names else 0.3
        score = self.score(f, sim, app_match, appl, ctx.now) + bonus
        return section, Cand(score, src, i, "long_term", sim, app_match, appl, bonus, 0.0, item_id)

    def _long_term_facts(self, src: Source, i: int, env: tuple[str | None, ...]) -> LongTermFacts:
        """What judging a long-term memory needs that only its index line and the environment decide."""
        e = src.entries[i]
        f = src.feat(i)
        user_rule = field_str(e.get("type")) in PROFILE_TYPES
        return LongTermFacts(user_rule, f, f.status in ("active", "conflicted"), applicability(f.appl, env, True),
                             0.2 if user_rule else 0.0, "conflicts" if f.status == "conflicted" else "long_term",
                             e["id"])

    def judge_rules(self, src: Source, found: dict[int, float], ctx: Query, drop: DropLog) -> Iterator[Verdict]:
        """``judge_all`` for the long-term memories. A memory no word of the goal reaches (similarity 0: most of
        the user's rules and preferences, on most goals) is judged once per generation and environment and its
        verdict replayed, drops included, as long as nothing else it depends on can differ (no clock-bound
        field, no name of the goal in its text)."""
        if ctx.exclude:
            found = {i: sim for i, sim in found.items() if src.entries[i]["id"] not in ctx.exclude}
        view = src.gen.view(ctx.env)
        settled, facts = view.settled, view.facts
        names = ctx.names
        for i, sim in found.items():
            if sim == 0.0:
                known = settled.get(i)
                if known is None:
                    known = settled[i] = self._settle(src, i, ctx, facts)
                if known is not False and not (names and any(n in src.rule_text(i, known) for n in names)):
                    for call in known.calls:
                        drop(*call)
                    if known.verdict is not None:
                        yield known.verdict
                    continue
            verdict = self.judge_long_term(src, i, sim, ctx, drop, facts)
            if verdict is not None:
                yield verdict

    def settle_always(self, src: Source, view: EnvView, ctx: Query) -> None:
        """Put every entry of the source's ``always`` in the view's settled verdicts (those not there yet are
        settled now)."""
        settled, facts = view.settled, view.facts
        unnamed = ctx._replace(names=())
        gen = src.gen
        free = gen.settled_free
        for i in gen.always[gen.free_at:]:
            if src.feat(i).appl == NO_ENV:  # applicability 0.6 under any environment: one verdict for all views
                known = settled.get(i)
                free[i] = known if known is not None else self._settle(src, i, unnamed, facts)
        gen.free_at = len(gen.always)
        settled.update(free)
        for i in gen.always:
            if i not in settled:
                settled[i] = self._settle(src, i, unnamed, facts)

    def settle_free(self, src: Source, i: int, now: datetime) -> Settled | Literal[False] | None:
        """``settle_always``'s verdict of always-recalled entry ``i`` when it names no environment (the same in every
        view), made apart from any view (a writer's thread); None for an entry of an environment."""
        if src.feat(i).appl != NO_ENV:
            return None
        ctx = Query(_NO_GOAL, (None,) * len(NO_ENV), now, (), frozenset(), frozenset())
        return self._settle(src, i, ctx, {})

    def _settle(self, src: Source, i: int, ctx: Query, facts: dict[int, Facts]) -> Settled | Literal[False]:
        """A long-term memory's verdict at similarity 0 for a goal that names nothing in it, with the drops it
        counts; False when its verdict depends on the clock (a time it was validated, an expiry)."""
        f = src.feat(i)
        if f.when is not None or (f.expires is not None and f.expires is not BAD_TIME):
            return False
        calls = CallLog()
        verdict = self.judge_long_term(src, i, 0.0, ctx if not ctx.names else ctx._replace(names=()), calls, facts)
        return Settled(tuple(calls.calls), verdict, field_text(src.entries[i].get("summary")).lower())

    def rejudge(self, c: Cand, rec: Any, fresh: dict[str, Any], ctx: Query, drop: DropLog) -> Rejudged | None:
        """A candidate judged on its file as it is now: status, expiry, applicability, confidence and text
        (the file is the truth at once, not after verify rebuilds the index)."""
        src, item_id = c.src, str(c.src.entries[c.i].get("id"))
        f = src.features(fresh)
        status = str(rec.status)
        if status not in ("active", "conflicted", "interrupted"):
            drop(status if status in STATUSES else "inactive", item_id, f"the file now says status {status}")
            return None
        if src.empty(rec):
            drop("file_empty", item_id, "the memory's text is empty")
            return None
        if src.expires and not self.live(f, ctx.now, drop, item_id):
            return None
        appl = applicability(f.appl, ctx.env, src.app_bound_applicability)
        if appl is None:
            drop("inapplicable", item_id, "the file now says " + mismatch(f.appl, ctx.env))
            return None
        score = self.score(f, c.sim, c.app_match, appl, ctx.now) + c.bonus
        return Rejudged(rec, fresh, f, c._replace(score=score, appl=appl))
