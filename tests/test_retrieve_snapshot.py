"""A fresh process starts the long-term memories from the index's snapshot: it must show exactly what reading the
whole index shows, follow saves and forgets, keep no forgotten word, and never be read through a link or when it
is not of the index as it is.

It reaches inside the snapshot (its file, and a forget killed between its two steps) and the retriever's long-term
source, to say which path a retrieve took.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memory_plane.retrieval._snapshot as snapshot
from memory_plane import MemoryPlane, MemoryRetrieveRequest, RetrieveConfig

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)
SNAP = "long_term.sqlite"

WORDS = ["garage", "vault", "office", "router", "kitchen", "station", "amber", "monitor", "pin", "code", "tram",
         "garden", "printer", "ticket", "coffee", "家里", "门禁", "密码", "快递", "支付", "Alice", "Bob"]
APPS = ["WeChat", "Alipay", "Settings", "Chrome", "美团"]
KINDS = ["rule", "preference", "profile", "fact", "fact", "rule"]
GOALS = ["what is the office code", "open the garage", "pay with WeChat", "查看家里的门禁密码", "send Alice the ticket",
         "never share the vault pin", "Chrome printer settings", "amber monitor station", "买咖啡", "tram ticket code"]


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    # A test index of a few dozen lines spans many digest blocks and many rows of a word's postings, as 100,000
    # lines do.
    monkeypatch.setattr(snapshot, "BLOCK", 512)
    monkeypatch.setattr(snapshot, "HEAD", 256)
    monkeypatch.setattr(snapshot, "CHUNK", 4)


def clock() -> datetime:
    return NOW


def snap_config(**kw: Any) -> RetrieveConfig:
    return RetrieveConfig(snapshot_min=8, **kw)


def open_plane(root: Path, **kw: Any) -> MemoryPlane:
    return MemoryPlane.open(root, clock=clock, retrieve_config=snap_config(**kw))


def blocks(plane: MemoryPlane, goals: list[str] = GOALS) -> list[str]:
    return [plane.retrieve(MemoryRetrieveRequest(input=g, current_hints={"language": "zh-CN"})).render()
            for g in goals]


def baseline(root: Path, goals: list[str] = GOALS) -> list[str]:
    """What reading the whole index shows (no snapshot, no persisted postings)."""
    with MemoryPlane.open(root, clock=clock, retrieve_config=RetrieveConfig(persist_postings=False)) as plane:
        return blocks(plane, goals)


def from_snapshot(root: Path, goals: list[str] = GOALS) -> tuple[list[str], bool]:
    """(the blocks, whether the long-term memories came from the snapshot) of a fresh plane."""
    with open_plane(root) as plane:
        out = blocks(plane, goals)
        used = plane._retriever._lt_source.gen.lines is not None  # which path the retrieve took
    return out, used


def spec_memories(rng_specs: list[tuple[int, list[int], int, int, int]]) -> list[dict[str, Any]]:
    out = []
    for n, (kind, words, app, prio, extra) in enumerate(rng_specs):
        text = " ".join(WORDS[w % len(WORDS)] for w in words) + f" n{n}"
        m: dict[str, Any] = {"type": KINDS[kind % len(KINDS)], "content": text, "priority": prio,
                             "tags": [WORDS[words[0] % len(WORDS)]], "source": "model" if extra % 5 == 0 else "user"}
        if app % 4 == 0:
            m["applicability"] = {"app": APPS[app % len(APPS)]}
        elif app % 7 == 1:
            m["content"] = f"In {APPS[app % len(APPS)]}: {text}"
        if extra % 6 == 1:
            m["ttl"] = "30d"
        if extra % 9 == 2:
            m["applicability"] = {"language": "en-US"}
        out.append(m)
    return out


def build(root: Path, memories: list[dict[str, Any]]) -> None:
    with open_plane(root) as plane:
        for m in memories:
            plane.long_term.save_memory(force=True, **m)


def as_yaml(root: Path, item_id: str) -> None:
    """The index line of ``item_id`` as a person may write it by hand (YAML, not JSON)."""
    index = root / "long_term" / "index.yaml"
    index.write_bytes(b"\n".join(ln.replace(b'"type": ', b"type: ", 1) if item_id.encode() in ln else ln
                                 for ln in index.read_bytes().split(b"\n")))


def with_secret(root: Path, content: str, lines: int = 16) -> str:
    """A tree of ``lines`` memories and one more holding ``content``, its snapshot made; the one's id."""
    build(root, spec_memories([(k % 6, [k, k + 2], k, 40, k) for k in range(lines)]))
    with open_plane(root) as plane:
        secret = plane.long_term.save_memory(type="fact", content=content).id
    make_snapshot(root)
    return secret


