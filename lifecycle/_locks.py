"""One lock per collection, shared by threads and processes (filelock)."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ._errors import LockTimeout, StorageError
from ._owner import makedirs_owned, own_like_parent

if TYPE_CHECKING:
    import filelock

DEFAULT_LOCK_TIMEOUT = 10.0
LOCK_NAME = ".lock"

_registry: dict[str, filelock.FileLock] = {}
_registry_guard = threading.Lock()


def _forget_inherited_locks() -> None:
    # A forked child must not reuse its parent's lock objects (filelock refuses them, and the flock
    # belongs to the parent's open file description): start the child with fresh ones.
    global _registry_guard
    _registry.clear()
    _registry_guard = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited_locks)


def _lock_for(path: Path) -> filelock.FileLock:
    # One FileLock object per path in a process: filelock is re-entrant per object (per
    # thread), whereas two objects on the same file would deadlock a nested acquire.
    # Imported on first use: a process that only reads memory (retrieve, grep-like tools) never
    # locks, and filelock costs ~10 ms of start-up.
    import filelock

    key = os.path.normpath(path)
    with _registry_guard:
        lock = _registry.get(key)
        if lock is None:
            lock = filelock.FileLock(key, thread_local=True)
            _registry[key] = lock
        return lock


@contextmanager
def locked(lock_path: str | os.PathLike[str], timeout: float = DEFAULT_LOCK_TIMEOUT) -> Iterator[None]:
    """Hold a collection's lock for the block; raise LockTimeout naming the lock file."""
    path = Path(lock_path)
    lock = _lock_for(path)
    import filelock

    try:
        makedirs_owned(path.parent)
        lock.acquire(timeout=timeout)
    except filelock.Timeout:
        raise LockTimeout(path, timeout) from None
    except PermissionError as exc:
        raise StorageError(path, f"cannot take the lock: permission denied ({_whose(path)}); run the command "
                                 "as the user who owns the memory tree") from exc
    except OSError as exc:
        if exc.errno == errno.EROFS:
            raise StorageError(path, f"cannot take the lock: the tree is read-only ({exc.strerror})") from exc
        # A folder, a socket or a symlink where the lock file belongs: nothing is written unlocked.
        raise StorageError(path, f"cannot take the lock: not a lock file ({exc.strerror or exc})") from exc
    own_like_parent(path)  # a lock file made by root's cron stays usable by the tree's owner
    try:
        yield
    finally:
        # filelock never unlinks the lock file on release: unlinking races with waiters.
        lock.release()


def _whose(path: Path) -> str:
    """Who owns the lock file (or its folder, when the file is not there)."""
    for p in (path, path.parent):
        try:
            st = os.stat(p)
        except OSError:
            continue
        try:
            import pwd

            who = pwd.getpwuid(st.st_uid).pw_name
        except (ImportError, KeyError):
            who = f"uid {st.st_uid}"
        return f"{'the lock file' if p == path else 'its folder'} belongs to {who}"
    return "a folder on the way is closed to this user"


def collection_lock(directory: str | os.PathLike[str], timeout: float = DEFAULT_LOCK_TIMEOUT):  # type: ignore[no-untyped-def]
    """Return the lock context of the collection stored in ``directory``."""
    return locked(Path(directory) / LOCK_NAME, timeout)
