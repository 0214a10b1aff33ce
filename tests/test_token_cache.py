"""The persisted postings of large indexes: used only when they match, never lose or hide a memory.

It reaches inside the postings cache (its file format, and its thresholds made small here), the tokenizer, the
inverted index's statistics and the app prior.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_plane.retrieval._postings_cache as token_cache
from memory_plane import MemoryPlane, MemoryRetrieveRequest, RetrieveConfig
from memory_plane._inverted_index import InvertedIndex
from memory_plane._tokens import token_set
from memory_plane.retrieval._app_prior import AppPrior
from tests.helpers import read_only

APPS = ["微信", "支付宝", "Settings", "Chrome", "美团", "Gmail"]
ACTS = ["open the chat with {n}", "send {n} the photo", "查看{n}的账单", "search for {n} news", "给{n}发消息",
        "turn on dark mode for {n}", "find the order from {n}", "download the file {n} sent"]
NAMES = ["Alice", "张三", "Bob", "李四", "Carol", "王五", "Dave", "赵六"]
QUERIES = ["open the chat with Alice in 微信", "查看张三的账单", "search for Bob news in Chrome", "给王五发消息",
           "turn on dark mode", "find the order from Carol on 美团"]


def goals(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(f"{rng.choice(ACTS).format(n=rng.choice(NAMES))} {k}", rng.choice(APPS)) for k in range(n)]


def commit(plane: MemoryPlane, goal: str, app: str) -> str:
    req = MemoryRetrieveRequest(input=goal, current_hints={"language": "zh-CN"})
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": app})
    rec.tool_result("launch_app", observed_state={"app": app, "page": "home"})
    ep = rec.finish(success=True)
    assert plane.commit_episode(ep)
    return ep.id


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    # Files for tiny stores, so a test store of 40 episodes exercises what 10,000 do.
    monkeypatch.setattr(token_cache, "MIN_ENTRIES", 16)
    monkeypatch.setattr(token_cache, "REFRESH_AFTER", 8)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tc") / "memory"
    with MemoryPlane.open(root, retrieve_config=RetrieveConfig(persist_postings=False)) as plane:
        for goal, app in goals(40, 1):
            commit(plane, goal, app)
        plane.flush()
    return root


@pytest.fixture
def store(built: Path, tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "memory"
    shutil.copytree(built, root, symlinks=True)
    yield root


def cache_file(root: Path) -> Path:
    return root / ".cache" / "retrieve" / "episodes.json.gz"


def answers(root: Path, persist: bool = True) -> tuple[list[tuple[str, list[str]]], MemoryPlane]:
    plane = MemoryPlane(root, retrieve_config=RetrieveConfig(persist_postings=persist))
    out = []
    for q in QUERIES:
        ctx = plane.retrieve(MemoryRetrieveRequest(input=q, current_hints={"language": "zh-CN"}))
        out.append((ctx.render(), [f"{h.id}:{h.score}" for h in ctx.common.similar_episodes]))
    plane.flush()
    return out, plane


def test_the_first_retrieve_writes_the_file_and_a_fresh_process_reads_it(store: Path) -> None:
    truth, _ = answers(store, persist=False)
    assert not (store / ".cache").exists()  # switched off: nothing written
    first, plane = answers(store)
    assert first == truth
    assert cache_file(store).is_file()
    assert plane._retriever._episode_source.persisted == 40
    with gzip.open(cache_file(store)) as fh:
        assert json.load(fh)["count"] == 40
    again, plane2 = answers(store)
    src = plane2._retriever._episode_source
    assert src.persisted == 40 and None in src.inv.docs  # loaded, not tokenised
    assert again == truth
    # A derived file: verify and GC leave it alone and report nothing about it.
    report = plane2.verify()
    assert report.ok, report.problems
    plane2.gc()
    assert cache_file(store).is_file()


def test_episodes_appended_after_the_file_are_tokenised_on_top_of_it(store: Path) -> None:
    answers(store)
    before = cache_file(store).read_bytes()
    with MemoryPlane.open(store, retrieve_config=RetrieveConfig(persist_postings=False)) as plane:
        new = [commit(plane, goal, app) for goal, app in goals(5, 2)]
        plane.flush()
    truth, _ = answers(store, persist=False)
    got, plane = answers(store)
    src = plane._retriever._episode_source
    assert src.persisted == 40 and len(src.gen.texts) == 45  # the prefix from the file, five tokenised
    assert got == truth
    assert cache_file(store).read_bytes() == before  # five behind is not worth a rewrite yet
    ctx = plane.retrieve(MemoryRetrieveRequest(input=goals(5, 2)[0][0], current_hints={"language": "zh-CN"}))
    assert new[0] in ctx.refs()


def test_a_hand_edited_index_makes_the_file_unused_and_rewritten(store: Path) -> None:
    answers(store)
    index = store / "episodes" / "index.yaml"
    lines = index.read_text("utf-8").split("\n")
    k = next(i for i, ln in enumerate(lines) if ln.startswith("- {"))
    entry = json.loads(lines[k][2:])
    entry["goal"] = "calibrate the barometer in the weather station"
    lines[k] = "- " + json.dumps(entry, ensure_ascii=False)
    index.write_text("\n".join(lines), "utf-8")
    truth, _ = answers(store, persist=False)
    got, plane = answers(store)
    assert got == truth
    ctx = plane.retrieve(MemoryRetrieveRequest(input="calibrate the barometer", current_hints={"language": "zh-CN"}))
    assert entry["id"] in ctx.refs()
    plane.flush()
    _, plane2 = answers(store)
    assert plane2._retriever._episode_source.persisted == 40  # rewritten for the edited texts, then used


def _good_payload(store: Path) -> dict:
    answers(store)
    with gzip.open(cache_file(store)) as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def _postings(payload: dict) -> dict[str, list[int]]:
    lengths, docs = token_cache._unpack(payload["lengths"]), token_cache._unpack(payload["docs"])
    out, at = {}, 0
    for t, n in zip(payload["tokens"], lengths):
        out[t], at = docs[at:at + n], at + n
    return out


def _with_postings(payload: dict, postings: dict[str, list[int]]) -> dict:
    return {**payload, "tokens": list(postings), "lengths": token_cache._pack([len(p) for p in postings.values()]),
            "docs": token_cache._pack([n for p in postings.values() for n in p])}


def _damaged(kind: str, good: dict) -> bytes:
    if kind == "garbage":
        return b"\x00not gzip at all"
    if kind == "truncated":
        return gzip.compress(json.dumps(good).encode())[:-20]
    if kind == "not_json":
        return gzip.compress(b"{{{ nope")
    bad = json.loads(json.dumps(good))
    postings = _postings(bad)
    first = next(iter(postings))
    if kind == "out_of_range":
        bad = _with_postings(bad, {**postings, first: [0, 10_000]})
    elif kind == "strings":
        bad["docs"] = ["0"]
    elif kind == "not_base64":
        bad["docs"] = bad["docs"][:-3] + "!!="
    elif kind == "lengths":
        bad["lengths"] = token_cache._pack([1] * len(postings))
    elif kind == "swapped":  # well formed, right digest, but not this tokenizer's postings
        bad = _with_postings(bad, dict(zip(postings, reversed(list(postings.values())))))
    elif kind == "not_mapping":
        bad["tokens"] = {"a": 1}
    elif kind in ("prior_counts", "prior_types"):  # a token of document 0 (always among the sampled)
        token = next(t for t, p in postings.items() if p[0] == 0)
        app = next(iter(bad["prior"]["counts"][token]))
        bad["prior"]["counts"][token][app] = "1" if kind == "prior_types" else 1000
    return gzip.compress(json.dumps(bad).encode())


@pytest.mark.parametrize("kind", ["garbage", "truncated", "not_json", "out_of_range", "strings", "not_base64",
                                  "lengths", "swapped", "not_mapping", "prior_counts", "prior_types"])
def test_a_damaged_file_is_never_trusted_and_never_breaks_retrieval(store: Path, kind: str,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    good = _good_payload(store)
    truth, _ = answers(store, persist=False)
    cache_file(store).write_bytes(_damaged(kind, good))
    got, plane = answers(store)
    assert got == truth
    assert plane._retriever._episode_source.persisted == 40  # rewritten from the index
    assert any("not used" in r.getMessage() and "episodes.json.gz" in r.getMessage() for r in caplog.records)
    with gzip.open(cache_file(store)) as fh:
        assert json.load(fh)["count"] == 40


def _prior_state(prior: AppPrior) -> tuple:
    return prior.docs, prior.mass, prior.total_docs, prior.counts


def test_the_app_prior_is_loaded_with_the_postings_and_only_for_the_apps_it_was_counted_with(store: Path) -> None:
    truth, plane = answers(store)
    computed = plane._retriever._episode_source.gen.prior
    assert "prior" in _good_payload(store)
    again, plane2 = answers(store)
    src = plane2._retriever._episode_source
    assert again == truth and None in src.inv.docs  # loaded, not tokenised: the prior came from the file
    assert _prior_state(src.gen.prior) == _prior_state(computed)
    q = token_set("send Alice the photo")
    assert src.gen.prior.posterior(q) == computed.posterior(q)
    # Another canonical app for one episode (a catalog that learned a name since): the postings are used,
    # the counts are not (counted again from the postings, for these apps).
    apps = [a or "" for a in src.gen.canon]
    apps[0] = "some_other_app"
    found = src.cache.load(src.gen.texts, apps)  # type: ignore[union-attr]
    assert found is not None and found.counts is None
    found = src.cache.load(src.gen.texts, [a or "" for a in src.gen.canon])  # type: ignore[union-attr]
    assert found is not None and found.counts == computed.counts


def test_a_read_only_tree_is_answered_without_writing(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    truth, _ = answers(store, persist=False)
    read_only(monkeypatch, store)
    got, plane = answers(store)
    assert got == truth
    assert plane.flush()
    assert not (store / ".cache").exists()
    assert plane._retriever._episode_source.cache.disabled  # type: ignore[union-attr]  # tried once, not again


def test_a_symlinked_cache_folder_is_neither_read_nor_written(store: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (store / ".cache").mkdir()
    os.symlink(outside, store / ".cache" / "retrieve")
    truth, _ = answers(store, persist=False)
    got, _ = answers(store)
    assert got == truth
    assert list(outside.iterdir()) == []


def test_the_tokenizer_fingerprint_is_the_same_in_every_process() -> None:
    code = "from memory_plane._tokens import tokenizer_fingerprint as f; print(f())"
    prints = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in (1, 2, 3)}
    assert len(prints) == 1


def test_the_app_prior_from_postings_counts_as_from_documents() -> None:
    rng = random.Random(5)
    docs = [token_set(g) for g, _ in goals(60, 3)]
    apps = [rng.choice(["wechat", "alipay", ""]) for _ in docs]
    one = AppPrior()
    for app, d in zip(apps, docs):
        if app:
            one.add(app, d)
    postings: dict[str, list[int]] = {}
    for n, d in enumerate(docs):
        for t in d:
            postings.setdefault(t, []).append(n)
    two = AppPrior()
    two.add_postings(postings, apps)
    assert (two.docs, two.mass, two.total_docs) == (one.docs, one.mass, one.total_docs)
    assert two.counts == one.counts
    three = AppPrior.from_counts(json.loads(json.dumps(two.counts)), apps)  # as a file gives them back
    assert _prior_state(three) == _prior_state(two) and list(three.docs) == list(two.docs)
    q = token_set("send Alice the photo")
    assert two.posterior(q) == one.posterior(q) == three.posterior(q)


def test_prepare_brings_the_file_up_to_date_without_a_query(store: Path) -> None:
    answers(store)
    with MemoryPlane.open(store, retrieve_config=RetrieveConfig(persist_postings=False)) as plane:
        for goal, app in goals(12, 4):
            commit(plane, goal, app)
    with MemoryPlane.open(store) as plane:
        plane.prepare()  # what GC does after it rewrote indexes, and a runtime may do at start-up
        plane.flush()
    with gzip.open(cache_file(store)) as fh:
        assert json.load(fh)["count"] == 52


_SHOW = """
import sys
from memory_plane import MemoryPlane, MemoryRetrieveRequest, RetrieveConfig
plane = MemoryPlane(sys.argv[1], retrieve_config=RetrieveConfig(search_limit=5, persist_postings=False))
ctx = plane.retrieve(MemoryRetrieveRequest(input="alice chat", current_hints={"language": "zh-CN"}))
print(ctx.render())
"""


def test_the_same_goal_recalls_the_same_memories_in_every_process(tmp_path: Path) -> None:
    # Ten goals share "alice", ten share "chat", all equally rare: every one ties with every other, and
    # the recall cut (search_limit) must not depend on the order a set of query words comes in.
    root = tmp_path / "memory"
    with MemoryPlane.open(root, retrieve_config=RetrieveConfig(persist_postings=False)) as plane:
        for k, word in enumerate(["alpha", "bravo", "delta", "echo", "golf", "hotel", "india", "kilo", "lima", "mike"]):
            commit(plane, f"alice {word}", "Gmail")
            commit(plane, f"chat {word}x{k}", "Gmail")
        plane.flush()
    renders = {subprocess.run([sys.executable, "-c", _SHOW, str(root)], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(1, 7)}
    assert len(renders) == 1


def test_the_episodes_file_keeps_their_trigram_counts_and_a_file_of_the_old_format_is_not_used(store: Path) -> None:
    from memory_plane._inverted_index import GramStats

    truth, plane = answers(store)
    counted = plane._retriever._episode_source.inv.grams
    assert counted is not None and counted.n == 40
    with gzip.open(cache_file(store)) as fh:
        data = json.load(fh)
    assert data["format"] == token_cache.FORMAT == 3
    assert data["grams"] == {"n": 40, "length": counted.length, "df": counted.df}
    again, plane2 = answers(store)
    loaded = plane2._retriever._episode_source.inv.grams
    assert loaded is not None and loaded.df == counted.df and loaded.length == counted.length and again == truth
    fresh = GramStats()
    fresh.add_many(plane2._retriever._episode_source.gen.texts)
    assert fresh.df == counted.df
    # A file without the counts (format 1): not used, rebuilt; the answers are the same.
    data["format"] = 1
    del data["grams"]
    cache_file(store).write_bytes(gzip.compress(json.dumps(data).encode()))
    third, plane3 = answers(store)
    src = plane3._retriever._episode_source
    assert third == truth and None not in src.inv.docs and src.inv.grams is not None and src.inv.grams.n == 40
    # Counts that do not match the documents make the file unused too.
    data["format"], data["grams"] = token_cache.FORMAT, {"n": 40, "length": 1, "df": {"zzz": 1}}
    cache_file(store).write_bytes(gzip.compress(json.dumps(data).encode()))
    fourth, plane4 = answers(store)
    assert fourth == truth and plane4._retriever._episode_source.inv.grams.df == counted.df


def test_a_source_smaller_than_the_refresh_lag_still_gets_its_file(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The device's failures or the long-term memories, a few hundred each: written once half is not in the file.
    monkeypatch.setattr(token_cache, "REFRESH_AFTER", 256)
    cache = token_cache.TokenCache(tmp_path, "long_term")
    assert cache.due(40, 0) and cache.due(40, 19)
    assert not cache.due(40, 21) and not cache.due(15, 0)  # below MIN_ENTRIES: no file
    assert cache.due(10_000, 10_000 - 256) and not cache.due(10_000, 10_000 - 255)


_WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "微信", "账单", "foxtrot", "golf", "hotel"]


def _new_count(before: list[str], now: list[str]) -> int:
    """How many of ``now`` are not among ``before`` (as many times as they are there)."""
    left = Counter(before)
    new = 0
    for t in now:
        if left[t] > 0:
            left[t] -= 1
        else:
            new += 1
    return new


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5).map(" ".join), min_size=1,
                      max_size=30),
       out=st.sets(st.integers(0, 29), max_size=12),
       more=st.lists(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5).map(" ".join), max_size=5),
       order=st.randoms(use_true_random=False), shuffled=st.booleans())
def test_a_file_of_other_documents_gives_the_postings_tokenising_gives(
        tmp_path_factory: pytest.TempPathFactory, texts: list[str], out: set[int], more: list[str],
        order: random.Random, shuffled: bool) -> None:
    """A file written before documents were taken out of the index (GC), others put in and the lines put in
    another order (a rebuild) gives exactly the postings tokenising the index now gives; or nothing."""
    root = tmp_path_factory.mktemp("tc")
    cache = token_cache.TokenCache(root, "long_term")
    cache.save(InvertedIndex.build(texts), texts)
    now = [t for k, t in enumerate(texts) if k not in out] + more
    if shuffled:
        order.shuffle(now)
    found = cache.load(now)
    new = _new_count(texts, now)
    if 2 * new > len(now) or len(now) < token_cache.MIN_ENTRIES:
        return  # most of them new, or too few for a file: rebuilt or not, either way
    assert found is not None
    n = len(found.inv.docs)
    want = InvertedIndex.build(now[:n]).postings
    assert found.inv.postings == want
    if now[:len(texts)] != texts:
        assert found.renumbered and n == len(now)


def test_memories_removed_keep_the_persisted_postings_of_the_others(tmp_path: Path) -> None:
    """After memories leave the index other than by a forget (a person deleted the files, verify rebuilt the
    index; GC), a fresh process loads the other memories' postings (renumbered, not tokenised), finds what it
    would find without the file, and writes the file again for the next one."""
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        ids = [plane.long_term.save_memory(type="fact", content=f"the {w} locker code is {k}").id
               for k, w in enumerate(_WORDS * 3)]
        plane.retrieve("the locker code")
        plane._retriever.wait()
    for gone in (ids[4], ids[11]):
        (root / "long_term" / "memories" / f"{gone}.md").unlink()
    with MemoryPlane.open(root) as plane:
        plane.verify(fix=True)
    with MemoryPlane.open(root) as plane:
        block = plane.retrieve("what is the golf locker code").render()
        src = plane._retriever._lt_source
        assert len(src.gen.entries) == len(ids) - 2
        assert None in src.inv.docs  # loaded, not tokenised
        plane._retriever.wait()
    # Renumbered on load, the file was written again as the index is now.
    assert json.loads(gzip.decompress((root / ".cache/retrieve/long_term.json.gz").read_bytes()))["count"] == 28
    with MemoryPlane.open(root, retrieve_config=RetrieveConfig(persist_postings=False)) as plane:
        assert plane.retrieve("what is the golf locker code").render() == block
    with MemoryPlane.open(root) as plane:
        plane.retrieve("what is the golf locker code")
        src = plane._retriever._lt_source
        assert src.persisted == len(ids) - 2 and None in src.inv.docs  # the file as it is now, loaded
