"""Files keep the tree's owner: a command run by root (a cron line) on a tree owned by the agent's user makes
every new file and folder with the owner and group of the folder it is made in, so the agent can still lock,
rewrite and remove them afterwards.

Costs nothing for any other user (one ``geteuid`` per process); as root, one ``fstat`` of the folder per file made.
"""

from __future__ import annotations

import os
from pathlib import Path

_EUID = os.geteuid() if hasattr(os, "geteuid") else -1


def _give(st: os.stat_result, name: str | os.PathLike[str], dir_fd: int | None, made: os.stat_result | None) -> None:
    if made is not None and (made.st_uid, made.st_gid) == (st.st_uid, st.st_gid):
        return
    try:
        os.chown(name, st.st_uid, st.st_gid, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        pass  # a filesystem without owners (FAT on a card): nothing to keep


def own_like_folder(dfd: int, name: str) -> None:
    """Give ``name``, just made in the folder ``dfd``, that folder's owner and group (only when running as root)."""
    if _EUID != 0:
        return
    st = os.fstat(dfd)
    if (st.st_uid, st.st_gid) == (0, os.getegid()):
        return  # a folder of root's own: the new entry already has its owner
    _give(st, name, dfd, None)


def own_fd_like_folder(dfd: int, fd: int) -> None:
    """Give the open file ``fd``, just made in the folder ``dfd``, that folder's owner and group (as root only)."""
    if _EUID != 0:
        return
    st = os.fstat(dfd)
    made = os.fstat(fd)
    if (made.st_uid, made.st_gid) != (st.st_uid, st.st_gid):
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except OSError:
            pass


def own_like_parent(path: str | os.PathLike[str]) -> None:
    """Give ``path`` its parent folder's owner and group when they differ (as root only)."""
    if _EUID != 0:
        return
    p = Path(path)
    try:
        st, made = os.stat(p.parent), os.lstat(p)
    except OSError:
        return
    _give(st, p, None, made)


def makedirs_owned(path: str | os.PathLike[str]) -> None:
    """``mkdir -p`` whose new folders take the owner of the folder above them (as root)."""
    p = Path(path)
    if _EUID != 0:
        p.mkdir(parents=True, exist_ok=True)
        return
    missing: list[Path] = []
    cur = p
    while not cur.is_dir() and cur != cur.parent:
        missing.append(cur)
        cur = cur.parent
    p.mkdir(parents=True, exist_ok=True)
    for d in reversed(missing):
        own_like_parent(d)
