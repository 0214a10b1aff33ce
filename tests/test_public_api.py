"""The public surface: every package's __all__ resolves, the contract of ARCHITECTURE.md holds, layers point down."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAYERS = ["lifecycle", "device_memory", "episodes", "memory_plane"]


@pytest.mark.parametrize("package", LAYERS)
def test_all_names_resolve(package: str) -> None:
    mod = importlib.import_module(package)
    assert mod.__all__
    for name in mod.__all__:
        assert hasattr(mod, name), f"{package}.{name} is in __all__ but missing"


def test_contract_names() -> None:
    import memory_plane

    for name in ["MemoryPlane", "MemoryRetrieveRequest", "CurrentEnvironmentHints", "MemoryHit", "MemoryPlaneError"]:
        assert name in memory_plane.__all__
    plane_api = memory_plane.MemoryPlane
    for method in ["open", "retrieve", "new_episode_recorder", "commit_episode", "flush", "verify", "gc", "close"]:
        assert callable(getattr(plane_api, method))
    assert set(memory_plane.MemoryHit.model_fields) >= {"id", "type", "score", "confidence", "text", "path"}


@pytest.mark.parametrize("lower_index", range(len(LAYERS)))
def test_imports_only_point_down(lower_index: int) -> None:
    package = LAYERS[lower_index]
    higher = set(LAYERS[lower_index + 1:])
    for path in (REPO / package).rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module.split(".")[0]]
            bad = higher & set(names)
            assert not bad, f"{path.relative_to(REPO)} imports {bad} from a higher layer"


def test_public_functions_have_docstrings() -> None:
    missing = []
    for package in LAYERS:
        for path in (REPO / package).rglob("*.py"):
            tree = ast.parse(path.read_text("utf-8"))
            for node in ast.walk(tree):
                public = isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")
                if public and ast.get_docstring(node) is None and not _is_nested_helper(tree, node):
                    missing.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert not missing, "\n".join(missing[:30])


def _is_nested_helper(tree: ast.AST, target: ast.AST) -> bool:
    # Functions defined inside other functions (closures passed to update()) are not public API.
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not target:
            for child in ast.walk(node):
                if child is target:
                    return True
    return False
