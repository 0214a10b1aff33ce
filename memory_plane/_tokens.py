"""Tokens of a text for matching goals: Latin words (stemmed), numbers, CJK bigrams and character trigrams."""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import types
from collections.abc import Iterable
from itertools import chain

TOKEN_PATTERN = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?|[\u3400-\u9fff\uf900-\ufaff]+")
_STOP_EN = frozenset([
    "a", "an", "the", "to", "of", "in", "on", "at", "for", "and", "or", "with", "my", "me", "i", "you",
    "your", "it", "this", "that", "is", "are", "be", "please", "can", "could", "would", "then", "from",
    "by", "as", "into", "up", "so", "app", "apps", "use", "using", "via", "now", "just", "all", "some",
    "any",
])
# Words that start nearly every Chinese request; they say nothing about which memory fits.
_STOP_ZH = frozenset(["帮我", "请帮", "一下", "我的", "我要", "我想", "然后", "并且", "可以", "一个", "这个", "那个"])


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    return word


@functools.lru_cache(maxsize=1 << 15)
def token_parts(tok: str) -> tuple[str, ...]:
    """The tokens of one match of ``TOKEN_PATTERN`` (a stemmed word, a number or a CJK run's bigrams)."""
    # The tokens of one regex match; cached because the same words and CJK runs recur across goals,
    # which makes indexing a store at start-up about a third faster (and shares the token strings).
    if "\u3400" <= tok[0] <= "\ufaff":
        if len(tok) == 1:
            return (tok,)
        return tuple(bg for bg in map(tok.__getitem__, _BIGRAMS[min(len(tok), 64)]) if bg not in _STOP_ZH)
    if tok in _STOP_EN:
        return ()
    return (_stem(tok),)


def _iter_tokens(text: str) -> Iterable[str]:
    return chain.from_iterable(map(token_parts, TOKEN_PATTERN.findall(text.lower())))


def tokens(text: str) -> list[str]:
    """Tokens of a text: stemmed lowercase words and numbers, CJK runs as bigrams (and single chars)."""
    return list(_iter_tokens(text))


_BIGRAMS = [[slice(i, i + 2) for i in range(n - 1)] for n in range(65)]


def token_set(text: str) -> frozenset[str]:
    """The distinct tokens of a text."""
    return frozenset(_iter_tokens(text))


@functools.lru_cache(maxsize=1)
def tokenizer_fingerprint() -> str:
    """A digest of everything that decides a text's tokens (pattern, stop words, the code that splits and
    stems, the interpreter); persisted postings made by another tokenizer are not reused."""
    parts = [TOKEN_PATTERN.pattern, sorted(_STOP_EN), sorted(_STOP_ZH), tuple(sys.version_info[:2]),
             *(_code_parts(fn.__code__) for fn in (_stem, token_parts.__wrapped__, _iter_tokens, _collapsed, grams,
                                                     gram_length)),
             MAX_GRAM_TEXT]
    return hashlib.sha1(repr(parts).encode("utf-8")).hexdigest()[:16]


def _code_parts(code: types.CodeType) -> list[object]:
    # What a function does, without what differs between processes: a nested code object's repr
    # holds its address, and a set's repr follows the per-process string hash.
    consts = [_code_parts(c) if isinstance(c, types.CodeType) else sorted(c) if isinstance(c, frozenset) else c
              for c in code.co_consts]
    return [code.co_code.hex(), code.co_names, consts]


MAX_GRAM_TEXT = 4000  # characters of a text whose trigrams are counted (a goal is at most 2,000)
_GRAM_SLICES = [slice(i, i + 3) for i in range(MAX_GRAM_TEXT)]


def _collapsed(text: str) -> str:
    return " ".join(text.lower().split())[:MAX_GRAM_TEXT]


def grams(text: str) -> frozenset[str]:
    """The distinct character trigrams of a text (lowercase, runs of whitespace as one space, across words)."""
    s = _collapsed(text)
    if len(s) < 3:
        return frozenset((s,)) if s else frozenset()
    return frozenset(map(s.__getitem__, _GRAM_SLICES[:len(s) - 2]))


def gram_length(text: str) -> int:
    """The length a document's matches are normalised by (its characters, runs of whitespace as one)."""
    return min(len(" ".join(text.split())), MAX_GRAM_TEXT)