def built_snapshot(root: Path, lines: int, step: int) -> tuple[Path, bytearray]:
    """A tree of ``lines`` memories with its snapshot made: the snapshot's path and its bytes, to damage."""
    build(root, spec_memories([(k % 6, [k, k + step], k, 30, k) for k in range(lines)]))
    make_snapshot(root)
    snap = root / ".cache" / "retrieve" / SNAP
    return snap, bytearray(snap.read_bytes())


def make_snapshot(root: Path) -> None:
    with open_plane(root) as plane:
        plane.retrieve("anything at all")  # the first retrieve of a large enough index writes its snapshot
    assert (root / ".cache" / "retrieve" / SNAP).is_file()


SPECS = st.lists(st.tuples(st.integers(0, 5), st.lists(st.integers(0, 40), min_size=2, max_size=6),
                           st.integers(0, 20), st.integers(0, 100), st.integers(0, 50)), min_size=10, max_size=30)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(SPECS)
def test_a_fresh_process_started_from_the_snapshot_shows_what_reading_the_index_shows(
        tmp_path_factory: pytest.TempPathFactory, specs: list[tuple[int, list[int], int, int, int]]) -> None:
    root = tmp_path_factory.mktemp("snap") / "m"
    build(root, spec_memories(specs))
    make_snapshot(root)
    got, used = from_snapshot(root)
    assert used
    assert got == baseline(root)


def test_lines_saved_after_the_snapshot_are_read_from_the_file(tmp_path: Path) -> None:
    root = tmp_path / "m"
    build(root, spec_memories([(k % 6, [k, k + 3, k * 7], k, k * 11 % 100, k) for k in range(20)]))
    make_snapshot(root)
    # Another process saves: the snapshot follows the append.
    with open_plane(root) as other:
        other.long_term.save_memory(type="rule", content="Never share the vault pin with Bob")
        other.long_term.save_memory(type="fact", content="The office router code is 8842")
    got, used = from_snapshot(root)
    assert used and got == baseline(root)
    assert any("8842" in b for b in got) and any("vault pin" in b for b in got)
    # The same process saves after it started from the snapshot: the appended lines are taken in.
    with open_plane(root) as plane:
        blocks(plane)
        plane.long_term.save_memory(type="fact", content="The garden tram ticket code is 5531")
        later = blocks(plane)
        assert plane._retriever._lt_source.gen.lines is not None
    assert any("5531" in b for b in later)
    assert later == baseline(root)


def test_a_forget_takes_the_words_out_of_the_snapshot_and_leaves_it_usable(tmp_path: Path) -> None:
    root = tmp_path / "m"
    build(root, spec_memories([(k % 6, [k, k + 5], k, 50, k) for k in range(24)]))
    with open_plane(root) as plane:
        secret = plane.long_term.save_memory(type="fact", content="The zebrafish locker code is quokka 7781").id
        rule = plane.long_term.save_memory(type="rule", content="Never read the numbat diary aloud").id
    make_snapshot(root)
    snap = root / ".cache" / "retrieve" / SNAP
    with sqlite3.connect(snap) as db:
        salt = bytes.fromhex(db.execute("SELECT v FROM meta WHERE k = 'salt'").fetchone()[0])
    keys = [snapshot.word_key(salt, w) for w in ("quokka", "zebrafish", "7781", "numbat")]
    data = snap.read_bytes()
    assert b"numbat" in data and all(k in data for k in keys)  # the rule's text, and every word's key
    assert b"quokka" not in data  # a word is kept by its key only
    with open_plane(root) as plane:
        plane.long_term.save_memory(type="fact", content="The office printer is on floor 3")  # the version moves on
        assert plane.forget(secret) and plane.forget(rule)
    data = snap.read_bytes()
    assert b"numbat" not in data and not any(k in data for k in keys)
    goals = [*GOALS, "zebrafish locker quokka code"]
    got, used = from_snapshot(root, goals)
    assert used, "a forget keeps the snapshot usable"
    assert got == baseline(root, goals)
    assert not any("quokka" in b for b in got)


