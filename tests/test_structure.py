"""The shape of the code stays as docs/architecture.md says: exports, private imports, rooms, sizes."""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOP = ("lifecycle", "device_memory", "episodes", "memory_plane", "prompts")
ROOMS = ("retrieval", "upkeep", "cli", "bench", "sim")
MAX_MODULE_LINES = 450  # a module this long is a sign to split it by concept
MAX_FUNCTION_LINES = 80  # outside bench/ and sim/, which script whole runs
MAX_TREE_LOOP_LINES = 60  # verify_tree and gc_tree: loops over the collections


def _modules() -> Iterator[tuple[Path, str]]:
    for top in TOP:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield path, ".".join(parts)


def _packages() -> list[str]:
    return [name for path, name in _modules() if path.name == "__init__.py"]


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path: Path, module: str) -> Iterator[tuple[int, str, str | None]]:
    """(line, imported module, imported name or None) of every import in a file, nested ones too."""
    tree = ast.parse(path.read_text("utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, path.name == "__init__.py", node)
            for alias in node.names:
                yield node.lineno, target, alias.name


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and part != "__future__" for part in dotted.split("."))


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "memory_plane" and len(parts) > 1 and parts[1] in ROOMS else None


@pytest.mark.parametrize("package", _packages())
def test_all_lists_exactly_the_public_names(package: str) -> None:
    mod = importlib.import_module(package)
    exported = set(getattr(mod, "__all__", ()))
    public = {name for name in dir(mod) if not name.startswith("_") and name != "annotations"
              and not isinstance(getattr(mod, name), types.ModuleType)}
    assert public <= exported, f"{package} has public names missing from __all__: {sorted(public - exported)}"
    # What __all__ lists beyond dir() must still resolve (names a module loads on first use).
    unresolved = [name for name in exported - public if not hasattr(mod, name)]
    assert not unresolved, f"{package}.__all__ lists names that do not resolve: {unresolved}"


def test_no_module_imports_a_private_name_of_another_package() -> None:
    bad = []
    for path, module in _modules():
        own = module.split(".")[0]
        for line, target, name in _imports(path, module):
            top = target.split(".")[0]
            if top not in TOP or top == own:
                continue
            if _private(target) or (name is not None and name.startswith("_")):
                bad.append(f"{path.relative_to(REPO)}:{line} imports {target}{'.' + name if name else ''}")
    assert not bad, "\n".join(bad)


def test_rooms_meet_only_through_their_front_door() -> None:
    bad = []
    for path, module in _modules():
        mine = _room(module)
        for line, target, name in _imports(path, module):
            full = f"{target}.{name}" if name else target
            theirs = _room(full) if _room(target) is None else _room(target)
            if theirs is None or theirs == mine:
                continue
            inner = target.split(".")[2:] + ([name] if name else [])
            if inner and _private(inner[0]):
                bad.append(f"{path.relative_to(REPO)}:{line} reaches into {theirs}/: {full}")
    assert not bad, "\n".join(bad)


def test_modules_and_functions_stay_small() -> None:
    long_modules, long_functions = [], []
    for path, module in _modules():
        text = path.read_text("utf-8")
        if len(text.splitlines()) >= MAX_MODULE_LINES:
            long_modules.append(f"{path.relative_to(REPO)}: {len(text.splitlines())} lines")
        if _room(module) in ("bench", "sim"):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {length} lines")
    assert not long_modules, "\n".join(long_modules)
    assert not long_functions, "\n".join(long_functions)


def test_verify_and_gc_are_loops_over_the_collections() -> None:
    from memory_plane.upkeep import gc_tree, verify_tree

    for fn in (verify_tree, gc_tree):
        source = Path(fn.__code__.co_filename).read_text("utf-8")
        node = next(n for n in ast.walk(ast.parse(source))
                    if isinstance(n, ast.FunctionDef) and n.name == fn.__name__)
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        assert length <= MAX_TREE_LOOP_LINES, f"{fn.__name__} is {length} lines"
        assert any(isinstance(n, ast.For) for n in ast.walk(node)), f"{fn.__name__} has no loop over collections"


def _documented_plane_names() -> set[str]:
    text = (REPO / "docs" / "architecture.md").read_text("utf-8")
    section = text.split("## What the plane offers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    return {name for row in rows for name in re.findall(r"`([a-z_]+)`", row.rsplit("|", 2)[1])}


def test_the_plane_offers_exactly_what_the_architecture_lists() -> None:
    from memory_plane import MemoryPlane

    public = {name for name in dir(MemoryPlane) if not name.startswith("_")}
    documented = _documented_plane_names()
    assert len(documented) > 10
    assert public == documented, f"undocumented: {sorted(public - documented)}; " \
                                 f"listed but missing: {sorted(documented - public)}"


CONFIG_CHECK = """
import sys
from memory_plane import MemoryPlane
root = sys.argv[1]
with MemoryPlane.open(root) as plane:
    with open(root + "/config.yaml", "w") as fh:
        fh.write("transcript:\\n  bogus: 1\\nlenses:\\n  nope: 2\\n")
    report = plane.verify()
assert [p.category for p in report.problems] == ["config", "config"], report.problems
print("\\n".join(sorted(sys.modules)))
"""


def test_checking_config_imports_no_transcript_engine_or_model_client(tmp_path: Path) -> None:
    # A fresh interpreter: what verify (and its config check) needs, not what other tests loaded.
    out = subprocess.run([sys.executable, "-c", CONFIG_CHECK, str(tmp_path / "m")], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.split()
    assert "episodes._transcript_config" in out and "memory_plane._lens_settings" in out  # the checks ran
    heavy = [m for m in out if m.startswith(("episodes.transcript", "memory_plane._lenses", "google"))]
    assert not heavy, heavy


def test_the_checks_above_catch_what_they_guard(tmp_path: Path) -> None:
    # The import scan sees a nested private import of another package and a room's back door.
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from lifecycle._yaml import emit_block_yaml\n    from ..cli._mcp import x\n")
    found = list(_imports(probe, "memory_plane.retrieval.probe"))
    assert (2, "lifecycle._yaml", "emit_block_yaml") in found
    assert (3, "memory_plane.cli._mcp", "x") in found
    assert _private("lifecycle._yaml") and not _private("lifecycle")
    assert _room("memory_plane.cli._mcp") == "cli" and _room("memory_plane.cli") == "cli"
    assert _room("memory_plane._plane") is None and _room("memory_plane") is None
