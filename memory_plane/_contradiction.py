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

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z0-9]")

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
    return len(_LATIN.findall(text)) + 2.5 * len(_CJK.findall(text))


def _strip(text: str) -> tuple[str, bool]:
    """(the text without negation and obligation markers, whether it was negated)."""
    t = " " + " ".join(text.lower().split()) + " "
    negated = False
    for m in _NEG_EN:
        pat = re.compile(rf"(?<![a-z']){re.escape(m)}(?![a-z'])")
        if pat.search(t):
            negated = True
            t = pat.sub(" ", t)
    for m in _MODAL_EN:
        t = re.sub(rf"(?<![a-z']){re.escape(m)}(?![a-z'])", " ", t)
    for m in _NEG_ZH:
        if m in t:
            negated = True
            t = t.replace(m, "")
    for m in _MODAL_ZH:
        t = t.replace(m, "")
    return re.sub(r"[\s\W_]+", " ", t).strip(), negated


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
    """What a text says to do or not to do: its words without negation and obligation markers, and whether it
    was negated."""

    words: frozenset[str]
    negated: bool


@functools.lru_cache(maxsize=8192)
def stance(text: str) -> Stance:
    """The stance of a text (memoised: the same rules and memories are asked about on every retrieve)."""
    bare, negated = _strip(text)
    return Stance(token_set(bare), negated)


MIN_RULE_WORDS = 2  # a rule of one word ("never") says too little to overrule anything


def overrules(rule: Stance, memory: Stance) -> bool:
    """Whether a user's rule says the opposite of what an automatic memory says: one negated and the other not,
    and every word of the rule's action (at least ``MIN_RULE_WORDS``) in the memory ("never pay with Alipay in
    Meituan" against a procedure "pay with Alipay in Meituan: tap Alipay, tap Pay")."""
    if rule.negated == memory.negated or len(rule.words) < MIN_RULE_WORDS:
        return False
    return rule.words <= memory.words
