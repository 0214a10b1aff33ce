"""The retriever: recall candidates from the indexes, judge each one, route the kept ones, trim to the block.

Per-entry facts (status, parsed times, applicability, validation, penalty) are computed once per index
generation (``_generation``); a query only intersects postings and judges the few candidates left.
"""

from __future__ import annotations

import heapq
import logging
import os
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from memory_plane.device_memory import GENERIC_NAMES, DeviceMemory, Procedure, type_of_id
from memory_plane.episodes import TaskEpisodeStore, is_system_screen
from memory_plane.lifecycle import FileProblemError, UnsafePathError, field_str, is_safe_id, safe_join

from .._contradiction import Stance, stance
from .._freshness import FileState, file_state, mtime_ns, still_indexed
from .._long_term import USER_WORD_TYPES, LongTermStore
from .._retrieve_types import MemoryHit, MemoryRetrieveRequest, RoleMemoryContext
from ._budget import fit_budget, in_rank_order, rank_key
from ._candidates import Cand as _Cand
from ._candidates import Rejudged
from ._config import CAPS, RetrieveConfig
from ._context import MemoryContext
from ._drops import DropLog
from ._features import said_text
from ._generation import Generation, IndexedFile, Loaded, StatKey
from ._goal_match import Query
from ._hits import HitMaker
from ._postings_cache import PostingsWriter, TokenCache
from ._query import ParsedQuery, parse_query
from ._recall import closest_always, recall, recall_episodes
from ._render import hit_line, slotted_text
from ._rule_plan import PlanShare, rule_plan
from ._rules_said import RulesSaid
from ._scoring import Scorer
from ._snapshot import SnapshotFile, SnapshotHook, StaleSnapshot
from ._sources import DeviceSource, EpisodeSource, LongTermSource, Source
from ._user_rules import RULE_SHARE, GoalRules, RuleScope

log = logging.getLogger("memory_plane")


class Checked(NamedTuple):
    """A candidate that still stands behind its index line: as indexed (``fresh`` None), or as its file says now."""

    cand: _Cand
    fresh: Rejudged | None




