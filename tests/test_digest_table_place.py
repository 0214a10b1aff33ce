"""Verify's table of digests lies in the memory tree's own .cache, never in the system's temporary folder: a phone
may have no temporary folder it can write, and verify must still run there."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memory_plane import MemoryPlane
from memory_plane.lifecycle import DigestTable, order_bytes

needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files through /proc")


def _open_files() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return out


def _table(root: Path, n: int) -> DigestTable:
    """A table of ``n`` items with index lines large enough that it outgrows its page cache (2 MB) many times."""
    folder = root / "device" / "procedures"
    table = DigestTable(entry_of=lambda r: {"id": r.id, "note": "x" * 600},
                        expected_of=lambda r: folder / f"{r.id}.yaml", sort_of=lambda e: order_bytes(str(e["id"])),
                        rel=lambda p: p.name, root=root)
    for i in range(n):
        table.add(folder / f"proc_{i:06d}.yaml", (i, i, i), SimpleNamespace(id=f"proc_{i:06d}"))
    # A second file holding one id (a hand copy): the one named after the id is the one indexed.
    table.add(folder / "copy_of_proc_000007.yaml", None, SimpleNamespace(id="proc_000007"))
    return table


@needs_proc
def test_a_table_larger_than_its_cache_keeps_its_file_in_the_tree_and_nothing_in_the_temporary_folder(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("SQLITE_TMPDIR", str(tmp))
    table = _table(root, 8000)
    try:
        seen: list[str] = []
        ids = []
        for line in table.chosen_lines():  # the index's order, through the whole table
            ids.append(line.split(b'"')[3].decode())
            if len(ids) % 2000 == 1:
                seen += _open_files()
        assert ids == [f"proc_{i:06d}" for i in range(8000)]
        assert not any(p.startswith(str(tmp)) for p in seen)
        assert not any(p.startswith(("/tmp/", "/var/tmp/", "/usr/tmp/")) and "etilqs" in p for p in seen)
        assert any(p.startswith(str(root / ".cache" / "verify")) for p in seen)
    finally:
        table.close()
    assert list(tmp.iterdir()) == []
    assert list((root / ".cache" / "verify").iterdir()) == []  # unlinked as soon as it was open: nothing stays


def test_verify_runs_with_a_temporary_folder_it_cannot_write(root: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """TMPDIR names a folder nothing can be written in (read-only for a user; a file in its place, for root too)."""
    tmp = tmp_path / "tmp"
    if os.geteuid() == 0:
        tmp.write_text("not a folder")
    else:
        tmp.mkdir()
        tmp.chmod(stat.S_IRUSR | stat.S_IXUSR)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("SQLITE_TMPDIR", str(tmp))
    try:
        with MemoryPlane.open(root) as plane:
            res = plane.long_term.save_memory(type="rule", content="the flashlight is in the quick panel")
            report = plane.verify()
            assert report.ok, report.problems
            assert res.id in (root / "long_term" / "index.yaml").read_text()
    finally:
        if tmp.is_dir():
            tmp.chmod(stat.S_IRWXU)
    assert list((root / ".cache" / "verify").iterdir()) == []


def test_a_table_on_a_tree_it_cannot_write_is_made_anyway(root: Path) -> None:
    """A read-only tree (verify still reports on it): the table goes to SQLite's own file instead."""
    cache = root / ".cache"
    cache.mkdir(exist_ok=True)
    (cache / "verify").write_text("a file where the folder belongs")
    table = _table(root, 50)
    try:
        lines: list[Any] = list(table.chosen_lines())
        assert len(lines) == 50
    finally:
        table.close()
