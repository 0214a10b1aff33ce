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
from typing import Any, Literal, NamedTuple

from lifecycle import STATUSES, field_str, field_text

from .._long_term import PROFILE_TYPES
from ._config import ROUTE, RetrieveConfig
from ._drops import CallLog, DropLog, mismatch
from ._goal_match import Query, app_match_of, intent_sim, tools_available
from ._query import BROAD_INTENTS, ParsedQuery, detect_intents
from ._sources import BAD_TIME, ENV_KEYS, Feat, Source, features

WEIGHTS = {"goal_similarity": 0.35, "entity_or_app_match": 0.20, "applicability": 0.15, "confidence": 0.10,
           "recency": 0.10, "validation": 0.10}
PENALTY_WEIGHT = 0.30


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


LongTermFacts = tuple[bool, Feat, bool, float | None, float, str, str]
"""(user rule, features, status servable, applicability, bonus, section, id) of a long-term memory."""
Settled = tuple[tuple[tuple[str, Any, Any], ...], tuple[str, Cand] | None, str]
"""(the drop calls, the verdict, the lowercase text a goal's names are looked for in) of a long-term memory."""
EpisodeFacts = tuple[Feat, float | None, str | None, tuple[frozenset[str], frozenset[str]], str]
"""(features, applicability, intent, (the specific intents of its goal, all of them), id) of an episode."""
DeviceFacts = tuple[Feat, str, str | None, bool, float | None, str]
"""(features, status in this environment, intent, status servable, applicability, id) of a device memory."""


