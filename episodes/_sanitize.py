"""Make tool inputs, outputs and observations safe to store: no base64, bounded, redacted."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from typing import Any

from memory_plane.lifecycle import as_text

MAX_STRING = 2000        # longest string kept whole in an event
EXCERPT_HEAD = 1500
EXCERPT_TAIL = 300
MAX_DEPTH = 12
MAX_ITEMS = 200          # list items / mapping keys kept per container
MAX_VISIBLE_TEXT = 80    # lines of UI text kept per observation
REDACTED = "[redacted]"
NAME_KEYS: tuple[str, ...] = ("app", "page", "package", "activity", "app_name", "page_name", "field_type",
                               "input_method", "login_state")
TEXT_KEYS: tuple[str, ...] = ("text", "query", "keyword", "input", "value", "content", "password")

_DATA_URI = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+);base64,(?P<b64>[A-Za-z0-9+/=\s]{16,})")
_B64_RUN = re.compile(r"[A-Za-z0-9+/]{200,}={0,2}")


def excerpt(text: str, limit: int = MAX_STRING, *, total: int | None = None) -> str:
    """Bound a string: head and tail kept, the middle replaced by a count (of ``total`` chars, if given)."""
    if len(text) <= limit:
        return text
    head = max(1, min(EXCERPT_HEAD, limit - EXCERPT_TAIL - 40))
    tail = min(EXCERPT_TAIL, max(0, limit - head - 40))
    omitted = (total or len(text)) - head - tail
    return f"{text[:head]}…[{omitted} chars omitted]…{text[len(text) - tail:] if tail else ''}"


def _decode_b64(blob: str) -> bytes | None:
    try:
        return base64.b64decode(re.sub(r"\s+", "", blob), validate=True)
    except (binascii.Error, ValueError):
        return None


ImageSink = Callable[[bytes], str | None]
"""Stores decoded image bytes found in text and returns its artifact ref (or None)."""


def scrub_base64(text: str, sink: ImageSink | None = None) -> str:
    """Replace base64 blobs: images go to artifacts through ``sink``, the rest are omitted."""

    def data_uri(m: re.Match[str]) -> str:
        raw = _decode_b64(m.group("b64"))
        if raw is None:
            return f"[base64: {len(m.group('b64'))} chars omitted]"
        if sink is not None and m.group("mime").startswith("image/"):
            ref = sink(raw)
            if ref:
                return f"[image: {ref}]"
        return f"[base64: {len(raw)} bytes omitted]"

    def run(m: re.Match[str]) -> str:
        blob = m.group(0)
        raw = _decode_b64(blob)
        if raw is None:
            return blob if not _looks_random(blob) else f"[base64: {len(blob)} chars omitted]"
        if sink is not None and _image_format(raw):
            ref = sink(raw)
            if ref:
                return f"[image: {ref}]"
        if not _image_format(raw) and not _looks_random(blob):
            return blob  # a long word of letters is text, not an encoded blob
        return f"[base64: {len(raw)} bytes omitted]"

    if len(text) < 200 and "base64," not in text:
        return text
    text = _DATA_URI.sub(data_uri, text)
    return _B64_RUN.sub(run, text)


def _looks_random(blob: str) -> bool:
    # A 200+ char run of base64 alphabet with mixed case and digits is not prose.
    return any(c.isdigit() for c in blob) and any(c.isupper() for c in blob) and any(c.islower() for c in blob)


def _image_format(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    return None


image_format = _image_format


def sanitize(value: Any, sink: ImageSink | None = None, *, depth: int = 0, limit: int = MAX_STRING) -> Any:
    """Turn any value into bounded JSON data: base64 moved out, bytes and deep nesting summarised."""
    if depth > MAX_DEPTH:
        return "[nested too deep]"
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, str):
        text = value.replace("\x00", "")
        # Lone surrogates (from undecodable input) would make the file unwritable as UTF-8.
        text = text.encode("utf-8", "replace").decode("utf-8")
        if len(text) > 4 * limit:
            # Only the head and the tail are kept: the middle of a 5 MB value is never scanned.
            total = len(text)
            joined = (scrub_base64(text[: 2 * limit], sink) + f"…[{total - 3 * limit} chars omitted]…"
                      + scrub_base64(text[-limit:], sink))
            return excerpt(joined, limit, total=total) if len(joined) > limit else joined
        return excerpt(scrub_base64(text, sink), limit)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if sink is not None and _image_format(raw):
            ref = sink(raw)
            if ref:
                return f"[image: {ref}]"
        return f"[bytes: {len(raw)} omitted]"
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= MAX_ITEMS:
                out["…"] = f"[{len(value) - MAX_ITEMS} more keys omitted]"
                break
            key = sanitize(k, None, depth=depth + 1, limit=200) if not isinstance(k, str) else k[:200]
            out[str(key)] = sanitize(v, sink, depth=depth + 1, limit=limit)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        seq = list(value)
        items = [sanitize(v, sink, depth=depth + 1, limit=limit) for v in seq[:MAX_ITEMS]]
        if len(seq) > MAX_ITEMS:
            items.append(f"[{len(seq) - MAX_ITEMS} more items omitted]")
        return items
    return excerpt(str(value), limit)


def redact_text_fields(tool_input: Any) -> Any:
    """Replace typed text in a tool input by ``[redacted]`` (sensitive fields)."""
    if isinstance(tool_input, Mapping):
        return {k: (REDACTED if k in TEXT_KEYS and v not in (None, "") else redact_text_fields(v))
                for k, v in tool_input.items()}
    if isinstance(tool_input, str):
        return REDACTED if tool_input else tool_input
    return tool_input


def normalize_observation(obs: Any) -> dict[str, Any] | None:
    """Bound an observed_state into a dict with app/page/package/visible_text keys."""
    if obs is None:
        return None
    if not isinstance(obs, Mapping):
        return {"value": excerpt(str(obs), 200)}
    out = sanitize(obs)
    # Accept both the contract's names (app, page) and Go's (app_name, page_name).
    if "app" not in out and isinstance(out.get("app_name"), str):
        out["app"] = out["app_name"]
    if "page" not in out and isinstance(out.get("page_name"), str):
        out["page"] = out["page_name"]
    for key in NAME_KEYS:
        # These become fields of episode.yaml (initial_state.app ...): what the phone reported as a
        # number or a list is read as text; a shape that cannot be is kept aside under <key>_raw.
        if key not in out or out[key] is None or isinstance(out[key], str):
            continue
        text = as_text(out[key])
        if isinstance(text, str):
            out[key] = text
        else:
            out[f"{key}_raw"] = out.pop(key)
    vt = out.get("visible_text")
    if isinstance(vt, list) and len(vt) > MAX_VISIBLE_TEXT:
        out["visible_text"] = [*vt[:MAX_VISIBLE_TEXT], f"[{len(vt) - MAX_VISIBLE_TEXT} more omitted]"]
    return out
