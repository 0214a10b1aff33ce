"""Record-time action labels, screen hashes, UI text diffs, same-turn envelopes and the token meter."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import read_bytes_nofollow, safe_join

from ._inputs import InputCleaner


def hit_test(x: float, y: float, elements: Iterable[Mapping[str, Any]]) -> str | None:
    """Label of the smallest element whose bounds contain the point (``bounds`` = [x0, y0, x1, y1])."""
    best: tuple[float, str] | None = None
    for e in elements:
        b = e.get("bounds") or e.get("box")
        label = e.get("label") or e.get("text") or e.get("content_desc")
        if not label or not isinstance(b, (list, tuple)) or len(b) != 4:
            continue
        try:
            x0, y0, x1, y1 = (float(v) for v in b)
        except (TypeError, ValueError):
            continue
        if x0 <= x <= x1 and y0 <= y <= y1:
            area = max(0.0, (x1 - x0) * (y1 - y0))
            if best is None or area < best[0]:
                best = (area, str(label))
    return best[1] if best else None


def label_action(args: Mapping[str, Any], elements: Iterable[Mapping[str, Any]] | None,
                 ocr: Iterable[Mapping[str, Any]] | None = None) -> tuple[str | None, str]:
    """(label, source) of an action: named by the model (index), hit-tested on the UI list, OCR, or none."""
    named = args.get("target_label") or args.get("target_text")
    if named:
        return str(named), "index"
    if "x" not in args or "y" not in args:
        return None, "none"
    try:
        x, y = float(args["x"]), float(args["y"])
    except (TypeError, ValueError):
        return None, "none"
    if elements:
        label = hit_test(x, y, elements)
        if label:
            return label, "hit_test"
    if ocr:
        label = hit_test(x, y, ocr)
        if label:
            return label, "ocr"
    return None, "none"


def ui_diff(before: Iterable[str] | None, after: Iterable[str] | None) -> dict[str, list[str]] | None:
    """Text that appeared and disappeared between two UI text lists (None when either is unknown)."""
    if before is None or after is None:
        return None
    b, a = list(dict.fromkeys(before)), list(dict.fromkeys(after))
    return {"appeared": [t for t in a if t not in b][:30], "disappeared": [t for t in b if t not in a][:30]}


_ERROR_LINE = re.compile(r"\b(error|exception|traceback|fatal|denied|not found|timeout|refused)\b", re.IGNORECASE)


def envelope(output: str, *, limit_chars: int, limit_lines: int, limit_tokens: int,
             patterns: Iterable[str] = (), full_ref: str | None = None) -> dict[str, Any] | None:
    """A bounded stand-in for an oversized tool output (None when it fits): matched lines, errors, tail."""
    lines = output.splitlines()
    tokens = estimate_text_tokens(output)
    if len(output) <= limit_chars and len(lines) <= limit_lines and tokens <= limit_tokens:
        return None
    pats = [re.compile(p, re.IGNORECASE) for p in patterns]
    important = [ln[:300] for ln in lines if any(p.search(ln) for p in pats)][:20]
    errors = [ln[:300] for ln in lines if _ERROR_LINE.search(ln)][:20]
    head = [ln[:300] for ln in lines[:5]]
    tail = [ln[:300] for ln in lines[-10:]]
    return {"status": "error" if errors else "ok", "important_lines": important or head, "errors": errors,
            "tail": tail, "full_result_ref": full_ref, "truncated": True, "original_chars": len(output),
            "original_lines": len(lines)}


SCREENSHOT_READ_BYTES = 32 << 20  # a screenshot hashed here is read up to this size (larger: not hashed)


def image_dhash(episode_dir: Path, ref: str, clean: InputCleaner | None = None) -> str | None:
    """The 64-bit dHash (hex) of an image file of the episode (``ref`` relative to it), read without following
    a link; None when it is missing, too large or not an image (said once through ``clean``)."""
    from .._artifacts import inspect_image

    try:
        raw = read_bytes_nofollow(safe_join(episode_dir, ref), max_bytes=SCREENSHOT_READ_BYTES + 1)
        if len(raw) > SCREENSHOT_READ_BYTES:
            raise ValueError("screenshot too large to hash")
        return inspect_image(raw)[2]
    except Exception as exc:  # a screen that cannot be hashed only loses its hint, never the step
        if clean is not None and not isinstance(exc, FileNotFoundError):
            clean.note("screenshot for its dHash", f"{ref}: {type(exc).__name__}: {exc}")
        return None


def estimate_text_tokens(text: str) -> int:
    """Heuristic tokens of text: characters / 4 (CJK counts one token a character)."""
    cjk = sum(1 for c in text if "\u3400" <= c <= "\u9fff")
    return math.ceil((len(text) - cjk) / 4) + cjk


def estimate_image_tokens(width: int | None, height: int | None) -> int:
    """Heuristic tokens of an image: 258 per 768x768 tile (Gemini's rule), 258 when the size is unknown."""
    if not width or not height:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


@dataclass
class TokenMeter:
    """The last prompt size the runtime measured, plus a heuristic for what was added since."""

    measured: int | None = None
    added_since: int = 0

    def observe_usage(self, prompt_tokens: int | None) -> None:
        """A model call reported its prompt size: that becomes the base again."""
        if prompt_tokens is not None:
            self.measured = int(prompt_tokens)
            self.added_since = 0

    def add(self, tokens: int) -> None:
        """Content appended since the last measurement."""
        self.added_since += max(0, tokens)

    def estimate(self, fallback: int = 0) -> int:
        """Measured base plus increments (the heuristic total when nothing was measured yet)."""
        if self.measured is None:
            return fallback
        return self.measured + self.added_since
