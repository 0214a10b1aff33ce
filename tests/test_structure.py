"""The shape of the code stays as docs/architecture.md says: exports, private imports, rooms, sizes, classes whole."""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
import types
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("lifecycle", "device_memory", "episodes", "prompts")
"""The card's folders at the top of the repository, each mapped into the one package as memory_plane.<folder>."""
ROOMS = ("retrieval", "upkeep", "cli", "bench", "sim", "fleet")
WARN_MODULE_LINES = 600  # a module longer than this is worth a look: does it hold more than one concept?
MAX_FUNCTION_LINES = 80  # outside bench/ and sim/, which script whole runs
MAX_TREE_LOOP_LINES = 60  # verify_tree and gc_tree: loops over the collections


def _modules() -> Iterator[tuple[Path, str]]:
    """Every module of the package with its dotted name, each file once (the links into memory_plane/ skipped)."""
    for folder in (*LAYERS, "memory_plane"):
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            parts = list(rel.parts)
            if folder == "memory_plane" and len(parts) > 1 and parts[1] in LAYERS:
                continue  # the same file as under its own folder, reached through the link
            if parts[-1] == "__init__":
                parts.pop()
            yield path, ".".join(parts if folder == "memory_plane" else ["memory_plane", *parts])


def _layer(dotted: str) -> str | None:
    """The layer a dotted name belongs to (memory_plane.lifecycle, ..., or memory_plane); None outside."""
    parts = dotted.split(".")
    if parts[0] != "memory_plane":
        return None
    return f"memory_plane.{parts[1]}" if len(parts) > 1 and parts[1] in LAYERS else "memory_plane"


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
        own = _layer(module)
        for line, target, name in _imports(path, module):
            theirs = _layer(target)
            if theirs is None or theirs == own:
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


def test_functions_stay_small_and_long_modules_are_named() -> None:
    # A module is as long as its concept needs: a long one is a warning to look at, never a reason to split a
    # class over files. A function over the limit fails.
    long_modules, long_functions = [], []
    for path, module in _modules():
        text = path.read_text("utf-8")
        if len(text.splitlines()) > WARN_MODULE_LINES:
            long_modules.append(f"{path.relative_to(REPO)}: {len(text.splitlines())} lines")
        if _room(module) in ("bench", "sim"):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {length} lines")
    for line in long_modules:
        warnings.warn(f"{line}, over {WARN_MODULE_LINES}: does it hold one concept?", UserWarning, stacklevel=1)
    assert not long_functions, "\n".join(long_functions)


def _package(module: str) -> str:
    return module.rpartition(".")[0]


def _split_classes(modules: Iterable[tuple[Path, str]]) -> list[str]:
    """Classes split over modules by inheritance: a class whose base is a class of the same package, defined
    in another module, the base of nothing else and never made on its own (a mixin that exists only to move
    code out of a file). A base several classes share, a class also used by itself, or a base in the class's
    own module is not a split."""
    classes: list[tuple[str, str, list[str], int]] = []  # (module, class, base names, line)
    called: set[str] = set()  # names called anywhere: a class made on its own is a class in its own right
    for path, module in modules:
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                called.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = [b.value if isinstance(b, ast.Subscript) else b for b in node.bases]  # Generic[T]
                names = [b.id if isinstance(b, ast.Name) else b.attr for b in bases
                         if isinstance(b, (ast.Name, ast.Attribute))]
                classes.append((module, node.name, names, node.lineno))
    homes: dict[tuple[str, str], list[str]] = {}  # (package, class name) -> the modules that define it
    for module, name, _bases, _line in classes:
        homes.setdefault((_package(module), name), []).append(module)
    uses = Counter(base for _m, _n, bases, _l in classes for base in bases)  # by name: lenient on a clash
    split = []
    for module, name, bases, line in classes:
        for base in bases:
            home = homes.get((_package(module), base), [])
            if len(home) == 1 and home[0] != module and uses[base] == 1 and base not in called:
                split.append(f"{module}:{line} {name} extends {base} of {home[0]}, which is the base of nothing "
                             "else and never made on its own: one class in two modules")
    return split


