"""RecordingLock: the lock a live recorder holds beside its episode, which tells verify it is not a crash."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from memory_plane.lifecycle import UnsafePathError, guarded_unlink, open_dir, own_fd_like_folder

from ._store import RECORDING_LOCK


class RecordingLock:
    """The flock on ``<episode>/.recording.lock`` held while a recorder lives."""

    def __init__(self, directory: Path, root: Path) -> None:
        self.dir = directory
        self.root = root
        self.fd: int | None = None

    def hold(self) -> None:
        """Take the lock (raises OSError when it cannot be had)."""
        # Held while this recorder lives; the kernel drops it if the process dies, which is how
        # verify tells a crashed recording from a live one.
        # Opened in the episode folder reached by folder descriptors: never created through a planted link.
        dfd = open_dir(self.root, self.dir, create=True)
        try:
            fd = os.open(RECORDING_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644, dir_fd=dfd)
            own_fd_like_folder(dfd, fd)
        finally:
            os.close(dfd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        self.fd = fd

    def release(self) -> None:
        """Remove the lock file and let go of the lock (once the episode is committed)."""
        if self.fd is not None:
            try:
                # Removed while still held: a committed episode folder keeps no lock file (a tree under
                # version control shows only real changes), and nobody can take a lock on a name that is gone.
                try:
                    guarded_unlink(self.root, self.dir / RECORDING_LOCK)
                except (OSError, UnsafePathError):
                    pass  # a folder swapped for a link meanwhile: nothing is unlinked through it
                os.close(self.fd)
            finally:
                self.fd = None

    def __del__(self) -> None:
        fd = getattr(self, "fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
