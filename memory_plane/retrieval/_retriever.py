"""Retrieval: recall candidates from the indexes, drop what must not be shown, score, route, trim.

Per-entry facts (status, parsed times, applicability, validation, penalty) are computed once
when an index changes; a query only intersects postings and scores the few candidates left.
"""

from __future__ import annotations

import heapq
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from device_memory import DeviceMemory, type_of_id
from episodes import TaskEpisodeStore
from lifecycle import (
    STATUSES,
    FileProblemError,
    field_num,
    field_str,
    field_text,
    field_words,
    safe_join,
)

from .._freshness import FileState, file_state, mtime_ns
from .._inverted_index import nearest_goal
from .._long_term import PROFILE_TYPES, USER_WORD_TYPES, LongTermStore
from .._retrieve_types import MemoryHit, MemoryRetrieveRequest, RoleMemoryContext
from ._context import MemoryContext
from ._postings_cache import PostingsWriter, TokenCache
from ._query import ParsedQuery, parse_query
from ._render import hit_line, render_context
from ._scoring import Drop, Query, Scorer, app_match_of, intent_sim, mismatch, tools_available
from ._sources import (
    BAD_TIME,
    ENV_KEYS,
    Feat,
    Source,
    device_text,
    episode_text,
    features,
    long_term_text,
)
from ._user_rules import RULE_SHARE, RuleScope

log = logging.getLogger("memory_plane")

CAPS = {"device_profile": 1, "app_profiles": 2, "long_term": 4, "procedures": 3, "navigation": 4,
        "similar_episodes": 3, "calibration_notes": 3, "failure_modes": 4, "conflicts": 3}
ROUTE = {"app_profile": "app_profiles", "procedure": "procedures", "navigation": "navigation",
         "calibration": "calibration_notes", "failure": "failure_modes", "ui_anchor": "calibration_notes"}


@dataclass
class RetrieveConfig:
    """Caps, thresholds and the size budget of the prompt block."""

    caps: dict[str, int] = field(default_factory=lambda: dict(CAPS))
    budget_chars: int = 4000
    min_similarity: float = 0.25
    episode_max_age_days: float = 180.0
    recency_days: float = 30.0
    search_limit: int = 60
    app_bound_limit: int = 40
    # Keep the postings of large indexes in <root>/.cache/retrieve so a fresh process need not tokenise
    # them again (written in the background when missing or behind; never on a read-only tree).
    persist_postings: bool = True


class _Cand(NamedTuple):
    """A scored candidate, turned into a MemoryHit only if it makes its category's cut."""

    score: float
    src: Source
    i: int
    item_type: str
    sim: float
    app_match: float
    appl: float
    bonus: float


def _rank_key(c: _Cand) -> tuple[float, str]:
    """Best score first; ties by id, so equal scores always come out in the same order."""
    return (-c.score, c.src.entries[c.i]["id"])


def _in_rank_order(cands: list[_Cand], cap: int) -> Iterator[_Cand]:
    """Candidates best first: the cap's best without a full sort, the rest only if some are turned away."""
    if len(cands) <= 512:  # a C sort of a few hundred beats a heap walked in Python
        yield from sorted(cands, key=_rank_key)
        return
    head = heapq.nsmallest(cap + 2, cands, key=_rank_key)
    yield from head
    if len(cands) > len(head):
        yield from sorted(cands, key=_rank_key)[len(head):]