def test_no_class_is_split_across_modules_by_inheritance() -> None:
    split = _split_classes(_modules())
    assert not split, "\n".join(split)


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
    assert "memory_plane.episodes._transcript_config" in out and "memory_plane._lens_settings" in out  # the checks ran
    heavy = [m for m in out if m.startswith(("memory_plane.episodes.transcript", "memory_plane._lenses", "google"))]
    assert not heavy, heavy


def test_the_checks_above_catch_what_they_guard(tmp_path: Path) -> None:
    # The import scan sees a nested private import of another package and a room's back door.
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from memory_plane.lifecycle._yaml import emit_block_yaml\n"
                     "    from ..cli._mcp import x\n    from ..lifecycle import load_yaml\n")
    found = list(_imports(probe, "memory_plane.retrieval.probe"))
    assert (2, "memory_plane.lifecycle._yaml", "emit_block_yaml") in found
    assert (3, "memory_plane.cli._mcp", "x") in found
    assert (4, "memory_plane.lifecycle", "load_yaml") in found
    assert _private("memory_plane.lifecycle._yaml") and not _private("memory_plane.lifecycle")
    assert _layer("memory_plane.lifecycle._yaml") == "memory_plane.lifecycle"
    assert _layer("memory_plane.retrieval") == "memory_plane" and _layer("lifecycle") is None
    assert _room("memory_plane.cli._mcp") == "cli" and _room("memory_plane.cli") == "cli"
    assert _room("memory_plane._plane") is None and _room("memory_plane") is None
    # A mixin chain over files is found; a base two classes share, or one in the class's own module, is not.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "_part.py").write_text("class Part:\n    pass\n\n\nclass Shared:\n    pass\n\n\n"
                                  "class Made:\n    pass\n\n\nMade()\n")
    (pkg / "_whole.py").write_text("from ._part import Made, Part, Shared\n\n\nclass Whole(Part):\n    pass\n\n\n"
                                   "class A(Shared):\n    pass\n\n\nclass Local:\n    pass\n\n\n"
                                   "class B(Shared, Local):\n    pass\n\n\nclass MadeMore(Made):\n    pass\n")
    found = _split_classes([(pkg / "_part.py", "pkg._part"), (pkg / "_whole.py", "pkg._whole")])
    assert len(found) == 1 and "Whole extends Part of pkg._part" in found[0], found


def _silent_reaches(path: Path) -> list[str]:
    """The private modules and names of the project a test file imports, when its docstring does not say why."""
    tree = ast.parse(path.read_text("utf-8"))
    if "reaches inside" in (ast.get_docstring(tree) or "").lower():
        return []
    return [f"{path.name}:{line} imports {target}{'.' + name if name else ''}"
            for line, target, name in _imports(path, f"tests.{path.stem}")
            if _layer(target) is not None and (_private(target) or (name is not None and name.startswith("_")))]


def test_a_test_that_reaches_inside_a_module_says_why() -> None:
    # Tests use the public API, so a module can move or split without breaking them; a test that must import
    # a private module or name says so in its docstring ("It reaches inside ... for ..."), with the reason.
    silent = [hit for path in sorted((REPO / "tests").rglob("*.py")) for hit in _silent_reaches(path)]
    assert not silent, "\n".join(silent)


