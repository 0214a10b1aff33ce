"""Item YAML codec: safe loading with bomb and depth limits, comment-preserving rewrites."""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML, YAMLError
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import LiteralScalarString

from ._errors import ParseError, YamlBombError

# A hand-written item has a few hundred nodes; 100k visits only comes from alias expansion.
NODE_BUDGET = 100_000
MAX_DEPTH = 64

_local = threading.local()


def _safe() -> YAML:
    # ruamel YAML objects are not thread-safe: one per thread.
    y = getattr(_local, "safe", None)
    if y is None:
        y = YAML(typ="safe")
        _local.safe = y
    return y


def _rt() -> YAML:
    y = getattr(_local, "rt", None)
    if y is None:
        y = YAML(typ="rt")
        y.allow_unicode = True
        y.width = 4096  # never fold long lines: grep must see whole values
        y.indent(mapping=2, sequence=4, offset=2)
        y.preserve_quotes = True
        _local.rt = y
    return y


def _error_line(exc: BaseException) -> int | None:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None and getattr(mark, "line", None) is not None:
        return int(mark.line) + 1
    return None


def decode_utf8(data: bytes, path: str | Path | None) -> str:
    """Decode UTF-8 (a BOM is dropped) or raise ParseError with the line of the bad byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ParseError(path, line, f"not valid UTF-8 (byte 0x{data[exc.start]:02x})") from None
    return text[1:] if text.startswith("\ufeff") else text


def check_budget(obj: Any, path: str | Path | None = None) -> None:
    """Raise YamlBombError if walking obj (aliases expanded) visits too many nodes or nests too deep."""
    count = 0
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > NODE_BUDGET:
            raise YamlBombError(path, None, f"more than {NODE_BUDGET} nodes after alias expansion")
        if depth > MAX_DEPTH:
            raise YamlBombError(path, None, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, Mapping):
            stack.extend((v, depth + 1) for v in node.values())
            stack.extend((k, depth + 1) for k in node if isinstance(k, (tuple, list, Mapping)))
        elif isinstance(node, (list, tuple)):
            stack.extend((v, depth + 1) for v in node)


def load_yaml(text: str, path: str | Path | None = None) -> Any:
    """Parse YAML safely (no object-building tags); ParseError names the file and line."""
    try:
        data = _safe().load(text)
    except YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ParseError(path, _error_line(exc), f"invalid YAML: {problem}") from None
    except RecursionError:
        raise YamlBombError(path, None, "nested too deeply to parse") from None
    except (ValueError, TypeError) as exc:  # e.g. an impossible date such as 2026-02-31
        raise ParseError(path, None, f"invalid YAML value: {exc}") from None
    check_budget(data, path)
    return data


def load_yaml_file(path: str | Path) -> Any:
    """Read and safely parse a YAML file (UTF-8 only)."""
    from ._atomic import read_bytes_nofollow

    return load_yaml(decode_utf8(read_bytes_nofollow(path), path), path)


def _to_commented(value: Any) -> Any:
    if isinstance(value, Mapping):
        cm = CommentedMap()
        for k, v in value.items():
            cm[k] = _to_commented(v)
        return cm
    if isinstance(value, (list, tuple)):
        return CommentedSeq(_to_commented(v) for v in value)
    if isinstance(value, str) and "\n" in value:
        return LiteralScalarString(value.replace("\r\n", "\n"))
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def _merge_into(target: CommentedMap, new: Mapping[str, Any]) -> None:
    # Update in place so comments and the order a person gave the keys survive.
    for key in list(target.keys()):
        if key not in new:
            del target[key]
    for key, value in new.items():
        if key in target:
            old = target[key]
            if isinstance(old, CommentedMap) and isinstance(value, Mapping):
                _merge_into(old, value)
                continue
            if _plain(old) == _plain(value):
                continue
        target[key] = _to_commented(value)


def dump_yaml(data: Mapping[str, Any], existing_text: str | None = None) -> str:
    """Render a mapping as block YAML; when rewriting, keep the old file's comments and key order."""
    doc: Any = None
    if existing_text:
        try:
            doc = _rt().load(existing_text)
        except YAMLError:
            doc = None
    if isinstance(doc, CommentedMap):
        _merge_into(doc, data)
    else:
        doc = _to_commented(data)
    buf = io.StringIO()
    _rt().dump(doc, buf)
    return buf.getvalue()
