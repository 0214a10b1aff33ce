"""A forget blanks its memories' index lines in place: index.yaml is never written out again, the other lines stay
where they were, the forgotten text is nowhere in the tree (not in the candidates index either, current or not),
retrieval in the same process and in a fresh one never shows the memory nor mixes up the others, and a rebuild
leaves the blank lines out.

It reaches inside `lifecycle._atomic` and `lifecycle._index` to see which writes a forget makes (a whole-file write
of index.yaml, a search of the file for a line its hint gives) without timing it, and to check the in-place
overwrite's mtime on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.lifecycle import _atomic, init_tree
from memory_plane.lifecycle import _index as index_module

from helpers import tree_files

REPO = Path(__file__).resolve().parent.parent
WORD = "Quorvexity"  # in no other memory, and in no word of the format
TEXT = f"The {WORD} gate code of the Zorbix flat is 4417 and the lift is on the left"
OTHER = "The Plimbrook office wifi password is on the fridge"


def _holding(root: Path, word: str) -> list[str]:
    """Files under root holding the word in any case (``.gz`` decompressed, binary files too): `grep -ri`."""
    return [str(p.relative_to(root)) for p, data in tree_files(root) if word.lower().encode() in data.lower()]


def _tree(root: Path) -> tuple[MemoryPlane, str, str]:
    init_tree(root)
    plane = MemoryPlane.open(root)
    for i in range(80):  # enough memories for the long-term postings to be persisted under .cache/
        plane.long_term.save_memory(type="fact", content=f"filler fact number {i} about topic {i * 7}")
    mem = plane.long_term.save_memory(type="rule", content=TEXT, entities=["Zorbix"], tags=["gate"])
    for i in range(10):
        plane.long_term.save_memory(type="fact", content=f"later fact number {i} about subject {i * 3}")
    other = plane.long_term.save_memory(type="fact", content=OTHER, entities=["Plimbrook"])
    return plane, mem.id, other.id


def _index(root: Path) -> Path:
    return root / "long_term" / "index.yaml"


def test_a_forget_blanks_the_line_in_place_and_every_other_line_stays_where_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "m"
    plane, mem_id, _ = _tree(root)
    plane.close()
    before = _index(root).read_bytes()
    st = os.stat(_index(root))
    written: list[str] = []
    real = _atomic.atomic_write

    def spy(path: object, *args: object, **kwargs: object) -> None:
        written.append(os.fspath(path))  # type: ignore[arg-type]
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_atomic, "atomic_write", spy)
    monkeypatch.setattr(index_module, "atomic_write", spy)
    with MemoryPlane.open(root) as plane:
        assert plane.forget(mem_id)
    after = _index(root).read_bytes()
    assert str(_index(root)) not in written  # never written out whole
    assert os.stat(_index(root)).st_ino == st.st_ino and len(after) == len(before)
    old, new = before.split(b"\n"), after.split(b"\n")
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    assert len(changed) == 1 and mem_id.encode() in old[changed[0]]
    assert new[changed[0]].strip() == b"#" and len(new[changed[0]]) == len(old[changed[0]])
    assert WORD.encode() not in after


def test_no_file_of_the_tree_holds_the_text_after_a_forget(tmp_path: Path) -> None:
    root = tmp_path / "m"
    plane, mem_id, _ = _tree(root)
    plane.retrieve(MemoryRetrieveRequest(input="what is the Zorbix gate code"))
    plane.flush()
    assert {"long_term/index.yaml", "long_term/candidates.sqlite", "long_term/profile.md"} <= set(
        _holding(root, WORD))
    assert plane.forget(mem_id)
    assert _holding(root, WORD) == []
    plane.close()


def test_a_candidates_index_behind_the_folder_keeps_no_key_of_a_forgotten_text(tmp_path: Path) -> None:
    root = tmp_path / "m"
    plane, mem_id, _ = _tree(root)
    # Another hand touched the memory folder: the candidates index is behind it (not current) until the next save.
    stray = root / "long_term" / "memories" / "notes.txt"
    stray.write_text("x")
    stray.unlink()
    assert not plane.long_term.candidates.current()
    assert plane.forget(mem_id)
    assert _holding(root, WORD) == []
    assert not plane.long_term.candidates.current()  # its rows went; the folder is still not recorded as seen
    assert plane.long_term.save_memory(type="fact", content="a new fact after the forget").status == "saved"
    assert plane.verify().ok
    plane.close()


def _shown(ctx: object) -> str:
    return ctx.render()  # type: ignore[attr-defined,no-any-return]


def test_retrieval_in_the_same_process_and_a_fresh_one_never_shows_a_forgotten_memory(tmp_path: Path) -> None:
    root = tmp_path / "m"
    plane, mem_id, other_id = _tree(root)
    goal = MemoryRetrieveRequest(input="what is the Zorbix gate code")
    other_goal = MemoryRetrieveRequest(input="what is the Plimbrook office wifi password")
    assert WORD in _shown(plane.retrieve(goal))
    shown = plane.retrieve(other_goal)
    assert other_id in shown.refs() and "fridge" in _shown(shown)
    assert plane.forget(mem_id)
    for p in (plane, MemoryPlane.open(root)):
        ctx = p.retrieve(goal)
        assert mem_id not in ctx.refs() and WORD not in _shown(ctx)
        shown = p.retrieve(other_goal)
        # The memories after the blank line keep their own text (no entry numbered as its neighbour).
        assert other_id in shown.refs() and "fridge" in _shown(shown)
        for hit in shown.common.all_hits():
            if hit.id.startswith("mem_"):  # each long-term hit shows its own memory's text
                assert hit.text in " ".join(p.long_term.get(hit.id).content.split())  # type: ignore[union-attr]
    plane.close()
    code = textwrap.dedent("""
        import sys
        from memory_plane import MemoryPlane, MemoryRetrieveRequest
        with MemoryPlane.open(sys.argv[1], create=False) as plane:
            ctx = plane.retrieve(MemoryRetrieveRequest(input="what is the Zorbix gate code"))
            print(sys.argv[2] in ctx.refs(), ctx.render())
    """)
    out = subprocess.run([sys.executable, "-c", code, str(root), mem_id], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, check=True, timeout=120).stdout
    assert out.startswith("False") and WORD not in out


def test_a_rebuild_leaves_the_blank_lines_out(tmp_path: Path) -> None:
    root = tmp_path / "m"
    plane, mem_id, _ = _tree(root)
    assert plane.forget(mem_id)
    lines = _index(root).read_text().split("\n")
    assert sum(1 for ln in lines if ln.startswith("#") and not ln.strip("# ")) == 1
    entries = [e["id"] for e in plane.long_term.entries()]
    assert plane.verify(fix=True).ok
    lines = _index(root).read_text().split("\n")
    assert all(ln.startswith("- {") for ln in lines[2:] if ln)  # the header, then entries only
    assert sorted(json.loads(ln[2:])["id"] for ln in lines[2:] if ln) == sorted(entries)
    plane.close()


def test_a_forget_after_a_save_finds_the_appended_line_where_the_save_noted_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "m"
    plane, _, _ = _tree(root)
    mem = plane.long_term.save_memory(type="fact", content="The Vantrillo boat is moored at pier nine")
    assert plane.long_term.candidates.line_hints([f"{mem.id}.md"])  # noted by the save that appended it

    def no_search(*_args: object) -> None:
        raise AssertionError("index.yaml searched for a line its hint gives")

    monkeypatch.setattr(index_module, "find_lines", no_search)
    assert plane.forget(mem.id)
    assert b"Vantrillo" not in _index(root).read_bytes()
    plane.close()


KILLED_BLANK = textwrap.dedent("""
    import os, sys
    from memory_plane import MemoryPlane
    real = os.pwrite
    def pwrite(fd, data, offset):
        real(fd, bytes(data)[:len(data) // 2], offset)  # half the blank line written: a torn write
        os._exit(9)
    os.pwrite = pwrite
    plane = MemoryPlane.open(sys.argv[1], create=False)
    plane.forget(sys.argv[2], reason="the user asked")
    os._exit(0)
""")


def test_a_forget_killed_while_blanking_is_finished_and_never_served(tmp_path: Path) -> None:
    root = tmp_path / "m"
    plane, mem_id, other_id = _tree(root)
    plane.close()
    done = subprocess.run([sys.executable, "-c", KILLED_BLANK, str(root), mem_id],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert done.returncode == 9
    assert (root / "long_term" / "memories" / f"{mem_id}.md").is_file()  # killed before the file went
    with MemoryPlane.open(root) as plane:
        ctx = plane.retrieve(MemoryRetrieveRequest(input="what is the Zorbix gate code"))
        assert mem_id not in ctx.refs() and WORD not in ctx.render()
        assert other_id in plane.retrieve(MemoryRetrieveRequest(input="Plimbrook office wifi password")).refs()
        plane.verify(fix=True)  # finishes the forget the tombstone names
        assert _holding(root, WORD) == []
        assert plane.verify().ok


def test_an_overwrite_in_place_always_moves_the_mtime_on(tmp_path: Path) -> None:
    # Readers key their parsed copy on (mtime, size, inode): a change that keeps the size and the inode must move
    # the mtime even when the filesystem clock has not ticked since the last change.
    path = tmp_path / "index.yaml"
    path.write_bytes(b"- {\"id\": \"a\"}\n")
    future = os.stat(path).st_mtime_ns + 10**12
    os.utime(path, ns=(future, future))
    _atomic.overwrite_in_place(path, [(0, b"#            \n")], root=tmp_path)
    assert os.stat(path).st_mtime_ns > future
    assert path.read_bytes() == b"#            \n"