class Retriever:
    """Finds the few most useful memories for a goal; never raises for bad data (it is skipped)."""

    def __init__(self, device: DeviceMemory, episodes: TaskEpisodeStore, long_term: LongTermStore,
                 config: RetrieveConfig | None = None) -> None:
        self.device = device
        self.episodes = episodes
        self.long_term = long_term
        self.config = config or RetrieveConfig()
        root = device.root

        def cache(name: str) -> TokenCache | None:
            return TokenCache(root, name) if self.config.persist_postings else None

        self._device_sources = {t: Source("device", device_text, cache=cache(f"device-{t}"))
                                for t in device.collections}
        self._episode_source = Source("episode", episode_text, device.catalog.app_id_for, cache=cache("episodes"))
        self._lt_source = Source("long_term", long_term_text, cache=cache("long_term"))
        self._writer = PostingsWriter()
        self._due: list[Source] = []  # sources whose postings are written once this retrieve has its answer
        self.scorer = Scorer(self.config)
        self.rule_scope = RuleScope(device.catalog)
        self._item_cache: dict[str, tuple[tuple[int, int, int], Any]] = {}
        self.explain = False  # record each dropped candidate with its reason (`retrieve --explain`)

    # -- the call ----------------------------------------------------------------

    def retrieve(self, req: MemoryRetrieveRequest, now: datetime) -> MemoryContext:
        """Build the MemoryContext for a request."""
        ctx = self._query(req, now)
        picked: dict[str, list[_Cand]] = {k: [] for k in CAPS}
        dropped: dict[str, int] = {}
        dropped_items: list[dict[str, Any]] = []
        explain = self.explain

        def drop(reason: str, item_id: Any = None, detail: str | None = None) -> None:
            dropped[reason] = dropped.get(reason, 0) + 1
            if explain and item_id is not None and len(dropped_items) < 500:
                dropped_items.append({"id": item_id, "reason": reason, **({"detail": detail} if detail else {})})

        self._device_candidates(ctx, picked, drop)
        self._episode_candidates(ctx, picked, drop)
        users: list[_Cand] = []  # the user's rules and preferences that apply: outside the caps, budgeted first
        self._long_term_candidates(ctx, picked, drop, users)

        common = RoleMemoryContext()
        index_mtimes: dict[Path, int] = {}
        for cat, cands in picked.items():
            cap = self.config.caps.get(cat, 3)
            hits: list[MemoryHit] = []
            rescored = False
            for c in _in_rank_order(cands, cap):
                if len(hits) >= cap:
                    break
                # The index may be older than the files (a person deleted, emptied or switched one off):
                # what is offered is checked against its own file (a stat when warm).
                rec = self._current(c, drop, index_mtimes, ctx)
                if rec is True:
                    hits.append(self._hit(c, cat, now))
                elif rec is not None:
                    hits.append(self._hit(rec[2], cat, now, rec[0], rec[1]))
                    rescored = True
            if rescored:  # a file read now may score other than its index line did
                hits.sort(key=lambda h: (-h.score, h.id))
            setattr(common, cat, hits)
        user_hits = self._user_hits(users, ctx, now, drop, index_mtimes, common)
        common.long_term = [*user_hits, *common.long_term]
        self._device_profile(req.device_id or "default", common, now)
        self._expand_steps(common)
        self._fit_budget(common, len(user_hits), drop)
        out = MemoryContext(common, ctx.q, dropped=dropped)
        out.dropped_items = dropped_items
        self._persist_due()
        return out

    def _query(self, req: MemoryRetrieveRequest, now: datetime) -> Query:
        """The parsed goal and the request's environment key (device, language, screen, app, input method)."""
        hints = req.current_hints
        q = parse_query(req.input, self.device.catalog, app_hint=hints.app)
        env = tuple(str(v).lower() if v not in (None, "") else None for v in
                    (req.device_id or "default", hints.language, hints.screen(), q.app, hints.input_method))
        if q.app is not None and not q.apps and not self._about_app(q, q.app):
            # The foreground app is context, not evidence: it raises the memories a goal is about, but a goal
            # that shares no word with anything the device knows of that app ("2+2等于多少？" with 微信 in
            # front) is about no app, and the app's memories are not admitted on the hint alone.
            q.app = q.app_name = None
        names = tuple(e.lower() for e in q.entities
                      if len(e) >= 2 and not e.replace(".", "").replace(":", "").isdigit())
        tools = frozenset(t.lower() for t in req.tool_names if isinstance(t, str) and t)
        exclude = frozenset(x for x in req.exclude_ids if isinstance(x, str))
        return Query(q, env, now, names, tools, exclude)

    def _about_app(self, q: ParsedQuery, app: str) -> bool:
        """Whether the goal shares a word with an episode or device memory of ``app`` (the hinted app); numbers
        are quantities, not what a goal is about, and do not count."""
        words = frozenset(t for t in q.tokens if not t.isdigit())
        if not words:
            return False
        sources: list[tuple[Source, Callable[[], list[dict[str, Any]]], Any, bool]] = [
            (self._episode_source, self.episodes.entries, "episodes index", True)]
        sources += [(self._device_sources[t], c.entries, c.dir, False) for t, c in self.device.collections.items()]
        for src, read, what, canon in sources:
            if not self._sync(src, read, what):
                continue
            docs = (src.by_canon if canon else src.by_app).get(app)
            if docs and any(not src.inv.doc(i).isdisjoint(words) for i in docs[-200:]):
                return True
        return False

    # -- filters and scoring -------------------------------------------------------

    def _admit(self, f: Feat, ctx: Query, drop: Drop, app_bound: bool, item_id: str) -> float | None:
        """The applicability of a live, applicable memory; None (and the reason counted) otherwise."""
        if not self.scorer.live(f, ctx.now, drop, item_id):
            return None
        appl = self.scorer.applicability(f.appl, ctx.env, app_bound)
        if appl is None:
            drop("inapplicable", item_id, mismatch(f.appl, ctx.env) if self.explain else None)
        return appl

    def _sync(self, src: Source, read: Callable[[], list[dict[str, Any]]], what: Any) -> bool:
        """Bring a source in step with its index; an unreadable index is logged and skipped."""
        try:
            src.sync(read())
        except (OSError, FileProblemError) as exc:
            log.warning("retrieve: cannot read %s: %s", what, exc)
            return False
        if src.cache_due() and src not in self._due:
            self._due.append(src)
        return True

    def _persist_due(self) -> None:
        """Write the postings of the sources found behind (in the background: the caller has its answer)."""
        if not self._due:
            return
        sources, self._due = self._due, []
        jobs = []
        for src in sources:
            if src.cache is not None:
                # A snapshot: later appends (or a reset after a rewrite) do not change what is written.
                grams = src.inv.grams
                jobs.append((src.cache, src.inv, src.texts[:], grams.snapshot() if grams is not None else None))
                src.persisted = len(src.texts)  # one write per lag, even if it fails
        self._writer.submit(jobs)

    def prepare(self) -> None:
        """Bring every source in step with its index now and write the persisted postings that are missing
        or behind (at start-up, after GC), so the next retrieve finds them ready."""
        for item_type, coll in self.device.collections.items():
            self._sync(self._device_sources[item_type], coll.entries, coll.dir)
        self._sync(self._episode_source, self.episodes.entries, "episodes index")
        self._sync(self._lt_source, self.long_term.entries, "long-term index")
        self._persist_due()

    def wait(self, timeout: float = 10.0) -> bool:
        """Wait for background cache writes; False if the timeout passed first."""
        return self._writer.wait(timeout)

    def _store_of(self, c: _Cand) -> tuple[Path, str, Path, Callable[[Path], Any], Callable[[Any], dict[str, Any]]]:
        """Where a candidate's item lives: (folder, its default file name there, the index, the loader, the
        index line of a record)."""
        e_id, kind = c.src.entries[c.i]["id"], c.src.kind
        store: Any = (self.episodes if kind == "episode" else self.long_term if kind == "long_term"
                      else self.device.collections[c.item_type])
        return store.dir, store.layout.name_for(e_id), store.index.path, store.load_path, store.entry_for

    def _current(self, c: _Cand, drop: Drop, index_mtimes: dict[Path, int], ctx: Query) -> Any:
        """Whether a candidate's file still stands behind its index line: True (trusted as indexed),
        (record, its index line now, the candidate scored on it) when the file changed since the index
        was written, or None (dropped, counted)."""
        kind, item_id = c.src.kind, c.src.entries[c.i].get("id")
        base, default, idx, load, entry_for = self._store_of(c)
        if idx not in index_mtimes:
            index_mtimes[idx] = mtime_ns(idx)  # once per index and retrieve
        state, path, why = file_state(base, field_str(c.src.entries[c.i].get("path")) or default, index_mtimes[idx])
        if state is FileState.INDEXED:
            return True  # what the index says is what the file says
        if state is FileState.MISSING and kind in ("device", "long_term"):
            # Renamed by a person: the item is found by the id inside it (issue 27).
            found = (self.device.collections[c.item_type].renamed_path(str(item_id)) if kind == "device"
                     else self.long_term.renamed_path(str(item_id)))
            if found is not None:
                state, path = FileState.CHANGED, str(found)
        if state is FileState.CHANGED:
            # A hand edit after the index was written: read it (once per change) before offering it.
            try:
                rec = self._cached(path, partial(load, Path(path)))
                fresh = entry_for(rec)
            except FileNotFoundError:
                state, why = FileState.MISSING, "the file was removed after its index line"
            except Exception as exc:  # a file a person edited may hold anything: it is skipped, never fatal
                state, why = FileState.UNREADABLE, str(exc)[:200]
            else:
                fresh["path"] = os.path.relpath(path, base)  # where it is now (a renamed file, too)
                return self._rescored(c, rec, fresh, drop, ctx)
        if state is FileState.UNREADABLE:
            log.warning("retrieve: %s not offered: %s", item_id, why)
        drop(state.value, item_id, why)
        return None

    def _rescored(self, c: _Cand, rec: Any, fresh: dict[str, Any], drop: Drop, ctx: Query) -> Any:
        """A candidate judged on its file as it is now: status, expiry, applicability, confidence and text
        (the file is the truth at once, not after verify rebuilds the index; issue 27)."""
        kind, item_id = c.src.kind, str(c.src.entries[c.i].get("id"))
        f = features(fresh, kind)
        status = str(rec.status)
        if status not in ("active", "conflicted", "interrupted"):
            drop(status if status in STATUSES else "inactive", item_id, f"the file now says status {status}")
            return None
        if kind == "long_term" and not str(getattr(rec, "content", "")).strip():
            drop("file_empty", item_id, "the memory's text is empty")
            return None
        if kind != "episode" and not self.scorer.live(f, ctx.now, drop, item_id):
            return None
        appl = self.scorer.applicability(f.appl, ctx.env, kind == "long_term")
        if appl is None:
            drop("inapplicable", item_id, "the file now says " + mismatch(f.appl, ctx.env))
            return None
        score = self.scorer.score(f, c.sim, c.app_match, appl, ctx.now) + c.bonus
        return rec, (fresh, f), c._replace(score=score, appl=appl)

    def _hit(self, c: _Cand, category: str, now: datetime, rec: Any = None,
             fresh: tuple[dict[str, Any], Feat] | None = None) -> MemoryHit:
        """The MemoryHit of a chosen candidate, with every score factor kept for --explain."""
        e, f = fresh if fresh is not None else (c.src.entries[c.i], c.src.feat(c.i))
        factors = {"goal_similarity": c.sim, "entity_or_app_match": c.app_match, "applicability": c.appl,
                   "confidence": f.confidence, "recency": self.scorer.recency(f.when, now), "validation": f.validation,
                   "conflict_or_stale_penalty": f.penalty}
        if c.bonus:
            factors["user_rule_bonus"] = c.bonus
        if not f.has_evidence:
            factors["no_evidence"] = 1.0  # part of the penalty: nothing on disk shows this memory
        kind = c.src.kind
        rel = field_str(e.get("path"))
        store: Any = (self.episodes if kind == "episode" else self.long_term if kind == "long_term"
                      else self.device.collections[c.item_type])
        layout = store.layout
        if kind == "episode":
            success = f.validation == 1.0
            item_type = "task_episode" if success else "task_episode_failure"
            text, title = field_text(e.get("summary")) or field_text(e.get("goal")), field_str(e.get("goal"))
            path = f"{layout.rel_dir}/{rel or ''}"
        elif kind == "long_term":
            item_type, text = field_str(e.get("type")) or "fact", field_text(e.get("summary"))
            if rec is not None:  # the text as the file holds it now, if a person edited it since
                text = " ".join(str(rec.content).split())[:240] or text
            title = field_str(e.get("title"))
            path = f"{layout.rel_dir}/{rel or ''}"
        else:
            item_type, title = c.item_type, field_str(e.get("title"))
            text = field_text(e.get("summary")) or field_text(e.get("title")) or e["id"]
            path = f"{layout.rel_dir}/{rel or layout.name_for(e['id'])}"
        return MemoryHit(id=e["id"], type=item_type, score=round(c.score, 4), confidence=f.confidence, text=text,
                         title=title, path=path, app=f.app, page=field_str(e.get("page")), status=f.status,
                         factors={k: round(v, 3) for k, v in factors.items()},
                         caution=category in ("failure_modes", "conflicts"),
                         conflicts_with=[x for x in field_words(e.get("conflicts_with")) if x != e["id"]][:3]
                         if category == "conflicts" else [])

    def _recall(self, src: Source, q: ParsedQuery) -> dict[int, float]:
        """Candidates of one source: the best token matches, the query app's items, the always-shown ones."""
        found = dict(src.inv.search(q.tokens, self.config.search_limit))
        # Below the search cut-off a document shares no token with the query, so its similarity is 0;
        # only when the search was truncated must the extra candidates be measured.
        truncated = len(found) >= self.config.search_limit
        weights = src.inv.weights(q.tokens) if truncated else None
        extra = list(src.always)
        for app in {q.app, *q.apps} - {None}:
            extra += src.by_app.get(str(app), [])[-self.config.app_bound_limit:]
        for i in extra:
            if i not in found:
                found[i] = src.inv.similarity(q.tokens, i, weights) if truncated else 0.0
        return found

    # -- device memory -------------------------------------------------------------

    def _device_candidates(self, ctx: Query, picked: dict[str, list[_Cand]],
                           drop: Drop) -> None:
        q = ctx.q
        for item_type, coll in self.device.collections.items():
            src = self._device_sources[item_type]
            if not self._sync(src, coll.entries, coll.dir):
                continue
            for i, sim in self._recall(src, q).items():
                self._device_hit(src, i, item_type, sim, ctx, picked, drop)

    def _device_hit(self, src: Source, i: int, item_type: str, sim: float, ctx: Query,
                    picked: dict[str, list[_Cand]], drop: Drop) -> None:
        f = src.feat(i)
        e = src.entries[i]
        q = ctx.q
        status = f.status
        stale = e.get("stale")
        if status == "conflicted" and stale in ENV_KEYS:
            # Demoted only because the device's environment changed; the request's own hints are
            # fresher: if they match what the memory was made under, it applies again.
            k = ENV_KEYS.index(stale)
            if ctx.env[k] is not None and f.appl[k] == ctx.env[k]:
                status = "active"
        sim = intent_sim(q, field_str(e.get("intent")), sim)
        # Relevance first: it is the cheap test that most recalled items fail (the hard filters
        # below then count what they drop among memories that would otherwise have been shown).
        if not self.scorer.relevant(item_type, sim, q, f.app, status):
            return
        appl = self._admit(f, ctx, drop, False, e["id"])
        if appl is None:
            return
        if item_type == "calibration" and not f.has_evidence:
            drop("calibration_without_evidence", e["id"], "no evidence_refs")
            return
        if ctx.tools and not tools_available(e, ctx.tools):
            # A path the agent could not follow with the tools it has now.
            drop("tool_unavailable", e["id"], f"needs {field_text(e.get('tools'))}")
            return
        app_match = app_match_of(ctx, f.app, e, "summary")
        cand = _Cand(self.scorer.score(f, sim, app_match, appl, ctx.now), src, i, item_type, sim, app_match, appl, 0.0)
        picked["conflicts" if status == "conflicted" else ROUTE[item_type]].append(cand)

    # -- episodes --------------------------------------------------------------------

    def _episode_candidates(self, ctx: Query, picked: dict[str, list[_Cand]],
                            drop: Drop) -> None:
        src = self._episode_source
        if not self._sync(src, self.episodes.entries, "episodes index"):
            return
        q, now = ctx.q, ctx.now
        floor = self.config.min_similarity
        limit = self.config.search_limit
        hits = src.inv.search(q.tokens, limit)  # best first
        if ctx.exclude:
            hits = [(i, sim) for i, sim in hits if src.entries[i]["id"] not in ctx.exclude]
        found = dict(hits)
        nearest = hits[:8]
        lead, fused = self._nearest(src, q, hits, ctx.exclude)
        post = src.app_posterior(q.tokens, ctx.exclude, nearest)
        target = self._target_app(q, post)
        if target is not None:
            # The device's experience of the app the goal is about is a candidate even when no word
            # is shared: which app it is was learned from the device's own goals, not from the words.
            truncated = len(hits) >= limit
            weights = src.inv.weights(q.tokens) if truncated else None
            # The app's most recent episodes, a few more than can be shown: they compete on score.
            for i in src.by_canon.get(target, [])[-2 * self.config.caps.get("similar_episodes", 3):]:
                if i not in found:
                    found[i] = src.inv.similarity(q.tokens, i, weights) if truncated else 0.0
        for i, sim in found.items():
            e = src.entries[i]
            if ctx.exclude and e["id"] in ctx.exclude:
                continue  # one of the app's recent episodes the caller left out
            f = src.feat(i)
            if f.status not in ("active", "interrupted"):
                drop(f.status, e["id"], f"status {f.status}")
                continue
            if f.when and f.when is not BAD_TIME and (now - f.when).days > self.config.episode_max_age_days:
                drop("expired", e["id"], f"older than {self.config.episode_max_age_days:g} days")
                continue
            appl = self.scorer.applicability(f.appl, ctx.env, False)
            if appl is None:
                drop("inapplicable", e["id"], mismatch(f.appl, ctx.env) if self.explain else None)
                continue
            app = src.canon[i]
            sim = intent_sim(q, field_str(e.get("intent")), max(sim, fused.get(i, 0.0)))
            success = f.validation == 1.0
            if success:
                if sim < floor and not (target is not None and app == target):
                    continue
            elif sim < floor + 0.1:
                continue
            app_match = max(app_match_of(ctx, app, e, "goal"), post.get(app, 0.0) if app else 0.0)
            if i == lead:
                # The closest past goal leads: a near-duplicate task is the strongest evidence there is,
                # and the app prior must not push it below episodes that only share the app.
                app_match = 1.0
            score = self.scorer.score(f, sim, app_match, appl, now)
            cand = _Cand(score, src, i, "task_episode", sim, app_match, appl, 0.0)
            picked["similar_episodes" if success else "failure_modes"].append(cand)

    @staticmethod
    def _nearest(src: Source, q: ParsedQuery, hits: list[tuple[int, float]],
                 exclude: frozenset[str]) -> tuple[int | None, dict[int, float]]:
        """The closest past goal among the word search's hits, and each hit's similarity on a calibrated scale.

        The hits are ordered by BM25 over shared words and character trigrams (an inflection, a typo or a
        phrase counts as in FTS5 trigram). A hit's similarity is the larger of its BM25 scaled so that the
        closest gets the best word similarity (the words' scale, the trigrams' order) and its BM25 as a share
        of the query's own score (so a goal close in characters but not in words, a typo, clears the floor)."""
        if not hits or src.inv.grams is None:
            return (hits[0][0] if hits else None), {}
        left_out = [i for i, e in enumerate(src.entries) if e["id"] in exclude] if exclude else []
        ranked, own = nearest_goal(q.text, q.tokens, [i for i, _ in hits], src.inv, src.inv.grams, src.texts,
                                   left_out)
        top = ranked[0][1]
        if top <= 0 or own <= 0:
            return hits[0][0], {}
        best = hits[0][1]
        return ranked[0][0], {i: max(best * b / top, min(1.0, b / own)) for i, b in ranked}

    @staticmethod
    def _target_app(q: ParsedQuery, post: dict[str, float]) -> str | None:
        """The app the goal is about: the one it names, else the one the device's goals make more likely
        than all others together."""
        if q.app and not q.app_generic:
            return q.app
        if not post:
            return None
        app, p = max(post.items(), key=lambda kv: kv[1])
        return app if p > 0.5 else None

    # -- long-term -------------------------------------------------------------------

    def _long_term_candidates(self, ctx: Query, picked: dict[str, list[_Cand]],
                              drop: Drop, users: list[_Cand] | None = None) -> None:
        src = self._lt_source
        if not self._sync(src, self.long_term.entries, "long-term index"):
            return
        q = ctx.q
        for i, sim in self._recall(src, q).items():
            e = src.entries[i]
            user_rule = field_str(e.get("type")) in PROFILE_TYPES
            if not user_rule and sim < self.config.min_similarity:
                continue
            f = src.feat(i)
            appl = self._admit(f, ctx, drop, True, e["id"])
            if appl is None:
                continue
            # User rules outrank automatic experience: full validation (set in features) and a bonus.
            app_match = app_match_of(ctx, None, e, "summary")
            bonus = 0.2 if user_rule else 0.0
            score = self.scorer.score(f, sim, app_match, appl, ctx.now) + bonus
            cand = _Cand(score, src, i, "long_term", sim, app_match, appl, bonus)
            if (users is not None and f.status != "conflicted" and field_str(e.get("type")) in USER_WORD_TYPES
                    and self.rule_scope.applies(e, q)):
                users.append(cand)  # the user's word for this goal: always in the block (see _user_rules)
                continue
            picked["conflicts" if f.status == "conflicted" else "long_term"].append(cand)

    def _user_hits(self, users: list[_Cand], ctx: Query, now: datetime, drop: Drop,
                   index_mtimes: dict[Path, int], common: RoleMemoryContext) -> list[MemoryHit]:
        """The rules and preferences that apply, as many as fit their share of the block: the user's own first,
        then those naming the goal's app, rules before preferences, then by score. The rest are counted in
        ``common.user_rules_left_out`` (and named in --explain), never read."""
        q = ctx.q
        goal_apps = {a for a in (q.app, *q.apps) if a}
        scope = self.rule_scope

        def order(c: _Cand) -> tuple[bool, bool, float, float, str]:
            e = c.src.entries[c.i]
            return (e.get("source") == "model", not (goal_apps and scope.apps(e) & goal_apps),
                    -field_num(e.get("priority"), 0), -c.score, e["id"])

        share = int(self.config.budget_chars * RULE_SHARE)
        hits: list[MemoryHit] = []
        used = 0
        # Only the first few can fit their share (a line is at least ~60 characters): the rest need no order,
        # only a count, unless some of the first are dropped as unreadable (then everything is ordered).
        first = share // 60 + 1
        ranked = heapq.nsmallest(first, users, key=order) if len(users) > 2 * first else sorted(users, key=order)
        if len(ranked) < len(users):
            chosen = {id(c) for c in ranked}
            rest = [c for c in users if id(c) not in chosen]
            head = len(ranked)
            ranked += rest
        else:
            head = len(ranked)
        for n in range(len(ranked)):
            if n == head and head < len(ranked):
                ranked[head:] = sorted(ranked[head:], key=order)  # the share is not full yet: in order on
            c = ranked[n]
            rec = self._current(c, drop, index_mtimes, ctx)
            if rec is None:
                continue
            hit = self._hit(c, "long_term", now) if rec is True else self._hit(rec[2], "long_term", now, rec[0], rec[1])
            cost = len(hit_line(hit)) + 1
            if hits and used + cost > share:
                # Beyond the share: counted and named, not checked one by one (there may be hundreds).
                left = ranked[n:]
                common.user_rules_left_out = len(left)
                why = (f"a rule or preference beyond their {share}-character share of the block (the block says "
                       "how many are left out and how to list them)")
                for x in left:
                    drop("budget", x.src.entries[x.i]["id"], why)
                break
            used += cost
            hits.append(hit)
        return hits

    # -- profile, steps, budget ----------------------------------------------------------

    def _device_profile(self, device_id: str, common: RoleMemoryContext, now: datetime) -> None:
        path = self.device.profiles.path_for(device_id)
        try:
            prof = self._cached(path, lambda: self.device.profiles.load_path(path))
        except FileNotFoundError:
            return
        except Exception as exc:  # a hand-edited profile may hold anything: no profile shown, never a failure
            log.warning("retrieve: device profile unreadable: %s", exc)
            return
        if prof.status != "active" or prof.is_expired(now):
            return  # an expired profile is stale knowledge of the device: not shown (verify marks it)
        common.device_profile = [MemoryHit(
            id=prof.id, type="device_profile", score=1.0, confidence=prof.confidence, text=prof.body(),
            path=str(path.relative_to(self.device.root)), status=prof.status)]

    def _cached(self, path: Any, load: Callable[[], Any]) -> Any:
        """An item loaded from a file, cached until the file's stat changes (warm path)."""
        st = os.stat(path)
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        hit = self._item_cache.get(str(path))
        if hit is not None and hit[0] == key:
            return hit[1]
        value = load()
        if len(self._item_cache) > 512:
            self._item_cache.clear()
        self._item_cache[str(path)] = (key, value)
        return value

    def _expand_steps(self, common: RoleMemoryContext) -> None:
        coll = self.device.collections["procedure"]
        for hit in common.procedures:
            if type_of_id(hit.id) != "procedure":
                continue
            try:
                path = safe_join(self.device.root, hit.path) if hit.path else coll.item_path(hit.id)
                # The same cached record the freshness check may have loaded: one parse per file change.
                proc = self._cached(path, partial(coll.load_path, path))
            except Exception as exc:  # the steps of a hand-edited file are optional: the hit stays without them
                log.warning("retrieve: %s unreadable: %s", hit.id, exc)
                continue
            hit.steps = [s.render() for s in getattr(proc, "steps", [])]

    def _fit_budget(self, common: RoleMemoryContext, users: int = 0, drop: Drop | None = None) -> None:
        # The user's rules and preferences that apply (the first ``users`` long-term hits, already within
        # their share) stay; the weakest other hits are dropped until the block fits, cautions last.
        budget = self.config.budget_chars
        order = ["similar_episodes", "navigation", "calibration_notes", "long_term", "procedures", "app_profiles",
                 "conflicts", "failure_modes"]
        memo: dict[tuple[int, bool], str] = {}  # the hits do not change while the weakest are dropped
        why = f"left out of the {budget}-character block"
        size = len(render_context(common, memo))
        while size > budget:
            victims = [(getattr(common, c)[-1].score, c) for c in order
                       if len(getattr(common, c)) > (users if c == "long_term" else 0)]
            if not victims:
                return
            non_caution = [v for v in victims if v[1] not in ("conflicts", "failure_modes")]
            _, cat = min(non_caution or victims)
            hits = getattr(common, cat)
            gone = hits.pop()
            if drop is not None:
                drop("budget", gone.id, f"{why} ({cat}; weakest there)")
            line = memo.get((id(gone), cat == "conflicts"))
            if hits and line is not None:
                # One line of a section that stays: the block is that line (and its newline) shorter. When
                # the estimate fits, the block is rendered once more to be sure.
                size -= len(line) + 1
                if size <= budget:
                    size = len(render_context(common, memo))
            else:
                size = len(render_context(common, memo))
