"""safe_join (lifecycle/_paths.py) gives the answers of the plain Path-based definition, on any parts."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.lifecycle import UnsafePathError, check_relpath, safe_join


def _reference(root: Path, *parts: str, follow_symlinks: bool = False) -> Path:
    # The definition: normalise, the result must be the root or below it, and no component a symlink.
    rel = "/".join(check_relpath(p) for p in parts if p not in ("", "."))
    target = Path(os.path.normpath(os.path.join(root, rel))) if rel else Path(root)
    root_norm = Path(os.path.normpath(root))
    if target != root_norm and root_norm not in target.parents:
        raise UnsafePathError(rel, "resolves outside the memory root")
    if not follow_symlinks:
        cur = root_norm
        for comp in target.relative_to(root_norm).parts:
            cur = cur / comp
            try:
                st_ = os.lstat(cur)
            except (FileNotFoundError, NotADirectoryError):  # nothing exists below a missing part or a file
                break
            if stat.S_ISLNK(st_.st_mode):
                raise UnsafePathError(rel, f"symlink in path at {cur}")
    return target


def _answer(fn: object, *args: object, **kw: object) -> object:
    try:
        return fn(*args, **kw)  # type: ignore[operator]
    except UnsafePathError as exc:
        return ("refused", str(exc))
    except OSError as exc:  # any other error is a failure of the function under test, whatever the reference says
        return ("raised", type(exc).__name__)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("root") / "memory"
    (root / "device" / "procedures").mkdir(parents=True)
    (root / "device" / "profile.yaml").write_text("id: default\n")
    outside = root.parent / "outside"
    outside.mkdir()
    (root / "device" / "linked").symlink_to(outside)
    (root / "episodes").symlink_to(outside)
    return root


PART = st.sampled_from(["device", "procedures", "profile.yaml", "linked", "episodes", "x.yaml", "..", ".", "",
                        "a/b", "a/../..", "/abs", "a//b", "2026", "é", "a\\b"])


@settings(max_examples=400, deadline=None)
@given(st.lists(PART, max_size=4), st.booleans(), st.sampled_from(["absolute", "relative", "dot", "dot-slash"]))
def test_safe_join_answers_as_the_definition(tree: Path, parts: list[str], follow: bool, style: str) -> None:
    # The root as a caller may pass it: absolute, relative to the working folder, or the working folder.
    where, root = {"absolute": (Path.cwd(), tree), "relative": (tree.parent, Path("memory")),
                   "dot": (tree, Path(".")), "dot-slash": (tree, Path("./"))}[style]
    before = Path.cwd()
    os.chdir(where)
    try:
        assert _answer(safe_join, root, *parts, follow_symlinks=follow) == \
            _answer(_reference, root, *parts, follow_symlinks=follow)
    finally:
        os.chdir(before)


def test_a_relative_root_is_a_working_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_plane import MemoryPlane
    from memory_plane.lifecycle import has_symlink

    monkeypatch.chdir(tmp_path)
    with MemoryPlane.open(tmp_path / "memory") as plane:
        saved = plane.long_term.save_memory(type="fact", content="the parking spot is B12")
    monkeypatch.chdir(tmp_path / "memory")
    assert not has_symlink(Path("."), Path("long_term"))
    with MemoryPlane(Path(".")) as plane:
        assert [h.id for h in plane.long_term.recall_memory("parking spot")] == [saved.id]


def test_safe_join_refuses_escapes_and_links(tree: Path) -> None:
    assert safe_join(tree, "device", "profile.yaml") == tree / "device" / "profile.yaml"
    with pytest.raises(UnsafePathError, match="symlink"):
        safe_join(tree, "device", "linked", "x.yaml")
    assert safe_join(tree, "episodes", "x", follow_symlinks=True) == tree / "episodes" / "x"
    with pytest.raises(UnsafePathError):
        safe_join(tree, "..", "outside")


def test_a_file_on_the_way_is_an_answer_not_an_error(tree: Path) -> None:
    # A part below a file cannot exist, so it holds no link: the join is answered, never an OSError.
    from memory_plane.lifecycle import has_symlink

    joined = safe_join(tree, "device", "profile.yaml", "device")
    assert joined == tree / "device" / "profile.yaml" / "device"
    assert not has_symlink(tree, joined)


def _has_symlink_reference(root: Path, path: Path) -> bool:
    # The definition: below the root (compared absolute), and some component on the way down a symlink.
    root_a, path_a = Path(os.path.abspath(root)), Path(os.path.abspath(path))
    if path_a == root_a:
        return False
    if root_a not in path_a.parents:
        return True
    cur = root_a
    for comp in path_a.relative_to(root_a).parts:
        cur = cur / comp
        try:
            if stat.S_ISLNK(os.lstat(cur).st_mode):
                return True
        except (FileNotFoundError, NotADirectoryError):
            return False
    return False


@settings(max_examples=300, deadline=None)
@given(st.lists(PART, max_size=4), st.sampled_from(["absolute", "relative", "dot"]), st.booleans())
def test_has_symlink_answers_as_the_definition_from_any_working_folder(
        tree: Path, parts: list[str], style: str, twice: bool) -> None:
    # Asked again from another working folder, a relative pair must be worked out anew (its steps are memoised).
    from memory_plane.lifecycle import has_symlink

    where, root = {"absolute": (Path.cwd(), tree), "relative": (tree.parent, Path("memory")),
                   "dot": (tree, Path("."))}[style]
    path = Path(os.path.join(root, *parts)) if parts else root
    before = Path.cwd()
    try:
        for folder in ([tree.parent / "outside", where] if twice else [where]):
            os.chdir(folder)
            assert has_symlink(root, path) == _has_symlink_reference(root, path), (root, path, folder)
    finally:
        os.chdir(before)