def test_a_forget_killed_between_the_snapshot_and_the_index_serves_nothing_forgotten(tmp_path: Path) -> None:
    root = tmp_path / "m"
    secret = with_secret(root, "The wombat safe code is 3391")
    with open_plane(root) as plane:
        store = plane.long_term
        index = store.index.path
        raw = index.read_bytes()
        at = raw.index(f'"id": "{secret}"'.encode()) - len(b'- {')
        end = raw.index(b"\n", at) + 1
        assert store.index_hook is not None
        store.tombstones.add("memory", secret, reason="forgotten")
        store.index_hook.forgetting(index, [(at, raw[at:end])])  # killed here: the line is not blanked yet
    data = (root / ".cache" / "retrieve" / SNAP).read_bytes()
    assert b"wombat" not in data
    goals = [*GOALS, "wombat safe code"]
    got, _ = from_snapshot(root, goals)
    # Served from neither path (its line, still in the index, counts in the words' statistics of one path only).
    assert not any("wombat" in b for b in got) and not any("wombat" in b for b in baseline(root, goals))
    with open_plane(root) as plane:
        plane.verify(fix=True, now=NOW)  # the forget is finished
    assert b"wombat" not in (root / "long_term" / "index.yaml").read_bytes()
    got, _ = from_snapshot(root, goals)
    assert got == baseline(root, goals)


def test_an_index_changed_otherwise_is_not_read_through_an_old_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "m"
    build(root, spec_memories([(k % 6, [k, k + 1], k, 60, k) for k in range(20)]))
    make_snapshot(root)
    index = root / "long_term" / "index.yaml"
    # A person edits one line in place, keeping its length and the file's size.
    raw = index.read_bytes()
    edited = raw.replace(b"garage", b"garbge", 1)
    assert edited != raw and len(edited) == len(raw)
    index.write_bytes(edited)
    got, used = from_snapshot(root)
    assert not used
    assert got == baseline(root)


def test_a_damaged_snapshot_is_not_used_and_is_written_again(tmp_path: Path) -> None:
    root = tmp_path / "m"
    snap, data = built_snapshot(root, 20, 4)
    for k in range(200, len(data), 997):
        data[k] ^= 0x5A
    snap.write_bytes(bytes(data))
    got, _ = from_snapshot(root)
    assert got == baseline(root)
    with sqlite3.connect(snap) as db:  # written again whole by the retrieve that could not use it
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert from_snapshot(root) == (baseline(root), True)


def test_a_linked_cache_folder_or_snapshot_is_neither_read_nor_written(tmp_path: Path) -> None:
    root = tmp_path / "m"
    build(root, spec_memories([(k % 6, [k, k + 6], k, 30, k) for k in range(20)]))
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = root / ".cache" / "retrieve"
    cache.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, cache)
    got, used = from_snapshot(root)
    assert not used and got == baseline(root)
    assert list(outside.iterdir()) == []
    os.unlink(cache)
    make_snapshot(root)
    snap = cache / SNAP
    os.replace(snap, outside / SNAP)
    os.symlink(outside / SNAP, snap)
    before = (outside / SNAP).read_bytes()
    got, used = from_snapshot(root)
    assert not used and got == baseline(root)
    with open_plane(root) as plane:
        first = plane.long_term.entries()[0]["id"]
        assert plane.forget(first)
    assert (outside / SNAP).read_bytes() == before  # a forget never writes through the link either


