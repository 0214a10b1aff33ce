"""Rules that say the opposite of each other, and how much meaning a short text carries (CJK and Latin alike).

Two user rules on one topic, one saying "must" and the other "must not", cannot both be followed: the
newer one supersedes the older. The markers are the general negation and obligation words of Chinese and
English grammar, not words of any data set.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from ._tokens import token_set

# Negations first (longest first), so that 不需要 is one marker and not 不 + 需要.
_NEG_ZH = ("不需要", "不必要", "无需", "不用", "不要", "不必", "不能", "不可", "禁止", "不准",
           "别", "勿", "莫", "没", "不")
_NEG_EN = ("must not", "mustn't", "should not", "shouldn't", "do not", "don't", "does not", "doesn't",
           "never", "no need to", "not", "without", "avoid")
_MODAL_ZH = ("必须", "一定要", "一定", "总是", "务必", "需要", "应该", "要")
_MODAL_EN = ("must", "always", "should", "need to", "needs to", "have to", "has to", "make sure to", "please")


def meaning_length(text: str) -> float:
    """How much a text says, comparable across scripts: Latin letters and digits count 1, a CJK character 2.5
    (one character is about a short word)."""
    latin, cjk = _scripts()
    return len(latin.findall(text)) + 2.5 * len(cjk.findall(text))


@functools.cache
def _scripts() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(a Latin letter or digit, a CJK ideograph), compiled on first use: a class over the BMP takes milliseconds
    to compile, and a retrieve weighs no text."""
    return re.compile(r"[A-Za-z0-9]"), re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


@functools.cache
def _markers_en() -> tuple[tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...]]:
    """(each English negation, each English obligation word) as a pattern of the whole word, in their order."""
    def word(m: str) -> re.Pattern[str]:
        return re.compile(rf"(?<![a-z']){re.escape(m)}(?![a-z'])")

    return tuple(map(word, _NEG_EN)), tuple(map(word, _MODAL_EN))


def _strip(text: str) -> tuple[str, bool]:
    """(the text without negation and obligation markers, whether it was negated)."""
    t = " " + " ".join(text.lower().split()) + " "
    negated = False
    negations, modals = _markers_en()
    for pat in negations:
        if pat.search(t):
            negated = True
            t = pat.sub(" ", t)
    for pat in modals:
        t = pat.sub(" ", t)
    for m in _NEG_ZH:
        if m in t:
            negated = True
            t = t.replace(m, "")
    for m in _MODAL_ZH:
        t = t.replace(m, "")
    return _gaps().sub(" ", t).strip(), negated


@functools.cache
def _gaps() -> re.Pattern[str]:
    """What separates the words of a stripped text (compiled on first use)."""
    return re.compile(r"[\s\W_]+")


def contradicts(old: str, new: str, *, same_topic: bool) -> bool:
    """Whether two rules say opposite things about the same action (one negated, the other not)."""
    a, neg_a = _strip(old)
    b, neg_b = _strip(new)
    if neg_a == neg_b or not a or not b:
        return False
    ta, tb = token_set(a), token_set(b)
    if ta and ta == tb:
        return True  # the same words: "always confirm before paying" / "never confirm before paying"
    short, long = sorted((a.replace(" ", ""), b.replace(" ", "")), key=len)
    if short and len(short) >= 0.75 * len(long) and _subsequence(short, long):
        return True  # the same action with a word dropped: 支付前确认 / 支付确认
    overlap = len(ta & tb) / len(ta | tb) if ta and tb else 0.0
    return overlap >= (0.75 if same_topic else 0.9)


def _subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(c in it for c in short)


class Stance(NamedTuple):
    """What a text says to do or not to do: its words without negation and obligation markers, whether it was
    negated, and the words a negation governs (what it says not to do)."""

    words: frozenset[str]
    negated: bool
    denied: frozenset[str] = frozenset()


@functools.cache
def _clause_end() -> re.Pattern[str]:
    """Where a clause ends, compiled on first use (its CJK punctuation makes a class over the BMP, which takes
    milliseconds to compile, and a process that starts to retrieve seldom needs it)."""
    return re.compile(r"[,.;:!?()\[\]{}\"'\n，。；：！？、（）「」『』“”‘’]")


SCOPE_WORDS = 4  # a Latin negator governs the next few words of its clause ("never pay with the gift card")
SCOPE_CJK = 6  # a CJK negator of two or more characters, the next characters of its clause ("不要在美团付款")
SCOPE_CJK_ONE = 2  # a one-character one, the next two: 不/别/没 also start ordinary words (不同, 别人), whose
# second character is then all they govern, never the action a rule names


def _denied(text: str) -> str:
    """The text each negation governs: what follows the negator up to the end of its clause, a few words or
    characters long (a memory saying "send it without sound" denies the sound, not the sending)."""
    t = " " + " ".join(text.lower().split()) + " "
    out: list[str] = []
    for pat in _markers_en()[0]:
        for hit in pat.finditer(t):
            rest = _clause_end().split(t[hit.end():], maxsplit=1)[0]
            out.append(" ".join(rest.split()[:SCOPE_WORDS]))
    for m in _NEG_ZH:
        at = t.find(m)
        while at >= 0:
            rest = _clause_end().split(t[at + len(m):], maxsplit=1)[0].strip()
            out.append(rest[:SCOPE_CJK_ONE if len(m) == 1 else SCOPE_CJK])
            at = t.find(m, at + len(m))
    return " ".join(out)


@functools.lru_cache(maxsize=8192)
def stance(text: str) -> Stance:
    """The stance of a text (memoised: the same rules and memories are asked about on every retrieve)."""
    bare, negated = _strip(text)
    denied = token_set(_strip(_denied(text))[0]) if negated else frozenset()
    return Stance(token_set(bare), negated, denied)


MIN_RULE_WORDS = 2  # a rule of one word ("never") says too little to overrule anything


def overrules(rule: Stance, memory: Stance) -> bool:
    """Whether a user's rule says the opposite of what an automatic memory says: every word of the rule's action
    (at least ``MIN_RULE_WORDS``) in the memory, and one of them denying what the other does: the rule forbids
    words the memory does ("never pay with Alipay in Meituan" against a procedure "pay with Alipay in Meituan:
    tap Alipay, tap Pay"), or the memory forbids words the rule asks for ("always ask before paying" against "pay
    without asking"). A negation about something else ("… without sound", 不同) is no opposite."""
    if len(rule.words) < MIN_RULE_WORDS or not rule.words <= memory.words:
        return False
    forbids = rule.denied & memory.words
    if forbids and not forbids & memory.denied:
        return True
    refuses = memory.denied & rule.words
    return bool(refuses) and not refuses & rule.denied
