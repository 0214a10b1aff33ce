"""The layout of the memory tree and `memplane init`."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from ._atomic import create_exclusive
from ._errors import StorageError, UnsafePathError
from ._guarded import guarded_makedirs
from ._index import INDEX_NAME
from ._owner import makedirs_owned
from ._paths import has_symlink

DEVICE_COLLECTIONS: tuple[str, ...] = ("apps", "procedures", "navigation", "calibration", "failures", "ui_anchors")

LAYOUT_DIRS: tuple[str, ...] = (
    "session",
    "session/chunks",
    "session_archive",
    "long_term",
    "long_term/memories",
    "device",
    "device/profiles",
    *(f"device/{c}" for c in DEVICE_COLLECTIONS),
    "episodes",
    "lifecycle",
    "lifecycle/quarantine",
)

_SKIP = {"__init__.py", ".keep", "__pycache__"}

TREE_MARKER = ".memplane-tree"
"""The file at the root that says a folder is a memory tree (written by `memplane init`)."""
TREE_LAYOUT_VERSION = 1
_MARKER_TEXT = (f"# a memory-plane memory tree (written by `memplane init`; do not remove)\n"
                f"layout: {TREE_LAYOUT_VERSION}\n")
_OLD_LAYOUT_DIRS = ("device", "episodes", "lifecycle")
_OLD_LAYOUT_FILES = ("config.yaml", "device/profile.yaml")


def not_a_tree(root: str | os.PathLike[str]) -> str | None:
    """Why a folder is not a memory tree (None: it is one). A tree holds the marker `init` writes, or, made by
    an older version, the layout: the device/, episodes/ and lifecycle/ folders and config.yaml or
    device/profile.yaml. An empty folder (an unmounted card's mount point) or one holding other files is not."""
    base = Path(root)
    if os.path.isfile(base / TREE_MARKER) and not os.path.islink(base / TREE_MARKER):
        return None
    if all((base / d).is_dir() for d in _OLD_LAYOUT_DIRS) and any((base / f).is_file() for f in _OLD_LAYOUT_FILES):
        return None
    try:
        empty = not any(os.scandir(base))
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    what = "is an empty folder" if empty else "holds other files"
    return (f"is not a memory tree: it {what}, without {TREE_MARKER} or the tree's folders (an unmounted card?); "
            "`memplane init` makes a tree there")


def _template_files(node: Traversable, prefix: str = "") -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.name in _SKIP or child.name.endswith(".pyc"):
            continue
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            out.extend(_template_files(child, rel + "/"))
        else:
            out.append((rel, child.read_bytes()))
    return out


def template_files() -> list[tuple[str, bytes]]:
    """Return (relative path, content) of every file of the shipped userdata template."""
    return _template_files(resources.files("memory_plane.userdata_template"))


def init_tree(root: str | os.PathLike[str], *, mark: bool = True) -> list[str]:
    """Create the memory tree under root, filling in only what is missing; return what was created.

    With ``mark`` (what `memplane init` does) the tree's marker (TREE_MARKER) is written too, if missing."""
    base = Path(root)
    created: list[str] = []
    new_dirs: set[str] = set()
    if not base.is_dir():
        makedirs_owned(base)
        created.append(".")
    for rel in LAYOUT_DIRS:
        d = base / rel
        if has_symlink(base, d):
            continue  # never create anything through a link planted in the tree (verify reports it)
        if os.path.lexists(d) and not d.is_dir():
            continue  # a file where a folder belongs is someone's data: never replaced (verify names it)
        if not d.is_dir():
            try:
                # Made folder by folder, none followed if a link is planted there meanwhile.
                guarded_makedirs(base, d)
            except (UnsafePathError, StorageError):
                continue  # a link or a file appeared on the way: verify names it
            created.append(rel + "/")
            new_dirs.add(rel)
    for rel, data in template_files():
        target = base / rel
        parent = rel.rpartition("/")[0]
        if target.name == INDEX_NAME and parent not in new_dirs:
            # An index is derived from the item files beside it: a missing one is rebuilt from them
            # when first needed. Putting back the empty template would hide the whole collection.
            continue
        if os.path.lexists(target) or has_symlink(base, target.parent):
            continue  # nothing that exists is written again (a read-only tree opens fine)
        # O_EXCL-style create: an existing file (a person's edit) is never touched; the folders on the way are
        # opened without following a link (one planted since the check above is refused).
        try:
            if create_exclusive(target, data, root=base):
                created.append(rel)
        except (UnsafePathError, StorageError):
            continue
    if mark and not os.path.lexists(base / TREE_MARKER):
        try:
            if create_exclusive(base / TREE_MARKER, _MARKER_TEXT.encode(), root=base):
                created.append(TREE_MARKER)
        except (UnsafePathError, StorageError):
            pass
    return created


FILE_SUFFIXES = frozenset({".yaml", ".yml", ".md", ".jsonl", ".json", ".txt", ".jpg", ".jpeg", ".png", ".webp",
                           ".gz", ".lock"})
"""Suffixes of the files the tree holds: a folder named like one stands where a file belongs."""


def _file_named(name: str) -> bool:
    """Whether a name is one the tree gives files (by suffix, or a lock or job marker)."""
    return (os.path.splitext(name)[1].lower() in FILE_SUFFIXES or name in (".lock", ".recording.lock", TREE_MARKER)
            or name.startswith((".done-", ".failed-")))


def _odd(rel: str, name: str, mode: int, folder_place: Callable[[str], bool]) -> str | None:
    """What is wrong with one entry's shape, in words (None: nothing)."""
    if stat.S_ISLNK(mode):
        return None  # symlinks are named on their own
    if stat.S_ISDIR(mode):
        if _file_named(name):
            return "a folder where a file belongs: never read (move out what it holds, then remove it)"
        return None
    if not stat.S_ISREG(mode):
        kind = "a named pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device file"
        return f"{kind} where a file belongs: never read (remove it)"
    if rel in LAYOUT_DIRS or folder_place(rel):
        return "a file where a folder belongs: what belongs there cannot be read or written (move it away)"
    return None


def odd_entries(root: str | os.PathLike[str], folder_place: Callable[[str], bool] = lambda rel: False
                ) -> tuple[list[tuple[str, bool]], list[tuple[str, str]]]:
    """One walk of the tree (links never followed, .cache skipped): its symlinks as (path, is a folder link),
    and the entries of the wrong shape as (path, what is wrong), paths relative to the root. ``folder_place``:
    the folders the stores keep besides LAYOUT_DIRS (their layouts answer it)."""
    links: list[tuple[str, bool]] = []
    shapes: list[tuple[str, str]] = []
    base = os.fspath(root)
    # Every path the walk yields is the root's own text, a separator, then names from listings (never "." or
    # ".."): cut off, that is what os.path.relpath answers, without its two abspaths per entry (a twentieth of
    # a settled verify's CPU). A root written another way (a trailing "/.", a double separator) is not cut.
    prefix = os.path.join(base, "") if os.path.normpath(base) == base else None
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        if os.path.basename(dirpath) == ".cache":
            dirnames[:] = []
            continue
        # Sets: a year folder holds tens of thousands of episode folders, and a look-up in the list per name
        # made this walk quadratic (41 CPU s at 50,000 episodes; 4.5 s with sets).
        folders = set(dirnames)
        keep: set[str] = set()
        for name in (*dirnames, *filenames):
            full = os.path.join(dirpath, name)
            try:
                mode = os.lstat(full).st_mode
            except OSError:
                continue  # gone meanwhile
            rel = full[len(prefix):] if prefix is not None else os.path.relpath(full, base)
            if stat.S_ISLNK(mode):
                links.append((rel, name in folders))
            why = _odd(rel, name, mode, folder_place)
            if why is not None:
                shapes.append((rel, why))
            elif name in folders:
                keep.add(name)
        dirnames[:] = [d for d in dirnames if d in keep]
    return links, shapes
