"""The user's rules at scale. A goal's words may reach thousands of rules in a large store: only the search's
pool of the closest (most shared word weight) are measured and ranked by their match; the others rank as rules
no word reaches. Their verdicts at no word match are worked out once per index, not once per environment, when
no rule names an environment.

It reaches inside `_inverted_index` for the pool, asked directly, and counts the long-term memories a retrieve
judges one by one (the work that grew with the store).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane
from memory_plane._inverted_index import InvertedIndex
from memory_plane._retrieve_types import CurrentEnvironmentHints, MemoryRetrieveRequest
from memory_plane._tokens import token_set
from memory_plane.lifecycle import init_tree
from memory_plane.retrieval import RetrieveConfig
from memory_plane.retrieval._rule_plan import RulePlan
from memory_plane.retrieval._scoring import Scorer

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"]


def _reference_pool(inv: InvertedIndex, q: frozenset[str], size: int, floor: float, within: set[int]) -> list[int]:
    """The pool as its definition says: documents of ``within`` holding a token that is not weak, the ``size``
    with the most shared IDF weight (every query token they hold), ties by number."""
    weak = inv.weak_tokens(q, floor)
    shared = {i: math.fsum(inv.weight(t) for t in q & inv.doc(i)) for i in within if (q - weak) & inv.doc(i)}
    if len(shared) <= size:
        return sorted(shared)
    best = sorted(shared.items(), key=lambda kv: (-kv[1], kv[0]))[:size]
    return sorted(i for i, _ in best)


@settings(max_examples=200, deadline=None)
@given(docs=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=40),
       more=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), max_size=10),
       query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
       size=st.integers(min_value=1, max_value=12),
       floor=st.sampled_from([0.0, 0.001, 0.01, 0.1, 0.3]),
       within_mod=st.integers(min_value=1, max_value=3))
def test_the_pool_is_the_most_shared_weight_of_the_reached(docs: list[list[str]], more: list[list[str]],
                                                           query: list[str], size: int, floor: float,
                                                           within_mod: int) -> None:
    inv = InvertedIndex.build(" ".join(d) for d in docs)
    q = token_set(" ".join(query))
    within = {i for i in range(len(docs)) if i % within_mod == 0}
    first = inv.pool(q, size, floor, within)
    got, want = first, _reference_pool(inv, q, size, floor, within)
    # Sums in another order may differ in the last bit: a tie at the cut may then fall either way.
    assert len(got) == len(want)
    assert set(got) == set(want) or _same_weights(inv, q, set(got) ^ set(want))
    # Documents appended later are pooled too (the common words' document sets follow their postings).
    inv.add_many(" ".join(d) for d in more)
    within |= {i for i in range(len(docs), len(docs) + len(more)) if i % within_mod == 0}
    got, want = inv.pool(q, size, floor, within), _reference_pool(inv, q, size, floor, within)
    assert len(got) == len(want)
    assert set(got) == set(want) or _same_weights(inv, q, set(got) ^ set(want))


def _same_weights(inv: InvertedIndex, q: frozenset[str], docs: set[int]) -> bool:
    weights = {round(math.fsum(inv.weight(t) for t in q & inv.doc(i)), 9) for i in docs}
    return len(weights) == 1


def _plane_with_rules(root: Path, n: int, search_limit: int) -> MemoryPlane:
    init_tree(root)
    plane = MemoryPlane.open(root)
    for k in range(n):
        # Every rule holds the goal's word "harbour"; the shorter ones match it more closely.
        plane.long_term.save_memory(type="rule", content=f"harbour rule {k}" + " with a longer tail" * (k % 4))
    for k in range(n):
        plane.long_term.save_memory(type="fact", content=f"the depot note {k} for the warehouse")
    plane.close()
    return MemoryPlane.open(root, retrieve_config=RetrieveConfig(search_limit=search_limit))


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The long-term entries a retrieve judges one by one with a word match (not replayed from the rule plan)."""
    seen: list[int] = []
    real = Scorer.judge_long_term

    def spy(self: Scorer, src, i, sim, ctx, drop, facts=None):  # type: ignore[no-untyped-def]
        if sim > 0:
            seen.append(i)
        return real(self, src, i, sim, ctx, drop, facts)

    monkeypatch.setattr(Scorer, "judge_long_term", spy)
    return seen


