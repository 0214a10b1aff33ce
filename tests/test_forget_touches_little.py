"""A forget reads what it removes: the memories it replaced are found through the candidates index, and the index
lines of what it removes are cut out of index.yaml, never the whole file parsed and written out again.

It reaches inside `lifecycle._index` to make a whole-file parse fail, the way a test counts work without timing it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_plane import MemoryPlane
from memory_plane.lifecycle import _index, init_tree

OLDER = "Mom's phone number is 555 0100, call her on Zorbix"
NEWER = "Mom's phone number is 555 0199, call her on Zorbix"


def _lines(root: Path) -> list[str]:
    return [ln for ln in (root / "long_term" / "index.yaml").read_text().splitlines() if ln.startswith("- {")]


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, str, str]:
    root = tmp_path / "m"
    init_tree(root)
    plane = MemoryPlane.open(root)
    older = plane.long_term.save_memory(type="fact", content=OLDER, tags=["mom"], entities=["Mom"])
    for i in range(30):
        plane.long_term.save_memory(type="fact", content=f"filler fact number {i} about topic {i * 7}")
    newer = plane.long_term.save_memory(type="fact", content=NEWER, tags=["mom"], entities=["Mom"])
    assert newer.status == "superseded" and newer.superseded == [older.id]
    plane.close()
    return root, older.id, newer.id


def test_a_forget_finds_what_it_replaced_and_cuts_their_lines_without_a_whole_parse(
        tree: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    root, older, newer = tree
    before = _lines(root)

    long_term_index = root / "long_term" / "index.yaml"
    read = _index.IndexFile.read

    def whole(self: _index.IndexFile) -> _index.IndexRead:
        assert self.path != long_term_index, "the long-term index.yaml read whole"
        return read(self)

    monkeypatch.setattr(_index.IndexFile, "read", whole)
    plane = MemoryPlane.open(root)
    assert plane.forget(newer)
    plane.close()
    after = _lines(root)
    gone = {json.loads(ln[2:])["id"] for ln in before} - {json.loads(ln[2:])["id"] for ln in after}
    assert gone == {older, newer}  # the memory and the one it replaced, found through the candidates index
    assert after == [ln for ln in before if json.loads(ln[2:])["id"] not in gone]  # every other line as it was
    assert not (root / "long_term" / "memories" / f"{older}.md").exists()


def test_without_a_current_candidates_index_a_forget_still_finds_what_it_replaced(
        tree: tuple[Path, str, str]) -> None:
    root, older, newer = tree
    (root / "long_term" / "candidates.sqlite").unlink()
    plane = MemoryPlane.open(root)
    assert plane.forget(newer)
    plane.close()
    ids = {json.loads(ln[2:])["id"] for ln in _lines(root)}
    assert older not in ids and newer not in ids and len(ids) == 30
