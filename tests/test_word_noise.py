"""A word match too weak to mean anything counts as none: the goal's commonest words (a word every memory holds)
neither reorder the user's rules nor make a retrieve visit every memory that holds them.

It reaches inside `_inverted_index` for the search and its bound, asked directly.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane
from memory_plane._inverted_index import InvertedIndex
from memory_plane._tokens import token_set
from memory_plane.lifecycle import init_tree

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"]


@settings(max_examples=150, deadline=None)
@given(docs=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=30),
       query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
       floor=st.sampled_from([0.001, 0.01, 0.1, 0.25, 0.5]))
def test_a_document_only_weak_words_reach_stays_under_the_floor(docs: list[list[str]], query: list[str],
                                                                floor: float) -> None:
    inv = InvertedIndex.build(" ".join(d) for d in docs)
    q = token_set(" ".join(query))
    weak = inv.weak_tokens(q, floor)
    assert weak <= q
    for i in range(len(docs)):
        if not (q - weak) & inv.doc(i):
            assert inv.similarity(q, i) < floor


@settings(max_examples=150, deadline=None)
@given(docs=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=30),
       query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
       floor=st.sampled_from([0.001, 0.01, 0.1, 0.25, 0.5]))
def test_a_search_with_a_floor_finds_every_document_at_or_above_it(docs: list[list[str]], query: list[str],
                                                                  floor: float) -> None:
    inv = InvertedIndex.build(" ".join(d) for d in docs)
    q = token_set(" ".join(query))
    everything = {i: s for i, s in inv.search(q, limit=1000) if s >= floor}
    above = {i: s for i, s in inv.search(q, limit=1000, floor=floor) if s >= floor}
    assert above.keys() == everything.keys()
    for i, s in above.items():
        assert abs(s - everything[i]) < 1e-9


def test_a_word_every_memory_holds_does_not_order_the_rules(tmp_path: Path) -> None:
    """Rules that share with the goal only a word every memory holds are ordered as rules sharing nothing (by id,
    after priority), not by which is shortest; a rule sharing a rarer word comes first."""
    root = tmp_path / "m"
    init_tree(root)
    plane = MemoryPlane.open(root)
    for n in range(60):
        plane.long_term.save_memory(type="fact", content=f"the ledger entry {n} for the zone")
    long_rule = "keep the ledger tidy and never rename the shared folders without asking the owner first"
    short_rule = "ledger in pencil"
    rare_rule = "the quarterly ledger goes to the auditor"
    for text in (long_rule, short_rule, rare_rule):
        plane.long_term.save_memory(type="rule", content=text)
    plane.close()
    plane = MemoryPlane.open(root)
    block = plane.retrieve("send the quarterly ledger").render()
    plane.close()
    shown = [line for line in block.splitlines() if "type=rule" in line]
    assert len(shown) == 3
    assert "quarterly" in shown[0]
    rest = [line.split()[1][1:] for line in shown[1:]]
    assert rest == sorted(rest), "rules only a common word reaches keep the id order of rules no word reaches"