def test_a_retrieve_measures_only_the_pool_of_the_rules_its_words_reach(tmp_path: Path, judged: list[int]) -> None:
    plane = _plane_with_rules(tmp_path / "m", 80, search_limit=4)
    plane.retrieve("check the harbour")  # the rule plan is made (every rule once, at no word match)
    judged.clear()
    block = plane.retrieve("the harbour gate").render()
    plane.close()
    # 80 rules hold "harbour"; the pool is three times the search limit.
    assert 0 < len(set(judged)) <= 3 * 4
    assert block.count("type=rule") > 0


def test_explain_ranks_the_rules_as_a_retrieve_does(tmp_path: Path) -> None:
    """``--explain`` judges every rule itself; it shows the same rules in the same order as the plan's replay."""
    plane = _plane_with_rules(tmp_path / "m", 80, search_limit=4)
    plane.retrieve("check the harbour")
    fast = plane.retrieve("the harbour gate").render()
    slow = plane.explain("the harbour gate").render()
    plane.close()

    def rules(block: str) -> list[str]:
        return [line for line in block.splitlines() if "type=rule" in line]

    assert rules(fast) and rules(fast) == rules(slow)


def test_the_closest_reached_rule_leads(tmp_path: Path) -> None:
    """Within the pool the closer match ranks first: a rule sharing two of the goal's rarer words leads the rules
    sharing one, however many of those there are."""
    plane = _plane_with_rules(tmp_path / "m", 80, search_limit=4)
    plane.long_term.save_memory(type="rule", content="harbour gate needs the blue pass")
    plane.close()
    plane = MemoryPlane.open(tmp_path / "m", retrieve_config=RetrieveConfig(search_limit=4))
    block = plane.retrieve("the harbour gate").render()
    plane.close()
    shown = [line for line in block.splitlines() if "type=rule" in line]
    assert "blue pass" in shown[0]


