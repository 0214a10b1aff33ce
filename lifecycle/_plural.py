"""Counts in words for people: ``1 file``, ``2 files``, ``1 memory``, ``3 memories``."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun, singular for exactly one and plural otherwise (zero included: ``0 files``).

    ``plural`` is the plural form when it is not regular; a regular one is made the English way (``entry`` →
    ``entries``, ``match`` → ``matches``, ``file`` → ``files``)."""
    return f"{n} {noun if n == 1 else (plural or _plural_of(noun))}"


def _plural_of(noun: str) -> str:
    """The regular English plural of a noun (the last word of a phrase: ``failed job`` → ``failed jobs``)."""
    if noun.endswith("y") and len(noun) > 1 and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"
