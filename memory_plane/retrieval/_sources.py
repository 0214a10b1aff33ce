"""Retrieval sources: one collection's index entries with their features, postings and app model.

A source is kept in step with its index incrementally (appends index only the new tail) and, for a
large index, starts from the postings a previous process persisted (``_token_cache``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from lifecycle import BUILD_DATE, collector_paused, expiry_believed, field_num, field_str, field_text, parse_ts

from .._inverted_index import GramStats, InvertedIndex
from .._long_term import PROFILE_TYPES
from ._app_prior import AppPrior
from ._postings_cache import PersistJob, TokenCache

log = logging.getLogger("memory_plane")

APP_BOUND = ("procedure", "navigation", "app_profile", "failure", "ui_anchor")
ENV_KEYS = ("device_id", "language", "screen", "app", "input_method")
_ALIASES = {"device_id": ("device_id", "device"), "language": ("language", "lang"), "screen": ("screen", "resolution"),
            "app": ("app", "app_id", "app_name"), "input_method": ("input_method",)}
_OWN_KEYS = frozenset({"device_id", "language", "screen"})  # also read from the entry itself
BAD_TIME = datetime.min  # marks an unparsable timestamp (treated as expired)


class Feat(NamedTuple):
    """What retrieval needs of an entry beyond its text, parsed once."""

    status: str
    expires: datetime | None
    when: datetime | None
    appl: tuple[str | None, ...]
    app: str | None
    confidence: float
    validation: float
    penalty: float
    has_evidence: bool


def parse_when(value: Any) -> datetime | None:
    """A timestamp field as a datetime; None when absent, BAD_TIME when unreadable."""
    if not value:
        return None
    try:
        return parse_ts(value)
    except (ValueError, TypeError, OverflowError):
        return BAD_TIME


def appl_key(e: dict[str, Any]) -> tuple[str | None, ...]:
    """The environment a memory was made under, one lowercase value (or None) per ENV_KEYS."""
    appl = e.get("applicability")
    if not isinstance(appl, dict):
        appl = {}
    out = []
    for key in ENV_KEYS:  # plain loops: this runs for every candidate of a first retrieve
        v = None
        for alias in _ALIASES[key]:
            v = field_str(appl.get(alias))
            if v:
                break
        if not v and key in _OWN_KEYS:
            v = field_str(e.get(key))
        out.append(v.lower() if v else None)
    return tuple(out)


def features(e: dict[str, Any], kind: str) -> Feat:
    """The query-independent facts of one index entry."""
    s, f = max(0, int(field_num(e.get("success_count"), 0))), max(0, int(field_num(e.get("failure_count"), 0)))
    status = (field_str(e.get("status")) or "active").strip().lower()
    if kind == "episode":
        ok = e.get("success") is True
        return Feat(status, None, parse_when(e.get("started_at")), appl_key(e),
                     field_str(e.get("app")), 1.0 if ok else 0.8, 1.0 if ok else 0.5, 0.0, True)
    penalty = 0.0
    # The device source holds every device type: what is app-bound is the entry's own type.
    item_type = (field_str(e.get("type")) or kind) if kind == "device" else kind
    evidence = bool(field_num(e.get("evidence"), 0)) or kind == "long_term"
    if (item_type in APP_BOUND and not evidence) or e.get("traceability") == "excerpt_only":
        penalty = 0.5  # missing evidence or broken traceability (its episodes are gone): downweighted
    if f > s or e.get("conflicts_with"):
        penalty = max(penalty, 0.5)
    when = parse_when(e.get("last_validated_at")) or parse_when(e.get("updated_at"))
    expires = parse_when(e.get("expires_at"))
    if expires is not None and expires is not BAD_TIME and expires < BUILD_DATE and not expiry_believed(
            expires, e.get("created_at"), e.get("updated_at"), e.get("last_validated_at")):
        expires = None  # computed under an unset clock (a phone at 1970): its age is unknown, it is not hidden
    if when is BAD_TIME or (when is not None and when < BUILD_DATE):
        when = None  # unknown, not ancient
    return Feat(status, expires, when,
                 appl_key(e), field_str(e.get("app")), min(1.0, max(0.0, field_num(e.get("confidence", 0.5), 0.0))),
                 (s + 1) / (s + f + 2), penalty, evidence)


class Source:
    """Index entries of one collection, their features and inverted index, kept in step incrementally."""

    def __init__(self, kind: str, text: Callable[[dict[str, Any]], str],
                 app_of: Callable[[str], str] | None = None, cache: TokenCache | None = None) -> None:
        self.kind = kind
        self._text = text
        # Episodes only: each entry's canonical app, and a model of which goal words go with which app.
        self._app_of = app_of
        self.cache = cache
        self.canon: list[str | None] = []
        self.by_canon: dict[str, list[int]] = {}
        self.prior = AppPrior()
        self._key: int | None = None
        self.generation = 0  # counts the resets: what is memoised per entry index holds for one generation
        self.entries: list[dict[str, Any]] = []
        self.texts: list[str] = []  # what each entry's postings were made from (and what the cache hashes)
        self.persisted = 0  # entries whose postings the cache file holds (as loaded or last written)
        self._feats: list[Feat | None] = []
        self.inv = InvertedIndex()
        self.by_app: dict[str, list[int]] = {}
        self.always: list[int] = []  # candidates for every query (calibration, device-wide failures, user rules)
        self.apps: list[Any] = []  # each entry's "app" field as its index line holds it
        self.not_active: set[int] = set()  # entries whose status field is anything but "active" (see app_bound)
        self._bound: dict[frozenset[Any], frozenset[int]] = {}  # app_bound's entries, per apps, while the
        self._bound_at = 0  # entries stay this many
        # Entry -> (its index file, its item file) once the file was found as indexed (see Retriever._current).
        self.indexed_at: dict[int, tuple[Path, str]] = {}

    def sync(self, entries: list[dict[str, Any]]) -> None:
        """Bring the postings in step with the current entries (incrementally after appends)."""
        # The index reader returns the same list object until the file changes; a pure append
        # extends it in place, so only the new tail needs indexing.
        if id(entries) != self._key or len(entries) < len(self._feats):
            self._key = id(entries)
            self.generation += 1
            self.inv, self._feats, self.by_app, self.always = InvertedIndex(), [], {}, []
            self.apps, self.not_active = [], set()
            self._bound, self._bound_at = {}, 0
            self.canon, self.by_canon, self.prior, self.texts = [], {}, AppPrior(), []
            self.indexed_at = {}
        self.entries = entries
        start = len(self._feats)
        if start == len(entries):
            return
        # Postings and fields of thousands of entries (a fresh process: all of them), none in a cycle. The
        # entries were read before this call: a rebuild of a doubtful index from its item files is not held off.
        with collector_paused():
            self._extend(entries, start)

    def _extend(self, entries: list[dict[str, Any]], start: int) -> None:
        """Index entries ``start``.. (the first ones of a new generation: from the persisted postings if any)."""
        new = entries[start:]
        self.texts += map(self._text, new)
        self._add_fields(new, start)
        loaded = 0
        counts = None
        if start == 0 and self.cache is not None:
            found = self.cache.load(self.texts, self._apps() if self._app_of is not None else None)
            if found is not None:
                self.inv, counts, loaded = found.inv, found.counts, len(found.inv.docs)
            self.persisted = loaded
        if self._app_of is not None:
            # Episodes only: the trigram frequencies the nearest past goal is found with (loaded with
            # the postings when the file has them, else counted for the documents they lack).
            if self.inv.grams is None:
                self.inv.grams = GramStats()
            self.inv.grams.add_many(self.texts[self.inv.grams.n:])
        if loaded and self._app_of is not None:
            apps = self._apps(loaded)
            if counts is not None:  # what add_postings would count, as the file holds it
                self.prior = AppPrior.from_counts(counts, apps)
            else:
                self.prior.add_postings(self.inv.postings, apps)
        begin = max(start, loaded)
        # Entry i is document i: the documents not loaded are tokenised now (most of a start without a cache).
        first = self.inv.add_many(self.texts[begin:])
        if self._app_of is not None:
            docs, add = self.inv.docs, self.prior.add
            for n in range(first, len(docs)):
                app_n = self.canon[n]
                if app_n:
                    add(app_n, docs[n] or ())

    def _add_fields(self, new: list[dict[str, Any]], start: int) -> None:
        """Index entries ``start``.. by their app (episodes: also by canonical app) and under ``always``."""
        # One comprehension per field rather than one loop doing all: this runs for every entry when a
        # process first retrieves.
        self._feats += [None] * len(new)  # parsed on first use: a cold query touches few entries
        apps = [e.get("app") for e in new]
        self.apps += apps
        self.not_active.update(i for i, e in enumerate(new, start) if e.get("status") != "active")
        by_app = self.by_app
        for i, app in enumerate(apps, start):
            if isinstance(app, str):
                by_app.setdefault(app, []).append(i)
        if self._app_of is not None:
            # Each distinct name is looked up once (a device has tens of apps, not thousands).
            canon_of = {a: self._app_of(a) for a in {a for a in apps if isinstance(a, str) and a}}
            canon = [canon_of[a] if isinstance(a, str) and a else None for a in apps]
            self.canon += canon
            by_canon = self.by_canon
            for i, c in enumerate(canon, start):
                if c:
                    by_canon.setdefault(c, []).append(i)
        # A raw "type" compares as its field_str would: no other value equals these names.
        profile = PROFILE_TYPES if self.kind == "long_term" else ()
        self.always += [i for i, (t, app) in enumerate(zip([e.get("type") for e in new], apps), start)
                        if t == "calibration" or (t == "failure" and not app) or t in profile]

    def _apps(self, count: int | None = None) -> list[str]:
        """The canonical app of each of the first ``count`` entries ("": none), as the prior counts them."""
        return [a or "" for a in self.canon[:count]]

    def persist_job(self) -> PersistJob | None:
        """What to write of this source's postings now, as a snapshot (later appends do not change it); counted
        as persisted from here on (one write per lag, even if it fails)."""
        if self.cache is None:
            return None
        grams = self.inv.grams
        job = PersistJob(self.cache, self.inv, self.texts[:], grams.snapshot() if grams is not None else None,
                         self._apps() if self._app_of is not None else None)
        self.persisted = len(self.texts)
        return job

    def app_posterior(self, tokens: frozenset[str], exclude: frozenset[str],
                      nearest: list[tuple[int, float]]) -> dict[str, float]:
        """P(app | goal): the device's past goals (naive Bayes, excluded episodes left out of the counts),
        weighed by the apps of the closest past goals (their squared similarity as votes)."""
        gone = [(app, self.inv.doc(i)) for i, app in enumerate(self.canon)
                if app and self.entries[i]["id"] in exclude] if exclude else []
        post = self.prior.posterior(tokens, without=gone)
        votes: dict[str, float] = {}
        for i, sim in nearest:
            app = self.canon[i]
            if app:
                votes[app] = votes.get(app, 0.0) + sim * sim
        total = sum(votes.values())
        if total > 0:
            # The two experts multiply; the floor keeps an app no close goal voted for possible.
            post = {app: p * (0.1 + votes.get(app, 0.0) / total) for app, p in post.items()}
            z = sum(post.values())
            post = {app: p / z for app, p in post.items()} if z > 0 else {}
        return post

    def app_bound(self, found: dict[int, float], apps: frozenset[Any]) -> dict[int, float]:
        """The candidates of ``found`` whose app is one of ``apps`` (as ``Feat.app`` reads it), whose status field
        is not plainly "active", or whose app field is no text: only these can be about a goal of those apps
        when the memory is bound to its app."""
        keep = self._bound.get(apps)
        if keep is None or self._bound_at != len(self.entries):
            if self._bound_at != len(self.entries) or len(self._bound) > 256:
                self._bound, self._bound_at = {}, len(self.entries)
            # A number or a list where the app belongs is kept (its Feat.app is not what the field says).
            keep = self._bound[apps] = frozenset(
                i for i, a in enumerate(self.apps)
                if i in self.not_active or (a in apps if a is None or a.__class__ is str else True))
        return {i: sim for i, sim in found.items() if i in keep}

    def cache_due(self) -> bool:
        """Whether the persisted postings lag the index enough to be written again."""
        return self.cache is not None and self.cache.due(len(self.texts), self.persisted)

    def feat(self, i: int) -> Feat:
        """Features of entry i (computed once)."""
        f = self._feats[i]
        if f is None:
            f = features(self.entries[i], self.kind)
            self._feats[i] = f
        return f


def device_text(e: dict[str, Any]) -> str:
    """The words of a device memory's index line that a goal is matched against."""
    return " ".join(x for x in map(field_text, (e.get("title"), e.get("summary"), e.get("app_name"), e.get("app"),
                                           e.get("page"), e.get("tags"))) if x)


def episode_text(e: dict[str, Any]) -> str:
    """The words of an episode's index line that a goal is matched against (its goal and app)."""
    goal, app = e.get("goal"), e.get("app")
    if isinstance(goal, str) and (app is None or isinstance(app, str)):  # the usual line, 10,000 times at start-up
        return f"{goal} {app}" if goal and app else goal or app or ""
    return " ".join(x for x in map(field_text, (goal, app)) if x)


def long_term_text(e: dict[str, Any]) -> str:
    """The words of a long-term memory's index line that a goal is matched against."""
    fields = (e.get("title"), e.get("summary"), e.get("tags"), e.get("entities"))
    return " ".join(x for x in map(field_text, fields) if x)
