"""Reading an index file's bytes as one version of the file: whole, from an offset on, or the digests of some of
its blocks, each read refused when the file changed meanwhile or is no regular file (a link is never followed)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

Version = tuple[int, int, int]
"""(mtime_ns, size, inode) of an index file."""


def digest(data: bytes | memoryview) -> bytes:
    """The digest a snapshot keeps of a block of the index (and of its first bytes)."""
    return hashlib.blake2b(data, digest_size=16).digest()


def read_version(fd: int) -> Version:
    """The (mtime, size, inode) of an open file."""
    st = os.fstat(fd)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def read_index(path: Path) -> tuple[bytes, Version] | None:
    """An index file's bytes and the version they are of (None: absent, a link, or changed while read)."""
    return read_appended(path, 0, b"")


def read_appended(path: Path, start: int, before: bytes) -> tuple[bytes, Version] | None:
    """The bytes of an index file from ``start`` on, and the version they are of; None when the ``before`` bytes
    are not the ones just before ``start`` (it changed other than by appends), or it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        version = read_version(fd)
        at = start - len(before)
        if at < 0 or not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while True:
            chunk = os.pread(fd, 1 << 20, at)
            if not chunk:
                break
            chunks.append(chunk)
            at += len(chunk)
        data = b"".join(chunks)
        if read_version(fd) != version or len(data) != version[1] - start + len(before):
            return None
    finally:
        os.close(fd)
    return (data[len(before):], version) if data.startswith(before) else None


def line_offsets(raw: bytes) -> list[int]:
    """Where each line of ``raw`` starts, and where the last whole one ends."""
    out = [0]
    find, at, end = raw.find, 0, len(raw)
    while at < end:
        nl = find(b"\n", at)
        if nl < 0:
            break
        at = nl + 1
        out.append(at)
    return out


def block_digests(path: Path, blocks: list[int], size: int, block: int,
                  head_size: int) -> tuple[Version, dict[int, bytes], str | None] | None:
    """(the file's version, the digest of each of these blocks of its first ``size`` bytes, the digest of its head
    when a block is in it) read now; None when the file is shorter, or changed while read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        version = read_version(fd)
        if version[1] < size:
            return None
        out = {}
        for b in blocks:
            start = b * block
            n = min(size, start + block) - start
            data = os.pread(fd, n, start)
            if len(data) != n:
                return None
            out[b] = digest(data)
        head = digest(os.pread(fd, min(head_size, size), 0)).hex() if any(b * block < head_size for b in blocks) \
            else None
        if read_version(fd) != version:
            return None
    finally:
        os.close(fd)
    return version, out, head
