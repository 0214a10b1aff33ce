"""The inverted index over goals and memory texts: IDF-weighted word postings, trigram statistics, BM25 nearest goal."""

from __future__ import annotations

import heapq
import math
import sys
from collections.abc import Container, Iterable, Sequence
from itertools import chain
from operator import itemgetter

from ._tokens import TOKEN_PATTERN, gram_length, grams, token_parts, token_set

_second = itemgetter(1)


def _overlap_first(item: tuple[int, float]) -> tuple[float, int]:
    return (-item[1], item[0])


def _first_len(pair: tuple[list[int], float]) -> int:
    return len(pair[0])


class InvertedIndex:
    """Postings token -> document numbers; grows by appends; IDF computed from live counts."""

    def __init__(self) -> None:
        # A document loaded with persisted postings is None until first asked for (``doc``): a fresh
        # process then tokenises only the few documents a query looks at, from ``_texts``.
        self.docs: list[frozenset[str] | None] = []
        self.postings: dict[str, list[int]] = {}
        self._texts: Sequence[str] = ()
        self.holes = 0  # documents that are no entry (lines of a file that hold none): not counted as documents
        self._norms: dict[int, float] = {}
        self._norms_at = 0
        self.grams: GramStats | None = None  # character trigram frequencies, where a source keeps them
        # IDF per token while the document count stays (every change of the postings adds documents).
        self._idf: dict[str, float] = {}
        self._idf_at = 0
        # token -> (how many of its postings are in the set, the set): common words a search asks about
        self._sets: dict[str, tuple[int, set[int]]] = {}
        # (query, weak tokens, documents) -> each reached document's shared weight: the last one asked (_overlap)
        self._last_overlap: tuple[tuple[frozenset[str], frozenset[str], int], dict[int, float]] | None = None

    @classmethod
    def from_postings(cls, postings: dict[str, list[int]], texts: Sequence[str]) -> InvertedIndex:
        """An index of ``texts`` whose postings were computed before (by this tokenizer, from these texts)."""
        inv = cls()
        inv.postings = postings
        inv.docs = [None] * len(texts)
        inv._texts = texts
        return inv

    def doc(self, i: int) -> frozenset[str]:
        """The token set of document i."""
        d = self.docs[i]
        if d is None:
            d = token_set(self._texts[i])
            self.docs[i] = d
        return d

    @classmethod
    def build(cls, texts: Iterable[str]) -> InvertedIndex:
        """Index a list of texts."""
        inv = cls()
        for t in texts:
            inv.add(t)
        return inv

    def add(self, text: str) -> int:
        """Index one more document; return its number."""
        doc = token_set(text)
        n = len(self.docs)
        self.docs.append(doc)
        for t in doc:
            self.postings.setdefault(t, []).append(n)
        return n

    def add_many(self, texts: Iterable[str]) -> int:
        """Index several documents (as ``add`` does, with the loop's lookups bound once); return the first's
        number."""
        docs, postings = self.docs, self.postings
        get, append_doc, findall, chained = postings.get, docs.append, TOKEN_PATTERN.findall, chain.from_iterable
        # A phone repeats its tasks ("open WeChat", "check the balance"): a text seen before in this
        # batch shares its token set instead of being tokenised again.
        seen: dict[str, frozenset[str]] = {}
        first = n = len(docs)
        for text in texts:
            doc = seen.get(text)
            if doc is None:
                doc = seen[text] = frozenset(chained(map(token_parts, findall(text.lower()))))
            append_doc(doc)
            for t in doc:
                posting = get(t)
                if posting is None:
                    postings[t] = [n]
                else:
                    posting.append(n)
            n += 1
        return first

    def weight(self, token: str) -> float:
        """BM25-style IDF of a token (an unseen token weighs as much as the rarest)."""
        if self._idf_at != len(self.docs):
            self._idf, self._idf_at = {}, len(self.docs)
        w = self._idf.get(token)
        if w is None:
            plist = self.postings.get(token)
            # Every word no document has weighs the same: one entry ("", never a token) for all of them, so
            # queries' unseen words do not pile up.
            key = token if plist is not None else ""
            w = self._idf.get(key)
            if w is None:
                n = max(1, len(self.docs) - self.holes)
                df = len(plist) if plist is not None else 0
                w = self._idf[key] = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return w

    def _fresh_norms(self) -> dict[int, float]:
        # Norms (total IDF of a document's tokens) are recomputed lazily once the corpus grew by a tenth.
        if len(self.docs) > self._norms_at * 1.1 + 10:
            self._norms, self._norms_at = {}, len(self.docs)
        return self._norms

    def _prefetch(self, docs: Iterable[int]) -> None:
        """Have postings read lazily (``from_postings`` of a mapping with ``prefetch``) fetch the tokens of these
        documents at once: their norms weigh every token they hold."""
        prefetch = getattr(self.postings, "prefetch", None)
        if prefetch is not None:
            prefetch({t for i in docs for t in self.doc(i)})

    def _norm(self, doc: int) -> float:
        norms = self._fresh_norms()
        n = norms.get(doc)
        if n is None:
            n = math.fsum(self.weight(t) for t in self.doc(doc)) or 1.0
            norms[doc] = n
        return n

    @staticmethod
    def _blend(recall: float, precision: float) -> float:
        # F2: mostly "how much of the query does the document cover", tempered by "how much of the
        # document is about the query", so a long document sharing one common word ranks low.
        if recall <= 0 or precision <= 0:
            return 0.0
        return 5 * precision * recall / (4 * precision + recall)

    def weak_tokens(self, query: frozenset[str], floor: float) -> frozenset[str]:
        """The query's tokens that, shared all together and nothing else, leave a document's similarity under
        ``floor``: a document only they reach need not be looked at by a caller for whom that is no match.

        A common word ("the", a word every memory holds) weighs next to nothing, yet its posting list holds the
        whole store: skipping the documents only such words reach keeps a search's work to what the rarer words
        reach, however large the store. The similarity is at most ``5r / (4 + r)`` for a document sharing a
        share ``r`` of the query's weight (its precision at most 1)."""
        if floor <= 0 or not query:
            return frozenset()
        weights = sorted((w, t) for t, w in self.weights(query).items())
        total = math.fsum(w for w, _ in weights)
        if total <= 0:
            return query
        weak: list[str] = []
        shared = 0.0
        for w, t in weights:
            r = (shared + w) / total
            if 5 * r / (4 + r) >= floor * (1 - 1e-9):  # a margin for rounding: never too many left out
                break
            shared += w
            weak.append(t)
        return frozenset(weak)

    def search(self, query: frozenset[str], limit: int = 200, floor: float = 0.0) -> list[tuple[int, float]]:
        """Documents sharing tokens with the query, by IDF-weighted overlap (0..1, F2 of coverages). With a
        ``floor``, documents that cannot reach it (``weak_tokens``) are left out unseen."""
        if not query:
            return []
        weak = self.weak_tokens(query, floor)
        if weak:
            return self._search_strong(query, weak, limit)
        # Sorted tokens and exact sums: a set's order follows the per-process string hash, and the same
        # query must recall the same documents (ties at the cut included) in every process.
        idf, weight = self._idf, self.weight
        if self._idf_at != len(self.docs):
            idf = {}  # weight() starts the memo anew
        weights = {t: idf.get(t) or weight(t) for t in sorted(query)}
        total = math.fsum(weights.values())
        postings = self.postings
        lists = sorted(((postings[t], w) for t, w in weights.items() if t in postings), key=_first_len, reverse=True)
        if not lists:
            return []
        # The longest posting list (a word most goals share) seeds the sums in one C call; only the
        # shorter ones are added doc by doc.
        acc: dict[int, float] = dict.fromkeys(lists[0][0], lists[0][1])
        get = acc.get
        for plist, w in lists[1:]:
            for i in plist:
                acc[i] = get(i, 0.0) + w
        if not acc or total <= 0:
            return []
        # Rank a generous pool by raw overlap, then re-score it with the document-length-aware blend
        # (written out here, not called: this loop runs for a few hundred documents per search).
        k = limit * 3
        # The same list either way (nlargest is defined as the sorted prefix, ties in order); a C sort is
        # faster until the candidates outnumber the pool many times over.
        pool = (sorted(acc.items(), key=_second, reverse=True)[:k] if len(acc) <= 16 * k
                else heapq.nlargest(k, acc.items(), key=_second))
        # Every overlap, total and norm is positive (IDF weights are), so the blend needs no guard here.
        norms, norm = self._fresh_norms(), self._norm
        self._prefetch(i for i, _ in pool if i not in norms)
        scored: list[tuple[int, float]] = []
        add = scored.append
        for i, s in pool:
            recall = s / total
            precision = s / (norms.get(i) or norm(i))
            if precision > 1.0:
                precision = 1.0
            add((i, 5 * precision * recall / (4 * precision + recall)))
        scored.sort(key=_second, reverse=True)
        return scored[:limit]

    def _search_strong(self, query: frozenset[str], weak: frozenset[str], limit: int) -> list[tuple[int, float]]:
        """``search`` over the documents a token not in ``weak`` reaches, scored on every token they share."""
        weights = {t: self.weight(t) for t in sorted(query)}
        total = math.fsum(weights.values())
        acc = self._overlap(query, weak, weights)
        if not acc or total <= 0:
            return []
        k = limit * 3
        # The same list either way (nlargest is the sorted prefix, ties in order): a heap once the documents
        # outnumber the pool many times over.
        pool = (sorted(acc.items(), key=_second, reverse=True)[:k] if len(acc) <= 16 * k
                else heapq.nlargest(k, acc.items(), key=_second))
        norms = self._fresh_norms()
        self._prefetch(i for i, _ in pool if i not in norms)
        scored = [(i, self._blend(s / total, min(1.0, s / self._norm(i)))) for i, s in pool]
        scored.sort(key=_second, reverse=True)
        return scored[:limit]

    def _overlap(self, query: frozenset[str], weak: frozenset[str], weights: dict[str, float]) -> dict[int, float]:
        """Each document a token not in ``weak`` reaches, with the IDF weight it shares with the query (the strong
        tokens' then the weak ones', each in sorted order). The last one is kept while the documents stay: a
        retrieve asks it twice (the search, and the pool of the user's rules)."""
        key = (query, weak, len(self.docs))
        last = self._last_overlap
        if last is not None and last[0] == key:
            return last[1]
        postings = self.postings
        acc: dict[int, float] = {}
        get = acc.get
        for t in sorted(query - weak):
            w = weights[t]
            for i in postings.get(t, ()):
                acc[i] = get(i, 0.0) + w
        if acc:
            for t in sorted(weak):
                plist = postings.get(t)
                if not plist:
                    continue
                w = weights[t]
                if len(plist) < len(acc):
                    for i in plist:
                        if i in acc:
                            acc[i] += w
                else:
                    holds = self._posting_set(t, plist)
                    for i in acc:
                        if i in holds:
                            acc[i] += w
        self._last_overlap = (key, acc)
        return acc

    def pool(self, query: frozenset[str], size: int, floor: float, within: Container[int]) -> list[int]:
        """The documents of ``within`` that a query token not weak under ``floor`` reaches: at most ``size`` of
        them, those sharing the most IDF weight with the query (as ``search`` pools its documents; ties by
        number), without measuring their similarity."""
        if not query:
            return []
        weak = self.weak_tokens(query, floor)
        acc = self._overlap(query, weak, {t: self.weight(t) for t in sorted(query)})
        mine = {i: s for i, s in acc.items() if i in within}
        if len(mine) <= size:
            return sorted(mine)
        return sorted(i for i, _ in heapq.nsmallest(size, mine.items(), key=_overlap_first))

    def _posting_set(self, token: str, plist: list[int]) -> set[int]:
        """The documents of a token's postings as a set, kept in step with its list (which only grows): whether a
        document holds a common word is then asked without tokenising the document."""
        known = self._sets.get(token)
        if known is None:
            known = self._sets[token] = (0, set())
        done, holds = known
        if done < len(plist):
            holds.update(plist[done:])
            self._sets[token] = (len(plist), holds)
        return holds

    def weights(self, query: frozenset[str]) -> dict[str, float]:
        """IDF weight of each query token (compute once per query)."""
        return {t: self.weight(t) for t in query}

    def similarity(self, query: frozenset[str], doc: int, weights: dict[str, float] | None = None) -> float:
        """IDF-weighted overlap of the query and one document (0..1, same measure as search)."""
        d = self.doc(doc)
        if query.isdisjoint(d):
            return 0.0  # the common case for candidates not found by search; one C call
        w = weights if weights is not None else self.weights(query)
        total = math.fsum(w.values())
        shared = math.fsum(v for t, v in w.items() if t in d)
        return self._blend(shared / total, min(1.0, shared / self._norm(doc))) if total else 0.0


