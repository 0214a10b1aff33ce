"""Layouts: where the item files of one store live (the path of an id, the files present, what is its own)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

from ._errors import ABSENT
from ._index import INDEX_NAME
from ._paths import check_id, safe_join


@runtime_checkable
class Layout(Protocol):
    """Where one store keeps its item files; every path a store, verify, GC or restore needs comes from here.

    ``dir`` is the store's folder (its index and lock live there); item names are relative to it.
    """

    root: Path
    rel_dir: str
    dir: Path
    items_dir: Path

    def path_of(self, item_id: str) -> Path:
        """The file of an id (refuses ids that cannot be a file name)."""
        ...

    def expected_path(self, item_id: str) -> Path:
        """Where the file of an id already known to be safe lives (no check: the hot path of the index)."""
        ...

    def name_for(self, item_id: str) -> str:
        """The default name of an id's file relative to ``dir`` (what a new index line says)."""
        ...

    def name_of(self, path: Path) -> str:
        """An item file's name relative to ``dir`` (what its index line says)."""
        ...

    def item_paths(self) -> list[Path]:
        """The item files present now, sorted (symlinks excluded)."""
        ...

    def iter_item_paths(self) -> Iterator[Path]:
        """``item_paths`` one by one (a store of any size is walked without holding every path)."""
        ...

    def item_names(self) -> list[str]:
        """The item files present now, relative to ``dir`` (the index check: no Path objects)."""
        ...

    def rel(self, path: Path | str) -> str:
        """A path relative to the memory root (for reports and hits)."""
        ...

    def owns(self, rel: str) -> bool:
        """Whether a path relative to the root is one of this store's item files."""
        ...

    def stamp_dirs(self) -> list[Path]:
        """The folders whose mtimes change when an item file appears or goes."""
        ...


def is_item_name(name: str, suffix: str) -> bool:
    """Whether a file name is an item file's: ``suffix``, not the index, not hidden."""
    return name.endswith(suffix) and name != INDEX_NAME and not name.startswith(".")


def rel_to(root: Path, path: Path | str) -> str:
    """A path relative to root (the path itself when it is not under root)."""
    text, base = str(path), os.path.join(str(root), "")
    if text.startswith(base) and len(text) > len(base) and "/." not in text and "//" not in text \
            and not text.endswith("/") and os.path.normpath(base[:-1] or "/") == (base[:-1] or "/"):
        return text[len(base):]  # the usual case, a path listed under root: no Path made (GC names 10,000s)
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


class FlatLayout:
    """One folder of ``<id><suffix>`` files: ``device/<type>/<id>.yaml``, ``long_term/memories/<id>.md``.

    ``rel_dir`` is the store's folder (index and lock), ``sub`` the folder of the item files inside it.
    """

    def __init__(self, root: Path, rel_dir: str, *, sub: str = "", suffix: str = ".yaml",
                 check_ids: bool = True) -> None:
        self.root = Path(root)
        self.rel_dir = rel_dir
        self.sub = sub
        self.suffix = suffix
        self.check_ids = check_ids
        # The folder itself may have been replaced by a symlink: the store then reads nothing and refuses
        # writes (path_of checks every component) instead of failing the whole plane.
        self.dir = safe_join(self.root, rel_dir, follow_symlinks=True)
        self.items_dir = self.dir / sub if sub else self.dir
        self._prefix = f"{sub}/" if sub else ""
        self._parts = Path(rel_dir, sub).parts

    def path_of(self, item_id: str) -> Path:
        """``<rel_dir>/<sub>/<id><suffix>``; refuses ids that are not safe."""
        name = check_id(item_id) if self.check_ids else item_id
        return safe_join(self.root, self.rel_dir, *([self.sub] if self.sub else []), f"{name}{self.suffix}")

    def expected_path(self, item_id: str) -> Path:
        """Where the file of a (safe) id lives."""
        return self.items_dir / f"{item_id}{self.suffix}"

    def name_for(self, item_id: str) -> str:
        """``<sub>/<id><suffix>``."""
        return f"{self._prefix}{item_id}{self.suffix}"

    def _scan(self) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(self.items_dir) as it:
                return [e for e in it if is_item_name(e.name, self.suffix) and e.is_file(follow_symlinks=False)]
        except ABSENT:
            return []

    def item_paths(self) -> list[Path]:
        """Item files present now, sorted by name."""
        return list(self.iter_item_paths())

    def iter_item_paths(self) -> Iterator[Path]:
        """``item_paths`` one by one: the names are listed and sorted, each path made as it is used (a store of
        100,000 files held as paths was 29 MB)."""
        try:
            with os.scandir(self.items_dir) as it:
                names = sorted(e.name for e in it
                               if is_item_name(e.name, self.suffix) and e.is_file(follow_symlinks=False))
        except ABSENT:
            return
        folder = self.items_dir
        for name in names:
            yield folder / name

    def item_names(self) -> list[str]:
        """Item files present now, relative to ``dir``."""
        return [f"{self._prefix}{e.name}" for e in self._scan()]

    def name_of(self, path: Path) -> str:
        """An item file's name relative to ``dir`` (what its index line says)."""
        return f"{self._prefix}{os.path.basename(path)}"

    def rel(self, path: Path | str) -> str:
        """A path relative to the memory root."""
        return rel_to(self.root, path)

    def owns(self, rel: str) -> bool:
        """Whether ``rel`` is a file right inside the item folder."""
        parts = Path(rel).parts
        return len(parts) == len(self._parts) + 1 and parts[:-1] == self._parts

    def stamp_dirs(self) -> list[Path]:
        """The item folder."""
        return [self.items_dir]


