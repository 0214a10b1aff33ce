"""The retrieval room's parts on their own: the drop log, the judge, recall's app decision, the caps' order,
the user rules' order and the budget (the whole path is tested in test_retrieve and test_user_word).

It reaches inside retrieval/ on purpose: these are its parts, tested one by one.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path

from memory_plane import (
    CurrentEnvironmentHints,
    MemoryHit,
    MemoryPlane,
    MemoryRetrieveRequest,
    ParsedQuery,
    RetrieveConfig,
    RoleMemoryContext,
    render_context,
)
from memory_plane.retrieval._budget import fit_budget, in_rank_order, rank_key
from memory_plane.retrieval._candidates import Cand, EpisodeEvidence
from memory_plane.retrieval._drops import DropLog
from memory_plane.retrieval._goal_match import Query
from memory_plane.retrieval._recall import target_app
from memory_plane.retrieval._scoring import Scorer
from memory_plane.retrieval._sources import EpisodeSource, LongTermSource, Source

NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _source(n: int) -> Source:
    src = LongTermSource()
    src.sync([{"id": f"mem_{k:04d}", "type": "rule" if k % 2 else "fact", "status": "active",
               "title": f"rule {k}", "summary": f"remember thing {k}", "priority": k % 3} for k in range(n)])
    return src


def _query(text: str = "remember thing") -> Query:
    q = ParsedQuery(text=text, tokens=frozenset(text.split()))
    return Query(q, ("default", None, None, None, None), NOW, (), frozenset(), frozenset())


def test_the_drop_log_counts_always_and_names_only_when_explaining() -> None:
    quiet, loud = DropLog(), DropLog(explain=True)
    for log in (quiet, loud):
        log("expired", "a", "past expires_at")
        log("budget", "b")
        log("budget")  # counted, not named: no id
    assert quiet.counts == loud.counts == {"expired": 1, "budget": 2}
    assert quiet.items == []
    assert loud.items == [{"id": "a", "reason": "expired", "detail": "past expires_at"},
                          {"id": "b", "reason": "budget"}]
    for k in range(DropLog.LIMIT + 10):
        loud("budget", f"x{k}")
    assert len(loud.items) == DropLog.LIMIT and loud.counts["budget"] == DropLog.LIMIT + 12


def test_the_judge_names_the_section_and_counts_what_it_turns_away() -> None:
    src = _source(4)
    src.entries[2]["status"] = "replaced"
    src.entries[3]["expires_at"] = "2020-01-01T00:00:00Z"
    scorer, drop = Scorer(RetrieveConfig()), DropLog(explain=True)
    verdicts = [scorer.judge(src, i, "long_term", 0.6, _query(), drop) for i in range(4)]
    assert [v[0] if v else None for v in verdicts] == ["long_term", "long_term", None, None]
    assert verdicts[1] is not None and verdicts[1][1].bonus == 0.2  # a rule outranks automatic experience
    assert drop.counts == {"replaced": 1, "expired": 1}
    assert scorer.judge(src, 0, "long_term", 0.1, _query(), drop) is None  # a fact below the floor: not counted
    assert drop.counts == {"replaced": 1, "expired": 1}


def test_the_target_app_is_the_named_one_else_a_majority_of_the_posterior() -> None:
    q = ParsedQuery(text="pay", tokens=frozenset({"pay"}))
    assert target_app(q, {}) is None
    assert target_app(q, {"alipay": 0.6, "wechat": 0.4}) == "alipay"
    assert target_app(q, {"alipay": 0.5, "wechat": 0.5}) is None
    q.app = "wechat"
    assert target_app(q, {"alipay": 0.9}) == "wechat"


def test_the_caps_order_is_the_full_sort_for_many_candidates() -> None:
    src = _source(1200)
    rng = random.Random(7)
    cands = [Cand(round(rng.random(), 2), src, i, "long_term", 0.0, 0.0, 1.0, 0.0) for i in range(1200)]
    assert list(in_rank_order(cands, 3)) == sorted(cands, key=rank_key)
    assert list(in_rank_order(cands[:100], 3)) == sorted(cands[:100], key=rank_key)


def test_the_budget_trims_the_weakest_and_keeps_the_users_rules() -> None:
    common = RoleMemoryContext()
    common.long_term = [MemoryHit(id=f"mem_{k}", type="rule", score=0.1, confidence=0.8, text="x" * 200)
                        for k in range(3)]
    common.similar_episodes = [MemoryHit(id=f"ep_{k}", type="task_episode", score=0.9 - k / 10, confidence=1.0,
                                         text="y" * 200) for k in range(3)]
    drop = DropLog(explain=True)
    budget = len(render_context(common)) - 100
    fit_budget(common, budget, users=3, drop=drop)
    assert len(render_context(common)) <= budget
    assert [h.id for h in common.long_term] == ["mem_0", "mem_1", "mem_2"]
    assert [d["id"] for d in drop.items] == ["ep_2"]


def test_explain_is_an_argument_not_a_state_of_the_retriever(root: Path) -> None:
    plane = MemoryPlane(root, clock=lambda: NOW)
    plane.long_term.save_memory(type="fact", content="the wifi password is on the fridge", title="wifi")
    plane.long_term.save_memory(type="fact", content="wifi password at the office is on the board",
                                title="office wifi", applicability={"language": "en-US"})
    req = MemoryRetrieveRequest(input="wifi password", current_hints=CurrentEnvironmentHints(language="zh-CN"))
    loud = plane._retriever.retrieve(req, NOW, explain=True)
    quiet = plane._retriever.retrieve(req, NOW)
    assert loud.dropped == quiet.dropped == {"inapplicable": 1}
    assert [d["reason"] for d in loud.dropped_items] == ["inapplicable"]
    assert "language" in loud.dropped_items[0]["detail"]
    assert quiet.dropped_items == [] and quiet.render() == loud.render()
    assert plane.explain(req).dropped_items == loud.dropped_items and plane.retrieve(req).dropped_items == []
    plane.close()


def _verdicts(scorer: Scorer, src: Source, found: dict[int, float], ctx: Query, one_by_one: bool) -> tuple:
    drop = DropLog(explain=True)
    if one_by_one:
        kept = [v for i, sim in found.items() if (v := scorer.judge(src, i, "long_term", sim, ctx, drop)) is not None]
    else:
        kept = list(scorer.judge_all(src, found, "long_term", ctx, drop))
    return [(sec, c.i, c.score, c.app_match, c.appl) for sec, c in kept], drop.counts, drop.items


def test_judging_all_at_once_replays_exactly_what_judging_one_by_one_decides() -> None:
    src = LongTermSource()
    entries = []
    for k in range(60):
        e = {"id": f"mem_{k:03d}", "type": ("rule", "preference", "fact", "profile")[k % 4],
             "status": ("active", "active", "conflicted", "deleted", "replaced")[k % 5],
             "title": f"rule {k}", "summary": f"about Alipay payments {k}" if k % 3 == 0 else f"thing {k}"}
        if k % 7 == 0:
            e["expires_at"] = "2020-01-01T00:00:00Z" if k % 2 else "2030-01-01T00:00:00Z"
        if k % 11 == 0:
            e["applicability"] = {"language": "en-US"}
        entries.append(e)
    src.sync(entries)
    scorer = Scorer(RetrieveConfig())
    found = {i: (0.0 if i % 2 else 0.4) for i in range(60)}
    for names in ((), ("alipay",)):
        for env in (("default", "zh-cn", None, None, None), ("default", "en-us", None, "alipay", None)):
            q = ParsedQuery(text="pay", tokens=frozenset({"pay"}))
            ctx = Query(q, env, NOW, names, frozenset(), frozenset())
            truth = _verdicts(scorer, src, found, ctx, one_by_one=True)
            assert _verdicts(scorer, src, found, ctx, one_by_one=False) == truth  # judged, memoised
            assert _verdicts(scorer, src, found, ctx, one_by_one=False) == truth  # replayed
    src.sync([dict(e, status="deleted") for e in entries])  # a new index: nothing memoised before holds
    ctx = Query(ParsedQuery(text="pay", tokens=frozenset({"pay"})), ("default", "zh-cn", None, None, None), NOW, (),
                frozenset(), frozenset())
    assert _verdicts(scorer, src, found, ctx, one_by_one=False) == _verdicts(scorer, src, found, ctx, True)
    assert _verdicts(scorer, src, found, ctx, one_by_one=False)[0] == []


def test_an_equal_score_goes_to_the_closest_past_goal_not_to_the_id_that_sorts_first() -> None:
    src = EpisodeSource()
    # The closest goal by BM25 (the lead) gets the best word similarity on the calibrated scale, which is the
    # word similarity of the best word match: the two tie on every factor. Its id sorts last.
    src.sync([{"id": f"ep_2026110{k}_{name}", "status": "active", "success": True, "app": "settings",
               "goal": goal, "started_at": "2026-11-01T00:00:00Z", "path": f"2026/x{k}/episode.yaml"}
              for k, (name, goal) in enumerate([("aaaa", "turn off notifications"),
                                                ("zzzz", "turn off the notification sound")])])
    ev = EpisodeEvidence(target="settings", post={"settings": 1.0}, lead=1, fused={1: 0.65, 0: 0.55})
    scorer = Scorer(RetrieveConfig())
    ctx = _query("turn off the notification")
    word_best = scorer.judge(src, 0, "task_episode", 0.65, ctx, DropLog(), ev)
    lead = scorer.judge(src, 1, "task_episode", 0.52, ctx, DropLog(), ev)
    assert word_best is not None and lead is not None
    assert word_best[1].score == lead[1].score  # the tie the bench met on SPA-Bench ENG
    assert [c.i for c in in_rank_order([word_best[1], lead[1]], 3)] == [1, 0]
    assert [c.i for c in in_rank_order([lead[1], word_best[1]], 3)] == [1, 0]


def test_the_closest_past_goal_is_shown_below_the_floor_only_when_no_app_is_likely() -> None:
    src = EpisodeSource()
    src.sync([{"id": f"ep_2026110{k}_{app}", "status": "active", "success": True, "app": app, "goal": goal,
               "started_at": "2026-11-01T00:00:00Z", "path": f"2026/x{k}/episode.yaml"}
              for k, (app, goal) in enumerate([("clock", "delete all alarms after 2pm"),
                                               ("settings", "set my alarm volume to max")])])
    scorer = Scorer(RetrieveConfig())
    ctx = _query("modify silence after to 5 miuntes")
    weak = 0.1  # under the similarity floor (0.25)
    # No app is likely: the closest past goal is shown rather than nothing; another goal that weak is not.
    ev = EpisodeEvidence(target=None, post={"clock": 0.4, "settings": 0.4}, lead=0, fused={0: weak})
    assert scorer.judge(src, 0, "task_episode", weak, ctx, DropLog(), ev) is not None
    assert scorer.judge(src, 1, "task_episode", weak, ctx, DropLog(), ev) is None
    # The device's goals make another app likely: that app's episodes are admitted, the weak lead is not.
    ev = ev._replace(target="settings", post={"clock": 0.1, "settings": 0.9})
    assert scorer.judge(src, 0, "task_episode", weak, ctx, DropLog(), ev) is None
    assert scorer.judge(src, 1, "task_episode", weak, ctx, DropLog(), ev) is not None


def test_the_weak_closest_goal_is_shown_only_when_no_other_episode_is() -> None:
    scorer = Scorer(RetrieveConfig())
    src = EpisodeSource()
    ev = EpisodeEvidence(target=None, post={}, lead=0, fused={0: 0.1})

    def cand(i: int, sim: float) -> Cand:
        return Cand(0.5, src, i, "task_episode", sim, 1.0, 1.0, 0.0)

    weak_lead, other = cand(0, 0.1), cand(1, 0.59)
    assert scorer.last_resort([weak_lead, other], ev) == [other]  # "play the latest podcast": not Gmail's "latest"
    assert scorer.last_resort([weak_lead], ev) == [weak_lead]  # rather than nothing
    assert scorer.last_resort([cand(0, 0.3), other], ev) == [cand(0, 0.3), other]  # over the floor: as ever
    assert scorer.last_resort([weak_lead, other], ev._replace(target="x")) == [weak_lead, other]  # admitted by app


def test_an_app_whose_only_goal_has_no_words_does_not_break_the_prior() -> None:
    # A goal of only punctuation or spaces gives its app a document but no tokens; the prior loaded from the
    # persisted postings must answer as the one counted document by document does, never with a KeyError.
    from memory_plane.retrieval._app_prior import AppPrior

    docs = [("wechat", ["send", "message"]), ("wechat", ["open", "chat"]), ("maps", [])]
    counted = AppPrior()
    for app, toks in docs:
        counted.add(app, toks)
    postings: dict[str, list[int]] = {}
    for n, (_, toks) in enumerate(docs):
        for t in toks:
            postings.setdefault(t, []).append(n)
    loaded = AppPrior()
    loaded.add_postings(postings, [app for app, _ in docs])
    assert loaded.posterior(["send"]) == counted.posterior(["send"])
    assert loaded.posterior(["send"], without=[("wechat", ["open", "chat"])]) == \
        counted.posterior(["send"], without=[("wechat", ["open", "chat"])])


def test_what_an_index_derives_lives_as_long_as_its_entries_and_goes_whole() -> None:
    src = _source(4)
    gen, entries = src.gen, src.entries
    scorer, ctx = Scorer(RetrieveConfig()), _query()
    kept = list(scorer.judge_all(src, dict.fromkeys(range(4), 0.0), "long_term", ctx, DropLog()))
    assert kept and gen.view(ctx.env).settled  # judged once, kept in the generation for this environment
    # An append extends the reader's list in place: the same generation, the new tail indexed on top.
    entries.append({"id": "mem_0004", "type": "rule", "status": "active", "title": "rule 4", "summary": "new"})
    src.sync(entries)
    assert src.gen is gen and len(gen.feats) == len(gen.texts) == 5 and gen.always == [1, 3, 4]
    assert [i for i, _ in gen.inv.search(frozenset({"new"}))] == [4]
    # A rewritten index is another list (and a shorter one cannot be an append): a new generation, nothing kept.
    for rewritten in ([dict(e) for e in entries], entries):
        if rewritten is entries:
            entries.pop()
        before = src.gen
        src.sync(rewritten)
        assert src.gen is not before and not src.gen.view(ctx.env).settled and not src.gen.hit_fields
        assert len(src.gen.feats) == len(rewritten)
