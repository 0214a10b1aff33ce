"""Guarded paths: every removal, move and write below the memory root, walked by folder descriptors.

The root is opened as it is (it may itself be a link, as ``/userdata`` is on many phones); every
component below it is opened with ``O_NOFOLLOW`` relative to the folder above, and the operation runs
relative to the last folder's descriptor. A folder swapped for a symlink, before or during the
operation, is refused (UnsafePathError naming the link) instead of followed: a delete, a move or a
write can never land outside the tree. Folders are removed by walking descriptors, never path strings.

Reads stay on plain paths (``safe_join``/``has_symlink``): they are the retrieve's hot path, and a
read through a link changes nothing on disk.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ._errors import StorageError, UnsafePathError
from ._owner import makedirs_owned, own_like_folder
from ._paths import _steps_below, first_link

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
DIR_NOFOLLOW = _DIR | _NOFOLLOW
"""Flags that open a folder and refuse a symlink in its place."""


def rel_parts(root: Path, path: str | os.PathLike[str]) -> list[str]:
    """The components of path below root (normalised, links not resolved); UnsafePathError if not inside."""
    root_s, path_s = os.path.abspath(root), os.path.abspath(path)
    if path_s == root_s:
        return []
    prefix = root_s if root_s.endswith(os.sep) else root_s + os.sep
    if not path_s.startswith(prefix):
        raise UnsafePathError(path_s[:200], "outside the memory root; nothing is changed there")
    return path_s[len(prefix):].split(os.sep)


def link_on_way(root: Path, path: str | os.PathLike[str]) -> Path | None:
    """The first symlink among path's components below root (path itself included), or None."""
    steps = _steps_below(os.path.abspath(root), os.path.abspath(path))
    if steps is None:
        raise UnsafePathError(os.fspath(path)[:200], "outside the memory root; nothing is changed there")
    link = first_link(steps)
    return None if link is None else Path(link)


def _symlink_error(parts: list[str]) -> UnsafePathError:
    """The error for a link met at the end of ``parts`` (its name is the link's path relative to the root)."""
    return UnsafePathError("/".join(parts), "a symlink below the memory root (never followed)")


