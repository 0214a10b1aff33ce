"""Item YAML codec: safe loading with bomb and depth limits, comment-preserving rewrites."""

from __future__ import annotations

import functools
import io
import json
import math
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML, YAMLError
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString

from ._errors import OversizeError, ParseError, YamlBombError
from ._yaml_events import FALLBACK, from_events

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


MAX_ITEM_BYTES = 1 << 20
"""An item file (a memory, an episode.yaml, a device profile) larger than this is not loaded: no memory
is near it (a long-term memory is cut to about 4,000 characters), and a 50 MB file would cost every
verify seconds and hundreds of MB. Verify names it (category ``oversize``)."""


def read_item_text(path: str | Path, limit: int = MAX_ITEM_BYTES) -> str:
    """An item file's text (never through a symlink); OversizeError over the limit, ParseError if not UTF-8."""
    from ._atomic import read_bytes_nofollow

    data = read_bytes_nofollow(path, limit + 1)
    if len(data) > limit:
        try:
            size = os.lstat(path).st_size
        except OSError:
            size = len(data)
        raise OversizeError(path, None, f"{size} bytes, over the {limit}-byte limit of an item file: not loaded "
                                        "(split or shorten it)")
    return decode_utf8(data, path)


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


try:  # the C parser with the safe constructor and YAML 1.2 rules, as YAML(typ="safe") uses,
    # but with the loader class built once: YAML().load builds a new class on every call.
    from ruamel.yaml.clib._ruamel_yaml import CParser as _CParser
    from ruamel.yaml.constructor import SafeConstructor as _SafeConstructor
    from ruamel.yaml.resolver import Resolver as _Resolver  # holds the YAML 1.2 implicit rules

    class _Loader(_CParser, _SafeConstructor, _Resolver):  # type: ignore[misc]
        # The constructor asks the resolver for the version to decide on octals, sexagesimals and
        # YAML 1.1 float warnings: answer 1.2, the rules this resolver holds.
        processing_version = (1, 2)

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            self._parser = self._composer = self
            _SafeConstructor.__init__(self, loader=self)
            self.allow_duplicate_keys = False
            _Resolver.__init__(self, loadumper=self)

    _CSafeLoader: Any = _Loader
except ImportError:  # pragma: no cover - without ruamel.yaml.clib
    _CSafeLoader = None


def _safe_load(text: str) -> tuple[Any, bool]:
    """The document, and whether it was built from the parser's events (which kept it within the node and depth
    budget as it went: an alias, which alone can make a small file a large document, is never built there)."""
    if _CSafeLoader is None:
        return _safe().load(text), False
    loader = _CSafeLoader(text)
    try:
        data = from_events(loader, NODE_BUDGET, MAX_DEPTH)
        if data is not FALLBACK:
            return data, True
    finally:
        loader.dispose()
    loader = _CSafeLoader(text)
    try:
        return loader.get_single_data(), False
    finally:
        loader.dispose()


def load_yaml(text: str, path: str | Path | None = None) -> Any:
    """Parse YAML safely (no object-building tags); ParseError names the file and line."""
    try:
        data, within_budget = _safe_load(text)
    except YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ParseError(path, _error_line(exc), f"invalid YAML: {problem}") from None
    except RecursionError:
        raise YamlBombError(path, None, "nested too deeply to parse") from None
    except (ValueError, TypeError) as exc:  # e.g. an impossible date such as 2026-02-31
        raise ParseError(path, None, f"invalid YAML value: {exc}") from None
    if not within_budget:  # built from events, it was counted as it was built: not walked again
        check_budget(data, path)
    return data


def load_yaml_file(path: str | Path) -> Any:
    """Read and safely parse a YAML file (UTF-8 only)."""
    from ._atomic import read_bytes_nofollow

    return load_yaml(decode_utf8(read_bytes_nofollow(path), path), path)


def round_float(value: float) -> float:
    """A float as people read it: 0.7000000000000001 (arithmetic noise past 15 significant digits) is 0.7."""
    rounded = float(f"{value:.15g}")
    return rounded if math.isfinite(rounded) else value  # near the largest float, rounding would overflow


def _to_commented(value: Any) -> Any:
    # Values written into a hand-edited file are quoted exactly as the plain emitter would quote them,
    # so a file does not flip between `"聊天:王五"` and `聊天:王五` depending on who last wrote it.
    if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")):
        return round_float(value)
    if isinstance(value, str) and "\n" not in value and _scalar(value).startswith('"'):
        return DoubleQuotedScalarString(value)
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


# Longer keys are written as explicit ("? key") keys, which have no length limit.
MAX_SIMPLE_KEY = 1000