def _settles(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The always-recalled entries settled one by one (judged at no word match for a view)."""
    seen: list[int] = []
    real = Scorer._settle

    def spy(self: Scorer, src, i, ctx, facts):  # type: ignore[no-untyped-def]
        seen.append(i)
        return real(self, src, i, ctx, facts)

    monkeypatch.setattr(Scorer, "_settle", spy)
    return seen


def test_another_environment_settles_only_the_rules_that_name_one(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A goal in another language or app is another view of the rules: those of no environment keep their verdict
    (settled once per index), only a rule whose applicability names an environment is judged for it anew; the
    blocks are those a fresh process makes."""
    root = tmp_path / "m"
    init_tree(root)
    plane = MemoryPlane.open(root)
    for k in range(6):
        plane.long_term.save_memory(type="rule", content=f"keep the receipts of batch {k}")
    plane.long_term.save_memory(type="rule", content="in Chinese menus pick 简体", applicability={"language": "zh-CN"})
    plane.long_term.save_memory(type="preference", content="dark theme please", applicability={"language": "en-US"})
    plane.close()
    settles = _settles(monkeypatch)
    plane = MemoryPlane.open(root)
    hints = [CurrentEnvironmentHints(language=lang) for lang in ("en-US", "zh-CN", "fr-FR")]
    blocks = []
    for n, h in enumerate(hints):
        settles.clear()
        blocks.append(plane.retrieve(MemoryRetrieveRequest(input="file the receipts", current_hints=h)).render())
        if n == 0:
            assert len(settles) == 8
        else:
            assert len(settles) <= 2, "only the rules naming an environment are settled again"
    plane.close()
    for h, block in zip(hints, blocks):
        fresh = MemoryPlane.open(root)
        assert fresh.retrieve(MemoryRetrieveRequest(input="file the receipts", current_hints=h)).render() == block
        fresh.close()
    assert "简体" in blocks[1]
    assert "简体" not in blocks[0]
    assert "dark theme" in blocks[0]
    assert "dark theme" not in blocks[2]


@pytest.fixture
def plans_made(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The rule plans a retrieve makes (each one made over every rule)."""
    made: list[object] = []
    real = RulePlan.__init__

    def spy(self: RulePlan, *args, **kwargs):  # type: ignore[no-untyped-def]
        made.append(self)
        real(self, *args, **kwargs)

    monkeypatch.setattr(RulePlan, "__init__", spy)
    return made


def _receipt_rules(root: Path) -> MemoryPlane:
    init_tree(root)
    plane = MemoryPlane.open(root)
    for k in range(30):
        plane.long_term.save_memory(type="rule", content=f"keep the receipts of batch {k}")
    return plane


def test_one_rule_plan_serves_every_environment_when_no_rule_names_one(tmp_path: Path,
                                                                        plans_made: list[object]) -> None:
    root = tmp_path / "m"
    _receipt_rules(root).close()
    made = plans_made
    plane = MemoryPlane.open(root)
    for lang in ("en-US", "zh-CN", "fr-FR", "en-US"):
        plane.retrieve(MemoryRetrieveRequest(input="file the receipts",
                                             current_hints=CurrentEnvironmentHints(language=lang)))
    plane.close()
    assert len(made) == 1


_SAVES = st.lists(st.tuples(st.sampled_from(["rule", "preference", "profile", "fact"]),
                            st.sampled_from(["receipts", "harbour gate", "WeChat payments", "backup", "简体 menus"]),
                            st.sampled_from([None, 60, 95]),
                            st.sampled_from([None, {"language": "zh-CN"}, {"language": "en-US"}])),
                  min_size=1, max_size=6)


def _drop_plans(plane: MemoryPlane) -> None:
    """Forget every rule plan the process made (the next retrieve makes them again over every rule)."""
    gen = plane._retriever._lt_source.gen
    gen.free_plans.clear()
    for view in gen._views.values():
        view.plans.clear()


@settings(max_examples=12, deadline=None)
@given(saves=_SAVES, lang=st.sampled_from([None, "en-US", "zh-CN"]))
def test_a_rule_saved_in_a_running_process_is_placed_as_the_whole_plan_made_again_places_it(
        tmp_path_factory: pytest.TempPathFactory, saves: list[tuple[str, str, int | None, dict[str, str] | None]],
        lang: str | None) -> None:
    """The rule plan takes in what a save appends instead of being made again over every rule: the blocks are
    those of a plan made again, for goals with and without an app, in the request's language."""
    root = tmp_path_factory.mktemp("m") / "m"
    init_tree(root)
    plane = MemoryPlane.open(root)
    for k in range(8):
        plane.long_term.save_memory(type="rule", content=f"keep the receipts of batch {k}", priority=70 + k)
    plane.long_term.save_memory(type="preference", content="pay with WeChat only after asking")
    goals = ["file the receipts", "open WeChat and pay the harbour gate"]
    hints = CurrentEnvironmentHints(language=lang)

    def blocks(p: MemoryPlane) -> list[str]:
        return [p.retrieve(MemoryRetrieveRequest(input=g, current_hints=hints)).render() for g in goals]

    blocks(plane)  # the plans are made
    for n, (kind, subject, priority, appl) in enumerate(saves):
        plane.long_term.save_memory(type=kind, content=f"{subject} note {n}: check twice", priority=priority,
                                    applicability=appl)
        extended = blocks(plane)
        _drop_plans(plane)
        assert blocks(plane) == extended
    plane.close()


def test_a_saved_rule_does_not_make_the_plan_again(tmp_path: Path, plans_made: list[object]) -> None:
    plane = _receipt_rules(tmp_path / "m")
    made = plans_made
    plane.retrieve("file the receipts")
    plane.long_term.save_memory(type="rule", content="receipts go to the blue folder", priority=99)
    block = plane.retrieve("file the receipts").render()
    plane.close()
    assert len(made) == 1
    rules = [line for line in block.splitlines() if "type=rule" in line]
    assert "blue folder" in rules[0]