def _open_below(fd: int, name: str, parts: list[str], create: bool) -> int:
    """Open one folder below ``fd`` without following a link (made first when ``create`` and missing)."""
    try:
        return os.open(name, DIR_NOFOLLOW, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        # Linux answers ENOTDIR for a link opened with O_DIRECTORY|O_NOFOLLOW, other systems ELOOP.
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            raise _symlink_error(parts) from None
        raise StorageError("/".join(parts), "a file stands where a folder of the path belongs") from None
    try:
        os.mkdir(name, 0o755, dir_fd=fd)
        own_like_folder(fd, name)
    except FileExistsError:
        pass  # made meanwhile by another writer, or a link planted meanwhile: the open below tells which
    return _open_below(fd, name, parts, create=False)


def open_dir(root: Path, path: str | os.PathLike[str], *, create: bool = False) -> int:
    """A descriptor of the folder at ``path`` (root or below), no component below root followed if a link.

    ``create`` makes missing folders on the way (as ``mkdir -p``, each relative to the one above).
    Raises UnsafePathError naming the first link met, StorageError for a file on the way,
    FileNotFoundError for a missing folder without ``create``. The caller closes the descriptor.
    """
    parts = rel_parts(root, path)
    fd = os.open(root, _DIR)  # the root itself may be a link; only what is below it is checked
    try:
        for i, name in enumerate(parts):
            nxt = _open_below(fd, name, parts[:i + 1], create)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def parent_fd(root: Path, path: str | os.PathLike[str], *, create: bool = False) -> Iterator[tuple[int, str]]:
    """The guarded descriptor of path's folder and path's own name, for the block (path strictly below root)."""
    parts = rel_parts(root, path)
    if not parts:
        raise UnsafePathError(os.fspath(root), "the memory root itself is never removed, moved or written")
    fd = open_dir(root, Path(root).joinpath(*parts[:-1]), create=create)
    try:
        yield fd, parts[-1]
    finally:
        os.close(fd)


def guarded_unlink(root: Path, path: str | os.PathLike[str], *, missing_ok: bool = True) -> bool:
    """Unlink a file (or a link, as a link) below root, through guarded folders; whether it was there."""
    try:
        with parent_fd(root, path) as (fd, name):
            os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        if not missing_ok:
            raise
        return False
    return True


def guarded_move(root: Path, src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
                 replace: bool = False, create: bool = True) -> None:
    """Move a file within the tree; never through a link, and never over a file unless ``replace``.

    Without ``replace`` the move is a link then an unlink (FileExistsError if dst appeared meanwhile).
    """
    with parent_fd(root, src) as (sfd, sname), parent_fd(root, dst, create=create) as (dfd, dname):
        if replace:
            os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
        else:
            os.link(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd, follow_symlinks=False)
            os.unlink(sname, dir_fd=sfd)
        os.fsync(dfd)  # the new name survives power loss
        if sfd != dfd:
            os.fsync(sfd)


class FolderChain:
    """The guarded descriptors of the folders on the way to the last folder asked for, kept for the next ask.

    Many removals (or writes) in one folder, or in folders side by side, open the folders they share once:
    ``fd_of`` keeps the descriptors of the components a new folder has in common with the last one and opens
    only the others, each with ``O_NOFOLLOW`` relative to the one above, as ``open_dir`` does. A link met on the
    way raises UnsafePathError naming it (nothing below it is opened); the folders above it stay usable. A
    descriptor once opened is the folder it was, wherever it is moved meanwhile: nothing is ever reached
    through a link. Close it (or use it as a context manager) to let the descriptors go.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._names: list[str] = []
        self._fds: list[int] = []  # _fds[0] is the root; _fds[i + 1] the folder _names[:i + 1]
        self.opened = 0
        """Folders this chain opened (the root included): what sharing them saves is measured by it."""

    def fd_of(self, folder: str | os.PathLike[str]) -> int:
        """A descriptor of ``folder`` (the root or below), valid until the next ``fd_of`` or ``close``; the caller
        never closes it. UnsafePathError names a link on the way, FileNotFoundError a missing folder,
        StorageError a file where a folder belongs."""
        return self.fd_at(rel_parts(self.root, folder))

    def fd_at(self, parts: list[str]) -> int:
        """``fd_of`` the folder whose components below the root are ``parts`` (as ``rel_parts`` gives them)."""
        if not self._fds:
            self._fds.append(os.open(self.root, _DIR))  # the root itself may be a link (as rel_parts allows)
            self.opened += 1
        shared = 0
        for a, b in zip(self._names, parts):
            if a != b:
                break
            shared += 1
        self._drop_below(shared)
        for i in range(shared, len(parts)):
            fd = _open_below(self._fds[-1], parts[i], parts[:i + 1], create=False)
            self.opened += 1
            self._fds.append(fd)
            self._names.append(parts[i])
        return self._fds[-1]

    def forget(self, path: str | os.PathLike[str]) -> None:
        """Let go of ``path`` and the folders below it, if held (it was just removed: a folder made again under
        its name is another one)."""
        self.forget_at(rel_parts(self.root, path))

    def forget_at(self, parts: list[str]) -> None:
        """``forget`` the folder whose components below the root are ``parts``."""
        if parts and self._names[:len(parts)] == parts:
            self._drop_below(len(parts) - 1)

    def _drop_below(self, depth: int) -> None:
        """Close the descriptors of the folders deeper than ``depth`` components."""
        while len(self._names) > depth:
            self._names.pop()
            os.close(self._fds.pop())

    def close(self) -> None:
        """Close every descriptor held."""
        self._drop_below(0)
        while self._fds:
            os.close(self._fds.pop())

    def __enter__(self) -> FolderChain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def remove_tree(root: Path, path: str | os.PathLike[str], *, last: str | None = None,
                folders: FolderChain | None = None) -> list[Path]:
    """Delete a file or folder tree below root by folder descriptors; every symlink (and its target) is left.

    Returns the links left in place (a link on the way to path included); a folder that still holds one is
    kept. Refuses the root itself and anything outside it. ``last``: the entry of the folder removed after all
    the others (the file that makes it what it is, so that a removal killed midway leaves a folder still
    recognised, and removed again, by the next run). ``folders``: a chain whose descriptors the removals of a
    batch share (each folder on the way opened once for them all, not once per removal).
    """
    parts = rel_parts(root, path)
    if not parts:
        raise UnsafePathError(os.fspath(root), "GC refuses to delete outside (or all of) the memory root")
    target = path if isinstance(path, Path) and len(path.parts) == len(Path(root).parts) + len(parts) \
        else Path(root).joinpath(*parts)
    chain = folders if folders is not None else FolderChain(root)
    try:
        try:
            fd = chain.fd_at(parts[:-1])
        except UnsafePathError as exc:
            return [Path(root) / exc.name]  # a link on the way: nothing below it is touched
        except (FileNotFoundError, NotADirectoryError, StorageError):
            return []  # nothing there to remove
        kept: list[Path] = []
        _remove_at(fd, parts[-1], target, kept, last)
        chain.forget_at(parts)
        return kept
    finally:
        if folders is None:
            chain.close()


def _remove_at(fd: int, name: str, where: Path, kept: list[Path], last: str | None = None) -> None:
    """Remove the entry ``name`` of the folder ``fd`` (depth first, by descriptors), links kept; of its own
    entries, ``last`` goes after the others."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        kept.append(where)
        return
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(name, dir_fd=fd)  # a file swapped for a link meanwhile: only the link goes
        except FileNotFoundError:
            pass
        return
    try:
        child = os.open(name, DIR_NOFOLLOW, dir_fd=fd)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):  # swapped for a link after the stat: never followed
            kept.append(where)
            return
        raise
    try:
        for entry in sorted(os.listdir(child), key=lambda e: (e == last, e)):
            _remove_at(child, entry, where / entry, kept)
    finally:
        os.close(child)
    try:
        os.rmdir(name, dir_fd=fd)
    except OSError:
        pass  # still holds a kept link


def file_nlink_check(fd: int, path: str | os.PathLike[str]) -> None:
    """Refuse to append to or rewrite in place a file with more than one hard link (StorageError)."""
    # A hard link planted from outside the tree would make our append land in the outside file too.
    if os.fstat(fd).st_nlink > 1:
        raise StorageError(os.fspath(path), "nothing written: the file has more than one hard link "
                                             "(a link from elsewhere would receive the write too)")


def guarded_makedirs(root: Path | None, path: str | os.PathLike[str]) -> None:
    """Make a folder and the missing ones above it (as ``mkdir -p``), never through a link below root
    (without a root, e.g. a transcript ledger used on its own: a plain ``mkdir -p``)."""
    if root is None:
        makedirs_owned(path)
        return
    os.close(open_dir(root, path, create=True))


def guarded_touch(root: Path, path: str | os.PathLike[str]) -> None:
    """Create an empty marker file if missing (no fsync: a marker lost to a crash is made again)."""
    with parent_fd(root, path, create=True) as (fd, name):
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0),
                         0o644, dir_fd=fd))
        own_like_folder(fd, name)
