"""A save reads only the memories its candidates index names, and answers exactly as reading every one would.

The index is derived: missing, behind a file added by hand, or behind a file edited in place, it is brought up
to date (by the next save, or by verify, which names it among the rebuilt indexes).

It reaches inside the long-term store for the save rules each memory is weighed by (``contradicts``,
``meaning_length``, the normalised text), the store itself (to make a twin that reads every memory) and the
candidates index (to ask it directly).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane
from memory_plane._contradiction import contradicts, meaning_length
from memory_plane._long_term import LongTermStore
from memory_plane._long_term_candidates import CANDIDATES_NAME, Probe
from memory_plane._long_term_model import GENERIC_ENTITIES, USER_WORD_TYPES, LongTermMemory, _norm
from memory_plane.lifecycle import init_tree

# Words of both scripts, the negation and obligation markers, stop words, and pieces of words: what makes the
# same text, a text inside another, and two rules that say the opposite.
WORDS = ["pay", "paying", "confirm", "before", "always", "never", "not", "must", "don't", "the", "a", "use", "it",
         "coffee", "tea", "alipay", "wechat", "send", "photo", "ask", "me", "12", "conf", "irm", "支付", "确认",
         "不要", "每次", "必须", "前", "微信", "我", "打开", "不", "x"]
JOIN = [" ", " ", " ", "", ", ", "'", "。"]
KINDS = ["rule", "preference", "fact"]
TAGS = ["money", "chat", "food", "Money"]
ENTITIES = ["alipay", "wechat", "user", "Coffee"]


@st.composite
def texts(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 8))
    parts = [draw(st.sampled_from(WORDS)) for _ in range(n)]
    out = parts[0]
    for p in parts[1:]:
        out += draw(st.sampled_from(JOIN)) + p
    return out


@st.composite
def saves(draw: st.DrawFn) -> list[dict]:
    out: list[dict] = []
    for _ in range(draw(st.integers(2, 9))):
        if out and draw(st.booleans()):
            # A piece of an earlier text, or an earlier text with more around it.
            prev = draw(st.sampled_from(out))["content"]
            i = draw(st.integers(0, len(prev) - 1))
            j = draw(st.integers(i + 1, len(prev)))
            text = prev[i:j] if draw(st.booleans()) else draw(texts()) + " " + prev + draw(st.sampled_from(["", " x"]))
            if not text.strip():
                text = prev
        else:
            text = draw(texts())
        out.append({"type": draw(st.sampled_from(KINDS)), "content": text,
                    "tags": draw(st.lists(st.sampled_from(TAGS), max_size=2)),
                    "entities": draw(st.lists(st.sampled_from(ENTITIES), max_size=2)),
                    "source": draw(st.sampled_from(["user", "model"]))})
    return out


def _store(root: Path, scan: bool) -> LongTermStore:
    t0 = datetime(2026, 5, 1, tzinfo=timezone.utc)
    ticks = iter(range(10**6))
    store = LongTermStore(root, clock=lambda: t0 + timedelta(seconds=next(ticks)))
    if scan:
        store.candidate_actives = lambda probe: None  # type: ignore[method-assign]  # every memory read
    return store


def _files(root: Path) -> dict[str, str]:
    folder = root / "long_term"
    return {str(p.relative_to(folder)): p.read_text("utf-8") for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name not in (CANDIDATES_NAME, ".lock")}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=saves())
def test_indexed_saves_answer_as_reading_every_memory(tmp_path_factory: pytest.TempPathFactory,
                                                      seq: list[dict]) -> None:
    base = tmp_path_factory.mktemp("saves")
    roots = [base / "indexed", base / "scan"]
    for r in roots:
        init_tree(r)
    indexed, scan = _store(roots[0], False), _store(roots[1], True)
    for s in seq:
        assert indexed.save_memory(**s) == scan.save_memory(**s), s
    assert _files(roots[0]) == _files(roots[1])


def _matters(old: str, norm: str, kind: str, m_ents: list[str], m_tags: list[str], ents: list[str],
             tags: list[str]) -> bool:
    """Whether any rule of a save looks at this active memory (the same, broader, inside, opposite, same subject)."""
    shared_e = {e.lower() for e in m_ents} & ({e.lower() for e in ents} - GENERIC_ENTITIES)
    shared_t = {t.lower() for t in m_tags} & {t.lower() for t in tags}
    topic = bool(shared_e or shared_t)
    return (old == norm or (meaning_length(norm) >= 8 and norm in old) or (meaning_length(old) >= 8 and old in norm)
            or (kind in USER_WORD_TYPES and contradicts(old, norm, same_topic=topic))
            or bool(shared_e and shared_t))


def _candidates_and_needed(store: Any, kind: str, new: str, ents: list[str], tags: list[str]
                           ) -> tuple[list[str] | None, set[str], list[tuple[str, Any]]]:
    """The candidates a save of ``new`` looks up, the active memories any rule of the save looks at (every one
    checked), and the active memories (file name, record)."""
    norm = _norm(new)
    store.sync_candidates()
    names = store.candidates.candidates(Probe(kind, norm, ents, tags))
    actives = [(i.path.name, i.record) for i in store.iter_items()
               if i.record is not None and i.record.status == "active"]
    needed = {n for n, m in actives if _matters(_norm(m.content), norm, kind, m.entities, m.tags, ents, tags)}
    return names, needed, actives


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(olds=st.lists(st.tuples(texts(), st.lists(st.sampled_from(ENTITIES), max_size=2),
                               st.lists(st.sampled_from(TAGS), max_size=2)), min_size=1, max_size=8),
       new=texts(), kind=st.sampled_from(KINDS), ents=st.lists(st.sampled_from(ENTITIES), max_size=2),
       tags=st.lists(st.sampled_from(TAGS), max_size=2))
def test_every_memory_a_save_looks_at_is_a_candidate(tmp_path_factory: pytest.TempPathFactory, olds: list,
                                                     new: str, kind: str, ents: list[str], tags: list[str]) -> None:
    root = tmp_path_factory.mktemp("cands")
    init_tree(root)
    store = _store(root, False)
    for text, m_ents, m_tags in olds:
        store.save_memory(type=kind, content=text, entities=m_ents, tags=m_tags, force=True)
    names, needed, _ = _candidates_and_needed(store, kind, new, ents, tags)
    if names is not None:
        assert needed <= set(names)


def _sized(root: Path, n: int) -> MemoryPlane:
    init_tree(root)
    plane = MemoryPlane.open(root)
    for i in range(n):
        plane.long_term.save_memory(type="fact", content=f"the office wifi password number {i} is kept in notes")
    return plane


def test_a_save_reads_the_candidates_not_every_memory(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    plane = _sized(tmp_path, 40)
    store = plane.long_term
    loaded: list[Path] = request.getfixturevalue("memory_loads")  # from here on: what the save reads
    res = store.save_memory(type="fact", content="the kitchen light switch is behind the fridge")
    assert res.status == "saved"
    assert len([p for p in loaded if p.parent == store.mem_dir]) <= 3
    plane.close()


def test_a_file_added_by_hand_is_found_by_the_next_save(tmp_path: Path) -> None:
    plane = _sized(tmp_path, 3)
    store = plane.long_term
    res = store.save_memory(type="rule", content="always confirm before paying in alipay")
    src = store.path_for(res.id)
    # A second copy of the rule under another id, written by a person (the index never saw it).
    text = src.read_text("utf-8").replace(res.id, "mem_by_hand")
    src.unlink()
    (store.mem_dir / "mem_by_hand.md").write_text(text, "utf-8")
    again = store.save_memory(type="rule", content="always confirm before paying in alipay")
    assert (again.id, again.status) == ("mem_by_hand", "ignored")
    plane.close()


def test_verify_rebuilds_a_missing_or_stale_candidates_index(tmp_path: Path) -> None:
    plane = _sized(tmp_path, 3)
    store = plane.long_term
    res = store.save_memory(type="rule", content="always confirm before paying in alipay")
    path = store.path_for(res.id)
    # Edited in place by a person: the folder's mtime does not change, only verify compares each file.
    text = path.read_text("utf-8").replace("always confirm before paying in alipay", "never send photos at night")
    st_before = os.stat(store.mem_dir)
    path.write_text(text, "utf-8")
    os.utime(store.mem_dir, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
    assert store.candidates.differences(store.layout.item_paths())[0] == [path.name]
    report = plane.verify()
    assert "long_term" in report.rebuilt_indexes
    assert store.candidates.differences(store.layout.item_paths()) == ([], [])
    assert store.save_memory(type="rule", content="never send photos at night").status == "ignored"
    (tmp_path / "long_term" / CANDIDATES_NAME).unlink()
    report = plane.verify()
    assert "long_term" in report.rebuilt_indexes
    assert (tmp_path / "long_term" / CANDIDATES_NAME).is_file()
    assert plane.verify().rebuilt_indexes == []
    plane.close()


def test_a_forgotten_memory_leaves_no_row_and_no_key(tmp_path: Path) -> None:
    plane = _sized(tmp_path, 2)
    store = plane.long_term
    res = store.save_memory(type="fact", content="my locker code is zanzibar4417")
    plane.forget(res.id)
    assert store.candidates.differences(store.layout.item_paths()) == ([], [])
    assert b"zanzibar" not in (tmp_path / "long_term" / CANDIDATES_NAME).read_bytes()
    plane.close()


def test_a_torn_candidates_file_is_made_again(tmp_path: Path) -> None:
    plane = _sized(tmp_path, 2)
    store = plane.long_term
    (tmp_path / "long_term" / CANDIDATES_NAME).write_bytes(b"not a database")
    res = store.save_memory(type="fact", content="the office wifi password number 1 is kept in notes")
    assert res.status == "ignored"
    assert store.candidates.current()
    plane.close()


def test_profile_md_lists_the_first_memories_by_priority_and_a_save_rewrites_only_those(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """profile.md holds the highest-priority active profile, rule and preference memories up to its bound and
    says more follow; a save of one below the bound reads no other memory and leaves the file as it was; one
    above it enters in its place. verify builds the same file from every memory."""
    import memory_plane._long_term as lt

    monkeypatch.setattr(lt, "PROFILE_LINES", 3)
    plane = MemoryPlane.open(tmp_path / "m")
    store = plane.long_term
    for k, prio in enumerate([50, 90, 30, 70, 10]):
        store.save_memory(type="preference", content=f"I prefer the colour number {k} for my phone", priority=prio)
    profile = store.dir / "profile.md"
    listed = [row.split()[1][1:] for row in profile.read_text().splitlines() if row.startswith("- [")]
    prios = {e["id"]: e["priority"] for e in store.index.read().entries}
    assert [prios[i] for i in listed] == [90, 70, 50] and "More active profile" in profile.read_text()
    before = profile.read_bytes()
    loaded: list[Path] = request.getfixturevalue("memory_loads")  # from here on: what the saves read
    store.save_memory(type="rule", content="never call anyone after ten in the evening", priority=20)
    assert profile.read_bytes() == before
    store.save_memory(type="rule", content="always ask before paying for anything", priority=80)
    listed = [row.split()[1][1:] for row in profile.read_text().splitlines() if row.startswith("- [")]
    prios = {e["id"]: e["priority"] for e in store.index.read().entries}
    assert [prios[i] for i in listed] == [90, 80, 70]
    assert len({p for p in loaded if p.parent == store.mem_dir}) <= 4  # the bound and the one saved, not all 7
    made = profile.read_bytes()
    assert plane.verify().ok and profile.read_bytes() == made  # verify, from every memory, writes the same file
    plane.close()


# What a rule says, without its negation or obligation: words of both scripts that share trigrams and tokens.
BODY = ["share", "the", "vault", "pin", "shared", "paying", "pay", "confirm", "before", "photo", "photos", "with",
        "bank", "code", "12", "x", "支付", "确认", "金额", "前", "微信", "支付宝", "每次", "锁门", "先"]
STANCE = ["", "never ", "always ", "don't ", "must not ", "you must ", "不要", "必须", "别", "每次都要"]
EDIT = list("aehinrstx 12支付确认前")


@st.composite
def bodies(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(BODY), min_size=1, max_size=7))
    return "".join(p + draw(st.sampled_from(["", " ", " ", ", "])) for p in parts).strip() or parts[0]


@st.composite
def near(draw: st.DrawFn, body: str) -> str:
    """The body with a few characters left out or put in and a few words dropped, under some stance."""
    text = body
    for op, at, ch in draw(st.lists(st.tuples(st.booleans(), st.integers(0, 999), st.sampled_from(EDIT)),
                                    max_size=5)):
        i = at % (len(text) + 1)
        text = text[:i] + text[i + 1:] if op and i < len(text) else text[:i] + ch + text[i:]
    words = text.split()
    if len(words) > 2 and draw(st.booleans()):
        del words[draw(st.integers(0, len(words) - 1))]
    return (draw(st.sampled_from(STANCE)) + " ".join(words)).strip() or body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), kind=st.sampled_from(["rule", "preference"]), body=bodies(),
       stance=st.sampled_from(STANCE), ents=st.lists(st.sampled_from(ENTITIES), max_size=1),
       tags=st.lists(st.sampled_from(TAGS), max_size=1))
def test_every_rule_saying_the_same_or_the_opposite_is_a_candidate(
        tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, kind: str, body: str, stance: str,
        ents: list[str], tags: list[str]) -> None:
    """Rules near the new one (characters left out or put in, words dropped, negated or not) among rules that
    share only pieces with it: every one the save's rules look at (checked against every memory) is a
    candidate, however many keys the lookup chose and however many of them it asks a file to hold."""
    root = tmp_path_factory.mktemp("opposite")
    init_tree(root)
    store = _store(root, False)
    new = (stance + body).strip()
    olds = data.draw(st.lists(st.one_of(near(body), bodies(), texts()), min_size=1, max_size=10))
    for text in olds:
        store.save_memory(type=kind, content=text, entities=data.draw(st.lists(st.sampled_from(ENTITIES), max_size=1)),
                          tags=data.draw(st.lists(st.sampled_from(TAGS), max_size=1)), force=True)
    names, needed, actives = _candidates_and_needed(store, kind, new, ents, tags)
    assert names is None or needed <= set(names), (new, [m.content for n, m in actives if n in needed])


def test_a_rule_among_many_sharing_its_common_pieces_reads_few_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rules that share the new one's common words and trigrams but neither say it nor its opposite are not read:
    a file must hold enough of the chosen keys, not one of them."""
    init_tree(tmp_path)
    plane = MemoryPlane.open(tmp_path)
    store = plane.long_term
    places = ["bank", "gym", "office", "school", "garage", "clinic"]
    for i in range(36):
        store.save_memory(type="rule", content=f"always share the {places[i % 6]} photos {i} with the team first")
        store.save_memory(type="rule", content=f"每次打开{places[i % 6]}前必须先确认第{i}个支付金额和收款人")
    replaced = store.save_memory(type="rule", content="always confirm the vault pin before paying").id
    read: list[str] = []
    real = store._load_names

    def spy(names: Iterable[str]) -> list[LongTermMemory]:
        names = list(names)
        read.extend(names)
        return real(names)

    monkeypatch.setattr(store, "_load_names", spy)
    monkeypatch.setattr(store, "update_profile", lambda mems: None)  # profile.md's own reads are not counted
    assert store.save_memory(type="rule", content="never share the vault pin").status == "saved"
    assert store.save_memory(type="rule", content="不要先确认支付").status == "saved"
    assert store.save_memory(type="rule", content="never confirm the vault pin before paying").status == "superseded"
    assert read == [store.path_for(replaced).name]  # the one the last save replaces, no other
    plane.close()