def test_the_apps_a_rule_names_come_from_the_snapshot_only_under_the_same_catalog(tmp_path: Path) -> None:
    from memory_plane.device_memory import AppCatalog

    root = tmp_path / "m"
    build(root, spec_memories([(k % 3 + 0, [k, k + 2], 7 * k + 1, 50, k) for k in range(20)]))
    make_snapshot(root)
    with open_plane(root) as plane:
        fingerprint = plane.device.catalog.fingerprint()
        config = snap_config().verdicts_key()
    loaded = snapshot.SnapshotFile(root, "long_term").load(root / "long_term" / "index.yaml", config)
    assert loaded is not None
    try:
        named = loaded.rule_apps(fingerprint)
        assert named is not None and any(named.values())  # rules "In WeChat: ..." name their app
        assert loaded.rule_apps("another catalog") is None
    finally:
        loaded.close()
    catalog = AppCatalog.shipped()
    before = catalog.fingerprint()
    catalog.learn("zorbo", ["Zorbo"])
    assert catalog.fingerprint() != before


def test_a_snapshot_behind_by_many_lines_is_written_again_from_the_one_it_started_from(tmp_path: Path) -> None:
    root = tmp_path / "m"
    build(root, spec_memories([(k % 6, [k, k + 3], k, 20, k) for k in range(16)]))
    make_snapshot(root)
    with open_plane(root) as plane:
        blocks(plane)
        for k in range(12):  # more lines than a snapshot of this size may lag by
            plane.long_term.save_memory(type=KINDS[k % len(KINDS)], content=f"the {WORDS[k]} kiosk code is {k}71")
        blocks(plane)  # started from the snapshot, its appended lines taken in: a new snapshot is written
        assert plane._retriever._lt_source.gen.lines is not None
    with open_plane(root) as plane:
        got = blocks(plane)
        src = plane._retriever._lt_source
        assert src.gen.snap is not None and src.gen.snap.covered == len(src.gen.entries)
    assert got == baseline(root)


EDITS = st.lists(st.tuples(st.sampled_from(["flip", "cut", "drop_line", "twin_line", "junk_line", "blank_line"]),
                           st.integers(0, 10**6)), min_size=1, max_size=3)


def _edit(raw: bytes, kind: str, at: int) -> bytes:
    if not raw:
        return b"- {not json: [\n" if kind == "junk_line" else raw
    lines = raw.split(b"\n")
    k = 2 + at % max(1, len(lines) - 3)  # past the header's comments
    if kind == "flip":
        i = at % len(raw)
        return raw[:i] + bytes([raw[i] ^ 0x21]) + raw[i + 1:]
    if kind == "cut":
        return raw[:at % len(raw)]
    if kind == "drop_line":
        return b"\n".join(lines[:k] + lines[k + 1:])
    if kind == "twin_line":
        return b"\n".join(lines[:k + 1] + lines[k:])
    if kind == "junk_line":
        return b"\n".join([*lines[:k], b"- {not json: [", *lines[k:]])
    return b"\n".join([*lines[:k], b"#" + b" " * 40, *lines[k:]])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(EDITS)
def test_an_index_edited_by_hand_in_any_way_is_never_read_through_the_snapshot_wrongly(
        tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[str, int]]) -> None:
    root = tmp_path_factory.mktemp("edit") / "m"
    build(root, spec_memories([(k % 6, [k, k + 9], k, 55, k) for k in range(14)]))
    make_snapshot(root)
    index = root / "long_term" / "index.yaml"
    raw = index.read_bytes()
    for kind, at in edits:
        raw = _edit(raw, kind, at)
    index.write_bytes(raw)
    got, _ = from_snapshot(root)  # whatever it makes of the file (a doubtful one is rebuilt from the item files)
    assert got == baseline(root)


def test_saves_and_forgets_keep_the_snapshot_vouching_for_the_index_without_a_listing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import memory_plane.retrieval._snapshot_source as snapshot_source

    root = tmp_path / "m"
    build(root, spec_memories([(k % 6, [k, k + 7], k, 35, k) for k in range(18)]))
    make_snapshot(root)
    with open_plane(root) as plane:
        kept = plane.long_term.save_memory(type="fact", content="The lighthouse key is in the red tin").id
        plane.long_term.save_memory(type="rule", content="Always lock the lighthouse door")
        assert plane.forget(kept)
    listed: list[Path] = []
    real = snapshot_source.paths_doubt
    monkeypatch.setattr(snapshot_source, "paths_doubt",
                        lambda store, *a: (listed.append(store.dir), real(store, *a))[1])
    got, used = from_snapshot(root)
    assert used and listed == []  # the folder was not listed: the writers kept the snapshot's word
    assert got == baseline(root)
    (root / "long_term" / "memories" / "mem_0000000000aa.md").write_text("---\nid: mem_0000000000aa\n---\nby hand\n")
    from_snapshot(root)
    assert listed  # a file added by another hand: the folder is listed again


