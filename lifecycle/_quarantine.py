"""lifecycle/quarantine/: where `verify --fix` moves files it cannot read, and the way back.

A quarantined file is named after its path (``/`` as ``__``) plus the time it was moved, and one line
in ``lifecycle/quarantine.jsonl`` records where it came from and why, so it can be put back even when
its own name is ambiguous (a file name that itself holds ``__``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._atomic import append_line
from ._clock import format_ts
from ._errors import UnsafePathError, UsageError
from ._guarded import guarded_move
from ._jsonl import dumps_compact, read_jsonl
from ._locks import collection_lock
from ._paths import check_relpath, has_symlink, is_within

QUARANTINE_DIR = "lifecycle/quarantine"
QUARANTINE_LOG = "lifecycle/quarantine.jsonl"


def quarantine_name(root: Path, path: Path) -> str:
    """The name a file gets in quarantine, before its time suffix (its path with ``__`` for ``/``)."""
    return str(Path(path).relative_to(root)).replace(os.sep, "__")


def quarantine(root: Path, path: Path, now_ns: int | None = None, reason: str = "") -> Path:
    """Move a broken file into lifecycle/quarantine/ (never deleted); return its new path.

    Both ends are walked by folder descriptors: with ``lifecycle/``, ``lifecycle/quarantine/`` or a folder
    above the file a symlink, UnsafePathError is raised and the file stays where it is (never moved out
    of the tree).
    """
    if not is_within(root, path):
        raise ValueError(f"refusing to move {path}: outside {root}")
    rel = quarantine_name(root, path)
    qdir = root / QUARANTINE_DIR
    stamp = now_ns or time.time_ns()
    target = qdir / f"{rel}.{stamp}"
    # Same filesystem: rename is atomic, the file is either here or there.
    guarded_move(root, path, target, replace=True)
    try:
        with collection_lock(root / "lifecycle"):
            append_line(root / QUARANTINE_LOG, dumps_compact({
                "name": target.name, "from": str(Path(path).relative_to(root)),
                "at": format_ts_ns(stamp), "reason": reason[:300]}), root=root)
    except (OSError, UnsafePathError):
        pass  # the name alone still says where it came from
    return target


def format_ts_ns(ns: int) -> str:
    """RFC 3339 text of a time in nanoseconds since the epoch."""
    from datetime import datetime, timezone

    return format_ts(datetime.fromtimestamp(ns / 1e9, timezone.utc))


@dataclass
class Quarantined:
    """One file in quarantine: its name there, where it came from, when and why."""

    name: str
    original: str
    quarantined_at: str | None
    reason: str | None
    size: int

    def to_dict(self) -> dict[str, Any]:
        """The `--json` form."""
        return {"name": self.name, "original": self.original, "quarantined_at": self.quarantined_at,
                "reason": self.reason, "bytes": self.size}


def _decoded(name: str) -> tuple[str, str | None]:
    """(original path, time) read from a quarantine file name."""
    base, _, stamp = name.rpartition(".")
    if base and stamp.isdigit():
        return base.replace("__", "/"), format_ts_ns(int(stamp))
    return name.replace("__", "/"), None


def list_quarantined(root: Path) -> list[Quarantined]:
    """Every file in quarantine, oldest first (symlinks never listed)."""
    qdir = root / QUARANTINE_DIR
    if has_symlink(root, qdir):
        return []  # a link in place of the quarantine: what it points at is not ours to list or restore
    log = {r.get("name"): r for r in read_jsonl(root / QUARANTINE_LOG).records if isinstance(r.get("name"), str)}
    out: list[Quarantined] = []
    try:
        entries = sorted(os.scandir(qdir), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    for e in entries:
        if not e.is_file(follow_symlinks=False) or e.name.startswith("."):
            continue
        original, at = _decoded(e.name)
        info = log.get(e.name) or {}
        out.append(Quarantined(e.name, str(info.get("from") or original), info.get("at") or at,
                               info.get("reason"), e.stat(follow_symlinks=False).st_size))
    out.sort(key=lambda q: (q.quarantined_at or "", q.name))
    return out


def find_quarantined(root: Path, name: str) -> Quarantined:
    """A quarantined file by its name there (or by its original path, the newest one); UsageError if none."""
    found = list_quarantined(root)
    exact = [q for q in found if q.name == name]
    by_origin = [q for q in found if q.original == name.strip("/")]
    hit = exact or by_origin
    if not hit:
        raise UsageError(f"nothing named {name!r} in {QUARANTINE_DIR} (see `memplane lifecycle quarantine list`)")
    return hit[-1]


def restore_quarantined(root: Path, q: Quarantined) -> Path:
    """Move a quarantined file back to where it came from; refuses to replace a file that exists there."""
    rel = check_relpath(q.original)
    target = root / rel
    if has_symlink(root, target.parent) or has_symlink(root, root / QUARANTINE_DIR):
        raise UsageError(f"{rel}: a symlink on the way; not restored")
    if os.path.lexists(target):
        raise UsageError(f"{rel} exists; move it away first (nothing was replaced)")
    try:
        # A link then an unlink, by folder descriptors: fails if the target appeared meanwhile (never
        # replaces a file), and a folder swapped for a symlink meanwhile is refused, not followed.
        guarded_move(root, root / QUARANTINE_DIR / q.name, target)
    except UnsafePathError as exc:
        raise UsageError(f"{rel}: a symlink on the way ({exc.name}); not restored") from None
    return target


def quarantined(root: Path, path: Path) -> bool:
    """Tell whether a file of this path was moved to quarantine (and is still there)."""
    qdir = root / QUARANTINE_DIR
    prefix = quarantine_name(root, path) + "."
    try:
        with os.scandir(qdir) as it:
            return any(e.name.startswith(prefix) for e in it)
    except OSError:
        return False