K1, B = 1.2, 0.75  # BM25's usual constants (not tuned here)


class GramStats:
    """Document frequencies of character trigrams over a list of texts, and their total length.

    Trigrams see what words miss: an inflection or a typo keeps most of a word's trigrams, and a
    trigram across a space keeps which words stand together ("app settings").
    """

    def __init__(self, df: dict[str, int] | None = None, n: int = 0, length: int = 0) -> None:
        self.df: dict[str, int] = df if df is not None else {}
        self.n = n
        self.length = length
        self._docs: dict[int, tuple[tuple[str, ...], int]] = {}

    def add_many(self, texts: Iterable[str]) -> None:
        """Count several more documents."""
        df, get = self.df, self.df.get
        for text in texts:
            for g in grams(text):
                df[g] = get(g, 0) + 1
            self.n += 1
            self.length += gram_length(text)

    def doc_grams(self, i: int, text: str) -> tuple[tuple[str, ...], int]:
        """Document i's trigrams and length (kept once a query looked at it: a tuple of interned strings,
        about 0.5 KB, where a set would take four times that)."""
        hit = self._docs.get(i)
        if hit is None:
            hit = self._docs[i] = (tuple(map(sys.intern, grams(text))), gram_length(text))
        return hit

    def snapshot(self) -> GramStats:
        """A copy that later additions do not change."""
        return GramStats(dict(self.df), self.n, self.length)