_RESERVED = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~", "nan", "inf"})


@functools.cache
def _scalar_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """(a plain scalar, a scalar YAML would read as a number or date, a character YAML forbids raw), compiled on
    the first write: classes over the whole BMP take milliseconds to compile, and a process that only reads
    (the agent's first retrieve) writes no YAML."""
    return (re.compile(r"^[A-Za-z_\u00c0-\uffff][\w\u00c0-\uffff .,/@()+=-]*$"),
            re.compile(r"^[-+]?(\d[\d_]*)?(\.\d*)?([eE][-+]?\d+)?$|^0[xob]|^\d{4}-\d\d-\d\d|^\d+:\d"),
            re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]"))


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return ".nan"
        if value in (float("inf"), float("-inf")):
            return ".inf" if value > 0 else "-.inf"
        return repr(round_float(value))
    return _text_scalar(str(value))


@functools.lru_cache(maxsize=8192)
def _text_scalar(text: str) -> str:
    """A text as a YAML scalar: plain when YAML reads it back as this text, else double-quoted. Kept per text (a
    bounded cache): a file's keys and most of its values are those of the files written before it."""
    plain, numberish, unsafe = _scalar_patterns()
    if (plain.match(text) and text.lower() not in _RESERVED and not numberish.match(text)
            and not text.endswith((" ", ":")) and ": " not in text and " #" not in text and text.strip() == text
            and unsafe.search(text) is None and len(text) < 2000):
        return text
    # A JSON string is a valid YAML double-quoted scalar; escape what YAML forbids raw.
    quoted = json.dumps(text, ensure_ascii=False)
    return unsafe.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def _emit(value: Any, indent: int, out: list[str]) -> None:
    pad = " " * indent
    if isinstance(value, Mapping):
        for k, v in value.items():
            key = _scalar(k)
            if len(key) > MAX_SIMPLE_KEY:
                # A YAML reader refuses an implicit key over 1,024 characters: the whole file would stop
                # parsing (a long page name as a key once hid everything an app profile had learned).
                out.append(f"{pad}? {key}")
                key = ""
            if isinstance(v, Mapping) and v:
                out.append(f"{pad}{key}:")
                _emit(v, indent + 2, out)
            elif isinstance(v, (list, tuple)) and v:
                out.append(f"{pad}{key}:")
                _emit(list(v), indent + 2, out)
            else:
                out.append(f"{pad}{key}: {_inline_empty(v)}")
    else:
        for item in value:
            if isinstance(item, Mapping) and item:
                sub: list[str] = []
                _emit(item, indent + 2, sub)
                sub[0] = f"{pad}- {sub[0][indent + 2:]}"
                out.extend(sub)
            elif isinstance(item, (list, tuple)) and item:
                out.append(f"{pad}-")
                _emit(list(item), indent + 2, out)
            else:
                out.append(f"{pad}- {_inline_empty(item)}")


def _inline_empty(v: Any) -> str:
    if isinstance(v, Mapping):
        return "{}"
    if isinstance(v, (list, tuple)):
        return "[]"
    return _scalar(v)


def emit_block_yaml(data: Mapping[str, Any]) -> str:
    """Block-style YAML of plain data (dicts, lists, scalars) in the given key order, fast."""
    if not data:
        return "{}\n"
    out: list[str] = []
    _emit(data, 0, out)
    return "\n".join(out) + "\n"


_TOP_KEY = re.compile(r"^([^\s#:-][^:]*):", re.MULTILINE)


def _hand_edited(existing_text: str, data: Mapping[str, Any]) -> bool:
    # Comments, or top-level keys in an order we would not write, mean a person shaped the file. A "#" in
    # a value ("Call #3") is not a comment: a file that is exactly what the emitter writes for its own
    # content was not touched by hand, and needs no comment-keeping (slow, pure-Python) rewrite.
    if "#" in existing_text and not _emitted_by_us(existing_text):
        return True
    keys = [k.strip().strip("'\"") for k in _TOP_KEY.findall(existing_text)]
    ours = [k for k in data if k in keys]
    theirs = [k for k in keys if k in data]
    return ours != theirs


def _emitted_by_us(text: str) -> bool:
    try:
        content = load_yaml(text)
    except ParseError:
        return False
    return isinstance(content, Mapping) and emit_block_yaml(content) == text


def dump_yaml(data: Mapping[str, Any], existing_text: str | None = None) -> str:
    """Render a mapping as block YAML; when rewriting, keep the old file's comments and key order."""
    if not existing_text or not _hand_edited(existing_text, data):
        return emit_block_yaml(data)
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