def stat_key(path: Path | str) -> StatKey:
    """The version of a file as ``os.stat`` tells it (raises OSError)."""
    st = os.stat(path)
    return StatKey(st.st_mtime_ns, st.st_size, st.st_ino)


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

        self._device_sources = {t: DeviceSource(c, cache(f"device-{t}")) for t, c in device.collections.items()}
        self._episode_source = EpisodeSource(episodes, device.catalog.app_id_for, cache("episodes"))
        self._lt_source = LongTermSource(long_term, cache("long_term"))
        if self.config.persist_postings:
            snap = SnapshotFile(root, "long_term")
            self._lt_source.keep_snapshot(snap, self.config.verdicts_key(), self.config.snapshot_min)
            # The store's writers keep the snapshot in step: an append moves its version on, a forget takes the
            # forgotten lines out of it before they are blanked.
            long_term.index_hook = SnapshotHook(snap)
        self._sources: list[Source] = [*self._device_sources.values(), self._episode_source, self._lt_source]
        # The stores a tombstone's type names (see _present).
        self._tombstoned = {**device.collections, "memory": long_term}
        self._writer = PostingsWriter()
        self._due: list[Source] = []  # sources whose postings are written once this retrieve has its answer
        self.scorer = Scorer(self.config)
        self.rule_scope = RuleScope(device.catalog)
        self._profiles: dict[str, Loaded] = {}  # device profile file -> its record (one per device on disk)
        self.hits = HitMaker(self.scorer)

    # -- the call ----------------------------------------------------------------

    def retrieve(self, req: MemoryRetrieveRequest, now: datetime, explain: bool = False) -> MemoryContext:
        """Build the MemoryContext for a request; with ``explain``, each candidate a filter dropped is named."""
        try:
            return self._retrieve(req, now, explain)
        except StaleSnapshot:
            # A snapshot could not be read to the end (damaged, or written anew meanwhile): its source reads its index
            # whole, and the retrieve is made again.
            for src in self._sources:
                src.snapshot_failed()
            return self._retrieve(req, now, explain)

    def _retrieve(self, req: MemoryRetrieveRequest, now: datetime, explain: bool) -> MemoryContext:
        in_step = self._sync_all()  # once per retrieve: the hinted app's check and the candidates read the same
        ctx = self._query(req, now, in_step)
        drop = DropLog(explain)
        picked: dict[str, list[_Cand]] = {k: [] for k in CAPS}
        self._device_candidates(ctx, picked, drop, in_step)
        if self._episode_source in in_step:
            self._episode_candidates(ctx, picked, drop)
        users: list[_Cand] = []  # the user's rules and preferences that apply: outside the caps, budgeted first
        rules, planned = None, None
        if self._lt_source in in_step:
            rules, planned = self._long_term_candidates(ctx, picked, drop, users)
        index_mtimes: dict[Path, int] = {}
        said = self._rulessaid_text(users, planned)
        common = self._within_caps(picked, ctx, drop, index_mtimes, said, planned.ranked() if planned else {})
        user_hits = ([] if rules is None
                     else self._user_hits(users, planned, rules, ctx, now, drop, index_mtimes, common))
        common.long_term = [*user_hits, *common.long_term]
        self._device_profile(req.device_id or "default", common, now, ctx.exclude)
        self._expand_steps(common, req.input)
        fit_budget(common, self.config.budget_chars, len(user_hits), drop)
        out = MemoryContext(common, ctx.q, dropped=drop.counts)
        out.dropped_items = drop.items
        # What this retrieve learned may make a snapshot due (its rules' apps were named under another catalog).
        self._due += [src for src in in_step if src not in self._due and src.snapshot_due()]
        self._persist_due()
        return out

    def _query(self, req: MemoryRetrieveRequest, now: datetime, in_step: set[Source]) -> Query:
        """The parsed goal and the request's environment key (device, language, screen, app, input method)."""
        hints = req.current_hints
        # A task started on the home screen is not about the launcher: a system screen in front is no app hint
        # (as no lesson is filed under one).
        hint = None if hints.app and is_system_screen(hints.app) else hints.app
        q = parse_query(req.input, self.device.catalog, app_hint=hint, tool_names=req.tool_names)
        env = tuple(str(v).lower() if v not in (None, "") else None for v in
                    (req.device_id or "default", hints.language, hints.screen(), q.app, hints.input_method))
        if q.app is not None and not q.apps and not self._about_app(q, q.app, in_step):
            # The foreground app is context, not evidence: it raises the memories a goal is about, but a goal
            # that shares no word with anything the device knows of that app ("2+2等于多少？" with 微信 in
            # front) is about no app, and the app's memories are not admitted on the hint alone.
            q.app = q.app_name = None
        names = tuple(e.lower() for e in q.entities
                      if len(e) >= 2 and not e.replace(".", "").replace(":", "").isdigit())
        tools = frozenset(t.lower() for t in req.tool_names if isinstance(t, str) and t)
        # A memory forgotten on purpose whose file a killed forget left behind is never served.
        exclude = frozenset(x for x in req.exclude_ids if isinstance(x, str)) \
            | self.long_term.tombstones.left_behind(self._present)
        return Query(q, env, now, names, tools, exclude)

    def _present(self, kind: str, item_id: str) -> bool:
        """Whether the file of a memory of this tombstone type is in the tree."""
        coll = self._tombstoned.get(kind)
        return coll is not None and is_safe_id(item_id) and coll.layout.expected_path(item_id).exists()

    def _apps_named(self, text: str) -> list[str]:
        """The apps a text names by a name of their own, as a goal's own app words are found ("settings" or
        "信息" may be just a word, and is not counted)."""
        return [app for app, _, name in self.device.catalog.find_in_text(text) if name.lower() not in GENERIC_NAMES]

    def _about_app(self, q: ParsedQuery, app: str, in_step: set[Source]) -> bool:
        """Whether the goal shares a word with an episode or device memory of ``app`` (the hinted app); numbers
        are quantities, not what a goal is about, and do not count."""
        words = frozenset(t for t in q.tokens if not t.isdigit())
        if not words:
            return False
        sources = [(self._episode_source, True), *((self._device_sources[t], False) for t in self.device.collections)]
        for src, canon in sources:
            if src not in in_step:
                continue
            gen = src.gen
            docs = (gen.by_canon if canon else gen.by_app).get(app)
            if docs and any(not gen.inv.doc(i).isdisjoint(words) for i in docs[-200:]):
                return True
        return False

    # -- the indexes ------------------------------------------------------------------

    def _sync_all(self) -> set[Source]:
        """Bring every source in step with its index; those that are (an unreadable index is logged and
        skipped)."""
        return {src for src in self._sources if self._sync(src)}

    def _sync(self, src: Source) -> bool:
        """Bring a source in step with its index; an unreadable index is logged and skipped."""
        try:
            if not src.sync_snapshot():
                src.sync(src.read())
        except (OSError, FileProblemError) as exc:
            log.warning("retrieve: cannot read %s: %s", src.label, exc)
            return False
        if (src.cache_due() or src.snapshot_due()) and src not in self._due:
            self._due.append(src)
        return True

    def _persist_due(self) -> None:
        """Write the postings of the sources found behind (in the background: the caller has its answer)."""
        if not self._due:
            return
        sources, self._due = self._due, []
        # Snapshots: later appends (or a reset after a rewrite) do not change what is written.
        postings = [src.persist_job() for src in sources if src.cache_due()]
        self._writer.submit([job for job in postings if job is not None],
                            [src.snapshot_job(self.scorer, self.rule_scope) for src in sources if src.snapshot_due()])

    def prepare(self) -> None:
        """Bring every source in step with its index now and write the persisted postings that are missing
        or behind (at start-up, after GC), so the next retrieve finds them ready."""
        self._sync_all()
        self._persist_due()

    def wait(self, timeout: float = 10.0) -> bool:
        """Wait for background cache writes; False if the timeout passed first."""
        return self._writer.wait(timeout)

    def _current(self, c: _Cand, drop: DropLog, index_mtimes: dict[Path, int], ctx: Query) -> Checked | None:
        """Whether a candidate's file still stands behind its index line: as indexed, or changed since the index
        was written (the candidate scored on the file as it is now); None when it is dropped (counted)."""
        src = c.src
        gen = src.gen
        seen = gen.indexed_at.get(c.i)
        if seen is not None:
            # The file was found as indexed before: the same one lstat decides again, without the paths worked
            # out anew (one index line names one file for as long as the index stays).
            idx, path = seen
            if idx not in index_mtimes:
                index_mtimes[idx] = mtime_ns(idx)
            if still_indexed(path, index_mtimes[idx]):
                return Checked(c, None)  # else gone, changed or odd now: the full check below says which
        item_id = gen.entries[c.i].get("id")
        store = src.store
        base, idx = store.dir, store.index.path
        if idx not in index_mtimes:
            index_mtimes[idx] = mtime_ns(idx)  # once per index and retrieve
        default = store.layout.name_for(gen.entries[c.i]["id"])
        state, path, why = file_state(base, field_str(gen.entries[c.i].get("path")) or default, index_mtimes[idx])
        if state is FileState.INDEXED:
            gen.indexed_at[c.i] = IndexedFile(idx, path)
            return Checked(c, None)  # what the index says is what the file says
        if state is FileState.MISSING:
            # Renamed by a person: the item is found by the id inside it (the file is the truth).
            found = src.renamed(str(item_id))
            if found is not None:
                state, path = FileState.CHANGED, str(found)
        if state is FileState.CHANGED:
            # A hand edit after the index was written: read it (once per change) before offering it.
            try:
                rec = gen.record(path, stat_key(path), partial(store.load_path, Path(path)))
                fresh = store.entry_for(rec)
            except FileNotFoundError:
                state, why = FileState.MISSING, "the file was removed after its index line"
            except Exception as exc:  # a file a person edited may hold anything: it is skipped, never fatal
                state, why = FileState.UNREADABLE, str(exc)[:200]
            else:
                fresh["path"] = os.path.relpath(path, base)  # where it is now (a renamed file, too)
                rejudged = self.scorer.rejudge(c, rec, fresh, ctx, drop)
                return None if rejudged is None else Checked(rejudged.cand, rejudged)
        if state is FileState.UNREADABLE:
            log.warning("retrieve: %s not offered: %s", item_id, why)
        drop(state.value, item_id, why)
        return None

    # -- candidates: recall, judge, route ------------------------------------------------

    def _device_candidates(self, ctx: Query, picked: dict[str, list[_Cand]], drop: DropLog,
                           in_step: set[Source]) -> None:
        q = ctx.q
        # The apps a memory bound to its app must have to be relevant to this goal (``Scorer.relevant``); the
        # others recalled are left out before they are judged (they would be, without a drop counted).
        one = frozenset((q.app,)) if q.app is not None else frozenset()
        bound: dict[str, frozenset[Any]] = {"navigation": one, "ui_anchor": one,
                                            "app_profile": frozenset((q.app, *q.apps)) - {None}}
        if q.app:
            bound["procedure"] = frozenset((q.app, None, ""))
        for item_type in self.device.collections:
            src = self._device_sources[item_type]
            if src in in_step:
                found = recall(src, q, self.config)
                if item_type in bound:
                    found = src.app_bound(found, bound[item_type])
                for section, cand in self.scorer.judge_all(src, found, item_type, ctx, drop):
                    picked[section].append(cand)

    def _episode_candidates(self, ctx: Query, picked: dict[str, list[_Cand]], drop: DropLog) -> None:
        src = self._episode_source
        found, evidence = recall_episodes(src, ctx, self.config, self._apps_named)
        shown: list[_Cand] = []
        for section, cand in self.scorer.judge_all(src, found, "task_episode", ctx, drop, evidence):
            (shown if section == "similar_episodes" else picked[section]).append(cand)
        picked["similar_episodes"] += self.scorer.last_resort(shown, evidence)

    def _long_term_candidates(self, ctx: Query, picked: dict[str, list[_Cand]], drop: DropLog,
                              users: list[_Cand]) -> tuple[GoalRules, PlanShare | None]:
        """The long-term candidates judged and routed (the user's word that applies into ``users``); the goal's
        view of the rules, and the share of the rule plan in them (None when ``drop.explain`` judges each one)."""
        src = self._lt_source
        rules = self.rule_scope.for_goal(src, ctx.q)
        planned = None
        # A word match under the noise floor counts as none: a rule sharing only the goal's commonest words is
        # judged as one sharing none (its verdict replayed from the plan), and is never looked at.
        floor = self.config.noise_similarity
        if drop.explain:
            reach = closest_always(src, ctx.q, self.config, src.gen.always_set, floor)
            found = recall(src, ctx.q, self.config, floor=floor, reach=reach)
        else:
            plan = rule_plan(self.scorer, src, src.gen.view(ctx.env), ctx, rules)
            # Judged with the goal as usual: the closest its words reach, what holds a name it gives, what is
            # clock-bound.
            reach = closest_always(src, ctx.q, self.config, src.gen.always_set, floor)
            found = recall(src, ctx.q, self.config,
                           sorted({*reach.intersection(plan.replay), *plan.named(ctx), *plan.unsettled}), floor, reach)
            apart = plan.replay.keys() & found.keys()
            if ctx.exclude:
                apart |= plan.excluded(ctx)
            planned = PlanShare(plan, apart)
        for section, cand in self.scorer.judge_all(src, found, "long_term", ctx, drop):
            if section == "long_term" and rules.user_word_applies(cand.i):
                users.append(cand)  # the user's word for this goal: always in the block (see _user_rules)
            else:
                picked[section].append(cand)
        if planned is not None:
            for reason, n in planned.counts().items():
                drop.add(reason, n)
        return rules, planned

    @staticmethod
    def _rulessaid_text(users: list[_Cand], planned: PlanShare | None) -> RulesSaid:
        """The stances of the user's rules and preferences that apply to the goal: the few judged now, and the
        plan's (worked out once per plan, not on every retrieve)."""
        def stances(cands: list[_Cand]) -> Callable[[], list[tuple[str, Stance]]]:
            return lambda: [(str(c.src.entries[c.i].get("id")), stance(said_text(c.src.entries[c.i]))) for c in cands]

        if planned is None:
            return RulesSaid(len(users), stances(users))
        plan = planned.plan
        if plan.said is None:
            ranked = plan.users

            def one(n: int) -> tuple[str, Stance]:
                c = ranked[n]
                return str(c.src.entries[c.i].get("id")), stance(said_text(c.src.entries[c.i]))

            # A snapshot knows each rule's filing word: only the rules a memory's words reach are worked out.
            filed = plan.src.filing_words([c.i for c in ranked]) if plan.src.gen.snap is not None else None
            plan.said = RulesSaid(len(ranked), stances(ranked), filed=filed, one=one if filed is not None else None)
        return RulesSaid(len(users), stances(users), plan.said, lambda: frozenset(
            str(c.src.entries[c.i].get("id")) for c in plan.users if c.i in planned.apart))

    @staticmethod
    def _overruled(c: _Cand, said: RulesSaid) -> tuple[str, str] | None:
        """(the rule's id, the memory's text) when an automatic memory says the opposite of a user's rule that
        applies; None otherwise (and for the user's own word)."""
        if not said or c.item_type == "task_episode":
            return None
        e = c.src.entries[c.i]
        if c.item_type == "long_term" and (field_str(e.get("type")) in USER_WORD_TYPES or e.get("source") == "user"):
            return None
        text = said_text(e)
        rid = said.overruling(stance(text))
        return (rid, text) if rid is not None else None

    def _within_caps(self, picked: dict[str, list[_Cand]], ctx: Query, drop: DropLog,
                     index_mtimes: dict[Path, int], said: RulesSaid,
                     replayed: dict[str, Iterator[_Cand]]) -> RoleMemoryContext:
        """Each section's best candidates up to its cap, each one checked against its own file; an automatic memory
        that says the opposite of a user's rule that applies is not offered (user rules outrank experience).
        ``replayed`` are a rule plan's candidates of each section, best first (merged, walked only as far as needed)."""
        common = RoleMemoryContext()
        for cat, cands in picked.items():
            cap = self.config.caps.get(cat, 3)
            kept: list[tuple[_Cand, MemoryHit]] = []
            rescored = False
            more = replayed.get(cat)
            ranked = in_rank_order(cands, cap) if more is None else heapq.merge(
                in_rank_order(cands, cap), more, key=rank_key)
            for c in ranked:
                if len(kept) >= cap:
                    break
                against = self._overruled(c, said)
                if against is not None:
                    drop("user_rule", c.src.entries[c.i].get("id"),
                         f"says the opposite of the user's rule {against[0]}" if drop.explain else None)
                    continue
                # The index may be older than the files (a person deleted, emptied or switched one off):
                # what is offered is checked against its own file (a stat when warm).
                checked = self._current(c, drop, index_mtimes, ctx)
                if checked is not None:
                    kept.append((checked.cand, self.hits.hit(checked.cand, cat, ctx.now, checked.fresh)))
                    rescored = rescored or checked.fresh is not None
            if rescored:  # a file read now may score other than its index line did: ranked again, one order
                kept.sort(key=lambda ch: rank_key(ch[0]))
            setattr(common, cat, [h for _, h in kept])
        return common

    def _user_hits(self, users: list[_Cand], planned: PlanShare | None, rules: GoalRules, ctx: Query, now: datetime,
                   drop: DropLog, index_mtimes: dict[Path, int], common: RoleMemoryContext) -> list[MemoryHit]:
        """The rules and preferences that apply (``users`` and the plan's), as many as fit their share of the
        block, in ``GoalRules.order``. The rest are counted in ``common.user_rules_left_out`` (and named in
        --explain), never read."""
        order = rules.order
        share = int(self.config.budget_chars * RULE_SHARE)
        hits: list[MemoryHit] = []
        used = 0
        # The plan's are in order already: merged with the few judged now, only as far as the share reaches.
        ranked = iter(sorted(users, key=order)) if planned is None else heapq.merge(
            sorted(users, key=order), planned.users(), key=order)
        total = len(users) + (planned.n_users if planned is not None else 0)
        for n, c in enumerate(ranked):
            checked = self._current(c, drop, index_mtimes, ctx)
            if checked is None:
                continue
            hit = (self.hits.rule_hit(c, ctx) if checked.fresh is None
                   else self.hits.hit(checked.cand, "long_term", now, checked.fresh))
            cost = len(hit_line(hit)) + 1
            if hits and used + cost > share:
                # Beyond the share: counted and named, not checked one by one (there may be hundreds).
                common.user_rules_left_out = total - n
                why = (f"a rule or preference beyond their {share}-character share of the block (the block says "
                       "how many are left out and how to list them)")
                if drop.explain:
                    drop.many("budget", [x.src.entries[x.i]["id"] for x in (c, *ranked)], why)
                else:
                    drop.add("budget", total - n)
                break
            used += cost
            hits.append(hit)
        return hits

    # -- profile and steps --------------------------------------------------------------

    def _device_profile(self, device_id: str, common: RoleMemoryContext, now: datetime,
                        exclude: frozenset[str]) -> None:
        try:
            path = self.device.profiles.path_for(device_id)
            prof = self._profile(path)
        except (FileNotFoundError, UnsafePathError):  # no profile, or one behind a symlink (never read)
            return
        except Exception as exc:  # a hand-edited profile may hold anything: no profile shown, never a failure
            log.warning("retrieve: device profile unreadable: %s", exc)
            return
        if prof.status != "active" or prof.is_expired(now) or prof.id in exclude:
            return  # an expired profile is stale knowledge of the device (verify marks it); an excluded one left out
        common.device_profile = [MemoryHit(
            id=prof.id, type="device_profile", score=1.0, confidence=prof.confidence, text=prof.body(),
            path=str(path.relative_to(self.device.root)), status=prof.status)]

    def _profile(self, path: Path) -> Any:
        """A device profile's record, read again only when its file changed."""
        stat = stat_key(path)
        known = self._profiles.get(str(path))
        if known is not None and known.stat == stat:
            return known.record
        prof = self.device.profiles.load_path(path)
        self._profiles[str(path)] = Loaded(stat, prof)
        return prof

    def _expand_steps(self, common: RoleMemoryContext, goal: str) -> None:
        coll = self.device.collections["procedure"]
        gen: Generation = self._device_sources["procedure"].gen
        for hit in common.procedures:
            if type_of_id(hit.id) != "procedure":
                continue
            try:
                path = safe_join(self.device.root, hit.path) if hit.path else coll.item_path(hit.id)
                # The same cached record the freshness check may have loaded: one parse per file change.
                proc = gen.record(path, stat_key(path), partial(coll.load_path, path))
            except Exception as exc:  # the steps of a hand-edited file are optional: the hit stays without them
                log.warning("retrieve: %s unreadable: %s", hit.id, exc)
                continue
            if isinstance(proc, Procedure):
                # The steps for the asked goal: its own values in the slots, never another task's text.
                hit.steps = [s.render() for s in proc.steps_for_goal(goal)]
                hit.text = slotted_text(proc, hit.text)
            else:
                hit.steps = [s.render() for s in getattr(proc, "steps", [])]
