"""`bench fuzz`: break one field (or one file) of a realistic tree, then run every reader; none may raise.

A realistic tree (every kind of item, episodes with events, long-term memories, indexes, logs, config
and retention) is built once. Each example copies it, replaces one field of one file with any YAML
value, or the whole file with something else (bytes that are not UTF-8, a BOM, CRLF line ends, a
duplicated key, a torn tail, random bytes), then runs retrieve, recall, the model tools, verify (with
and without ``--fix``), GC (dry run and real), the listing and show commands and the MCP resources.

Counted per example: ``raises`` (any reader raised, printed other than one JSON line with ``--json``,
retrieve fell back to an empty block, or verify named a problem without its file, or a field without its
line), ``lost``
(items of other files, or the item of a file whose field could be dropped, no longer listed), and
``silent_fix`` (``verify --fix`` quarantined an item for a field it could drop). All must be 0. The
test suite runs the same property with a bounded number of examples and a fixed seed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

GOALS = ["打开微信，找到张三，准备发消息", "open meituan and search for coffee", "在设置里打开蓝牙",
         "pay with alipay", "what is the door code"]
LARGE = "x" * 100_000
SKIP_NAMES = {".lock"}


@dataclass(frozen=True)
class Mutation:
    """One edit of one file: ``field`` (set key path to value), ``text`` (a textual edit) or ``file``."""

    path: str  # relative to the root
    mode: str  # "field" | "text" | "file"
    key: tuple[Any, ...] = ()
    value: Any = None
    how: str = ""  # text/file mode: what to do

    def describe(self) -> str:
        """One line for a report."""
        if self.mode == "field":
            return f"{self.path}: {'.'.join(map(str, self.key))} = {_short(self.value)}"
        return f"{self.path}: {self.mode} {self.how}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass
class Outcome:
    """What one example did: the readers that raised, items lost, quarantines of fixable items."""

    raises: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    silent_fix: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing raised, nothing lost, nothing quarantined that could have stayed."""
        return not (self.raises or self.lost or self.silent_fix)


# -- the tree -------------------------------------------------------------------------------------------


def build_template(root: Path) -> None:
    """A small realistic tree: simulated tasks (apps, procedures, navigation, calibration, failures, UI
    anchors, episodes), a second device profile, long-term memories, config and retention."""
    from lifecycle import init_tree

    from .._plane import MemoryPlane
    from ..sim import run_rounds

    init_tree(root)
    with MemoryPlane.open(root) as plane, contextlib.redirect_stdout(io.StringIO()):
        run_rounds(plane, n_tasks=1, seed=3)
        plane.flush(30)
        plane.long_term.save_memory(type="fact", content="The door code is 4711", title="door code")
        plane.long_term.save_memory(type="rule", content="Always confirm before paying", tags=("pay",))
        plane.long_term.forget_memory(plane.long_term.save_memory(type="fact", content="old number 12").id,
                                      reason="fuzz fixture")
        plane.flush(30)


def mutable_files(root: Path) -> list[str]:
    """Every text file of the tree a person could edit (not images, locks or job markers)."""
    out = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.is_symlink() or p.name in SKIP_NAMES or p.name.startswith((".done-", ".failed-")):
            continue
        if p.suffix in (".yaml", ".md", ".jsonl"):
            out.append(str(p.relative_to(root)))
    return out


