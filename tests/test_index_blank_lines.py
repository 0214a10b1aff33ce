"""Entries blanked out of an index file in place: every reader sees exactly the entries left, in order, through its
fast path; the blanked text is gone from the bytes; no other line moves; a hint that is wrong is never trusted.

It reaches inside `lifecycle._index` for the byte parser (``_bulk_bytes``, the fast path every cold read takes) and
the text parser, so the test can say both see the same entries, and inside `lifecycle._digest_table` for the
line-by-line reader verify uses."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.lifecycle import IndexFile
from memory_plane.lifecycle._digest_table import index_problems
from memory_plane.lifecycle._index import _bulk_bytes, format_entry, parse_index

_IDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
# Any text a field may hold: line breaks, quotes, "#" and "}" and "- {" (escaped or not by JSON), CJK, emoji.
_TEXT = st.text(alphabet=st.sampled_from(list("ab #}{-\n\"\\:,é中文🙂")), max_size=30)
_FIELD_VALUES = st.one_of(_TEXT, st.integers(-5, 5), st.lists(_TEXT, max_size=3), st.none())


@st.composite
def _index_case(draw: st.DrawFn) -> tuple[list[dict[str, Any]], set[str], dict[str, int]]:
    ids = draw(st.lists(_IDS, min_size=1, max_size=25, unique=True))
    entries = []
    for n, item_id in enumerate(ids):
        extra = draw(st.dictionaries(st.sampled_from(["title", "summary", "tags", "x"]), _FIELD_VALUES, max_size=3))
        # A word only this entry holds, so its text can be looked for in the bytes afterwards.
        entries.append({"id": item_id, "summary": f"uniq{n}word", **extra})
    gone = set(draw(st.lists(st.sampled_from(ids), max_size=len(ids), unique=True)))
    hints = draw(st.dictionaries(st.sampled_from(ids), st.integers(-3, 4000), max_size=len(ids)))
    return entries, gone, hints


def _write(path: Path, entries: list[dict[str, Any]]) -> IndexFile:
    index = IndexFile(path, path.parent)
    for e in entries:
        index.append(e)
    return index


@settings(max_examples=150, deadline=None)
@given(_index_case(), st.booleans(), st.booleans())
def test_blanked_entries_are_gone_and_every_other_is_read_as_it_was(
        case: tuple[list[dict[str, Any]], set[str], dict[str, int]], true_hints: bool, twice: bool) -> None:
    entries, gone, wrong_hints = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index.yaml"
        index = _write(path, entries)
        before = path.read_bytes()
        hints = dict(index.line_starts()) if true_hints else wrong_hints  # noted where the lines start, or garbage
        assert index.blank_out(gone, hints) == len(gone)
        if twice:
            assert index.blank_out(gone, hints) == 0  # a resumed forget finds nothing left to blank
        data = path.read_bytes()
        left = [e for e in entries if e["id"] not in gone]

        assert len(data) == len(before)  # in place: no other line moved
        for e in left:
            assert format_entry(e).encode("utf-8") + b"\n" in data
        for n, e in enumerate(entries):
            if e["id"] in gone:
                assert f"uniq{n}word".encode() not in data
        # Every reader: the parse of the bytes (its fast path when any entry is left), the text reader, the cached
        # read, the line-by-line reader, a fresh object's read; and the hints a rebuild notes point at each line.
        if left:
            assert _bulk_bytes(data) == left
        assert parse_index(data.decode("utf-8")).entries == left
        fresh = IndexFile(path, path.parent)
        assert index.read().entries == left and fresh.read().entries == left and not fresh.read().problems
        assert list(fresh.iter_entries()) == left
        assert index_problems(fresh) == []
        starts = dict(fresh.line_starts())
        assert set(starts) == {e["id"] for e in left}
        for e in left:
            assert data[starts[e["id"]]:].startswith(format_entry(e).encode("utf-8") + b"\n")
        # An append after the blanks is read after the entries left, and a rewrite leaves the blank lines out.
        index.append({"id": "appended", "summary": "z"})
        assert [e["id"] for e in IndexFile(path, path.parent).read().entries] == [e["id"] for e in left] + ["appended"]
        index.write(index.read().entries)
        assert all(ln.startswith("- {") for ln in path.read_text(encoding="utf-8").split("\n")[2:] if ln)


def test_a_hint_at_another_entrys_line_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "index.yaml"
    index = _write(path, [{"id": "a", "summary": "alpha"}, {"id": "b", "summary": "bravo", "superseded_by": "a"}])
    starts = dict(index.line_starts())
    assert index.blank_out(["a"], {"a": starts["b"]}) == 1  # b's line, which names a: searched, a's line blanked
    assert [e["id"] for e in index.read().entries] == ["b"]
    assert b"alpha" not in path.read_bytes()


def test_a_hand_edited_line_naming_the_id_makes_a_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "index.yaml"
    index = _write(path, [{"id": "a", "summary": "alpha"}, {"id": "b", "summary": "bravo"}])
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("- id: a\n  summary: alpha again\n")  # block YAML: no JSON line to blank
    assert index.blank_out(["a"], {}) >= 1
    assert [e["id"] for e in index.read().entries] == ["b"]
    assert b"alpha" not in path.read_bytes()