def test_the_reach_check_sees_a_silent_reach(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text('"""A probe."""\n\ndef f():\n    from memory_plane.bench import _quality\n'
                     "    from memory_plane.lifecycle._yaml import round_float\n"
                     "    from memory_plane.lifecycle import load_yaml\n")
    assert _silent_reaches(probe) == ["test_probe.py:4 imports memory_plane.bench._quality",
                                      "test_probe.py:5 imports memory_plane.lifecycle._yaml.round_float"]
    probe.write_text('"""A probe.\n\nIt reaches inside bench/ for its metrics."""\n\n'
                     "from memory_plane.bench import _quality\n")
    assert _silent_reaches(probe) == []


RETRIEVAL = ("memory_plane/retrieval", "memory_plane/_inverted_index.py")


def _ad_hoc_caches(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) of each ``id()`` call and each mapping emptied when its own size passes a bound: what
    retrieval derives from an index lives in that index's generation, dropped whole when the index changes."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id":
            yield node.lineno, "id() of an object as a key (the number is reused once the object is gone)"
        if not isinstance(node, ast.If):
            continue
        sized = {ast.dump(c.left.args[0]) for c in ast.walk(node.test)
                 if isinstance(c, ast.Compare) and isinstance(c.left, ast.Call) and isinstance(c.left.func, ast.Name)
                 and c.left.func.id == "len" and c.left.args and isinstance(c.ops[0], (ast.Gt, ast.GtE))}
        for stmt in node.body:
            for n in ast.walk(stmt):
                emptied: list[ast.AST] = []
                if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "clear"
                        and not n.args):
                    emptied.append(n.func.value)
                elif isinstance(n, ast.Assign):
                    pairs = (zip(n.targets[0].elts, n.value.elts)
                             if isinstance(n.targets[0], ast.Tuple) and isinstance(n.value, ast.Tuple)
                             else [(n.targets[0], n.value)])
                    emptied += [t for t, v in pairs if isinstance(v, ast.Dict) and not v.keys]
                if any(ast.dump(e).replace("Store()", "Load()") in sized for e in emptied):
                    yield node.lineno, "a cache emptied when it passes a size"


def test_retrieval_keeps_no_cache_keyed_by_id_or_emptied_by_size() -> None:
    bad = []
    for rel in RETRIEVAL:
        base = REPO / rel
        for path in sorted(base.rglob("*.py")) if base.is_dir() else [base]:
            bad += [f"{path.relative_to(REPO)}:{line} {what}" for line, what in _ad_hoc_caches(ast.parse(
                path.read_text("utf-8")))]
    assert not bad, "\n".join(bad)
    # The check sees what it forbids, and leaves a bound on something else (a corpus that grew) alone.
    probe = ast.parse("def f(self, e, d):\n    if len(self._memo) > 4096:\n        self._memo.clear()\n"
                      "    if e is not self._of or len(self._goals) > 256:\n        self._of, self._goals = e, {}\n"
                      "    hit = self._seen.get(id(e))\n"
                      "    if len(self.docs) > self._at * 1.1:\n        self._norms = {}\n")
    assert [line for line, _ in _ad_hoc_caches(probe)] == [2, 4, 6]


# -- one installed name: the card's folders mapped into memory_plane ------------------------------------


def test_one_installed_name() -> None:
    # The distribution installs the one package memory_plane: nothing named lifecycle, episodes or prompts
    # lands in site-packages beside other projects' packages of those names.
    from importlib.metadata import distribution

    top = (distribution("memory-plane").read_text("top_level.txt") or "").split()
    assert top == ["memory_plane"]
    for layer in (*LAYERS, "userdata_template"):
        link = REPO / "memory_plane" / layer
        assert link.is_symlink() and os.readlink(link) == f"../{layer}", f"memory_plane/{layer} maps ../{layer}"


def test_importing_from_inside_a_memory_root_needs_no_path_patching(tmp_path: Path) -> None:
    # A memory root has folders named lifecycle/ and episodes/; run from inside one, nothing they hold is imported.
    from memory_plane.lifecycle import init_tree

    root = tmp_path / "m"
    init_tree(root)
    out = subprocess.run([sys.executable, "-c", "import memory_plane, sys; print(sorted(m for m in sys.modules "
                          "if m.split('.')[0] in ('lifecycle', 'episodes', 'device_memory', 'prompts')))"],
                         cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert not (REPO / "memory_plane" / "_siblings.py").exists()


def test_nothing_imports_a_layer_by_its_folder_name() -> None:
    # Imported as `lifecycle` beside `memory_plane.lifecycle`, a module would load twice: two registries, two
    # sets of module globals, and a test's patch of one would miss the other.
    bare = []
    for path in sorted(REPO.rglob("*.py")):
        rel = path.relative_to(REPO)
        if rel.parts[0].startswith(".") or (rel.parts[0] == "memory_plane" and rel.parts[1] in LAYERS):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            bare += [f"{rel}:{node.lineno} {n}" for n in names if n.split(".")[0] in LAYERS]
    assert not bare, "\n".join(bare)
