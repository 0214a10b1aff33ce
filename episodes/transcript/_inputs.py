"""What the runtime hands the ledger, made safe to keep: the ledger never raises because of its input.

Like the recorder, the ledger sanitises or drops what it cannot use (a dhash that is not hex, elements
that are not mappings, NaN in an argument) and says so once per kind in the log, instead of storing a
value that makes a later ``render()`` or compaction fail.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .._sanitize import sanitize

log = logging.getLogger("memory_plane")

_HEX = re.compile(r"^[0-9a-f]{1,64}$")
NOTE_EXCERPT_CHARS = 300  # what a step keeps of a note's content (the note itself is in the notes system)
TOOL_OUTPUT_CHARS = 1_000_000  # what a step keeps of one tool output: its start and, past this, its end


class InputCleaner:
    """Cleans stage/commit arguments; each kind of odd input is logged once per ledger."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._warned: set[str] = set()

    def note(self, what: str, value: Any) -> None:
        """Log one line the first time a kind of input is dropped or changed."""
        if what in self._warned:
            return
        self._warned.add(what)
        log.warning("transcript %s: %s %r not usable as given; sanitised (logged once)", self.where, what,
                    str(value)[:80])

    def text(self, what: str, value: Any, limit: int = 8000) -> str | None:
        """A text argument as a bounded string, or None."""
        if value is None:
            return None
        if not isinstance(value, str):
            self.note(what, value)
            if isinstance(value, (dict, list, tuple, set)):
                return None
            value = str(value)
        out = sanitize(value, limit=limit)
        return out if isinstance(out, str) else None

    def output(self, what: str, value: Any) -> str | None:
        """A tool's output as a bounded string: whole up to ``TOOL_OUTPUT_CHARS``, else its start and its last
        tenth with the count of what was left out between (not the short head and tail ``text`` keeps: the full
        output is saved for recall_history, which searches its lines)."""
        if isinstance(value, str) and len(value) > TOOL_OUTPUT_CHARS:
            self.note(what, f"{len(value)} characters")
            tail = TOOL_OUTPUT_CHARS // 10
            value = (value[:TOOL_OUTPUT_CHARS - tail] + f"\n…[{len(value) - TOOL_OUTPUT_CHARS} chars omitted]…\n"
                     + value[-tail:])
        return self.text(what, value, TOOL_OUTPUT_CHARS + 100)

    def texts(self, what: str, value: Any, limit: int = 200) -> list[str]:
        """A list-of-text argument (a single string counts as one item); other items dropped."""
        if value is None:
            return []
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            self.note(what, value)
            value = [value]
        out: list[str] = []
        for v in value:
            t = self.text(what, v, limit=2000) if v is not None else None
            if t:
                out.append(t)
            if len(out) >= limit:
                break
        return out

    def notes(self, value: Any, args: Mapping[str, Any] | None) -> tuple[list[str], dict[str, str]]:
        """The note keys a step wrote and an excerpt of each one's content: ``(keys, {key: excerpt})``.

        Each item is a key, or a mapping with ``key`` (or ``path``/``name``) and ``content`` (or ``text``). A key
        given alone whose value is one of the action's arguments (a ``save_note(key=…, content=…)`` step) takes
        the action's longest other text argument as its content."""
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
            value = [] if value is None else [value]
        keys: list[str] = []
        excerpts: dict[str, str] = {}
        texts = [v for v in (args or {}).values() if isinstance(v, str) and v.strip()]
        for item in list(value)[:200]:
            content: Any = None
            if isinstance(item, Mapping):
                key = self.text("notes_written", next((item[k] for k in ("key", "path", "name") if item.get(k)), None),
                                300)
                content = next((item[k] for k in ("content", "text") if item.get(k) is not None), None)
            else:
                key = self.text("notes_written", item, 300)
                if key and key in texts:
                    content = max((t for t in texts if t != key), key=len, default=None)
            if not key:
                continue
            if key not in keys:
                keys.append(key)
            if isinstance(content, str):
                # The start of the note: a longer text given to ``text`` would keep its last lines instead.
                content = content[:4 * NOTE_EXCERPT_CHARS]
            excerpt = self.text("note content", content, 4 * NOTE_EXCERPT_CHARS) if content is not None else None
            if excerpt and excerpt.strip():
                one = " ".join(excerpt.split())
                excerpts[key] = one if len(one) <= NOTE_EXCERPT_CHARS else one[: NOTE_EXCERPT_CHARS - 1] + "…"
        return keys, excerpts

    def mappings(self, what: str, value: Any, limit: int = 400) -> list[dict[str, Any]]:
        """A list of mappings (UI elements, recovery attempts); anything else is dropped."""
        if value is None:
            return []
        if isinstance(value, Mapping):
            value = [value]
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            self.note(what, value)
            return []
        out: list[dict[str, Any]] = []
        for v in value:
            if not isinstance(v, Mapping):
                self.note(what, v)
                continue
            out.append(self.mapping(what, v) or {})
            if len(out) >= limit:
                break
        return out

    def mapping(self, what: str, value: Any) -> dict[str, Any] | None:
        """A mapping as JSON-safe data (NaN, bytes, base64 and deep nesting made safe), or None."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.note(what, value)
            return None
        clean = sanitize({str(k): v for k, v in value.items()})
        if _has_non_finite(value):
            self.note(what, value)
        return clean if isinstance(clean, dict) else None

    def size(self, what: str, value: Any) -> int | None:
        """A screen dimension: a positive integer, or None."""
        if value is None:
            return None
        try:
            n = int(value)
        except (TypeError, ValueError, OverflowError):
            self.note(what, value)
            return None
        if n <= 0 or n > 100_000:
            self.note(what, value)
            return None
        return n

    def revision(self, value: Any) -> int | str | None:
        """A plan revision: a non-negative integer, or a short label such as "rev-1"; else None."""
        if value is None or isinstance(value, bool):
            return None
        if isinstance(value, int):
            if 0 <= value <= 10**9:
                return value
            self.note("plan_revision", value)
            return None
        if isinstance(value, str):
            v = value.strip()
            if v.isdigit() and len(v) <= 9:
                return int(v)
            if v and len(v) <= 64 and re.fullmatch(r"[\w.:#/-]+", v):
                return v
        self.note("plan_revision", value)
        return None

    def signature(self, value: Any) -> str | None:
        """A thought signature as base64 text (bytes are encoded; anything else is dropped)."""
        import base64

        if value is None or value == b"" or value == "":
            return None
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(bytes(value)).decode("ascii")
        if isinstance(value, str) and len(value) <= 100_000:
            return value
        self.note("thought_signature", value)
        return None

    def dhash(self, value: Any) -> str | None:
        """A perceptual hash as lowercase hex (an int is converted), or None."""
        if value is None or value == "":
            return None
        if isinstance(value, bool):
            self.note("dhash", value)
            return None
        if isinstance(value, int):
            return format(value, "016x") if value >= 0 else None
        if isinstance(value, str):
            h = value.strip().lower().removeprefix("0x")
            if _HEX.match(h):
                return h
        self.note("dhash", value)
        return None


def _has_non_finite(value: Any, depth: int = 0) -> bool:
    if depth > 8:
        return False
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_has_non_finite(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_non_finite(v, depth + 1) for v in value)
    return False
