"""Which rules and preferences may say the opposite of a new one: the bounds a save's lookup counts keys by.

``contradicts`` finds two rules opposite when one is negated and the other not and they share three quarters of
their tokens, or one is, without spaces, a subsequence of the other at least three quarters as long. A memory
of either kind must hold many of the new text's token and trigram keys (the candidates index's ``t`` and ``q``
keys, with ``tl`` its token count and ``ql`` its length): the counts below say how many, so the lookup reads
only the files that hold that many, never every file sharing one common piece.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._contradiction import _strip
from ._tokens import token_set

if TYPE_CHECKING:
    from ._long_term_candidates import _Lookup

__all__: list[str] = []


def _missing(places: list[int], broken: int) -> int:
    """How many of these keys (each standing at so many places) ``broken`` broken places can remove at most:
    each removed key has all its places broken, so the removed ones' places add up to no more than ``broken``,
    and the most are removed by taking the fewest-placed first."""
    gone = used = 0
    for p in sorted(places):
        if used + p > broken:
            break
        used += p
        gone += 1
    return gone


def _opposite(look: _Lookup, norm: str) -> set[str]:
    """The rules and preferences that may say the opposite of this text (see ``contradicts``).

    Such a memory is negated where the text is not (or the other way) and either shares at least three
    quarters of the text's tokens, or, without spaces, one of the two is a subsequence of the other at least
    three quarters as long.

    Tokens: of the text's ``N`` tokens such a memory lacks at most ``N // 4`` (each token stands at one place,
    ``N // 4`` places may break), so of any chosen ones it holds all but that many (``_Lookup.sharing``). And
    with ``M`` tokens of its own (its ``tl`` key) it shares ``s`` with ``s >= 3/4 (N + M - s)``, that is
    ``7 s >= 3 (N + M)``; of ``c`` chosen tokens it holds at least ``s - (N - c)``, which each file's count is
    then held against.

    Characters: let ``n`` be the text's length and ``L`` the memory's. When ``L <= n`` the memory is the text
    with ``n - L`` characters left out, each of which breaks at most the three trigram places that cover it; when
    ``L > n`` it is the text with ``L - n`` characters put in, each of which breaks at most the two places that
    span its gap. Every trigram place not broken is a trigram of the memory. So a memory of length ``L`` lacks
    no trigram key with a place unbroken: of any keys it lacks at most ``_missing`` of them for ``3 (n - L)``
    or ``2 (L - n)`` broken places, and holds the rest. So, length by length (its ``ql`` key), the files
    holding that many of the text's trigram keys are the ones that may match (``_near_subsequences``); at a
    length where every place may break, every file of that length is.
    """
    stripped, negated = _strip(norm)
    if not stripped:
        return set()
    other = int(not negated)
    found: set[str] = set()
    toks = token_set(stripped)
    if toks:
        shared = look.sharing({f"t{other}:{t}": 1 for t in toks}, len(toks) // 4)
        if shared is not None:
            rest = len(toks) - len(shared.keys)  # tokens not chosen: a file may share every one of them
            found.update(name for name, m in look.values(shared.held_by, f"tl{other}:").items()
                         if 7 * (shared.held_by[name] + rest) >= 3 * (len(toks) + int(m)))
    compact = stripped.replace(" ", "")
    n = len(compact)
    lengths = [m for m in range(1, 2 * n + 2) if 4 * min(m, n) >= 3 * max(m, n)]
    places: dict[str, int] = {}
    for i in range(n - 2):
        key = f"q{other}:{compact[i:i + 3]}"
        places[key] = places.get(key, 0) + 1
    return found | _near_subsequences(look, places, n, lengths, f"ql{other}:")


def _near_subsequences(look: _Lookup, places: dict[str, int], n: int, lengths: list[int], prefix: str) -> set[str]:
    """The memories of these lengths holding enough of the text's trigrams (``places``: each one's places) to be
    a subsequence of it or have it as one, length by length (see ``_opposite``): the memories of a length are
    read whole when they are fewer than the postings of the rarest trigrams that must be read otherwise."""
    order = look.by_rarity(places)
    found: set[str] = set()
    for m in lengths:
        at_length = look.count(f"{prefix}{m}")
        if not at_length:
            continue
        broken = _broken(n, m)
        chosen, covered = [], 0
        for key in order:
            if covered > broken:
                break
            chosen.append(key)
            covered += places[key]
        # A few keys more than the cover, so that a file must hold more than one of them: the grouped scan
        # reads their rows far faster than the survivors' keys are counted one file at a time.
        chosen += order[len(chosen):len(chosen) + _SPARE] if covered > broken else []
        if covered <= broken:  # every trigram place may break: any memory of this length
            found |= look.union([f"{prefix}{m}"])
        else:
            need = len(places) - _missing(list(places.values()), broken)
            if at_length * len(places) <= sum(map(look.count, chosen)):
                found |= look.holding(f"{prefix}{m}", places, need)
            else:
                found |= look.holding(f"{prefix}{m}", places, need, chosen,
                                      len(chosen) - _missing([places[k] for k in chosen], broken))
    return found


_SPARE = 2  # keys chosen beyond a cover (measured at 100k rules: two more made the per-length lookup 2-3x faster)


def _broken(n: int, m: int) -> int:
    """The most trigram places of a text of ``n`` characters broken in one of ``m`` that it is a subsequence of
    or that is a subsequence of it (two per character put in, three per character left out)."""
    return 2 * (m - n) if m > n else 3 * (n - m)