def nearest_goal(query: str, query_tokens: frozenset[str], cands: Sequence[int], inv: InvertedIndex,
                 stats: GramStats, texts: Sequence[str],
                 left_out: Sequence[int] = ()) -> tuple[list[tuple[int, float]], float]:
    """``cands`` scored by BM25 over the query's word tokens and character trigrams, best first, and the score
    the query itself would get (what a document identical to it scores: the scale of the others).

    Each shared word or trigram adds its IDF once, saturated by the document's length as in BM25;
    ``left_out`` are documents whose trigrams do not count in the frequencies (the caller excluded them).
    """
    if not cands:
        return [], 0.0
    q_grams = grams(query)
    n, total = stats.n, stats.length
    df = stats.df
    minus: dict[str, int] = {}
    for i in left_out:
        n -= 1
        total -= gram_length(texts[i])
        for g in q_grams & grams(texts[i]):
            minus[g] = minus.get(g, 0) + 1
    n = max(1, n)
    avg = max(1.0, total / n)
    g_weight = {}
    for g in q_grams:
        d = max(0, df.get(g, 0) - minus.get(g, 0))
        g_weight[g] = math.log(1 + (n - d + 0.5) / (d + 0.5))
    # A document's trigrams looked up in the query's weights (absent: None, filtered out): the same shared
    # trigrams as an intersection, without building a set per document; fsum does not depend on the order.
    g_get = g_weight.get
    w_get = {t: inv.weight(t) for t in query_tokens}.__getitem__
    kept, doc_grams, docs = stats._docs, stats.doc_grams, inv.docs
    scale, norm = K1 + 1, K1 * B / avg
    out = []
    for i in cands:
        dg = kept.get(i) or doc_grams(i, texts[i])
        words = docs[i]
        if words is None:
            words = inv.doc(i)
        shared = math.fsum(filter(None, map(g_get, dg[0]))) + math.fsum(map(w_get, query_tokens & words))
        out.append((i, shared * scale / (1 + K1 * (1 - B) + norm * dg[1])))
    out.sort(key=lambda x: (-x[1], x[0]))
    own = (math.fsum(g_weight.values()) + math.fsum(inv.weight(t) for t in sorted(query_tokens))) * scale / (
        1 + K1 * (1 - B) + norm * gram_length(query))
    return out, own
