"""Durable writes, appends, locks, ids and paths.

It reaches inside `lifecycle._atomic` to watch the files a whole-file write opens.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.lifecycle import (
    LockTimeout,
    UnsafePathError,
    append_line,
    atomic_write,
    check_relpath,
    create_exclusive,
    has_symlink,
    is_safe_id,
    locked,
    read_jsonl,
    safe_join,
    slug_id,
)

from conftest import no_temp_debris


def test_atomic_write_replaces_content(tmp_path: Path) -> None:
    p = tmp_path / "a.yaml"
    atomic_write(p, "one\n")
    atomic_write(p, "two\n")
    assert p.read_text() == "two\n"
    assert no_temp_debris(tmp_path) == []



def test_atomic_write_staged_in_another_folder(tmp_path: Path) -> None:
    stage = tmp_path / ".staging"
    p = tmp_path / "deep" / "episode.yaml"
    atomic_write(p, "one\n", stage_in=stage)
    atomic_write(p, "two\n", stage_in=stage)
    assert p.read_text() == "two\n"
    assert stage.is_dir() and list(stage.iterdir()) == []
    assert no_temp_debris(tmp_path) == []


def test_atomic_write_never_stages_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / ".staging").symlink_to(outside)
    seen: list[str] = []
    real_open = os.open

    def spy(path, *a, **k):  # type: ignore[no-untyped-def]
        seen.append(str(path))
        return real_open(path, *a, **k)

    import memory_plane.lifecycle._atomic as atomic_mod

    atomic_mod.os.open = spy  # type: ignore[assignment]
    try:
        atomic_write(root / "a.yaml", "x\n", stage_in=root / ".staging")
    finally:
        atomic_mod.os.open = real_open  # type: ignore[assignment]
    assert (root / "a.yaml").read_text() == "x\n"
    assert not any(s.startswith(str(root / ".staging")) for s in seen)
    assert list(outside.iterdir()) == []

@pytest.mark.parametrize("fail_at", ["fsync", "replace", "write"])
def test_crash_mid_write_keeps_old_file_and_no_debris(tmp_path: Path, monkeypatch, fail_at: str) -> None:
    p = tmp_path / "item.yaml"
    atomic_write(p, "old: 1\n")

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, fail_at, boom)
    with pytest.raises(OSError, match="No space"):
        atomic_write(p, "new: 2\n" * 1000)
    monkeypatch.undo()
    assert p.read_text() == "old: 1\n"
    assert no_temp_debris(tmp_path) == []


def test_create_exclusive_never_overwrites(tmp_path: Path) -> None:
    p = tmp_path / "x"
    assert create_exclusive(p, "first")
    assert not create_exclusive(p, "second")
    assert p.read_text() == "first"
    assert no_temp_debris(tmp_path) == []


def test_append_after_torn_line_keeps_new_record_whole(tmp_path: Path) -> None:
    p = tmp_path / "events.jsonl"
    append_line(p, '{"a": 1}')
    with open(p, "ab") as fh:
        fh.write(b'{"b": 2, "trunc')  # a writer died mid-line
    r = read_jsonl(p)
    assert [x["a"] for x in r.records] == [1] and r.torn_tail
    append_line(p, '{"c": 3}')
    r = read_jsonl(p)
    assert [list(x) for x in r.records] == [["a"], ["c"]]
    assert len(r.problems) == 1 and r.problems[0].line == 2 and not r.torn_tail


def test_append_rejects_embedded_newline(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        append_line(tmp_path / "x.jsonl", "a\nb")


def test_concurrent_appends_are_whole_lines(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"

    def worker(n: int) -> None:
        for i in range(200):
            with locked(tmp_path / ".lock"):
                append_line(p, f'{{"w": {n}, "i": {i}, "pad": "{"x" * 300}"}}', fsync=False)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    r = read_jsonl(p)
    assert len(r.records) == 800 and not r.problems


def test_lock_timeout_names_the_lock(tmp_path: Path) -> None:
    lock_path = tmp_path / "coll" / ".lock"
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with locked(lock_path):
            held.set()
            release.wait(5)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(5)
    try:
        with pytest.raises(LockTimeout) as ei, locked(lock_path, timeout=0.05):
            pass
        assert str(lock_path) in str(ei.value)
        assert ei.value.lock_path == str(lock_path)
    finally:
        release.set()
        t.join()
    assert lock_path.exists()  # never unlinked on release


def test_lock_is_reentrant_in_one_thread(tmp_path: Path) -> None:
    with locked(tmp_path / ".lock"), locked(tmp_path / ".lock", timeout=0.1):
        pass


@pytest.mark.parametrize(
    "name", ["..", "/etc/passwd", "微信", "a/b", "A" * 300, "", "x\0y", "C:\\win", "..\\..", "con.txt"]
)
def test_slug_id_is_always_safe(name: str) -> None:
    ident = slug_id(name, prefix="app_")
    assert is_safe_id(ident) and len(ident) <= 80
    assert ident.startswith("app_")


def test_slug_id_distinguishes_non_ascii_names() -> None:
    assert slug_id("微信") != slug_id("支付宝")
    assert slug_id("WeChat") == "wechat"
    assert slug_id("微信") == slug_id("微信")


@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", "a/../../b", "x\0", "", "C:/x", "a//b"])
def test_check_relpath_refuses_escapes(bad: str) -> None:
    with pytest.raises(UnsafePathError):
        check_relpath(bad)


def test_safe_join_stays_in_root_and_refuses_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "device").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "device" / "apps").symlink_to(outside)
    assert safe_join(root, "device", "x.yaml") == root / "device" / "x.yaml"
    with pytest.raises(UnsafePathError):
        safe_join(root, "device/apps", "x.yaml")
    with pytest.raises(UnsafePathError):
        safe_join(root, "../outside")


def test_has_symlink_finds_a_link_anywhere_below_root(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    (root / "device" / "procedures").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "episodes").symlink_to(outside)
    (root / "device" / "procedures" / "link.yaml").symlink_to(outside / "x")
    assert not has_symlink(root, root)
    assert not has_symlink(root, root / "device" / "procedures")
    assert not has_symlink(root, root / "device" / "missing" / "deeper")  # absent: nothing to follow
    assert has_symlink(root, root / "episodes")
    assert has_symlink(root, root / "episodes" / "2026" / "ep_x")
    assert has_symlink(root, root / "device" / "procedures" / "link.yaml")
    assert has_symlink(root, tmp_path / "elsewhere")  # not below root
    assert has_symlink(root, root / ".." / "outside")  # climbs out
    assert not has_symlink(Path(str(root) + "/"), root / "device")  # a trailing slash on root


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 200_000), st.one_of(st.none(), st.integers(0, 250_000)))
def test_a_file_read_without_following_links_is_read_whole_or_up_to_its_limit(tmp_path_factory, size: int,
                                                                              limit: int | None) -> None:
    from memory_plane.lifecycle import read_bytes_nofollow

    path = tmp_path_factory.mktemp("r") / "f.bin"
    data = os.urandom(size)
    path.write_bytes(data)
    assert read_bytes_nofollow(path, limit) == (data if limit is None else data[:limit])
