"""The tokenizer (memory_plane/_tokens.py) and the inverted index with BM25 nearest goal (_inverted_index.py).

It reaches inside on purpose: the tokenizer and the inverted index are tested on their own.
"""

from __future__ import annotations

import math
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane._inverted_index import GramStats, InvertedIndex, nearest_goal
from memory_plane._tokens import gram_length, grams, token_parts, token_set, tokens


def test_words_are_lowercased_stemmed_and_stop_words_dropped() -> None:
    assert token_set("Open the Settings") == token_set("open settings")
    assert "setting" in token_set("Settings") and "the" not in token_set("the settings")
    assert token_set("opening messages") == token_set("opening message")


def test_chinese_runs_become_bigrams_without_request_words() -> None:
    assert token_set("打开微信") == {"打开", "开微", "微信"}
    assert "帮我" not in token_set("帮我打开微信")
    assert token_parts("微") == ("微",)


def test_trigrams_cross_word_boundaries_and_ignore_whitespace_runs() -> None:
    assert "p s" in grams("app settings")
    assert grams("app   settings\n") == grams("App Settings")
    assert grams("ab") == {"ab"} and grams("") == frozenset()
    assert gram_length("a  b") == 3


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=string.ascii_letters + string.digits + " \t\n'’微信打开设置", max_size=80))
def test_tokens_never_depend_on_case_or_spacing(text: str) -> None:
    assert token_set(text) == token_set(text.upper()) == token_set(text.swapcase())
    assert grams(text) == grams(" ".join(text.split()))
    assert set(tokens(text)) == token_set(text)


def test_rare_words_weigh_more_and_search_ranks_the_sharing_document_first() -> None:
    inv = InvertedIndex.build(["open wechat chat", "open settings", "open camera", "send a wechat message"])
    assert inv.weight("camera") > inv.weight("open")
    hits = inv.search(token_set("wechat message"))
    assert hits[0][0] == 3


def test_appended_documents_are_found_and_counted() -> None:
    inv = InvertedIndex.build(["open wechat"])
    assert inv.add("book a taxi") == 1
    assert inv.add_many(["taxi home", "taxi to work"]) == 2  # the number of the first one added
    assert {i for i, _ in inv.search(token_set("taxi"))} == {1, 2, 3}


def test_nearest_goal_forgives_a_typo_and_its_own_text_sets_the_scale() -> None:
    texts = ["turn on bluetooth", "set an alarm for seven", "order a pizza", "turn off wifi"]
    inv = InvertedIndex.build(texts)
    stats = GramStats()
    stats.add_many(texts)
    query = "turn on bluetoth"  # typo: the word no longer matches, its trigrams still do
    ranked, own = nearest_goal(query, token_set(query), range(len(texts)), inv, stats, texts)
    assert ranked[0][0] == 0
    assert 0 < ranked[0][1] <= own
    assert nearest_goal(query, token_set(query), [], inv, stats, texts) == ([], 0.0)


def test_documents_left_out_do_not_count_in_the_frequencies() -> None:
    texts = ["call mom", "call mom now", "call dad"]
    inv = InvertedIndex.build(texts)
    stats = GramStats()
    stats.add_many(texts)
    kept, _ = nearest_goal("call mom", token_set("call mom"), [1, 2], inv, stats, texts)
    without, _ = nearest_goal("call mom", token_set("call mom"), [1, 2], inv, stats, texts, left_out=[0])
    # With the identical goal left out, "mom" is rarer, so the document sharing it scores higher.
    assert dict(without)[1] > dict(kept)[1]
    assert stats.snapshot().df == stats.df and stats.snapshot() is not stats


def _search_reference(inv: InvertedIndex, query: frozenset[str], limit: int) -> list[tuple[int, float]]:
    # The definition: each document's IDF overlap summed in the lists' order (longest first), a pool of the
    # best three times the limit (ties in the order the documents were met), re-scored by the blend of the
    # query's and the document's coverage, the best first (ties in pool order).
    weights = {t: inv.weight(t) for t in sorted(query)}
    total = math.fsum(weights.values())
    lists = sorted(((inv.postings[t], w) for t, w in weights.items() if t in inv.postings),
                   key=lambda pw: len(pw[0]), reverse=True)
    acc: dict[int, float] = {}
    for plist, w in lists:
        for i in plist:
            acc[i] = acc[i] + w if i in acc else w
    pool = sorted(acc.items(), key=lambda kv: kv[1], reverse=True)[:limit * 3]
    scored = [(i, inv._blend(s / total, min(1.0, s / inv._norm(i)))) for i, s in pool]
    return sorted(scored, key=lambda kv: kv[1], reverse=True)[:limit]


WORDS = ["open", "wechat", "send", "message", "alarm", "seven", "pizza", "taxi", "home", "photo", "share", "mom"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), min_size=1, max_size=400),
       st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), st.integers(1, 40))
def test_search_answers_as_its_definition(docs: list[list[str]], query: list[str], limit: int) -> None:
    # Few words over many documents: most overlaps tie, and the pool is cut inside a run of equal scores.
    inv = InvertedIndex.build([" ".join(d) for d in docs])
    q = token_set(" ".join(query))
    assert inv.search(q, limit) == _search_reference(inv, q, limit)
