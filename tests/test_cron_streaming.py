"""Verify and GC stream: no whole index is held (or left cached), the expiry marks verify writes are followed by a
rebuild from the digests it made (no memory parsed a third time), and the streamed order and comparison of an index
are the ones the list of its entries had.

It reaches inside lifecycle._index for the process's cache of parsed index files (what must stay empty), inside
_long_term for the class whose file loads it counts, and inside bench/ for the episode builder's check."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from memory_plane import MemoryPlane
from memory_plane._long_term import LongTermStore
from memory_plane.episodes import TaskEpisodeStore
from memory_plane.lifecycle import _index, order_bytes

THEN = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def _tree(root: Path, n: int = 12, kinds: tuple[str, ...] = ("rule", "preference", "fact")) -> None:
    """n memories; the facts expire by NOW (a fact's default TTL), the others do not."""
    with MemoryPlane.open(root, clock=lambda: THEN) as plane:
        for i in range(n):
            plane.long_term.save_memory(type=kinds[i % len(kinds)],
                                        content=f"memory {i} about the {('gym', 'bank', 'cafe', 'park')[i % 4]} code "
                                                f"{i * 7}", priority=40 + i)


def _cached(path: Path) -> bool:
    return any(Path(k) == path for k in _index._cache)


def test_verify_and_gc_leave_no_whole_index_cached(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _tree(root)
    index = root / "long_term" / "index.yaml"
    _index.forget_loaded_indexes()
    with MemoryPlane.open(root) as plane:
        plane.verify(now=NOW)  # marks written: the index is rewritten
        plane.verify(now=NOW)  # nothing to write: the index is only checked
        assert not _cached(index)
        plane.gc(dry_run=True)  # the machine's clock, checked against the newest write the indexes hold
        assert not _cached(index)


def test_expiry_marks_are_followed_by_a_rebuild_from_the_digests_verify_made(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root, clock=lambda: THEN) as plane:  # none of profile.md's types: it reads none of them
        for i in range(12):
            plane.long_term.save_memory(type="fact", content=f"fact {i} about the code {i * 7}",
                                        ttl="forever" if i % 3 else None)
    loads: list[str] = []
    original = LongTermStore.load_path

    def counted(self: LongTermStore, path: Path):  # type: ignore[no-untyped-def]
        loads.append(path.name)
        return original(self, path)

    monkeypatch.setattr(LongTermStore, "load_path", counted)
    with MemoryPlane.open(root) as plane:
        loads.clear()
        rep = plane.verify(now=NOW)
    marked = rep.stats["expired_marked"]
    assert len(marked) == 4
    # Each memory once by the walk, and each marked one once more to write its mark: nothing after.
    assert len(loads) == 12 + len(marked)
    lines = [json.loads(ln[2:]) for ln in (root / "long_term" / "index.yaml").read_text().splitlines()
             if ln.startswith("- {")]
    assert sorted(e["id"] for e in lines if e["status"] == "expired") == sorted(marked)
    with MemoryPlane.open(root) as plane:  # the index the marks left is the one a rebuild from the files makes
        assert not plane.long_term.rebuild_index()


def test_an_index_equal_in_values_but_not_in_bytes_or_order_is_not_rewritten(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _tree(root)
    index = root / "long_term" / "index.yaml"
    lines = index.read_text().split("\n")
    entries = [json.loads(ln[2:]) for ln in lines if ln.startswith("- {")]
    # A person's edit: the keys of one line in another order, a priority written as a float, the lines reversed.
    first = dict(reversed(list(entries[0].items())))
    first["priority"] = float(first["priority"])
    edited = [first, *entries[1:]][::-1]
    text = "# Derived\n# by hand\n" + "".join("- " + json.dumps(e, ensure_ascii=False) + "\n" for e in edited)
    index.write_text(text)
    store = LongTermStore(root)
    assert not store.rebuild_index()
    assert index.read_text() == text
    entries[3]["title"] = "changed by hand"
    index.write_text("".join("- " + json.dumps(e, ensure_ascii=False) + "\n" for e in entries))
    assert store.rebuild_index()
    assert "changed by hand" not in index.read_text()


_parts = st.one_of(st.integers(min_value=-10**30, max_value=10**30), st.text(max_size=6),
                   st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                                timezones=st.just(timezone.utc)))


@given(st.lists(st.tuples(st.integers(min_value=-10**30, max_value=10**30), st.text(max_size=8)), max_size=30))
def test_order_bytes_sort_as_the_tuples_of_the_memory_index(keys: list[tuple[int, str]]) -> None:
    assert sorted(keys, key=lambda k: order_bytes(*k)) == sorted(keys)


@given(st.lists(st.tuples(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                                       timezones=st.just(timezone.utc)), st.text(max_size=8)), max_size=30))
def test_order_bytes_sort_as_the_tuples_of_the_episode_index(keys: list[tuple[datetime, str]]) -> None:
    assert sorted(keys, key=lambda k: order_bytes(*k)) == sorted(keys)


def test_episode_index_order_as_bytes_matches_its_order_of_entries(tmp_path: Path) -> None:
    store = TaskEpisodeStore(tmp_path)
    entries = [{"id": f"ep_{i}", "started_at": ts} for i, ts in enumerate(
        ["2026-01-02T00:00:00Z", "not a time", None, "2025-12-31T23:59:59.5Z", "2026-01-02T01:00:00+01:00", 7])]
    by_bytes = sorted(entries, key=store.sort_bytes)
    assert [e["id"] for e in by_bytes] == [e["id"] for e in store.order_entries(entries)]


def test_the_episode_builder_writes_what_commit_episode_writes(tmp_path: Path) -> None:
    from memory_plane.bench._episode_tree import check_episode_builder

    assert check_episode_builder(tmp_path, 6) == 2 * 6 + 1  # episode.yaml and events.jsonl of each, the index
