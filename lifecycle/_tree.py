"""The layout of the memory tree and `memplane init`."""

from __future__ import annotations

import os
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from ._atomic import create_exclusive
from ._index import INDEX_NAME
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
    return _template_files(resources.files("userdata_template"))


def init_tree(root: str | os.PathLike[str]) -> list[str]:
    """Create the memory tree under root, filling in only what is missing; return what was created."""
    base = Path(root)
    created: list[str] = []
    new_dirs: set[str] = set()
    if not base.is_dir():
        base.mkdir(parents=True, exist_ok=True)
        created.append(".")
    for rel in LAYOUT_DIRS:
        d = base / rel
        if has_symlink(base, d):
            continue  # never create anything through a link planted in the tree (verify reports it)
        if not d.is_dir():
            d.mkdir(parents=True, exist_ok=True)
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
        target.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL-style create: an existing file (a person's edit) is never touched.
        if create_exclusive(target, data):
            created.append(rel)
    return created