def _parse(path: Path) -> Any:
    """The data of a file as the fuzzer edits it: a mapping (YAML, frontmatter) or a list (index, jsonl)."""
    from lifecycle import load_yaml

    text = path.read_text("utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if path.name == "index.yaml":
        return [json.loads(line[2:]) for line in text.splitlines() if line.startswith("- {")]
    if path.suffix == ".md":
        if not text.startswith("---\n"):
            return {}
        return load_yaml(text[4:text.find("\n---", 4) + 1]) or {}
    return load_yaml(text) or {}


def key_paths(data: Any) -> list[tuple[Any, ...]]:
    """Field paths worth breaking: every top-level key and one level into nested mappings and lists."""
    out: list[tuple[Any, ...]] = []

    def walk(node: Any, prefix: tuple[Any, ...], depth: int) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                out.append((*prefix, k))
                if depth < 2:
                    walk(v, (*prefix, k), depth + 1)
        elif isinstance(node, list) and node and depth < 2:
            out.append((*prefix, 0))
            walk(node[0], (*prefix, 0), depth + 1)

    if isinstance(data, list):  # one record a line: break a field of the first and of the last line
        for i in sorted({0, len(data) - 1} if data else set()):
            out.append((i,))
            if isinstance(data[i], dict):
                for k in data[i]:
                    out.append((i, k))
    else:
        walk(data, (), 0)
    return out


def catalogue(root: Path) -> dict[str, list[tuple[Any, ...]]]:
    """file -> its field paths, for every mutable file of the template."""
    out = {}
    for rel in mutable_files(root):
        try:
            out[rel] = key_paths(_parse(root / rel))
        except Exception:  # a file the fuzzer cannot parse is still broken as a whole
            out[rel] = []
    return out


def _yaml_dump(data: Any) -> str:
    from ruamel.yaml import YAML

    y = YAML(typ="safe", pure=True)
    y.default_flow_style = False
    y.allow_unicode = True
    buf = io.StringIO()
    y.dump(data, buf)
    return buf.getvalue()


def _json_default(value: Any) -> Any:
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return str(value)


def _set(data: Any, key: tuple[Any, ...], value: Any) -> bool:
    node = data
    for part in key[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return False
    try:
        node[key[-1]] = value
    except (IndexError, TypeError):
        return False
    return True


def apply(root: Path, m: Mutation) -> None:
    """Make the edit a mutation describes (as a person or a fault would)."""
    path = root / m.path
    raw = path.read_bytes()
    if m.mode == "file":
        path.write_bytes(_whole_file(raw, m))
        return
    if m.mode == "text":
        path.write_bytes(_text_edit(raw, m))
        return
    data = _parse(path)
    if not m.key or not _set(data, m.key, m.value):
        return
    text = raw.decode("utf-8")
    if path.suffix == ".jsonl":
        out = "".join(json.dumps(r, ensure_ascii=False, default=_json_default) + "\n" for r in data)
    elif path.name == "index.yaml":
        head = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
        out = head + "".join("- " + json.dumps(r, ensure_ascii=False, default=_json_default) + "\n" for r in data)
    elif path.suffix == ".md":
        end = text.find("\n---", 4)
        body = text[end + 4:] if end >= 0 else text
        out = "---\n" + _yaml_dump(data) + "---" + body
    else:
        out = _yaml_dump(data)
    path.write_text(out, "utf-8")


def _whole_file(raw: bytes, m: Mutation) -> bytes:
    if m.how == "value":
        return _yaml_dump(m.value).encode()
    if m.how == "empty":
        return b""
    if m.how == "torn":
        return raw[: max(0, int(len(raw) * (m.value or 0.5)))]
    if m.how == "random":
        return bytes(m.value or b"\xff")
    raise ValueError(m.how)


def _text_edit(raw: bytes, m: Mutation) -> bytes:
    if m.how == "bom":
        return b"\xef\xbb\xbf" + raw
    if m.how == "crlf":
        return raw.replace(b"\n", b"\r\n")
    if m.how == "not_utf8":  # a value with bytes that are not UTF-8
        lines = raw.split(b"\n")
        i = min(len(lines) - 1, max(0, int(m.value or 0)))
        lines[i] = lines[i] + b" \xff\xfe\xc3"
        return b"\n".join(lines)
    if m.how == "duplicate_key":  # the first top-level key again, with another value
        lines = raw.split(b"\n")
        keys = [ln for ln in lines if ln[:1].isalpha() and b":" in ln]
        if not keys:
            return raw
        return raw + (b"" if raw.endswith(b"\n") else b"\n") + keys[0].split(b":")[0] + b": 7\n"
    raise ValueError(m.how)


# -- the readers ----------------------------------------------------------------------------------------


class _FallbackWatch(logging.Handler):
    """Notices retrieve's last-resort fallback (an empty block because something raised inside)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the fallback's message."""
        msg = record.getMessage()
        if "continuing without memory" in msg or record.exc_info:
            self.seen.append(msg[:200])


def inventory(plane: Any) -> dict[str, str]:
    """id -> where it lives, for every item the stores list."""
    out: dict[str, str] = {}
    for coll in plane.device.collections.values():
        for e in coll.entries():
            out[str(e.get("id"))] = f"device/{coll.rel_dir.split('/')[-1]}/{e.get('path') or ''}"
    for e in plane.episodes.entries():
        out[str(e.get("id"))] = f"episodes/{e.get('path') or ''}"
    for e in plane.long_term.entries():
        out[str(e.get("id"))] = f"long_term/{e.get('path') or ''}"
    return out


def _cli(root: Path, *argv: str) -> tuple[int, str]:
    from ..cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--root", str(root), *argv])
    return code, out.getvalue()


def exercise(root: Path, m: Mutation | None, clean: dict[str, str] | None = None) -> tuple[Outcome, dict[str, str]]:
    """Run every reader on the tree; return what went wrong and the inventory after ``verify --fix``."""
    from lifecycle import ConfigError

    from .._plane import MemoryPlane
    from .._retrieve_types import MemoryRetrieveRequest
    from ..cli import mcp_resources

    res = Outcome()
    watch = _FallbackWatch()
    logger = logging.getLogger("memory_plane")
    logger.addHandler(watch)
    after: dict[str, str] = {}

    def step(name: str, fn: Any) -> Any:
        try:
            return fn()
        except ConfigError as exc:
            if name == "gc" and str(exc.path).endswith("retention.yaml"):
                return None  # documented: GC refuses to delete anything while retention.yaml is bad (exit 1)
            res.raises.append(f"{name}: {type(exc).__name__}: {exc}")
            return None
        except Exception as exc:  # counting raises is the point
            res.raises.append(f"{name}: {type(exc).__name__}: {exc} | {traceback.format_exc(limit=-3)[-600:]}")
            return None

    try:
        plane = step("open", lambda: MemoryPlane.open(root))
        if plane is None:
            return res, after
        with plane:
            for goal in GOALS:
                step(f"retrieve {goal!r}", lambda g=goal: plane.retrieve(MemoryRetrieveRequest(input=g)).render())
            step("recall", lambda: plane.long_term.recall_memory("door code"))
            first: dict[str, Any] = next(iter(plane.episodes.entries()), {})
            calls: list[tuple[str, dict[str, Any]]] = [
                ("recall_memory", {"query": "code"}), ("recall_device_memory", {"query": "wechat"}),
                ("inspect_episode", {"episode_id": first.get("id") or "ep_x"}),
                ("recall_session_chunks", {"query": "x"})]
            for name, args in calls:
                r = step(f"tool {name}", lambda n=name, a=args: plane.tools.call(n, a))
                if r is not None and "Traceback" in r.text:
                    res.raises.append(f"tool {name}: {r.text[:200]}")
            rep = step("verify", lambda: plane.verify())
            if rep is not None:
                unnamed = [str(p) for p in rep.problems if not p.path]
                if unnamed:
                    res.raises.append(f"verify: problems without a file: {unnamed[:3]}")
                # A field set aside is named with its file, line and field (the line of its top-level key).
                unplaced = [str(p) for p in rep.problems if p.category == "field"
                            and (not p.line or not p.message.startswith("field "))]
                if unplaced:
                    res.raises.append(f"verify: field problems without a line: {unplaced[:3]}")
            step("resources", lambda: [p.read_bytes() for _, _, p in mcp_resources(plane).values()])
        json_runs: list[tuple[str, ...]] = [("lifecycle", "verify", "--json"),
                                            ("lifecycle", "gc", "--dry-run", "--json")]
        for argv in json_runs:
            code, out = step(" ".join(argv), lambda a=argv: _cli(root, *a)) or (None, "")
            lines = [ln for ln in out.splitlines() if ln.strip()]
            if code is not None and (len(lines) != 1 or code not in (0, 1)):
                res.raises.append(f"{' '.join(argv)}: exit {code}, {len(lines)} stdout lines")
            elif code is not None:
                step(f"{' '.join(argv)} json", lambda ln=lines[0]: json.loads(ln))
        listings: list[tuple[str, ...]] = [("episodes", "list"), ("device", "list"),
                                           ("lifecycle", "quarantine", "list"), ("episodes", "list", "--json"),
                                           ("device", "list", "--json")]
        for argv in listings:
            code, _ = step(" ".join(argv), lambda a=argv: _cli(root, *a)) or (None, "")
            if code not in (None, 0):
                res.raises.append(f"{' '.join(argv)}: exit {code}")
        for item_id in sorted(clean or {})[:200]:
            verb = "episodes" if item_id.startswith("ep_") else "device" if not item_id.startswith("mem_") else ""
            if verb:
                code, _ = step(f"{verb} show {item_id}", lambda v=verb, i=item_id: _cli(root, v, "show", i)) or (0, "")
                if code not in (0, 1):
                    res.raises.append(f"{verb} show {item_id}: exit {code}")
        with MemoryPlane.open(root) as plane:
            fixed = step("verify --fix", lambda: plane.verify(fix=True))
            after = step("inventory", lambda: inventory(plane)) or {}
            if fixed is not None and m is not None and m.mode == "field" and _droppable(m):
                gone = [f for f in fixed.fixed if "quarantined" in f and m.path in f]
                if gone:
                    res.silent_fix.append(f"{m.describe()}: {gone[0]}")
            step("gc", lambda: plane.gc())
            for goal in GOALS[:2]:
                step(f"retrieve after gc {goal!r}", lambda g=goal: plane.retrieve(MemoryRetrieveRequest(input=g)))
    finally:
        logger.removeHandler(watch)
    res.raises.extend(f"retrieve fell back: {s}" for s in watch.seen)
    if clean is not None:
        res.lost = [f"{i} ({where})" for i, where in sorted(clean.items())
                    if i not in after and not _may_lose(m, where)]
    return res, after


def _droppable(m: Mutation) -> bool:
    """Whether the mutated field is one an item can stand without (so the item must survive it)."""
    if m.mode != "field" or not m.key:
        return False
    if m.path.endswith(("index.yaml", ".jsonl")) or m.path in ("config.yaml", "lifecycle/retention.yaml"):
        return False  # derived or not an item: nothing to keep
    return m.key[0] not in ("id",)


def _may_lose(m: Mutation | None, where: str) -> bool:
    """Whether an item may be missing after this mutation: only the item of the file it made unreadable."""
    if m is None:
        return False
    if m.path.endswith(("index.yaml", ".jsonl")) or not where.endswith(m.path.split("/")[-1]):
        return False  # an index is derived and a log is not an item: no item may go with them
    return not (m.mode == "field" and _droppable(m))


# -- the strategies (hypothesis) ------------------------------------------------------------------------


def strategies(cat: dict[str, list[tuple[Any, ...]]]) -> Any:
    """A hypothesis strategy of Mutations over a catalogue of files and field paths."""
    from hypothesis import strategies as st

    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20), st.just(LARGE),
        st.dates(), st.datetimes(timezones=st.sampled_from([timezone.utc])), st.datetimes(),
        st.sampled_from(["", "active", "inactive", "../../etc/passwd", "2020-01-01T00:00:00Z", "-1", "yes",
                         "5", "45d", "forever"]))
    values = st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=6)
    files = sorted(cat)
    with_keys = [f for f in files if cat[f]]

    @st.composite
    def field_mutation(draw: Any) -> Mutation:
        f = draw(st.sampled_from(with_keys))
        return Mutation(f, "field", draw(st.sampled_from(cat[f])), draw(values))

    text = st.builds(lambda f, how, v: Mutation(f, "text", (), v, how), st.sampled_from(files),
                     st.sampled_from(["bom", "crlf", "not_utf8", "duplicate_key"]), st.integers(0, 20))
    whole = st.one_of(
        st.builds(lambda f, v: Mutation(f, "file", (), v, "value"), st.sampled_from(files), values),
        st.builds(lambda f: Mutation(f, "file", (), None, "empty"), st.sampled_from(files)),
        st.builds(lambda f, v: Mutation(f, "file", (), v, "torn"), st.sampled_from(files),
                  st.floats(min_value=0.05, max_value=0.95)),
        st.builds(lambda f, v: Mutation(f, "file", (), v, "random"), st.sampled_from(files),
                  st.binary(min_size=1, max_size=2000)))
    return st.one_of(field_mutation(), field_mutation(), field_mutation(), text, whole)