def test_a_new_memory_is_appended_without_the_index_being_parsed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_plane.lifecycle import IndexFile, forget_loaded_indexes

    root = tmp_path / "m"
    init_tree(root)
    store = LongTermStore(root)
    for k in range(30):
        store.save_memory(type="fact", content=f"the garden shed {k} key is under pot {k}")
    store.rebuild_index()  # a verify: index.yaml is known to match the files
    forget_loaded_indexes()  # a fresh process: no parse of index.yaml in memory
    reads: list[Path] = []
    real = IndexFile.read
    monkeypatch.setattr(IndexFile, "read", lambda self: (reads.append(self.path), real(self))[1])
    fresh = LongTermStore(root)
    res = fresh.save_memory(type="fact", content="the attic ladder is in the garage")
    assert res.status == "saved"
    assert store.index.path not in reads  # the new line was appended, the index not read
    lines = [e["id"] for e in LongTermStore(root).entries()]
    assert lines.count(res.id) == 1 and len(lines) == 31


def test_a_memory_saved_again_after_its_file_was_deleted_by_hand_keeps_one_line(tmp_path: Path) -> None:
    root = tmp_path / "m"
    init_tree(root)
    store = LongTermStore(root)
    for k in range(5):
        store.save_memory(type="fact", content=f"the tram pass {k} is in the blue wallet")
    gone = store.save_memory(type="fact", content="the spare phone charger is in the desk")
    os.unlink(store.path_for(gone.id))  # by hand: index.yaml still has its line
    again = LongTermStore(root).save_memory(type="fact", content="the spare phone charger is in the desk")
    assert again.id == gone.id
    raw = (root / "long_term" / "index.yaml").read_text("utf-8")
    assert raw.count(f'"id": "{gone.id}"') == 1
