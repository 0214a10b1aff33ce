"""How `bench fuzz` breaks a tree: the mutations, the files and field paths they apply to, their strategies."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

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


# -- the files and their fields --------------------------------------------------------------------------


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
    from memory_plane.lifecycle import load_yaml

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


def droppable(m: Mutation) -> bool:
    """Whether the mutated field is one an item can stand without (so the item must survive it)."""
    if m.mode != "field" or not m.key:
        return False
    if m.path.endswith(("index.yaml", ".jsonl")) or m.path in ("config.yaml", "lifecycle/retention.yaml"):
        return False  # derived or not an item: nothing to keep
    return m.key[0] not in ("id",)


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
