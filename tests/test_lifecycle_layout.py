"""Layouts answer where a store's files live; the default rules say what verify marks and GC removes.

It reaches inside `lifecycle._tree` and `lifecycle._layout` for the tree walk and the naming of a path under the
root, whose shortcuts must name every path as `os.path.relpath` and `Path.relative_to` do."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.lifecycle import (
    DatedLayout,
    FlatLayout,
    Layout,
    ProfileLayout,
    Record,
    TombstoneLog,
    UnsafePathError,
    VerifyReport,
    collect_reason,
    load_retention,
    not_yet_tombstoned,
    slug_id,
    verify_marks,
)

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


def _year(item_id: str) -> str:
    return item_id[3:7] if item_id.startswith("ep_") else "unknown"


def test_a_flat_layout_answers_for_device_folders(root: Path) -> None:
    lay = FlatLayout(root, "device/procedures")
    assert isinstance(lay, Layout)
    assert lay.path_of("proc_a") == root / "device" / "procedures" / "proc_a.yaml"
    assert lay.name_for("proc_a") == "proc_a.yaml" and lay.rel(lay.path_of("proc_a")) == "device/procedures/proc_a.yaml"
    with pytest.raises(UnsafePathError):
        lay.path_of("../x")
    (lay.dir / "proc_b.yaml").write_text("id: proc_b\n")
    (lay.dir / "proc_a.yaml").write_text("id: proc_a\n")
    (lay.dir / ".hidden.yaml").write_text("")
    (lay.dir / "notes.txt").write_text("")
    os.symlink(lay.dir / "proc_a.yaml", lay.dir / "proc_link.yaml")
    assert lay.item_paths() == [lay.dir / "proc_a.yaml", lay.dir / "proc_b.yaml"]  # no index, hidden, link
    assert sorted(lay.item_names()) == ["proc_a.yaml", "proc_b.yaml"]
    assert lay.owns("device/procedures/proc_a.yaml") and not lay.owns("device/apps/app_a.yaml")
    assert not lay.owns("device/procedures/sub/proc_a.yaml") and lay.stamp_dirs() == [lay.dir]


def test_a_flat_layout_with_a_sub_folder_answers_for_long_term(root: Path) -> None:
    lay = FlatLayout(root, "long_term", sub="memories", suffix=".md", check_ids=False)
    assert lay.dir == root / "long_term" and lay.items_dir == root / "long_term" / "memories"
    assert lay.path_of("mem_a") == root / "long_term" / "memories" / "mem_a.md"
    assert lay.name_for("mem_a") == "memories/mem_a.md" == lay.name_of(lay.path_of("mem_a"))
    (lay.items_dir / "mem_a.md").write_text("---\nid: mem_a\n---\n")
    assert lay.item_names() == ["memories/mem_a.md"] and lay.item_paths() == [lay.items_dir / "mem_a.md"]
    assert lay.owns("long_term/memories/mem_a.md") and not lay.owns("long_term/profile.md")


def test_a_dated_layout_answers_for_episode_folders(root: Path) -> None:
    lay = DatedLayout(root, "episodes", "episode.yaml", _year)
    ep = "ep_20260301_0000000001"
    assert lay.path_of(ep) == root / "episodes" / "2026" / ep / "episode.yaml"
    assert lay.name_for(ep) == f"2026/{ep}/episode.yaml" == lay.name_of(lay.path_of(ep))
    lay.item_dir(ep).mkdir(parents=True)
    (lay.item_dir(ep) / "episode.yaml").write_text("id: x\n")
    bare = lay.item_dir("ep_20260302_0000000002")
    bare.mkdir()
    # A folder without its file is listed by name (the index check finds it unreadable), never as an item.
    assert lay.item_paths() == [lay.path_of(ep)]
    assert sorted(lay.item_names()) == [f"2026/{ep}/episode.yaml", "2026/ep_20260302_0000000002/episode.yaml"]
    assert lay.item_dirs() == [lay.item_dir(ep), bare]
    assert lay.stamp_dirs() == [lay.dir, lay.dir / "2026"]
    assert lay.owns(f"episodes/2026/{ep}/episode.yaml") and not lay.owns(f"episodes/2026/{ep}/events.jsonl")
    with pytest.raises(UnsafePathError):
        lay.path_of("EP 1")


def test_a_profile_layout_names_files_after_devices(root: Path) -> None:
    lay = ProfileLayout(root, slug_id)
    assert lay.path_of("default") == root / "device" / "profile.yaml"
    assert lay.path_of("Pixel 8") == root / "device" / "profiles" / f"{slug_id('Pixel 8')}.yaml"
    (lay.dir / "pixel.yaml").write_text("id: device_pixel\n")
    assert lay.item_paths() == [root / "device" / "profile.yaml", lay.dir / "pixel.yaml"]  # default first
    assert lay.owns("device/profile.yaml") and lay.owns("device/profiles/pixel.yaml")
    assert not lay.owns("device/procedures/proc_a.yaml")


def test_verify_marks_expired_and_excerpt_only_only_when_the_episodes_are_known() -> None:
    rec = Record(id="proc_a", type="procedure", status="active", expires_at=NOW - timedelta(days=1),
                 evidence_refs=[{"type": "episode", "id": "ep_gone"}])
    unknown = VerifyReport()
    assert verify_marks(rec, unknown, NOW) == {"status": "expired"}  # nothing known about the episodes
    known = VerifyReport(traced={"ep_other"})
    assert verify_marks(rec, known, NOW) == {"status": "expired", "traceability": "excerpt_only"}
    assert known.stats == {"expired_marked": ["proc_a"], "excerpt_only": ["proc_a"]}
    assert verify_marks(rec, VerifyReport(traced={"ep_gone"}), NOW) == {"status": "expired"}


def test_collect_reason_follows_the_grace_periods(root: Path) -> None:
    ret = load_retention(None)  # expired: 14d, replaced: 30d
    assert collect_reason(Record(id="a", type="x", status="deleted"), ret, NOW) == "deleted"
    replaced = Record(id="b", type="x", status="replaced", updated_at=NOW - timedelta(days=29))
    assert collect_reason(replaced, ret, NOW) is None
    assert collect_reason(replaced, ret, NOW + timedelta(days=2)) == "replaced_past_grace"
    expired = Record(id="c", type="x", status="expired", expires_at=NOW - timedelta(days=13))
    assert collect_reason(expired, ret, NOW) is None
    assert collect_reason(expired, ret, NOW + timedelta(days=2)) == "expired_past_grace"
    tombs = TombstoneLog(root, clock=lambda: NOW)
    tombs.add_many("device/procedures", ["a"], reason="gc")
    # A rerun writes no second tombstone; an id made again after its tombstone needs a new one.
    assert not_yet_tombstoned(tombs, "device/procedures", {"a": NOW - timedelta(days=1), "b": NOW}) == ["b"]
    assert not_yet_tombstoned(tombs, "device/procedures", {"a": NOW + timedelta(days=1)}) == ["a"]


def test_the_episode_layout_names_the_folders_it_keeps() -> None:
    # The places where a file would stand where a folder belongs: the store's own folders, years, episode
    # folders and what an episode folder holds; the same answers as the pattern verify used before.
    import re

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from memory_plane.episodes import TaskEpisodeStore

    layout = TaskEpisodeStore(Path("/nonexistent/root")).layout
    old = re.compile(r"^episodes/(\.staging|\d{4}(/[^/.][^/]*(/artifacts|/transcript(/chunks|/envelopes)?)?)?)$")
    part = st.sampled_from(["episodes", "2026", "202", "20266", "ep_1", ".x", "artifacts", "transcript", "chunks",
                            "envelopes", ".staging", "episode.yaml", "long_term", "a.b", "x", "²⁰²⁶", "٢٠٢٦"])

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(st.lists(part, min_size=1, max_size=6))
    def same(parts: list[str]) -> None:
        rel = "/".join(parts)
        assert layout.folders(rel) == bool(old.match(rel)), rel

    same()
    assert layout.folders("episodes/2026/ep_1/transcript/chunks") and not layout.folders("episodes/notes.txt")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["2026", "ep_1", ".", "..", "", ".staging", "a b", "微信", "x.yaml", ".hidden"]),
                min_size=1, max_size=5))
def test_a_dated_layout_names_a_file_as_its_path_relative_to_the_folder(parts: list[str]) -> None:
    # name_of takes a shortcut for the paths it is usually given; it must name every path as Path does.
    root = Path("/m")
    lay = DatedLayout(root, "episodes", "episode.yaml", _year)
    text = "/m/episodes/" + "/".join(parts)
    try:
        want: str | None = str(Path(text).relative_to(lay.dir))
    except ValueError:
        want = None
    try:
        got: str | None = lay.name_of(text)  # type: ignore[arg-type]
    except ValueError:
        got = None
    assert got == want
    if got is not None:
        assert lay.name_of(Path(text)) == got


@pytest.mark.parametrize("spelling", ["abs", "abs/", "abs/.", "abs//", "rel", "rel/", "./rel", "."])
def test_the_walk_names_odd_entries_relative_to_the_root_however_the_root_is_written(tmp_path: Path, monkeypatch,
                                                                                      spelling: str) -> None:
    from memory_plane.lifecycle._tree import odd_entries

    root = tmp_path / "M"
    (root / "episodes" / "2026").mkdir(parents=True)
    (root / "device").write_text("a file where a folder belongs\n")
    (root / "episodes" / "2026" / "ep_a").symlink_to(tmp_path, target_is_directory=True)
    monkeypatch.chdir(tmp_path if spelling != "." else root)
    given_root = {"abs": str(root), "abs/": f"{root}/", "abs/.": f"{root}/.", "abs//": f"{root}//", "rel": "M",
                  "rel/": "M/", "./rel": "./M", ".": "."}[spelling]
    links, shapes = odd_entries(given_root)
    assert links == [("episodes/2026/ep_a", True)]
    assert [rel for rel, _ in shapes] == ["device"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["/m", "/m/", "m", "/m/.", "/", "/m//n"]),
       st.lists(st.sampled_from(["m", "n", ".", "..", "", ".x", "a b", "微信", "f.yaml"]), min_size=0, max_size=5))
def test_a_path_is_named_relative_to_the_root_as_path_names_it(root: str, parts: list[str]) -> None:
    from memory_plane.lifecycle._layout import rel_to

    text = root.rstrip("/") + "/" + "/".join(parts) if parts else root
    try:
        want = str(Path(text).relative_to(Path(root)))
    except ValueError:
        want = text
    assert rel_to(Path(root), text) == want
    assert rel_to(root, Path(text)) == (want if want != text else str(Path(text)))  # type: ignore[arg-type]