def test_a_process_that_forgets_then_saves_does_not_keep_the_forgotten_memory(tmp_path: Path) -> None:
    root = tmp_path / "m"
    build(root, spec_memories([(k % 6, [k, k + 3], k, 45, k) for k in range(16)]))
    with open_plane(root) as plane:
        fact = plane.long_term.save_memory(type="fact", content="Pay the zebra office with Alipay code quickly",
                                           force=True, source="model").id
        rule = plane.long_term.save_memory(type="rule", content="Never pay the zebra office with Alipay code quickly",
                                           force=True).id
    make_snapshot(root)
    goals = ["pay the zebra office with alipay", *GOALS]
    with open_plane(root) as plane:
        blocks(plane, goals)
        assert plane.forget(rule)
        plane.long_term.save_memory(type="fact", content="The printer in the garden is green", force=True)
        got = blocks(plane, goals)
    assert got == baseline(root, goals)
    assert fact in got[0] and rule not in "".join(got)  # the forgotten rule no longer overrules the fact


def test_a_line_a_person_wrote_as_yaml_is_never_lost_through_a_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "m"
    build(root, spec_memories([(k % 6, [k, k + 1], k, 30, k) for k in range(16)]))
    with open_plane(root) as plane:
        kept = plane.long_term.save_memory(type="rule", content="Always answer the wombat kiosk politely").id
    as_yaml(root, kept)
    goals = [*GOALS, "wombat kiosk"]
    for _ in range(2):  # the first reads the index whole; the second starts from whatever it left
        got, _ = from_snapshot(root, goals)
        assert got == baseline(root, goals) and any("wombat" in b for b in got)


def test_a_forget_that_rewrites_the_index_drops_the_snapshot_with_the_words(tmp_path: Path) -> None:
    root = tmp_path / "m"
    secret = with_secret(root, "The zebrafish locker code is quokka 7781")
    as_yaml(root, secret)  # the forget cannot blank such a line in place, and rewrites the index
    with open_plane(root) as plane:
        assert plane.forget(secret)
    for f in (root / ".cache" / "retrieve").iterdir():
        assert b"quokka" not in f.read_bytes(), f


def test_a_snapshot_that_fails_mid_retrieve_is_read_around_and_dropped(tmp_path: Path) -> None:
    root = tmp_path / "m"
    snap, data = built_snapshot(root, 30, 8)
    with sqlite3.connect(snap) as db:
        size = db.execute("PRAGMA page_size").fetchone()[0]
    for page in range(1, len(data) // size):
        if data[page * size] in (0x0A, 0x02):  # the pages of the postings (a table of no row ids)
            data[page * size + 1:page * size + 8] = b"\xff" * 7
    snap.write_bytes(bytes(data))
    got, _ = from_snapshot(root)
    assert got == baseline(root)
    assert not snap.exists() or from_snapshot(root)[0] == baseline(root)  # dropped (the next process writes it)
    from_snapshot(root)
    assert from_snapshot(root) == (baseline(root), True)  # written again whole, and used


def test_a_journal_a_killed_write_left_is_never_read_and_goes_with_its_file(tmp_path: Path) -> None:
    root = tmp_path / "m"
    build(root, spec_memories([(k % 6, [k, k + 5], k, 30, k) for k in range(16)]))
    make_snapshot(root)
    journal = root / ".cache" / "retrieve" / (SNAP + "-journal")
    journal.write_bytes(b"pages as they were: quokka")
    got, used = from_snapshot(root)
    assert not used and got == baseline(root)
    with open_plane(root) as plane:
        assert plane.forget(plane.long_term.entries()[0]["id"])
    assert not journal.exists()


def test_a_root_whose_path_reads_as_a_query_is_started_from_its_own_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "odd?mode=rwc&x=1#y" / "m"
    build(root, spec_memories([(k % 6, [k, k + 3], k, 30, k) for k in range(16)]))
    make_snapshot(root)
    got, used = from_snapshot(root)
    assert used and got == baseline(root)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd?mode=rwc&x=1#y"]
