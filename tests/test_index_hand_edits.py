"""An index a person broke with a line that does not parse: the next save or commit still lands, indexed."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.lifecycle import INDEX_HEADER, IndexFile, collection_lock, format_entry


def _break(index: Path) -> None:
    with index.open("a", encoding="utf-8") as f:
        f.write("- just text a person typed\n")


def test_a_new_id_is_written_beside_the_lines_that_parse(tmp_path: Path) -> None:
    d = tmp_path / "coll"
    d.mkdir()
    idx = IndexFile(d / "index.yaml")
    with collection_lock(d):
        idx.upsert({"id": "a", "path": "a.yaml"})
        _break(d / "index.yaml")
        assert idx.read().problems
        idx.upsert({"id": "b", "path": "b.yaml"})
    read = idx.read()
    assert [e["id"] for e in read.entries] == ["a", "b"] and not read.problems


def test_a_save_and_a_commit_land_in_a_hand_broken_index(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    with MemoryPlane.open(root) as plane:
        plane.long_term.save_memory(type="fact", content="the wifi password is on the router")
        _break(root / "long_term" / "index.yaml")
        saved = plane.long_term.save_memory(type="fact", content="the parking spot is B12")
        assert saved.status == "saved"
        assert any(h.id == saved.id for h in plane.long_term.recall_memory("parking spot"))

        req = MemoryRetrieveRequest(input="open settings")
        plane.commit_episode(plane.new_episode_recorder(req, plane.retrieve(req)).finish(success=True))
        plane.flush(10)
        _break(root / "episodes" / "index.yaml")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        ep = rec.finish(success=True)
        assert plane.commit_episode(ep) is not False
        plane.flush(10)
        assert plane.episodes.get(ep.id) is not None
        assert ep.id in {e["id"] for e in plane.episodes.entries()}


def test_a_path_of_another_type_is_read_as_before_by_the_index_check(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    # The check's set operations take the lines' paths as they are only when all are strings (a number is read
    # as the name of a file that is not there, a list or null as no name: the file is found by its id).
    root = tmp_path / "memory"
    with MemoryPlane.open(root) as plane:
        for text in ("the wifi password is on the router", "the parking spot is B12"):
            plane.long_term.save_memory(type="fact", content=text)
        store = plane.long_term
        index = store.index.path
        good = [dict(e) for e in store.index.read().entries]
        for odd, rebuilt in (([good[0]["path"]], False), (12, True), (None, False), ("memories/gone.md", True)):
            lines = [dict(e) for e in good]
            lines[0]["path"] = odd
            index.write_text(INDEX_HEADER + "".join(format_entry(e) + "\n" for e in lines), "utf-8")
            caplog.clear()
            assert sorted(e["id"] for e in store.entries()) == sorted(e["id"] for e in good)
            warned = [r.getMessage() for r in caplog.records if "rebuilt from the item files" in r.getMessage()]
            assert bool(warned) == rebuilt, (odd, warned)
        assert "1 line(s) name files that are not there (first: memories/gone.md)" in warned[0]


@pytest.mark.parametrize("change", ["remove", "update"])
def test_a_rewrite_copies_the_lines_it_does_not_change(tmp_path: Path, change: str) -> None:
    """Removing or updating one entry rewrites the file with every other line as it was (a person's spacing
    included) and that entry's line alone made again (or cut out); an update beside an id that needs escapes
    formats every line instead, the entries the same."""
    d = tmp_path / "coll"
    d.mkdir()
    idx = IndexFile(d / "index.yaml")
    lines = [format_entry({"id": f"i{k}", "n": k}) for k in range(5)]
    lines[3] = '- {"id": "i3",   "n": 3,  "note": "spaced by hand"}'
    (d / "index.yaml").write_text(INDEX_HEADER + "".join(ln + "\n" for ln in lines))
    with collection_lock(d):
        if change == "remove":
            assert idx.remove(["i1"]) == 1
            want = [lines[0], *lines[2:]]
        else:
            idx.upsert({"id": "i1", "n": 10})
            want = [lines[0], format_entry({"id": "i1", "n": 10}), *lines[2:]]
    assert (d / "index.yaml").read_text() == INDEX_HEADER + "".join(ln + "\n" for ln in want)
    # An id with a quote in it: its line cannot be told by its start, so an update formats every line again;
    # a removal cuts out the lines of the ids it removes and leaves that one as it is.
    odd = [{"id": 'a"b', "n": 1}, {"id": "c", "n": 2}]
    (d / "index.yaml").write_text(INDEX_HEADER + '- {"id": "a\\"b",  "n": 1}\n- {"id": "c", "n": 2}\n')
    with collection_lock(d):
        idx.upsert({"id": "c", "n": 3})
    assert (d / "index.yaml").read_text() == INDEX_HEADER + format_entry(odd[0]) + "\n" + format_entry(
        {"id": "c", "n": 3}) + "\n"
    with collection_lock(d):
        assert idx.remove(["c"]) == 1
    assert (d / "index.yaml").read_text() == INDEX_HEADER + format_entry(odd[0]) + "\n"
    (d / "index.yaml").write_text(INDEX_HEADER + '- {"id": "a\\"b",  "n": 1}\n- {"id": "c", "n": 2}\n')
    with collection_lock(d):
        assert idx.remove(["c"]) == 1
    assert (d / "index.yaml").read_text() == INDEX_HEADER + '- {"id": "a\\"b",  "n": 1}\n'
    with collection_lock(d):
        assert idx.remove(['a"b']) == 1  # an id with escapes: the file read whole, the entries the same
    assert [e["id"] for e in idx.read().entries] == []


_IDS = st.sampled_from(["a", "b", "ab", "b-2", "mem_1", "x_y"])


@settings(max_examples=120, deadline=None)
@given(rows=st.lists(st.tuples(_IDS, st.sampled_from(["", "a", "b", "mem_1"]), st.booleans()), max_size=12),
       drop=st.sets(_IDS, max_size=3), blank_line=st.booleans())
def test_removing_lines_leaves_what_a_whole_rewrite_leaves(rows: list[tuple[str, str, bool]], drop: set[str],
                                                           blank_line: bool) -> None:
    """Whatever ids the lines hold (twins, an id that is another's prefix, an id named in another line's field),
    a removal leaves the entries a parse, a filter and a rewrite would, in their order, and says how many went."""
    lines = []
    for item_id, other, spaced in rows:
        entry = {"id": item_id, "superseded_by": other} if other else {"id": item_id}
        lines.append(format_entry(entry).replace(", ", ",   ") if spaced else format_entry(entry))
    if blank_line and lines:
        lines.insert(len(lines) // 2, "")  # another shape: the file is read whole
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        idx = IndexFile(d / "index.yaml")
        (d / "index.yaml").write_text(INDEX_HEADER + "".join(ln + "\n" for ln in lines))
        before = [dict(e) for e in idx.read().entries]
        want = [e for e in before if e["id"] not in drop]
        with collection_lock(d):
            assert idx.remove(drop) == len(before) - len(want)
        assert [dict(e) for e in idx.read().entries] == want


@settings(max_examples=120, deadline=None)
@given(rows=st.lists(st.tuples(_IDS, st.sampled_from(["", "a", "b", "mem_1"]), st.booleans(), st.booleans()),
                     max_size=12),
       drop=st.sets(_IDS, max_size=4), absent=st.integers(min_value=0, max_value=40))
def test_removing_many_ids_leaves_the_bytes_removing_a_few_leaves(rows: list[tuple[str, str, bool, bool]],
                                                                  drop: set[str], absent: int) -> None:
    """A removal of many ids (a GC's thousands, the lines walked once) leaves the file byte for byte as a removal of
    the same present ids alone (each one's line searched for), hand-written lines that are not JSON included."""
    lines = []
    for item_id, other, spaced, flow in rows:
        entry = {"id": item_id, "superseded_by": other} if other else {"id": item_id}
        line = format_entry(entry).replace(", ", ",   ") if spaced else format_entry(entry)
        lines.append(f"- {{id: {item_id}}}" if flow else line)  # a person's YAML flow mapping, not JSON
    text = INDEX_HEADER + "".join(ln + "\n" for ln in lines)
    many = drop | {f"gone_{i}" for i in range(absent)}
    out = []
    for ids in (drop, many):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            idx = IndexFile(d / "index.yaml")
            (d / "index.yaml").write_text(text)
            with collection_lock(d):
                count = idx.remove(ids)
            out.append((count, (d / "index.yaml").read_bytes()))
    assert out[0] == out[1]
