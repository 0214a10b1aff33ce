"""The neutral contract of model-written summaries: the banned outcome words live here, and only here."""

from __future__ import annotations

import re

# Words that judge an outcome. A summary describes what was on the screen and what was done; whether
# it worked is the Validator's call (a lens that judged would contradict it).
BANNED_WORDS: tuple[str, ...] = (
    "successfully", "successful", "success", "succeeded", "completed", "complete", "completion", "entered",
    "navigated to", "navigated", "failed", "failure", "unsuccessful", "could not", "couldn't", "achieved",
    "accomplished", "managed to", "finished", "成功", "完成", "失败", "已进入", "进入了", "导航到",
)
_BANNED = re.compile("|".join(rf"\b{re.escape(w)}\b" if w.isascii() else re.escape(w) for w in BANNED_WORDS),
                     re.IGNORECASE)
MIN_CHARS = 15
MAX_CHARS = 1500


def banned_words_in(text: str) -> list[str]:
    """The outcome words a text uses (empty when it is neutral)."""
    return sorted({m.group(0).lower() for m in _BANNED.finditer(text)})


def degenerate_reason(text: str, markers: tuple[str, ...] = ()) -> str | None:
    """Why an output is unusable (too short, too long, echoing prompt markers), or None."""
    stripped = text.strip()
    if len(stripped) < MIN_CHARS:
        return f"shorter than {MIN_CHARS} characters"
    if len(stripped) > MAX_CHARS:
        return f"longer than {MAX_CHARS} characters"
    for m in markers:
        if m and m in stripped:
            return f"echoes the prompt marker {m!r}"
    return None


# A summary enters the agent's own context: one that reads like instructions (a heading, "ignore previous",
# a tool call, a role line), which screen text can smuggle into a lens's output, is rejected.
_INSTRUCTION_LIKE = re.compile(
    r"(^|\n)\s*#{1,6}\s|ignore (all |the )?(previous|above|prior)|disregard (all |the )?(previous|above)|"
    r"(^|\n)\s*(system|assistant|user)\s*:|<\s*/?\s*(tool|function|system)[^>]*>|\b(function_call|tool_call)\b|"
    r"\brecall_history\s*\(|\byou must now\b|忽略(之前|以上|前面)",
    re.IGNORECASE)


def instruction_like(text: str) -> str | None:
    """The first instruction-like fragment of a lens output, or None."""
    m = _INSTRUCTION_LIKE.search(text)
    return m.group(0).strip() if m else None


def check_summary(text: str, markers: tuple[str, ...] = ()) -> str | None:
    """None if a summary may be used, else the reason to reject it."""
    bad = banned_words_in(text)
    if bad:
        return "uses outcome words: " + ", ".join(bad)
    injected = instruction_like(text)
    if injected:
        return f"reads like an instruction ({injected[:40]!r})"
    return degenerate_reason(text, markers)
