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

__all__ = ["one_line", "quote_text", "strip_unsafe"]

# The rule's characters as code-point runs, written out so that no process pays for a scan of Unicode
# (a scan of planes 0, 1 and 14 through ``unicodedata`` takes 50-300 ms, a third of a cold retrieve).
# ``tests/test_quoting.py`` checks the table against the running Python's ``unicodedata``: every character
# of the categories is covered. Runs may reach past what the running version assigns (the Egyptian
# hieroglyph format controls up to U+1343F are Unicode 15's): removing an unassigned character costs nothing.
REMOVED_RUNS: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xD800, 0xF8FF), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE007F),  # the whole tag block, assigned or not
    (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD),  # the private-use planes
)
"""Format (Cf), private-use (Co) and surrogate (Cs) characters, and the tag block: removed."""
SPACED_RUNS: tuple[tuple[int, int], ...] = ((0x0000, 0x001F), (0x007F, 0x009F), (0x2028, 0x2029))
"""Controls (Cc, tab and line breaks among them) and the line and paragraph separators: a space."""


def _char_class(runs: list[tuple[int, int]]) -> re.Pattern[str]:
    # One character per match, no "+": a plain class over the BMP compiles to a bitmap that sre scans in C,
    # several times faster than a repeated class (the block quotes every line on every retrieve).
    parts = "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in runs)
    return re.compile(f"[{parts}]")


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], frozenset[str]]:
    """(every character of the rule within the BMP, those beyond it, the ones that become a space).

    Two classes, because a class reaching past U+FFFF is checked range by range, while one within the BMP
    is a bitmap."""
    runs = sorted([*REMOVED_RUNS, *SPACED_RUNS])
    bmp = [(a, min(b, 0xFFFF)) for a, b in runs if a <= 0xFFFF]
    astral = [(max(a, 0x10000), b) for a, b in REMOVED_RUNS if b > 0xFFFF]
    spaced = frozenset(chr(cp) for a, b in SPACED_RUNS for cp in range(a, b + 1))
    return _char_class(bmp), _char_class(astral), spaced


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