class DatedLayout:
    """Dated folders of one file each: ``episodes/<yyyy>/<id>/episode.yaml`` (``folder_of`` gives the year)."""

    def __init__(self, root: Path, rel_dir: str, file: str, folder_of: Callable[[str], str], *,
                 inner: tuple[str, ...] = (), beside: tuple[str, ...] = ()) -> None:
        self.root = Path(root)
        self.rel_dir = rel_dir
        self.file = file
        self.folder_of = folder_of
        self.inner = frozenset(inner)  # the folders an item folder holds besides its file (artifacts/ ...)
        self.beside = frozenset(beside)  # the store's own folders beside the year folders (.staging/ ...)
        self.dir = safe_join(self.root, rel_dir, follow_symlinks=True)
        self._dir_prefix = os.path.join(str(self.dir), "")
        self.items_dir = self.dir

    def item_dir(self, item_id: str) -> Path:
        """The folder of an id: ``<rel_dir>/<yyyy>/<id>``; refuses ids that are not safe."""
        return safe_join(self.root, self.rel_dir, self.folder_of(check_id(item_id)), item_id)

    def path_of(self, item_id: str) -> Path:
        """The item file of an id."""
        return self.item_dir(item_id) / self.file

    def expected_path(self, item_id: str) -> Path:
        """Where the item file of a (safe) id lives."""
        return self.dir / self.folder_of(item_id) / item_id / self.file

    def name_for(self, item_id: str) -> str:
        """``<yyyy>/<id>/<file>``."""
        return f"{self.folder_of(item_id)}/{item_id}/{self.file}"

    def item_dirs(self) -> list[Path]:
        """Every item folder present now (with or without its file), sorted."""
        return [d for y in scan_dirs(self.dir) for d in scan_dirs(y)]

    def item_paths(self) -> list[Path]:
        """The item file of every item folder that has one."""
        return [d / self.file for d in self.item_dirs() if (d / self.file).is_file()]

    def iter_item_paths(self) -> Iterator[Path]:
        """``item_paths`` one by one."""
        return iter(self.item_paths())
    def item_names(self) -> list[str]:
        """``<yyyy>/<id>/<file>`` of every item folder present now (a folder without its file is listed too)."""
        out: list[str] = []
        for year in scan_names(str(self.dir)):
            out.extend(f"{year}/{ep}/{self.file}" for ep in scan_names(os.path.join(self.dir, year)))
        return out

    def name_of(self, path: Path) -> str:
        """An item file's path relative to ``dir`` (what its index line says)."""
        text, base = str(path), self._dir_prefix
        if text.startswith(base) and "/." not in text and "//" not in text and not text.endswith("/") \
                and len(text) > len(base):
            return text[len(base):]  # the usual case, a path listed under ``dir``: no Path made (verify names 10,000s)
        return str(Path(path).relative_to(self.dir))

    def rel(self, path: Path | str) -> str:
        """A path relative to the memory root."""
        return rel_to(self.root, path)

    def owns(self, rel: str) -> bool:
        """Whether ``rel`` is an item file under this store's folder."""
        parts = Path(rel).parts
        return parts[:1] == (self.rel_dir,) and parts[-1] == self.file

    def stamp_dirs(self) -> list[Path]:
        """The store folder and its year folders (an item folder appearing changes a year folder's mtime)."""
        return [self.dir, *scan_dirs(self.dir)]

    def folders(self, rel: str) -> bool:
        """Whether a path relative to the root is a folder this layout keeps (a year, an item's folder and
        the folders in it, the store's own): a file there stands where a folder belongs."""
        parts = rel.split("/")
        if parts[0] != self.rel_dir or len(parts) < 2:
            return False
        if len(parts) == 2:
            return parts[1] in self.beside or (len(parts[1]) == 4 and parts[1].isdecimal())
        if not (len(parts[1]) == 4 and parts[1].isdecimal()) or parts[2].startswith("."):
            return False
        return len(parts) == 3 or "/".join(parts[3:]) in self.inner


