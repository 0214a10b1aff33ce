"""File-level garbage collection primitives: never follow a symlink, never leave the root."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._atomic import is_temp_name
from ._errors import ABSENT, StorageError, UnsafePathError
from ._guarded import FolderChain, link_on_way, remove_tree
from ._layout import rel_to
from ._plural import counted

if TYPE_CHECKING:
    from ._journal import TombstoneLog


@dataclass(frozen=True)
class Removal:
    """One file or folder of the tree GC has decided to remove, and why (``apply_plan`` removes it)."""

    target: Path
    reason: str
    last: str | None = None
    """The entry of a folder removed after all its others (see ``remove_tree``)."""


@dataclass
class GcReport:
    """What GC removed (or would remove, in a dry run), why, and what it kept.

    The report records; it never deletes. A store plans a removal (``discard``), which is noted at once, and
    ``apply_plan`` carries the plan out (nothing in a dry run, whose report is the plan).
    """

    dry_run: bool = False
    removed: list[dict[str, Any]] = field(default_factory=list)
    kept: dict[str, int] = field(default_factory=dict)
    bytes_freed: int = 0
    tombstones_written: int = 0
    skipped_symlinks: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    evidence: set[str] = field(default_factory=set, repr=False)
    """Episodes still evidence for a live memory (set by gc_tree before the stores collect). Not reported."""
    cited_events: dict[str, set[str]] = field(default_factory=dict, repr=False)
    """The events of each evidence episode a live memory cites (what its excerpt keeps). Not reported."""
    plan: list[Removal] = field(default_factory=list, repr=False)
    """Removals noted and not yet applied (``apply_plan`` empties it). Not reported: ``removed`` says them."""
    _free_folders: set[str] = field(default_factory=set, repr=False)
    """Folders a discard of the plan being made found free of links on the way (``apply_plan`` forgets them)."""

    def note(self, path: str, reason: str, size: int = 0) -> None:
        """Record one removal."""
        self.removed.append({"path": path, "reason": reason, "bytes": size})
        self.bytes_freed += size

    def discard(self, root: Path, path: Path, reason: str, *, last: str | None = None) -> None:
        """Plan the removal of a file or folder of the tree: noted now, removed by ``apply_plan``.

        A symlink, or one anywhere on the way below the root (``session_archive/`` or a year folder swapped
        for one), is skipped instead: reported in ``skipped_symlinks``, never followed."""
        link = self._link_on_way(root, path)
        if link is not None:
            self.skip_link(root, link)
            return
        self.note(rel_to(root, path), reason, tree_size(path))
        self.plan.append(Removal(path, reason, last))

    def _link_on_way(self, root: Path, path: Path) -> Path | None:
        """``link_on_way``, asking only of the path itself when its folder was found free of links by an earlier
        discard of this plan (an episode's events file, then its screenshots: the folders above are asked once).
        A link planted later in a folder found free is still never followed: ``apply_plan`` walks descriptors."""
        text = os.fspath(path)
        if os.path.normpath(text) != text:
            return link_on_way(root, path)  # a ".." or "." on the way: every component asked (and the root's bound)
        folder = os.path.dirname(text)
        below = [folder]  # the folders between the nearest one found free and the path, deepest first
        while below[-1] not in self._free_folders and len(below) <= 2:
            below.append(os.path.dirname(below[-1]))
        if below[-1] not in self._free_folders:
            link = link_on_way(root, path)  # nothing near found free: every component below the root
            if link is None:
                self._free_folders.add(folder)
            return link
        for step in [*reversed(below[:-1]), text]:
            if os.path.islink(step):
                return Path(step)
        self._free_folders.update(below[:-1])
        return None

    def skip_link(self, root: Path, link: Path) -> None:
        """Report a symlink GC met and left alone (each once)."""
        rel = str(link.relative_to(root))
        if rel not in self.skipped_symlinks:
            self.skipped_symlinks.append(rel)

    def write_tombstones(self, log: TombstoneLog, ref_type: str, ids: list[str]) -> bool:
        """Append GC tombstones first; False (the error reported) when they cannot be, and nothing may go."""
        try:
            self.tombstones_written += log.add_many(ref_type, ids, reason="gc")
        except (UnsafePathError, StorageError) as exc:
            # Tombstone first: a removal without its tombstone could be re-learned, so none is made.
            self.errors.append(f"{ref_type}: nothing removed, tombstones cannot be written: {exc}")
            return False
        return True

    def unnote(self, mark: int) -> None:
        """Take back the removals noted since ``len(removed)`` was ``mark`` (they were not made)."""
        self.bytes_freed -= sum(r["bytes"] for r in self.removed[mark:])
        del self.removed[mark:]

    def keep(self, why: str) -> None:
        """Count something kept on purpose."""
        self.kept[why] = self.kept.get(why, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        """The `--json` report."""
        by_reason: dict[str, int] = {}
        for r in self.removed:
            by_reason[r["reason"]] = by_reason.get(r["reason"], 0) + 1
        return {"dry_run": self.dry_run, "removed_count": len(self.removed), "removed_by_reason": by_reason,
                "bytes_freed": self.bytes_freed, "kept": self.kept, "tombstones_written": self.tombstones_written,
                "skipped_symlinks": self.skipped_symlinks, "errors": self.errors, "removed": self.removed}

    def lines(self) -> list[str]:
        """Human-readable summary."""
        verb = "would remove" if self.dry_run else "removed"
        out = [f"{verb}: {r['path']} ({r['reason']})" for r in self.removed[:200]]
        if len(self.removed) > 200:
            out.append(f"... and {len(self.removed) - 200} more")
        out += [f"skipped symlink (never followed): {s}" for s in self.skipped_symlinks]
        out += [f"error: {e}" for e in self.errors]
        d = self.to_dict()
        out.append(f"gc {'dry run' if self.dry_run else 'done'}: {verb} {counted(d['removed_count'], 'path')}, "
                   f"{counted(self.bytes_freed, 'byte')}; kept {self.kept or 'nothing by rule'}")
        return out


def apply_plan(root: Path, report: GcReport) -> None:
    """Carry out the removals ``report`` planned (none in a dry run) and empty its plan: every GC removal goes
    through here. Symlinks inside what is removed are left, and reported as skipped."""
    plan, report.plan = report.plan, []
    report._free_folders.clear()  # a plan made after these removals asks its folders again
    if report.dry_run:
        return
    # One chain of folder descriptors for the whole plan: removals in the same folder, or in folders side by
    # side (an episode's events file, then its screenshots), open the folders on their way once.
    with FolderChain(root) as folders:
        for removal in plan:
            # remove_path walks by folder descriptors: a folder swapped for a link after the plan was made is
            # still never followed (it is reported as skipped instead).
            for link in remove_path(root, removal.target, last=removal.last, folders=folders):
                report.skip_link(root, link)


def tree_size(path: Path) -> int:
    """Bytes under a path (links counted as themselves, never followed)."""
    try:
        st = os.lstat(path)
    except ABSENT:
        return 0
    if not stat.S_ISDIR(st.st_mode):
        return st.st_size
    total = 0
    for dirpath, dirnames, files in os.walk(path, followlinks=False):
        for name in files + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def remove_path(root: Path, path: Path, *, last: str | None = None, folders: FolderChain | None = None) -> list[Path]:
    """Delete a file or folder tree inside root, leaving every symlink (and what it points at) alone.

    Returns the symlinks left in place (a link on the way to path included); a folder that still holds one
    is kept. Walks by folder descriptors (``remove_tree``), so a folder swapped for a link meanwhile is
    never followed. ``last``: the folder's entry removed after its others. ``folders``: the descriptors of the
    folders on the way, shared by the removals of one plan.
    """
    return remove_tree(root, path, last=last, folders=folders)


def stale_temp_files(root: Path, older_than: timedelta, now: datetime) -> list[Path]:
    """Staging files left by a crash (our temp-name pattern) older than the grace period."""
    cutoff = now.timestamp() - older_than.total_seconds()
    found = []
    # Names first: a stat only for the few that look like staging files, not for every file in the tree.
    for dirpath, _, files in os.walk(root, followlinks=False):
        for name in files:
            if not is_temp_name(name):
                continue
            p = Path(dirpath) / name
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
                found.append(p)
    return found
