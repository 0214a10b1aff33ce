"""Every write below the root goes through the guarded path: each call site of the writing functions names
the root, and making a tree refuses a link planted after its own check.

Reaches inside: the tree maker's check is patched away (``lifecycle._tree.has_symlink``) to stand for a link
planted between the check and the write, which no public call can time.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from memory_plane.lifecycle import init_tree

REPO = Path(__file__).resolve().parent.parent
WRITERS = {"atomic_write", "append_line", "append_lines", "create_exclusive", "IndexFile"}
PACKAGES = ("lifecycle", "device_memory", "episodes", "memory_plane")


def _calls_without_root() -> list[str]:
    bad = []
    for top in PACKAGES:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO)
            if rel.parts[:2] in (("memory_plane", "bench"), ("memory_plane", "sim")):
                continue  # benchmarks and the simulated phone write their own scratch trees
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if not isinstance(node, ast.Call):
                    continue
                name = node.func.id if isinstance(node.func, ast.Name) else (
                    node.func.attr if isinstance(node.func, ast.Attribute) else None)
                names_root = any(k.arg == "root" for k in node.keywords) or (
                    name == "IndexFile" and len(node.args) >= 2)
                # Inside lifecycle/_atomic.py the writers call each other with the root passed on.
                if name in WRITERS and not names_root and rel.as_posix() != "lifecycle/_atomic.py":
                    bad.append(f"{rel}:{node.lineno} {name}(...) without root=")
    return bad


def test_every_write_names_the_root_it_must_not_leave() -> None:
    assert _calls_without_root() == []


def test_making_a_tree_refuses_a_link_planted_after_its_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "m"
    root.mkdir()
    os.symlink(outside, root / "device")
    monkeypatch.setattr("memory_plane.lifecycle._tree.has_symlink", lambda base, path: False)
    created = init_tree(root)
    assert list(outside.iterdir()) == []
    assert not any(c.startswith("device") for c in created)
    assert (root / "episodes").is_dir() and (root / "lifecycle").is_dir()  # the rest of the tree is made
