"""Shared fixtures: a fresh memory root, a plane over it (per test or per module), a repository-relative data path.

It reaches inside the long-term store (``memory_plane._long_term``) for ``LongTermStore.load_path``, to count the
memory files a save or a forget reads (``memory_loads``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from memory_plane import MemoryPlane
from memory_plane.lifecycle import init_tree

# CI replays the same examples every run (main stays green); a developer's run explores new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("MEMPLANE_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A freshly initialised memory tree."""
    r = tmp_path / "memory"
    init_tree(r)
    return r


@pytest.fixture
def plane(root: Path) -> Iterator[MemoryPlane]:
    """A plane over a fresh memory tree, closed after the test."""
    with MemoryPlane.open(root) as p:
        yield p


@pytest.fixture(scope="module")
def shared_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryPlane]:
    """One plane over a fresh memory tree for all of a module's tests (property tests add to it example after
    example), closed after the module."""
    with MemoryPlane.open(tmp_path_factory.mktemp("shared") / "m") as p:
        yield p


@pytest.fixture
def memory_loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every long-term memory file read (``LongTermStore.load_path``) from now on in the test, in order."""
    from memory_plane._long_term import LongTermStore

    loaded: list[Path] = []
    real = LongTermStore.load_path

    def counting(self: LongTermStore, path: Path):  # type: ignore[no-untyped-def]
        loaded.append(path)
        return real(self, path)

    monkeypatch.setattr(LongTermStore, "load_path", counting)
    return loaded


def no_temp_debris(directory: Path) -> list[str]:
    """Return staging files left anywhere under directory."""
    from memory_plane.lifecycle import is_temp_name

    return [str(p) for p in directory.rglob("*") if is_temp_name(p.name)]