class Scorer:
    """The filters and the weighted score under one RetrieveConfig (applicability memoised)."""

    def __init__(self, config: RetrieveConfig) -> None:
        self.config = config
        self._appl_memo: dict[tuple[Any, ...], float | None] = {}
        # Memos per source (kept for one index generation) and environment: see judge_all and _judge_rules.
        self._facts: dict[int, Any] = {}
        self._settled: dict[int, Any] = {}
        self._stale_app: dict[int, tuple[int, int, bool]] = {}
        self._recency_at: datetime | None = None
        self._recency: dict[datetime, float] = {}

    def applicability(self, appl: tuple[str | None, ...], env: tuple[str | None, ...],
                       app_bound: bool) -> float | None:
        """1.0 all keys known and matching, lower when the request does not know some; None on a mismatch."""
        memo_key = (appl, env, app_bound)
        if memo_key in self._appl_memo:
            return self._appl_memo[memo_key]
        total = known = 0
        result: float | None = None
        for i, (have, want) in enumerate(zip(appl, env)):
            if have is None or (i == 3 and not app_bound):
                continue
            total += 1
            if want is None:
                continue
            known += 1
            if have != want:
                break
        else:
            result = 0.6 if total == 0 else (1.0 if known == total else 0.6 + 0.4 * known / total)
        if len(self._appl_memo) > 4096:
            self._appl_memo.clear()
        self._appl_memo[memo_key] = result
        return result

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
        if now is not self._recency_at:  # memoised for one ``now`` (one retrieve): memories share their times
            self._recency_at, self._recency = now, {}
        r = self._recency.get(when)
        if r is None:
            age = max(0.0, (now - when).total_seconds() / 86400)
            r = self._recency[when] = math.exp(-age / self.config.recency_days)
        return r

    def score(self, f: Feat, sim: float, app_match: float, appl: float, now: datetime) -> float:
        """The design's weighted score."""
        return (0.35 * sim + 0.20 * app_match + 0.15 * appl + 0.10 * f.confidence
                + 0.10 * self.recency(f.when, now) + 0.10 * f.validation - PENALTY_WEIGHT * f.penalty)

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
              evidence: EpisodeEvidence | None = None) -> tuple[str, Cand] | None:
        """The section a recalled candidate belongs to, with its score; None (the reason counted, or no reason
        when it is merely not relevant) when a filter turns it away. Episodes need the search's ``evidence``."""
        if src.kind == "episode":
            assert evidence is not None
            return self._judge_episode(src, i, sim, ctx, drop, evidence)
        if src.kind == "long_term":
            return self._judge_long_term(src, i, sim, ctx, drop)
        return self._judge_device(src, i, item_type, sim, ctx, drop)

    def _judge_device(self, src: Source, i: int, item_type: str, sim: float, ctx: Query, drop: DropLog,
                      facts: dict[int, DeviceFacts] | None = None) -> tuple[str, Cand] | None:
        row: Any = facts.get(i) if facts is not None else None  # the memo's facts, made on first use
        if row is None:
            row = self._device_facts(src, i, ctx.env)
            if facts is not None:
                facts[i] = row
        f, status, intent, status_ok, appl, item_id = row
        q = ctx.q
        sim = intent_sim(q, intent, sim)
        # Relevance first: it is the cheap test that most recalled items fail (the hard filters
        # below then count what they drop among memories that would otherwise have been shown).
        if not self.relevant(item_type, sim, q, f.app, status):
            return None
        if not self._servable(f, status_ok, appl, ctx, drop, item_id):
            return None
        if item_type == "calibration" and not f.has_evidence:
            drop("calibration_without_evidence", item_id, "no evidence_refs")
            return None
        e = src.entries[i]
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
        return (f, status, field_str(e.get("intent")), f.status in ("active", "conflicted"),
                self.applicability(f.appl, env, False), e["id"])

    def _judge_episode(self, src: Source, i: int, sim: float, ctx: Query, drop: DropLog, ev: EpisodeEvidence,
                       facts: dict[int, EpisodeFacts] | None = None) -> tuple[str, Cand] | None:
        row: Any = facts.get(i) if facts is not None else None  # the memo's facts, made on first use
        if row is None:
            row = self._episode_facts(src, i, ctx.env)
            if facts is not None:
                facts[i] = row
        f, appl, intent, intents, item_id = row
        q, now = ctx.q, ctx.now
        floor = self.config.min_similarity
        if f.status not in ("active", "interrupted"):
            drop(f.status, item_id, f"status {f.status}")
            return None
        if f.when and f.when is not BAD_TIME and (now - f.when).days > self.config.episode_max_age_days:
            drop("expired", item_id, f"older than {self.config.episode_max_age_days:g} days")
            return None
        if appl is None:
            drop("inapplicable", item_id, mismatch(f.appl, ctx.env) if drop.explain else None)
            return None
        app = src.canon[i]
        sim = intent_sim(q, intent, max(sim, ev.fused.get(i, 0.0)), *intents)
        success = f.validation == 1.0
        if success:
            # Under the floor, the app the device's goals make likely is still admitted; when none is, the
            # closest past goal is, for a block that would show no episode otherwise (``last_resort``).
            if sim < floor and not (app == ev.target if ev.target is not None else i == ev.lead):
                return None
        elif sim < floor + 0.1:
            return None
        app_match = app_match_of(ctx, app, src.entries[i], "goal")
        named = ev.named
        if not (named and app not in q.apps and not named <= src.inv.doc(i)):
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
        intents = (asks - BROAD_INTENTS, asks)
        return f, self.applicability(f.appl, env, False), field_str(e.get("intent")), intents, e["id"]

    def _judge_long_term(self, src: Source, i: int, sim: float, ctx: Query, drop: DropLog,
                         facts: dict[int, LongTermFacts] | None = None) -> tuple[str, Cand] | None:
        row: Any = facts.get(i) if facts is not None else None  # the memo's facts, made on first use
        if row is None:
            row = self._long_term_facts(src, i, ctx.env)
            if facts is not None:
                facts[i] = row
        user_rule, f, status_ok, appl, bonus, section, item_id = row
        if not user_rule and sim < self.config.min_similarity:
            return None
        if not self._servable(f, status_ok, appl, ctx, drop, item_id):
            return None
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
        return (user_rule, f, f.status in ("active", "conflicted"), self.applicability(f.appl, env, True),
                0.2 if user_rule else 0.0, "conflicts" if f.status == "conflicted" else "long_term", e["id"])

    def _memo_for(self, slot: dict[int, Any], src: Source, env: tuple[str | None, ...]) -> dict[int, Any]:
        """One memo of ``slot`` for a source's entries under one environment (kept until its index changes)."""
        memo = slot.get(id(src))
        if memo is None or memo[0] != src.generation:
            memo = (src.generation, {})
            slot[id(src)] = memo
        by_env: dict[tuple[str | None, ...], dict[int, Any]] = memo[1]
        rows = by_env.get(env)
        if rows is None:
            if len(by_env) >= 64:  # the environment holds the goal's app: a few dozen in a day's use
                by_env.clear()
            rows = by_env[env] = {}
        return rows

    def judge_all(self, src: Source, found: dict[int, float], item_type: str, ctx: Query, drop: DropLog,
                  evidence: EpisodeEvidence | None = None) -> Iterator[tuple[str, Cand]]:
        """``judge`` over one source's recalled candidates in recall order: the kept ones, with their section."""
        # Hundreds of device memories and rules are candidates for every goal of an app (and every rule for
        # every goal): what their index lines decide is judged once per index change and environment.
        env = ctx.env
        if ctx.exclude and src.kind != "episode":  # episodes are left out before recall (and of the app prior)
            found = {i: sim for i, sim in found.items() if src.entries[i]["id"] not in ctx.exclude}
        # Episodes and device memories are not app-bound in applicability: their facts do not depend on the
        # goal's app (unless a device memory was demoted for its app), so one memo serves every app.
        any_app = (*env[:3], None, *env[4:])
        if src.kind == "episode":
            assert evidence is not None
            facts = self._memo_for(self._facts, src, any_app)
            for i, sim in found.items():
                verdict = self._judge_episode(src, i, sim, ctx, drop, evidence, facts)
                if verdict is not None:
                    yield verdict
            return
        if src.kind == "long_term":
            yield from self._judge_rules(src, found, ctx, drop, self._memo_for(self._facts, src, env))
            return
        facts = self._memo_for(self._facts, src, env if self._stale_for_app(src) else any_app)
        for i, sim in found.items():
            verdict = self._judge_device(src, i, item_type, sim, ctx, drop, facts)
            if verdict is not None:
                yield verdict

    def _stale_for_app(self, src: Source) -> bool:
        """Whether any entry of a source was demoted because of its app (its facts then depend on the goal's)."""
        known = self._stale_app.get(id(src))
        if known is None or known[0] != src.generation or known[1] != len(src.entries):
            known = (src.generation, len(src.entries), any(e.get("stale") == "app" for e in src.entries))
            self._stale_app[id(src)] = known
        return known[2]

    def _judge_rules(self, src: Source, found: dict[int, float], ctx: Query, drop: DropLog,
                     facts: dict[int, Any]) -> Iterator[tuple[str, Cand]]:
        """The long-term candidates judged. A memory no word of the goal reaches (similarity 0: most of the
        user's rules and preferences, on most goals) is judged once per index change and environment and its
        verdict replayed, drops included, as long as nothing else it depends on can differ (no clock-bound
        field, no name of the goal in its text)."""
        settled = self._memo_for(self._settled, src, ctx.env)
        names = ctx.names
        for i, sim in found.items():
            if sim == 0.0:
                known = settled.get(i)
                if known is None:
                    known = settled[i] = self._settle(src, i, ctx, facts)
                if known is not False and not (names and any(n in known[2] for n in names)):
                    for call in known[0]:
                        drop(*call)
                    if known[1] is not None:
                        yield known[1]
                    continue
            verdict = self._judge_long_term(src, i, sim, ctx, drop, facts)
            if verdict is not None:
                yield verdict

    def settled(self, src: Source, ctx: Query) -> dict[int, Settled | Literal[False]]:
        """The settled verdicts of a source's entries under the request's environment: the memo ``_judge_rules``
        replays, one object per index generation and environment."""
        return self._memo_for(self._settled, src, ctx.env)

    def settle_always(self, src: Source, ctx: Query) -> None:
        """Put every entry of ``src.always`` in the ``settled`` memo (those not yet there are settled now)."""
        settled = self._memo_for(self._settled, src, ctx.env)
        facts = self._memo_for(self._facts, src, ctx.env)
        for i in src.always:
            if i not in settled:
                settled[i] = self._settle(src, i, ctx, facts)

    def _settle(self, src: Source, i: int, ctx: Query, facts: dict[int, Any]) -> Settled | Literal[False]:
        """A long-term memory's verdict at similarity 0 for a goal that names nothing in it, with the drops it
        counts; False when its verdict depends on the clock (a time it was validated, an expiry)."""
        f = src.feat(i)
        if f.when is not None or (f.expires is not None and f.expires is not BAD_TIME):
            return False
        calls = CallLog()
        verdict = self._judge_long_term(src, i, 0.0, ctx._replace(names=()), calls, facts)
        return tuple(calls.calls), verdict, field_text(src.entries[i].get("summary")).lower()

    def rejudge(self, c: Cand, rec: Any, fresh: dict[str, Any], ctx: Query, drop: DropLog) -> Any:
        """A candidate judged on its file as it is now: status, expiry, applicability, confidence and text
        (the file is the truth at once, not after verify rebuilds the index)."""
        kind, item_id = c.src.kind, str(c.src.entries[c.i].get("id"))
        f = features(fresh, kind)
        status = str(rec.status)
        if status not in ("active", "conflicted", "interrupted"):
            drop(status if status in STATUSES else "inactive", item_id, f"the file now says status {status}")
            return None
        if kind == "long_term" and not str(getattr(rec, "content", "")).strip():
            drop("file_empty", item_id, "the memory's text is empty")
            return None
        if kind != "episode" and not self.live(f, ctx.now, drop, item_id):
            return None
        appl = self.applicability(f.appl, ctx.env, kind == "long_term")
        if appl is None:
            drop("inapplicable", item_id, "the file now says " + mismatch(f.appl, ctx.env))
            return None
        score = self.score(f, c.sim, c.app_match, appl, ctx.now) + c.bonus
        return rec, (fresh, f), c._replace(score=score, appl=appl)