class Fixture:
    """The template tree, built once, and a fresh copy of it per example."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="memplane-fuzz-"))
        self.template = self.base / "template"
        build_template(self.template)
        self.catalogue = catalogue(self.template)
        work = self.copy()
        out, self.clean = exercise(work, None)
        shutil.rmtree(work.parent, ignore_errors=True)
        if not out.ok:
            raise RuntimeError(f"the clean tree already fails: {out}")
        self._n = 0

    def copy(self) -> Path:
        """A fresh copy of the template (symlinks copied as links, never followed)."""
        self._n = getattr(self, "_n", 0) + 1
        d = self.base / f"ex{self._n}"
        shutil.copytree(self.template, d / "memory", symlinks=True)
        return d / "memory"

    def run(self, m: Mutation) -> Outcome:
        """Apply one mutation to a copy and exercise it."""
        root = self.copy()
        try:
            apply(root, m)
            return exercise(root, m, self.clean)[0]
        finally:
            shutil.rmtree(root.parent, ignore_errors=True)

    def close(self) -> None:
        """Remove the template and every copy."""
        shutil.rmtree(self.base, ignore_errors=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """examples, raises, items_lost, silent_quarantines (goals: 0, 0, 0) and the first failures."""
    try:
        from hypothesis import HealthCheck, given, settings
    except ImportError as exc:  # pragma: no cover - hypothesis is in the dev extra
        from lifecycle import UsageError

        raise UsageError("bench fuzz needs hypothesis (pip install 'memory-plane[dev]')") from exc
    n = 40 if getattr(args, "short", False) else int(getattr(args, "examples", 0) or 500)
    seed = int(getattr(args, "seed", 0) or 0)
    fx = Fixture()
    totals: dict[str, Any] = {"examples": 0, "raises": 0, "items_lost": 0, "silent_quarantines": 0,
                              "files_in_tree": len(fx.catalogue),
                              "fields_in_tree": sum(len(v) for v in fx.catalogue.values())}
    failures: list[dict[str, Any]] = []
    t0 = time.perf_counter()

    @settings(max_examples=n, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(m=strategies(fx.catalogue))
    def one(m: Mutation) -> None:
        out = fx.run(m)
        totals["examples"] += 1
        totals["raises"] += bool(out.raises)
        totals["items_lost"] += len(out.lost)
        totals["silent_quarantines"] += len(out.silent_fix)
        if not out.ok and len(failures) < 10:
            failures.append({"mutation": m.describe(), "raises": out.raises[:2], "lost": out.lost[:3],
                             "silent_fix": out.silent_fix[:1]})

    from hypothesis import seed as hseed

    try:
        hseed(seed)(one)()
    finally:
        fx.close()
    totals["seconds"] = round(time.perf_counter() - t0, 1)
    totals["failures"] = failures
    return totals
