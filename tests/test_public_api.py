"""The public surface: every package's __all__ resolves, the contract of ARCHITECTURE.md holds, layers point down."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAYERS = ["lifecycle", "device_memory", "episodes", "memory_plane"]
"""The layers, lowest first; all but the last are folders of the repository mapped into memory_plane."""


def _package(layer: str) -> str:
    return layer if layer == "memory_plane" else f"memory_plane.{layer}"


@pytest.mark.parametrize("layer", LAYERS)
def test_all_names_resolve(layer: str) -> None:
    mod = importlib.import_module(_package(layer))
    assert mod.__all__
    for name in mod.__all__:
        assert hasattr(mod, name), f"{_package(layer)}.{name} is in __all__ but missing"


def test_contract_names() -> None:
    import memory_plane

    for name in ["MemoryPlane", "MemoryRetrieveRequest", "CurrentEnvironmentHints", "MemoryHit", "MemoryPlaneError"]:
        assert name in memory_plane.__all__
    plane_api = memory_plane.MemoryPlane
    for method in ["open", "retrieve", "new_episode_recorder", "commit_episode", "flush", "verify", "gc", "close"]:
        assert callable(getattr(plane_api, method))
    assert set(memory_plane.MemoryHit.model_fields) >= {"id", "type", "score", "confidence", "text", "path"}


def _layer_of(dotted: str) -> str | None:
    """The layer an absolute import names (None: not the project's)."""
    parts = dotted.split(".")
    if parts[0] != "memory_plane":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS[:-1] else "memory_plane"


@pytest.mark.parametrize("lower_index", range(len(LAYERS) - 1))
def test_imports_only_point_down(lower_index: int) -> None:
    layer = LAYERS[lower_index]
    higher = set(LAYERS[lower_index + 1:])
    for path in (REPO / layer).rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.ImportFrom) and node.level > 1:
                # A relative import that climbs out of the layer's own package reaches memory_plane itself.
                depth = len(path.relative_to(REPO / layer).parts) - 1
                assert node.level <= depth + 1, f"{path.relative_to(REPO)} climbs out of {layer} ({node.level} dots)"
            bad = higher & {_layer_of(n) for n in names}
            assert not bad, f"{path.relative_to(REPO)} imports {bad} from a higher layer"
    # The top layer's own modules are checked by test_structure's private-import rule; the layers below never
    # name memory_plane's own modules (above), nor a layer above their own.


def test_public_functions_have_docstrings() -> None:
    missing = []
    for layer in LAYERS:
        for path in (REPO / layer).rglob("*.py"):
            if layer == "memory_plane" and path.relative_to(REPO / layer).parts[0] in LAYERS:
                continue  # reached through a link: checked under its own folder
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

