"""The goal's values in a procedure: which step values came from the goal, their slot names, and a new goal's values.

A procedure learned from "给老妈发消息说晚上回家吃饭" typed 老妈 and 晚上回家吃饭 because the goal said so: those
values are slots (``contact``, ``message``), kept with the example values beside them. For another goal the
example goal is aligned against the new one, the slot values standing as placeholders: what stands where an
example value stood is the new value; a slot the new goal does not give is shown by its name.

Text is compared token by token on its NFKC, case-folded form: a run of letters or digits of an alphabetic
script is one token, every other character (a CJK character, a punctuation mark) is a token of its own, so a
value matches at word boundaries in English and anywhere in Chinese.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping

Token = tuple[str, int, int]  # (case-folded token, start, end in the NFKC text)

QUOTES = "\"'“”‘’「」『』《》«»`"
ROLE_WORDS: dict[str, tuple[str, ...]] = {
    "contact": ("to", "text", "call", "email", "给", "跟", "和", "与", "打给", "打电话给", "联系"),
    "name": ("named", "called", "name", "叫", "叫做", "名为", "名叫", "命名为", "名字为", "名称为"),
    "title": ("titled", "title", "标题", "标题为", "题为"),
    "message": ("message", "saying", "say", "says", "reply", "write", "说", "内容", "内容为", "消息", "回复", "写"),
    "query": ("search", "for", "find", "look up", "search for", "搜索", "搜", "查找", "查询", "找", "找到"),
}
"""Words that say which role the value after them plays in a goal (English and Chinese, no app's words)."""
RECIPIENT_ONLY = frozenset({"to", "给", "跟", "和", "与"})
"""Contact words that name a recipient only in a goal that messages or calls someone ("rename X to Y" names no
contact): elsewhere the value after them has no role from them."""
CLAUSE_WORDS = ("and", "then", "also", "after that", "und", "dann", "et", "puis", "y", "luego", "depois",
                "然后", "并且", "并", "再", "接着", "之后", "随后")
"""Words that start the next part of a request: what follows them is its verb, not a value."""
LEAD_WORDS = ("please", "kindly", "can you", "could you", "help me", "help me to", "i want to", "i'd like to",
              "bitte", "por favor", "s'il te plaît", "请", "帮我", "麻烦", "我要", "我想", "你")
"""Words a request may open with before its verb."""
_CLAUSE_MARKS = frozenset(",;.!?，；。！？")
ADDRESS_SHAPE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$|^\+?[\d\s\-()]{6,}$")
"""An e-mail address or a phone number: whoever the goal names with it is a contact."""
TIME_SHAPE = re.compile(r"\d\s*(?::|：|点|时|分|am\b|pm\b|a\.m|p\.m|h\b)|(?:上午|下午|晚上|早上)\s*\d", re.IGNORECASE)
PLACEHOLDER = "\x00slot:"


def _is_wordish(c: str) -> bool:
    # Letters and digits of scripts written with spaces between words join into one token; a wide (CJK)
    # character is a token of its own.
    return c.isalnum() and unicodedata.east_asian_width(c) not in ("W", "F")


def tokens(text: str) -> tuple[str, list[Token]]:
    """The NFKC form of a text and its tokens (case-folded), with their spans in that form."""
    t = unicodedata.normalize("NFKC", text)
    out: list[Token] = []
    i = 0
    while i < len(t):
        c = t[i]
        if c.isspace():
            i += 1
            continue
        j = i + 1
        if _is_wordish(c):
            while j < len(t) and _is_wordish(t[j]):
                j += 1
        out.append((t[i:j].casefold(), i, j))
        i = j
    return t, out


def normalize(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed: the form values are compared in."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _keys(text: str) -> list[str]:
    return [k for k, _, _ in tokens(text)[1]]


def _find(needle: list[str], hay: list[str], start: int = 0) -> int | None:
    n = len(needle)
    if not n:
        return None
    for i in range(start, len(hay) - n + 1):
        if hay[i:i + n] == needle:
            return i
    return None


def occurs(value: str, text: str) -> bool:
    """Whether a value occurs in a text, token for token (at word boundaries)."""
    return _find(_keys(value), _keys(text)) is not None


INFLECTION = 2
"""Letters one word may have beyond another and still be that word ("salad" typed for "salads", "geysers" for
"geyser")."""
SLIP_FROM = 6
"""Words at least this long are one word with one letter changed, added or left out ("Mediterraneam")."""
APOSTROPHES = frozenset("'’‘`´")


def _same_word(v: str, k: str) -> bool:
    if v == k:
        return True
    if not (v.isalpha() and k.isalpha() and v.isascii() and k.isascii()):
        return False  # digits, and scripts without inflection, match exactly
    short, long_ = (v, k) if len(v) <= len(k) else (k, v)
    if len(short) >= 3 and long_.startswith(short) and len(long_) - len(short) <= INFLECTION:
        return True
    from rapidfuzz.distance import Levenshtein

    return len(short) >= SLIP_FROM and Levenshtein.distance(v, k, score_cutoff=1) <= 1


def _loose_words(keys: list[str]) -> list[tuple[str, int, int]]:
    """The words of a token list with their token range: punctuation and quotes left out, a word's apostrophe
    folded into it ("reader's" is ``readers``); a mark that is no text (a placeholder) stays as a barrier."""
    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(keys):
        k = keys[i]
        if k in APOSTROPHES and out and out[-1][2] == i and i + 1 < len(keys) and keys[i + 1][:1].isalnum():
            w, a, _ = out[-1]
            out[-1] = (w + keys[i + 1], a, i + 2)
            i += 2
            continue
        if k[:1].isalnum() or k.startswith(PLACEHOLDER):
            out.append((k, i, i + 1))
        i += 1
    return out


def _span(vk: list[str], keys: list[str], start: int = 0) -> tuple[int, int] | None:
    """Where a value's tokens stand in a text's tokens, from token ``start``: token for token, else word for word
    once punctuation and quotes are set aside, each word allowed another inflection or (when long) one slip, and
    a value of four words or more one other word after its first."""
    at = _find(vk, keys, start)
    if at is not None:
        return at, at + len(vk)
    vw = [w for w, _, _ in _loose_words(vk)]
    if not vw:
        return None
    hw = [x for x in _loose_words(keys) if x[1] >= start]
    n = len(vw)
    # A value of four words or more may differ in one word after its first: what was typed is the goal's
    # words said again ("Navy Blue shirt for men" for "the navy blue shirt for me").
    spare = 1 if n >= 4 else 0
    for i in range(len(hw) - n + 1):
        window = hw[i:i + n]
        if any(h[0].startswith(PLACEHOLDER) for h in window) or not _same_word(vw[0], window[0][0]):
            continue
        if sum(not _same_word(v, h[0]) for v, h in zip(vw, window)) <= spare:
            return window[0][1], window[-1][2]
    return None


def occurs_inflected(value: str, text: str) -> bool:
    """Whether a value occurs in a text token for token, or word for word with punctuation and quotes set aside
    and each alphabetic word allowed another form (a plural, a verb ending, a possessive, one slip of typing in
    a long word: "Photo Album" in "photo albums", "Readers Digest" in "Reader's Digest"); a value of four
    words or more may differ in one word after its first. Words of scripts without inflection (CJK characters)
    must match exactly."""
    return _span(_keys(value), _keys(text)) is not None


def _ends_with(keys: list[str], word: list[str]) -> bool:
    return len(keys) >= len(word) and keys[len(keys) - len(word):] == word


def role_of(goal: str, value: str, *, messaging: bool = True) -> str | None:
    """The role the goal gives a value it contains: ``text`` when quoted, ``time`` by its shape, ``contact``
    for an address, else the role word right before it (``named`` → name, ``给`` → contact, ``说`` → message,
    ``search`` → query). Unless the goal is ``messaging``, a bare recipient word (``to``, ``给``) gives no role."""
    keys, vk = _keys(goal), _keys(value)
    span = _span(vk, keys)
    if span is None:
        return None
    at, end = span
    if at > 0 and keys[at - 1] in QUOTES and end < len(keys) and keys[end] in QUOTES:
        return "text"
    if TIME_SHAPE.search(unicodedata.normalize("NFKC", value)):
        return "time"
    if ADDRESS_SHAPE.match(normalize(value)):
        return "contact"
    before = keys[:at]
    while before and not any(_is_wordish(ch) or unicodedata.east_asian_width(ch) in ("W", "F")
                             for ch in before[-1]):
        before = before[:-1]  # "saying: hello", "named, Yoga": the punctuation between does not matter
    best: tuple[int, str] | None = None
    for role, words in ROLE_WORDS.items():
        for w in words:
            if role == "contact" and not messaging and w in RECIPIENT_ONLY:
                continue
            wk = _keys(w)
            if _ends_with(before, wk) and (best is None or len(wk) > best[0]):
                best = (len(wk), role)
    return best[1] if best else None


def starts_clause(goal: str, value: str) -> bool:
    """Whether a value stands where the goal (or a part of it after ``,``/``and``/``然后`` ...) starts: there it is
    the request's verb ("Add" in "Add a new entry", "send" in "... and send it"), not a value."""
    keys, vk = _keys(goal), _keys(value)
    at = _find(vk, keys)
    while at is not None:
        before = keys[:at]
        for w in sorted(LEAD_WORDS, key=lambda w: -len(_keys(w))):
            if before == _keys(w):
                before = []  # "please add ...": the verb still leads
                break
        if not before or before[-1] in _CLAUSE_MARKS or any(_ends_with(before, _keys(w)) for w in CLAUSE_WORDS):
            return True
        at = _find(vk, keys, at + 1)
    return False


def slot_names(goal: str, values: Iterable[str], target: str | None = None, *,
               messaging: bool = True) -> dict[str, str]:
    """A slot name for each value (values equal once normalised share one): its role in the goal (``messaging``
    as for ``role_of``), ``target`` for the goal's parsed target, else ``value1``, ``value2`` ... in order; a
    role met twice is numbered."""
    out: dict[str, str] = {}
    by_norm: dict[str, str] = {}
    used: set[str] = set()
    unnamed = 0
    for v in values:
        n = normalize(v)
        if n in by_norm:
            out[v] = by_norm[n]
            continue
        role = role_of(goal, v, messaging=messaging) or ("target" if target and normalize(target) == n else None)
        if role is None:
            unnamed += 1
            role = f"value{unnamed}"
        name, k = role, 1
        while name in used:
            k += 1
            name = f"{role}{k}"
        used.add(name)
        out[v] = by_norm[n] = name
    return out


def mask_values(text: str, values: Iterable[str], mark: str = "…") -> str:
    """A text with every occurrence of the values (longest first; token for token, else word for word as
    ``occurs_inflected`` finds them) replaced by ``mark``."""
    t, toks = tokens(text)
    spans: list[tuple[int, int]] = []
    keys = [k for k, _, _ in toks]
    taken = [False] * len(toks)
    for v in sorted({v for v in values if v}, key=lambda v: -len(_keys(v))):
        vk = _keys(v)
        span = _span(vk, keys)
        while span is not None:
            at, end = span
            if not any(taken[at:end]):
                for i in range(at, end):
                    taken[i] = True
                spans.append((toks[at][1], toks[end - 1][2]))
            span = _span(vk, keys, at + 1)
    for a, b in sorted(spans, reverse=True):
        t = t[:a] + mark + t[b:]
    return t


def fill(examples: Iterable[str], slots: Mapping[str, str], goal: str) -> dict[str, str]:
    """The values a new goal gives each slot: each example goal holding the slot values is aligned against
    the goal, and the text standing where an example value stood is that slot's value. Slots the goal does
    not give (no example aligns, or the text around the value differs) are left out."""
    if not slots:
        return {}
    import difflib  # loaded by the first goal with slots to fill, not at import

    g_text, g_toks = tokens(goal)
    g_keys = [k for k, _, _ in g_toks]
    out: dict[str, str] = {}
    for ex in examples:
        ex_keys = _keys(ex)
        present = False
        for name, value in sorted(slots.items(), key=lambda kv: -len(_keys(kv[1]))):
            vk = _keys(value)
            span = _span(vk, ex_keys)
            while span is not None:
                present = True
                ex_keys[span[0]:span[1]] = [PLACEHOLDER + name]
                span = _span(vk, ex_keys, span[0] + 1)
        if not present:
            continue
        sm = difflib.SequenceMatcher(None, ex_keys, g_keys, autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            # Only a placeholder replaced on its own is a value: one mixed with other words in the same
            # change is not known to stand where the value stood.
            if tag != "replace" or i2 - i1 != 1 or not ex_keys[i1].startswith(PLACEHOLDER):
                continue
            name = ex_keys[i1][len(PLACEHOLDER):]
            value = g_text[g_toks[j1][1]:g_toks[j2 - 1][2]].strip().strip(QUOTES).strip()
            if value and name not in out:
                out[name] = value
        if all(name in out for name in slots):
            break
    return out


def _edges_pattern(value: str) -> str:
    # A value is replaced where it stands as a whole: not inside a longer word of an alphabetic script.
    pat = re.escape(value)
    if value and _is_wordish(value[0]):
        pat = r"(?<![^\W_])" + pat if value[0].isascii() else pat
    if value and _is_wordish(value[-1]):
        pat = pat + r"(?![^\W_])" if value[-1].isascii() else pat
    return pat


def substitute(text: str | None, values: Mapping[str, str]) -> str | None:
    """A stored text with each example value (key) replaced by its new value or placeholder (value);
    a one-character value only when it is the whole text."""
    if text is None or not values:
        return text
    n = normalize(text)
    for old, new in values.items():
        if normalize(old) == n:
            return new
    out = text
    for old, new in sorted(values.items(), key=lambda kv: -len(kv[0])):
        if len(old.strip()) < 2:
            continue
        out = re.sub(_edges_pattern(old.strip()), new.replace("\\", "\\\\"), out, flags=re.IGNORECASE)
    return out
