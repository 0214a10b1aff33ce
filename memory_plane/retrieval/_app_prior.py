"""Which app a goal is about, learned from this device's own episodes (multinomial naive Bayes).

The device's past goals say which words go with which app ("B站" with 哔哩哔哩, "spent on taxis" with a
budgeting app), including words no shipped alias table knows. The model is counts only: it grows by
appends as episodes are indexed, forgets a document by subtracting it, and answers a posterior over
the apps in a time proportional to the query's postings, not to the number of apps times the vocabulary.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

ALPHA = 0.5  # Lidstone smoothing: half a count for a word an app has never been seen with


class AppPrior:
    """Token counts per app over indexed goals; ``posterior(tokens)`` gives P(app | goal)."""

    def __init__(self, alpha: float = ALPHA) -> None:
        self.alpha = alpha
        self.docs: dict[str, int] = {}  # app -> documents
        self.mass: dict[str, int] = {}  # app -> tokens counted
        self.counts: dict[str, dict[str, int]] = {}  # token -> app -> count
        self.total_docs = 0
        self._cache: tuple[int, dict[str, float], dict[str, float]] | None = None  # (docs, prior, denominator)
        self._gain: list[float] = []  # log((c + alpha) / alpha) for small counts c

    @classmethod
    def from_counts(cls, counts: dict[str, dict[str, int]], apps: Sequence[str], alpha: float = ALPHA) -> AppPrior:
        """The prior ``add_postings`` makes of documents whose apps are ``apps`` ("": not counted), given the token
        counts it made of them (``counts``, taken as they are)."""
        prior = cls(alpha)
        docs = Counter(apps)  # in order of first appearance, as add_postings counts them
        docs.pop("", None)
        prior.docs, prior.total_docs = dict(docs), sum(docs.values())
        mass = prior.mass
        for per in counts.values():
            for app, c in per.items():
                mass[app] = mass.get(app, 0) + c
        prior.counts = counts
        return prior

    def add(self, app: str, toks: Iterable[str]) -> None:
        """Count one document (its distinct tokens) for an app."""
        counts = self.counts  # this loop runs for every episode when a process first retrieves
        n = 0
        for t in toks:
            per = counts.get(t)
            if per is None:
                counts[t] = {app: 1}
            else:
                per[app] = per.get(app, 0) + 1
            n += 1
        self._cache = None
        self.docs[app] = self.docs.get(app, 0) + 1
        self.mass[app] = self.mass.get(app, 0) + n
        self.total_docs += 1

    def add_postings(self, postings: Mapping[str, Sequence[int]], apps: Sequence[str]) -> None:
        """Count documents given as postings (token -> document numbers); ``apps[n]`` is document n's app
        ("": not counted). The same counts as ``add`` for each document, without the documents."""
        for app in apps:
            if app:
                self.docs[app] = self.docs.get(app, 0) + 1
                self.total_docs += 1
        counts, mass, app_of = self.counts, self.mass, apps.__getitem__
        for t, plist in postings.items():
            per = Counter(map(app_of, plist))  # counted in C: this runs once per token at start-up
            per.pop("", None)
            if not per:
                continue
            have = counts.get(t)
            if have is None:
                counts[t] = dict(per)
            else:
                for app, c in per.items():
                    have[app] = have.get(app, 0) + c
            for app, c in per.items():
                mass[app] = mass.get(app, 0) + c
        self._cache = None

    def posterior(self, query: Iterable[str], without: Iterable[tuple[str, Iterable[str]]] = ()) -> dict[str, float]:
        """P(app | query tokens) over every app seen; ``without`` leaves documents out (app, tokens)."""
        without = list(without)
        if not without:
            return self._posterior_all(query)
        docs, mass = dict(self.docs), dict(self.mass)
        minus: dict[tuple[str, str], int] = {}
        total = self.total_docs
        for app, toks in without:
            if docs.get(app, 0) <= 0:
                continue
            docs[app] -= 1
            total -= 1
            for t in toks:
                minus[(t, app)] = minus.get((t, app), 0) + 1
                mass[app] -= 1
        apps = [a for a, n in docs.items() if n > 0]
        if not apps:
            return {}
        # A word only the left-out documents had is unseen now: out of the vocabulary and the query.
        removed: dict[str, int] = {}
        for (t, _), v in minus.items():
            removed[t] = removed.get(t, 0) + v
        gone = {t for t, v in removed.items() if sum(self.counts[t].values()) <= v}
        vocab = max(1, len(self.counts) - len(gone))
        a = self.alpha
        known = [t for t in sorted(set(query)) if t in self.counts and t not in gone]
        if not _evidence(known):
            return {}
        prior = {app: math.log((docs[app] + 1) / (total + len(apps))) for app in apps}
        # An app whose documents hold no token has no mass (add_postings and from_counts count none for it).
        denominator = {app: math.log((mass.get(app, 0) + a * vocab) / a) for app in apps}
        return self._normalise(prior, denominator, known, minus)

    def _posterior_all(self, query: Iterable[str]) -> dict[str, float]:
        # The usual call: per-app terms depend only on the counts, so they are kept until the next add.
        if self._cache is None or self._cache[0] != self.total_docs:
            apps = [a for a, n in self.docs.items() if n > 0]
            vocab = max(1, len(self.counts))
            a = self.alpha
            prior = {app: math.log((self.docs[app] + 1) / (self.total_docs + len(apps))) for app in apps}
            denominator = {app: math.log((self.mass.get(app, 0) + a * vocab) / a) for app in apps}
            self._cache = (self.total_docs, prior, denominator)
        _, prior, denominator = self._cache
        if not prior:
            return {}
        known = [t for t in sorted(set(query)) if t in self.counts]
        if not _evidence(known):
            return {}  # no word of the goal was ever seen with an app: the base rate is no opinion of it
        return self._normalise(prior, denominator, known, {})

    def _normalise(self, prior: dict[str, float], denominator: dict[str, float], known: list[str],
                   minus: dict[tuple[str, str], int]) -> dict[str, float]:
        # Every app starts from its prior and "no query word seen"; the apps a word was seen with gain
        # log((c + a) / a) for it. Only the postings of the query's words are visited.
        m = len(known)
        ll = {app: p - m * denominator[app] for app, p in prior.items()}
        gain = self._gain
        for t in known:
            for app, c in self.counts[t].items():
                if minus:
                    c -= minus.get((t, app), 0)
                if c > 0 and app in ll:
                    while c >= len(gain):
                        gain.append(math.log((len(gain) + self.alpha) / self.alpha))
                    ll[app] += gain[c]
        top = max(ll.values())
        exp = {app: math.exp(v - top) for app, v in ll.items()}
        z = sum(exp.values())
        return {app: v / z for app, v in exp.items()}


def _evidence(known: list[str]) -> bool:
    """Whether the goal's seen words say anything of its app (numbers are quantities, not what it is about)."""
    return any(not t.isdigit() for t in known)
