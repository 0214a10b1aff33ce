"""Whether an index line still speaks for its file: the one rule that retrieve and recall share.

An index is derived and may be older than its files: a person deletes, empties or edits a memory.
Before a memory is offered its file is looked at (one ``lstat``): gone or empty, it is not offered;
written before its index line, the line says what the file says; changed after it, the file must be
read before the memory is offered as it is now.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path

from memory_plane.lifecycle import ABSENT


class FileState(Enum):
    """What a memory's file says about its index line."""

    INDEXED = "indexed"  # unchanged since its index line was written
    CHANGED = "changed"  # written after its index line: read it
    MISSING = "file_missing"
    EMPTY = "file_empty"
    UNREADABLE = "file_unreadable"


def file_in(base: Path, rel: str) -> str:
    """The path of an index line's file inside its folder (ValueError for a path that would leave it)."""
    # String checks, not safe_join: this runs for every hit of every retrieve. An index line is
    # hand-editable, so a path that would leave its folder is refused all the same.
    if rel.startswith("/") or ".." in rel.split("/") or "\0" in rel:
        raise ValueError(f"index path {rel!r} leaves its folder")
    return f"{base}/{rel}"


def file_state(base: Path, rel: str, index_mtime_ns: int) -> tuple[FileState, str, str]:
    """(state, path, why) of the file an index line names, relative to its folder."""
    try:
        path = file_in(base, rel)
        st = os.lstat(path)
    except ABSENT:
        return FileState.MISSING, rel, "the file was removed after its index line"
    except (OSError, ValueError) as exc:
        return FileState.UNREADABLE, rel, str(exc)[:200]
    if st.st_size == 0:
        return FileState.EMPTY, path, "the file is empty"
    if _as_indexed(st, index_mtime_ns):
        return FileState.INDEXED, path, ""
    return FileState.CHANGED, path, "changed after its index line"


def _as_indexed(st: os.stat_result, index_mtime_ns: int) -> bool:
    # Not empty and written no later than its index line: what the index says is what the file says.
    return bool(st.st_size) and st.st_mtime_ns <= index_mtime_ns


def still_indexed(path: str, index_mtime_ns: int) -> bool:
    """Whether a file found INDEXED before still is (False: ask ``file_state`` what it is now)."""
    try:
        return _as_indexed(os.lstat(path), index_mtime_ns)
    except OSError:
        return False


def mtime_ns(path: Path) -> int:
    """A file's mtime in ns (0 when it cannot be read)."""
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0
