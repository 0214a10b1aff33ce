"""An index a person broke with a line that does not parse: the next save or commit still lands, indexed."""

from __future__ import annotations

from pathlib import Path

from lifecycle import IndexFile, collection_lock
from memory_plane import MemoryPlane, MemoryRetrieveRequest


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