class ProfileLayout:
    """Device profiles: ``device/profile.yaml`` for ``default``, ``device/profiles/<slug>.yaml`` for the others."""

    def __init__(self, root: Path, slug: Callable[[str], str]) -> None:
        self.root = Path(root)
        self.rel_dir = "device/profiles"
        self.slug = slug
        self.dir = safe_join(self.root, "device", "profiles", follow_symlinks=True)  # a link: read nothing (see above)
        self.items_dir = self.dir
        self.default = self.root / "device" / "profile.yaml"

    def path_of(self, item_id: str) -> Path:
        """The profile file of a device id (never shared between two devices)."""
        if item_id == "default":
            return safe_join(self.root, "device", "profile.yaml")
        return safe_join(self.root, "device", "profiles", f"{self.slug(item_id)}.yaml")

    def expected_path(self, item_id: str) -> Path:
        """The profile file of a device id."""
        return self.path_of(item_id)

    def name_for(self, item_id: str) -> str:
        """The profile file of a device id, relative to the root."""
        return self.rel(self.path_of(item_id))

    def item_paths(self) -> list[Path]:
        """The default profile (when present) and every other device's, by name."""
        paths = [self.default] if self.default.exists() else []
        try:
            with os.scandir(self.dir) as it:
                paths += sorted(Path(e.path) for e in it
                                if is_item_name(e.name, ".yaml") and e.is_file(follow_symlinks=False))
        except ABSENT:
            pass
        return paths

    def iter_item_paths(self) -> Iterator[Path]:
        """``item_paths`` one by one."""
        return iter(self.item_paths())
    def item_names(self) -> list[str]:
        """Profile files present now, relative to the root."""
        return [self.rel(p) for p in self.item_paths()]

    def name_of(self, path: Path) -> str:
        """A profile file relative to the root."""
        return self.rel(path)

    def rel(self, path: Path | str) -> str:
        """A path relative to the memory root."""
        return rel_to(self.root, path)

    def owns(self, rel: str) -> bool:
        """Whether ``rel`` is a device profile file."""
        return rel == "device/profile.yaml" or Path(rel).parts[:2] == ("device", "profiles")

    def stamp_dirs(self) -> list[Path]:
        """The profiles folder."""
        return [self.dir]


def scan_names(directory: str) -> list[str]:
    """Names of the (non-hidden, non-symlink) folders in a folder, unsorted."""
    try:
        with os.scandir(directory) as it:
            return [e.name for e in it if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []


def scan_dirs(directory: Path) -> list[Path]:
    """The (non-hidden, non-symlink) folders in a folder, sorted."""
    try:
        with os.scandir(directory) as it:
            return sorted(Path(e.path) for e in it if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
