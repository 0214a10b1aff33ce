"""The one quoting rule for stored text that a model or another agent reads: data on one line.

Stored text (a memory, a page or app name, a tool's output) may hold anything a person, a model or a
screen put there: line breaks that start a markdown heading, bidi overrides that show text backwards,
invisible characters that hide words from a reader but not from a model. Every reader of the tree
(the prompt block, every tool answer, MCP resources, ``profile.md``) passes stored text through
``one_line`` or ``quote_text``, so the rule is written once:

- characters of the Unicode categories Cf (format: bidi controls, zero-width characters, U+00AD,
  U+061C, U+180E, U+2060, U+FEFF, the tag characters), Co (private use) and Cs (surrogates), and the
  whole tag block U+E0000–E007F (assigned or not), are removed;
- Cc (control characters, tab and line breaks among them) and the line and paragraph separators
  (Zl, Zp) become a space, so the words they separated stay apart;
- runs of whitespace fold into one space, the ends are trimmed.

``quote_text`` then puts the line between « and » (turning any « or » inside into ") and cuts it to a
length, so stored text can never close its quotes, start a line, or pass for an instruction.
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["one_line", "quote_text", "strip_unsafe"]

_REMOVED = frozenset({"Cf", "Co", "Cs"})
_SPACED = frozenset({"Cc", "Zl", "Zp"})
# Planes 0 and 1 and the special-purpose plane 14 hold every assigned Cc, Cf, Cs, Zl and Zp character;
# the other planes hold letters (2, 3) or private use only (15, 16), added as whole ranges below.
_SCANNED = (range(0x0, 0x20000), range(0xE0000, 0xE1000))
_PRIVATE_PLANES = ((0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))
_TAG_BLOCK = (0xE0000, 0xE007F)


def _ranges(points: list[int]) -> list[tuple[int, int]]:
    """Sorted code points as (first, last) runs."""
    out: list[tuple[int, int]] = []
    for p in sorted(set(points)):
        if out and out[-1][1] == p - 1:
            out[-1] = (out[-1][0], p)
        else:
            out.append((p, p))
    return out


def _char_class(runs: list[tuple[int, int]]) -> re.Pattern[str]:
    # One character per match, no "+": a plain class over the BMP compiles to a bitmap that sre scans in C,
    # several times faster than a repeated class (the block quotes every line on every retrieve).
    parts = "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in runs)
    return re.compile(f"[{parts}]")


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], frozenset[str]]:
    """(every character of the rule within the BMP, those beyond it, the ones that become a space).

    Built once from ``unicodedata`` on first use, not at import: the scan takes tens of milliseconds that a
    CLI command reading no stored text should not pay. Two classes, because a class reaching past U+FFFF
    is checked range by range, while one within the BMP is a bitmap."""
    removed: list[int] = []
    spaced: list[int] = []
    for block in _SCANNED:
        for cp in block:
            cat = unicodedata.category(chr(cp))
            if cat in _REMOVED:
                removed.append(cp)
            elif cat in _SPACED:
                spaced.append(cp)
    removed += range(_TAG_BLOCK[0], _TAG_BLOCK[1] + 1)
    for first, last in _PRIVATE_PLANES:
        removed += range(first, last + 1)
    runs = _ranges(removed + spaced)
    bmp = [(a, min(b, 0xFFFF)) for a, b in runs if a <= 0xFFFF]
    astral = [(max(a, 0x10000), b) for a, b in _ranges(removed) if b > 0xFFFF]
    return _char_class(bmp), _char_class(astral), frozenset(map(chr, spaced))


def _cleaned(text: str) -> str:
    """The removed characters gone and the spaced ones (line breaks among them) a space."""
    bmp, astral, spaced = _patterns()
    # One scan finds both kinds; the replacement is chosen only where a character matched (rare).
    text = bmp.sub(lambda m: " " if m.group() in spaced else "", text)
    if not text.isascii() and len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text):
        text = astral.sub("", text)  # something beyond U+FFFF: the tag characters, private use
    return text


def one_line(text: str) -> str:
    """Stored text as one line of plain data: invisible, format and direction characters removed,
    controls and line breaks turned into spaces, whitespace folded."""
    return " ".join(_cleaned(text or "").split())


def strip_unsafe(text: str) -> str:
    """Text with its line breaks kept (``\\n`` only) and every other character of the rule dealt with as
    ``one_line`` does (removed or a space): for answers built of several lines, each already quoted."""
    return "\n".join(_cleaned(part) for part in (text or "").split("\n"))


def quote_text(text: str, limit: int = 280) -> tuple[str, int]:
    """``«one line»`` cut to ``limit`` characters, and how many characters of the line it left out.

    A « or » inside becomes ", so the data cannot close its own quotes; a cut line ends with …»."""
    clean = one_line(text).replace("«", '"').replace("»", '"')
    if len(clean) > limit:
        return f"«{clean[: limit - 1]}…»", len(clean) - (limit - 1)
    return f"«{clean}»", 0
