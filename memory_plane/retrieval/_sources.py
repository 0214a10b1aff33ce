"""Retrieval sources: one store's index as retrieval reads it, and what differs by the kind of store.

A source holds the current ``Generation`` of what is derived from its index (``_generation``), kept in step
incrementally (appends index only the new tail) and, for a large index, started from the postings a previous
process persisted (``_postings_cache``). What differs between device memories, episodes and long-term
memories (their text, their features, their hits, a renamed file) is a method of the source's class.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memory_plane.lifecycle import collector_paused, field_num, field_str, field_text, has_symlink, stat_key

from .._inverted_index import GramStats, InvertedIndex
from .._long_term import PROFILE_TYPES
from ._app_prior import AppPrior
from ._features import (
    Feat,
    device_text,
    episode_features,
    episode_text,
    long_term_text,
    memory_features,
    said_text,
)
from ._generation import Generation, HitFields
from ._index_bytes import read_appended
from ._line_entries import NO_ENTRY
from ._postings_cache import REFRESH_AFTER, PersistJob, TokenCache
from ._snapshot import SnapshotFile, StaleSnapshot

if TYPE_CHECKING:
    from ._candidates import EpisodeEvidence, Settled, Verdict
    from ._drops import DropLog
    from ._goal_match import Query
    from ._scoring import Scorer
    from ._snapshot_source import SnapJob
    from ._user_rules import RuleScope

log = logging.getLogger("memory_plane")

def always_recalled(kind: Any, app: Any, always_types: Any) -> bool:
    """Whether an index line of this raw ``type`` and ``app`` is a candidate of every goal: a calibration note, a
    failure mode of no app (device-wide), or one of the source's ``always_types`` (a raw type compares as its
    field_str would: no other value equals these names)."""
    return kind == "calibration" or (kind == "failure" and not app) or kind in always_types


class IndexedStore(Protocol):
    """What retrieval reads of a store: its index's entries, where its files are, and how one is read."""

    dir: Path
    layout: Any  # the store's layout: ``rel_dir`` and ``name_for`` place a hit's file
    index: Any  # the store's IndexFile: its ``path`` dates the index

    def entries(self) -> list[dict[str, Any]]:
        """The index entries (the same list until the index file changes; appends extend it)."""
        ...

    def load_path(self, path: Path) -> Any:
        """The record an item file holds."""
        ...

    def entry_for(self, record: Any) -> dict[str, Any]:
        """The index line of a record."""
        ...

    @property
    def root(self) -> Path:
        """The memory root."""
        ...

    def linked(self) -> bool:
        """Whether the item folder is (under) a symlink: never read then."""
        ...

    def lock(self) -> Any:
        """The store's lock (a context manager)."""
        ...


class RenamingStore(IndexedStore, Protocol):
    """A store that finds an item file a person renamed by the id inside it."""

    def renamed_path(self, item_id: str) -> Path | None:
        """The file that holds ``item_id`` under another name, if any."""
        ...


class Source:
    """One store's index entries as retrieval sees them: the current ``Generation`` of what is derived from
    them, kept in step incrementally, and what differs by the kind of store (the methods subclasses define).

    ``Source`` itself serves stores of one kind of memory file with no behaviour of their own (tests)."""

    label = "index"  # what a warning calls the index when it cannot be read
    # The types of entry recalled for every goal, beyond calibration notes and device-wide failures.
    always_types: frozenset[str] | tuple[str, ...] = ()
    expires = True  # whether status and expiry are asked of a file read now (an episode has neither)
    app_bound_applicability = False  # whether the goal's app counts in applicability (see Scorer.applicability)

    def __init__(self, store: IndexedStore | None = None, cache: TokenCache | None = None) -> None:
        self._store = store  # None: a source built by hand from entries (tests)
        self.cache = cache
        self.gen = Generation([])
        self.persisted = 0  # entries whose postings the cache file holds (as loaded or last written)
        # The snapshot file a fresh process starts this source's generation from (``_snapshot``; None: not kept),
        # what its settled verdicts must have been made under, and the size from which one is written.
        self.snap_file: SnapshotFile | None = None
        self.snap_config = ""
        self.snap_min = 0
        # The generation a snapshot was last asked for, with its lines then (None: none asked for yet, or asked
        # again: the catalog the snapshot named the rules' apps under has changed).
        self._snap_asked: tuple[Generation, int] | None = None

    # -- what differs by kind ------------------------------------------------------------------

    def text(self, e: dict[str, Any]) -> str:
        """The words of an index line that a goal is matched against."""
        return device_text(e)

    def features(self, e: dict[str, Any]) -> Feat:
        """The query-independent facts of one index line."""
        # A device memory's type is the entry's own (the calibration notes hold UI anchors too).
        return memory_features(e, field_str(e.get("type")) or "device", bool(field_num(e.get("evidence"), 0)))

    def app_of(self, app: str) -> str | None:
        """The canonical app of an entry's app name, where the source keeps one (episodes only)."""
        return None

    keeps_apps = False  # whether the source keeps each entry's canonical app and the app prior (``app_of``)

    @property
    def store(self) -> IndexedStore:
        """The store whose index this source reads."""
        assert self._store is not None, "a source built from entries alone has no store"
        return self._store

    def read(self) -> list[dict[str, Any]]:
        """The store's index entries (raises OSError or FileProblemError when the index cannot be read)."""
        return self.store.entries()

    def renamed(self, item_id: str) -> Path | None:
        """The file a person renamed that holds ``item_id`` (None: not found, or the store does not look)."""
        return None

    def empty(self, record: Any) -> bool:
        """Whether a file read now holds nothing to show (only a long-term memory's text can be empty)."""
        return False

    def judge(self, scorer: Scorer, i: int, item_type: str, sim: float, ctx: Query, drop: DropLog,
              evidence: EpisodeEvidence | None) -> Verdict | None:
        """``Scorer.judge`` of one of this source's candidates: the filters of its kind."""
        return scorer.judge_device(self, i, item_type, sim, ctx, drop)

    def judge_all(self, scorer: Scorer, found: dict[int, float], item_type: str, ctx: Query, drop: DropLog,
                  evidence: EpisodeEvidence | None) -> Iterator[Verdict]:
        """``Scorer.judge_all`` of this source's recalled candidates."""
        return scorer.judge_devices(self, found, item_type, ctx, drop)

    def hit_fields(self, e: dict[str, Any], f: Feat, item_type: str, record: Any) -> HitFields:
        """What a hit of this index line shows (from its file too, when ``record`` was read now)."""
        layout = self.store.layout
        path = f"{layout.rel_dir}/{field_str(e.get('path')) or layout.name_for(e['id'])}"
        return HitFields(item_type, field_text(e.get("summary")) or field_text(e.get("title")) or e["id"],
                         field_str(e.get("title")), path, field_str(e.get("page")))

    # -- the generation ------------------------------------------------------------------------

    @property
    def entries(self) -> Sequence[dict[str, Any]]:
        """The index entries of the current generation."""
        return self.gen.entries

    @property
    def inv(self) -> InvertedIndex:
        """The current generation's postings."""
        return self.gen.inv

    def sync(self, entries: list[dict[str, Any]]) -> None:
        """Bring the generation in step with the current entries (a new one when the index was rewritten; the new
        tail indexed after appends)."""
        gen = self.gen
        # The index reader returns the same list object until the file changes; a pure append extends it in
        # place, so only the new tail needs indexing.
        if entries is not gen.entries or len(entries) < len(gen.feats):
            gen = self.gen = Generation(entries)
        start = len(gen.feats)
        if start == len(entries):
            return
        # Postings and fields of thousands of entries (a fresh process: all of them), none in a cycle. The
        # entries were read before this call: a rebuild of a doubtful index from its item files is not held off.
        with collector_paused():
            self._extend(gen, entries, start)

    def _extend(self, gen: Generation, entries: list[dict[str, Any]], start: int) -> None:
        """Index entries ``start``.. (the first ones of a new generation: from the persisted postings if any)."""
        new = entries[start:]
        gen.texts.extend(map(self.text, new))
        self._add_fields(gen, new, start)
        loaded = 0
        counts = None
        keeps_apps = self.keeps_apps
        if start == 0 and self.cache is not None:
            found = self.cache.load(gen.texts, self._apps() if keeps_apps else None)
            if found is not None:
                gen.inv, counts, loaded = found.inv, found.counts, len(found.inv.docs)
            # A file renumbered on load is written again (the next process then loads it as it is).
            self.persisted = 0 if found is not None and found.renumbered else loaded
        if keeps_apps:
            # Episodes only: the trigram frequencies the nearest past goal is found with (loaded with
            # the postings when the file has them, else counted for the documents they lack).
            if gen.inv.grams is None:
                gen.inv.grams = GramStats()
            gen.inv.grams.add_many(gen.texts[gen.inv.grams.n:])
        if loaded and keeps_apps:
            apps = self._apps(loaded)
            if counts is not None:  # what add_postings would count, as the file holds it
                gen.prior = AppPrior.from_counts(counts, apps)
            else:
                gen.prior.add_postings(gen.inv.postings, apps)
        begin = max(start, loaded)
        # Entry i is document i: the documents not loaded are tokenised now (most of a start without a cache).
        first = gen.inv.add_many(gen.texts[begin:])
        if keeps_apps:
            docs, add, canon = gen.inv.docs, gen.prior.add, gen.canon
            for n in range(first, len(docs)):
                app_n = canon[n]
                if app_n:
                    add(app_n, docs[n] or ())

    def _add_fields(self, gen: Generation, new: list[dict[str, Any]], start: int) -> None:
        """Index entries ``start``.. by their app (episodes: also by canonical app) and under ``always``."""
        # One comprehension per field rather than one loop doing all: this runs for every entry when a
        # process first retrieves.
        gen.feats += [None] * len(new)  # parsed on first use: a cold query touches few entries
        apps = [e.get("app") for e in new]
        gen.apps += apps
        gen.not_active.update(i for i, e in enumerate(new, start) if e.get("status") != "active")
        by_app = gen.by_app
        for i, app in enumerate(apps, start):
            if isinstance(app, str):
                by_app.setdefault(app, []).append(i)
        if self.keeps_apps:
            # Each distinct name is looked up once (a device has tens of apps, not thousands).
            canon_of = {a: self.app_of(a) for a in {a for a in apps if isinstance(a, str) and a}}
            canon = [canon_of[a] if isinstance(a, str) and a else None for a in apps]
            gen.canon += canon
            by_canon = gen.by_canon
            for i, c in enumerate(canon, start):
                if c:
                    by_canon.setdefault(c, []).append(i)
        # A raw "type" compares as its field_str would: no other value equals these names.
        profile = self.always_types
        always = [i for i, (t, app) in enumerate(zip([e.get("type") for e in new], apps), start)
                  if always_recalled(t, app, profile)]
        gen.always += always
        gen.always_set.update(always)
        gen.stale_app = gen.stale_app or any(e.get("stale") == "app" for e in new)

    def _apps(self, count: int | None = None) -> list[str]:
        """The canonical app of each of the first ``count`` entries ("": none), as the prior counts them."""
        return [a or "" for a in self.gen.canon[:count]]

    def persist_job(self) -> PersistJob | None:
        """What to write of this source's postings now, as a snapshot (later appends do not change it); counted
        as persisted from here on (one write per lag, even if it fails)."""
        if self.cache is None or self.gen.lines is not None:
            return None
        gen = self.gen
        grams = gen.inv.grams
        job = PersistJob(self.cache, gen.inv, gen.texts[:], grams.snapshot() if grams is not None else None,
                         self._apps() if self.keeps_apps else None)
        self.persisted = len(gen.texts)
        return job

    def app_posterior(self, tokens: frozenset[str], exclude: frozenset[str],
                      nearest: list[tuple[int, float]]) -> dict[str, float]:
        """P(app | goal): the device's past goals (naive Bayes, excluded episodes left out of the counts),
        weighed by the apps of the closest past goals (their squared similarity as votes)."""
        gen = self.gen
        gone = [(app, gen.inv.doc(i)) for i, app in enumerate(gen.canon)
                if app and gen.entries[i]["id"] in exclude] if exclude else []
        post = gen.prior.posterior(tokens, without=gone)
        votes: dict[str, float] = {}
        for i, sim in nearest:
            app = gen.canon[i]
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
        gen = self.gen
        if gen.bound_at != len(gen.entries):  # entries appended: the sets are made again for all of them
            gen.bound, gen.bound_at = {}, len(gen.entries)
        keep = gen.bound.get(apps)
        if keep is None:
            not_active = gen.not_active
            # A number or a list where the app belongs is kept (its Feat.app is not what the field says).
            keep = gen.bound[apps] = frozenset(
                i for i, a in enumerate(gen.apps)
                if i in not_active or (a in apps if a is None or a.__class__ is str else True))
        return {i: sim for i, sim in found.items() if i in keep}

    def cache_due(self) -> bool:
        """Whether the persisted postings lag the index enough to be written again."""
        # A generation started from a snapshot is kept by the snapshot (its texts are made only as asked for).
        return self.cache is not None and self.gen.lines is None and self.cache.due(len(self.gen.texts), self.persisted)

    def feat(self, i: int) -> Feat:
        """Features of entry i (computed once per generation)."""
        feats = self.gen.feats
        f = feats[i]
        if f is None:
            f = feats[i] = self.features(self.gen.entries[i])
        return f


    # -- the snapshot ----------------------------------------------------------------------------

    def keep_snapshot(self, file: SnapshotFile, config: str, min_entries: int) -> None:
        """Start fresh processes' generations from ``file`` once the index has ``min_entries`` lines; its settled
        verdicts are used when made under ``config``."""
        self.snap_file, self.snap_config, self.snap_min = file, config, min_entries

    def sync_snapshot(self) -> bool:
        """Bring the generation in step from the snapshot (a fresh process, or an index changed other than by
        appends): True; False when the index must be read whole (``sync(read())``): no snapshot for it as it is
        now, or this process read it whole already."""
        file = self.snap_file
        gen = self.gen
        if file is None or (gen.lines is None and gen.entries):
            return False
        store = self.store
        if store.linked() or has_symlink(store.root, store.dir):
            return False
        if gen.lines is not None and not gen.stale:
            version = stat_key(Path(store.index.path))
            if version == gen.version or (version is not None and self._appended(gen, version)):
                return True
        from ._snapshot_source import load_generation  # a source kept as a snapshot only

        new = load_generation(self, file, self.snap_config)
        if new is None:
            return False
        # The old generation's snapshot is let go with it (a writer still reading it keeps it until done).
        self.gen = new
        self._snap_asked = (new, new.snap.covered if new.snap is not None else len(new.entries))
        return True

    def _appended(self, gen: Generation, version: tuple[int, int, int]) -> bool:
        """Take in the lines appended to the index since ``gen`` read it (False: it changed otherwise)."""
        lines = gen.lines
        assert lines is not None and gen.version is not None
        if version[2] != gen.version[2] or version[1] <= lines.size:
            return False
        # Only a writer that kept the snapshot in step says the lines read before are still as read (a forget in
        # between blanked some, and is counted there; another hand's change is not vouched for).
        if gen.snap is None or not gen.snap.vouches(version):
            return False
        from ._snapshot_source import add_lines, lines_match

        got = read_appended(Path(self.store.index.path), lines.size, lines.tail(64))
        if got is None or got[1] != version:
            return False
        before = len(lines)
        if not add_lines(lines, got[0], lines.size):
            return False
        if gen.line_facts is None or not lines_match(self.store, gen.line_facts, None, lines):
            return False
        gen.version = version
        self.extend_from(gen, before)
        return True

    def extend_from(self, gen: Generation, start: int) -> None:
        """Index the generation's lines from ``start`` (read from the file after the snapshot)."""
        with collector_paused():
            self._extend(gen, gen.entries, start)  # type: ignore[arg-type]
        gen.inv.holes += sum(1 for i in range(start, len(gen.entries)) if gen.entries[i] is NO_ENTRY)

    def snapshot_due(self) -> bool:
        """Whether a snapshot of the generation should be written now (none for it yet, or it lags by many lines)."""
        file, gen, asked = self.snap_file, self.gen, self._snap_asked
        if file is None or file.disabled or len(gen.entries) < self.snap_min:
            return False
        if asked is not None and asked[0] is gen and len(gen.entries) - asked[1] < min(REFRESH_AFTER, self.snap_min):
            return False
        if gen.lines is None and asked is not None and file.vouches_for(self.store.index.version_of(gen.entries)):
            # The index was read whole again after a writer kept the snapshot in step (a forget): it stands.
            self._snap_asked = (gen, len(gen.entries))
            return False
        return True

    def snapshot_failed(self) -> None:
        """A retrieve met a snapshot it could not read to the end: the generation goes, and the file too when it was
        not written anew meanwhile (damaged: derived, made again from the index), not to be read again here."""
        gen, file = self.gen, self.snap_file
        if gen.snap is None or file is None or not gen.stale:
            return
        self.gen = Generation([])
        if gen.snap.damaged:
            file.drop()
            file.disabled = True

    def snapshot_job(self, scorer: Scorer, scope: RuleScope) -> SnapJob:
        """What to write of the generation's snapshot, captured now (``SnapJob.run`` writes it)."""
        from ._snapshot_source import SnapJob

        self._snap_asked = (self.gen, len(self.gen.entries))
        return SnapJob(self, scorer, self.snap_config, scope)

    def snapshot_apps(self, catalog: Callable[[], str]) -> dict[int, frozenset[str]] | None:
        """The apps each rule of the snapshot names (read once per generation), when named under the catalog as it
        is (``catalog``: its fingerprint); None without a snapshot or under another catalog."""
        gen = self.gen
        if gen.snap is None:
            return None
        if gen.snap_apps is None:
            try:
                kept = gen.snap.rule_apps(catalog())
                if kept is None:
                    # The catalog learned a name since: the apps are found in the lines now, and the snapshot is
                    # written again under the catalog as it is.
                    self._snap_asked = None
                gen.snap_apps = kept or {}
            except StaleSnapshot as exc:
                log.info("retrieve snapshot: %s; the apps rules name are found in their lines", exc)
                gen.stale, gen.snap_apps = True, {}
        return gen.snap_apps

    def id_of(self, i: int) -> str:
        """Entry i's id (from the snapshot's facts when it has them: the line is not parsed)."""
        facts = self.gen.line_facts
        if facts is not None and i < len(facts.ids):
            return facts.ids[i] or ""
        return str(self.gen.entries[i].get("id"))

    def filing_words(self, order: list[int]) -> Callable[[], list[str | None]]:
        """What gives the filing word of each entry of ``order`` (``RulesSaid``): the snapshot's, read on first use,
        else worked out from the line."""
        def words() -> list[str | None]:
            from .._contradiction import stance
            from ._rules_said import filing_word

            gen = self.gen
            kept: dict[int, str] = {}
            if gen.snap is not None:
                try:
                    kept = gen.snap.filing_words()
                except StaleSnapshot as exc:
                    log.info("retrieve snapshot: %s; the rules' stances are made from their lines", exc)
                    gen.stale = True
            out: list[str | None] = []
            for i in order:
                key = kept.get(i)
                if key is None:
                    key = filing_word(stance(said_text(gen.entries[i]))) or ""
                out.append(key or None)
            return out
        return words

    def rule_text(self, i: int, known: Settled) -> str:
        """The lowercase text of a settled entry that a goal's names are looked for in."""
        return known.text if known.text is not None else self.rule_texts([i], {i: known})[0]

    def rule_texts(self, order: list[int], replay: Mapping[int, Settled]) -> list[str]:
        """``rule_text`` of each entry of ``order`` (a snapshot's are read from it, all at once, on first use)."""
        gen = self.gen
        kept: dict[int, str] = {}
        if gen.snap is not None and any(replay[i].text is None for i in order):
            if gen.snap_texts is None:
                try:
                    gen.snap_texts = gen.snap.texts()
                except StaleSnapshot as exc:
                    log.info("retrieve snapshot: %s; the rules' texts are made from their lines", exc)
                    gen.stale, gen.snap_texts = True, {}
            kept = gen.snap_texts
        out = []
        for i in order:
            text = replay[i].text
            if text is None:
                text = kept.get(i)
                if text is None:
                    text = field_text(gen.entries[i].get("summary")).lower()
            out.append(text)
        return out


class DeviceSource(Source):
    """One device collection (procedures, navigation, app profiles, failures, UI anchors, calibration)."""

    def __init__(self, store: RenamingStore | None = None, cache: TokenCache | None = None) -> None:
        super().__init__(store, cache)
        self._renaming = store
        self.label = str(store.dir) if store is not None else "device index"

    def renamed(self, item_id: str) -> Path | None:
        """The file of the collection that holds ``item_id`` under another name."""
        assert self._renaming is not None
        return self._renaming.renamed_path(item_id)


class EpisodeSource(Source):
    """The task episodes: goals matched by words and trigrams, each entry's canonical app and the app prior."""

    label = "episodes index"
    expires = False
    keeps_apps = True

    def __init__(self, store: IndexedStore | None = None, app_of: Callable[[str], str] = str,
                 cache: TokenCache | None = None) -> None:
        super().__init__(store, cache)
        self._app_of = app_of

    def text(self, e: dict[str, Any]) -> str:
        """An episode's goal and app."""
        return episode_text(e)

    def features(self, e: dict[str, Any]) -> Feat:
        """An episode's facts: its outcome is its confidence and validation; it never expires."""
        return episode_features(e)

    def app_of(self, app: str) -> str | None:
        """The catalog's canonical app for an episode's app name."""
        return self._app_of(app)

    def judge(self, scorer: Scorer, i: int, item_type: str, sim: float, ctx: Query, drop: DropLog,
              evidence: EpisodeEvidence | None) -> Verdict | None:
        """``Scorer.judge_episode``, with what the search learned of the goal."""
        assert evidence is not None, "an episode is judged with what the search learned of the goal"
        return scorer.judge_episode(self, i, sim, ctx, drop, evidence)

    def judge_all(self, scorer: Scorer, found: dict[int, float], item_type: str, ctx: Query, drop: DropLog,
                  evidence: EpisodeEvidence | None) -> Iterator[Verdict]:
        """``Scorer.judge_episodes``, with what the search learned of the goal."""
        assert evidence is not None, "episodes are judged with what the search learned of the goal"
        return scorer.judge_episodes(self, found, ctx, drop, evidence)

    def hit_fields(self, e: dict[str, Any], f: Feat, item_type: str, record: Any) -> HitFields:
        """A success or a failure, shown by its summary or goal, titled by its goal."""
        return HitFields("task_episode" if f.validation == 1.0 else "task_episode_failure",
                         field_text(e.get("summary")) or field_text(e.get("goal")), field_str(e.get("goal")),
                         f"{self.store.layout.rel_dir}/{field_str(e.get('path')) or ''}", field_str(e.get("page")))


class LongTermSource(Source):
    """The long-term memories: facts, and the user's rules and preferences (recalled for every goal)."""

    label = "long-term index"
    always_types = PROFILE_TYPES
    app_bound_applicability = True

    def __init__(self, store: RenamingStore | None = None, cache: TokenCache | None = None) -> None:
        super().__init__(store, cache)
        self._renaming = store

    def renamed(self, item_id: str) -> Path | None:
        """The long-term memory file that holds ``item_id`` under another name."""
        assert self._renaming is not None
        return self._renaming.renamed_path(item_id)

    def text(self, e: dict[str, Any]) -> str:
        """A long-term memory's title, summary, tags and entities."""
        return long_term_text(e)

    def features(self, e: dict[str, Any]) -> Feat:
        """A long-term memory's facts (its evidence is the user's word or the session it was learned in)."""
        return memory_features(e, "long_term", True)

    def empty(self, record: Any) -> bool:
        """Whether the memory's text is blank."""
        return not str(getattr(record, "content", "")).strip()

    def judge(self, scorer: Scorer, i: int, item_type: str, sim: float, ctx: Query, drop: DropLog,
              evidence: EpisodeEvidence | None) -> Verdict | None:
        """``Scorer.judge_long_term``."""
        return scorer.judge_long_term(self, i, sim, ctx, drop)

    def judge_all(self, scorer: Scorer, found: dict[int, float], item_type: str, ctx: Query, drop: DropLog,
                  evidence: EpisodeEvidence | None) -> Iterator[Verdict]:
        """``Scorer.judge_rules``: what no word of the goal reaches is replayed."""
        return scorer.judge_rules(self, found, ctx, drop)

    def hit_fields(self, e: dict[str, Any], f: Feat, item_type: str, record: Any) -> HitFields:
        """Its type and summary (the text its file holds now, when read now)."""
        text = field_text(e.get("summary"))
        if record is not None:  # the text as the file holds it now, if a person edited it since
            text = " ".join(str(record.content).split())[:240] or text
        return HitFields(field_str(e.get("type")) or "fact", text, field_str(e.get("title")),
                         f"{self.store.layout.rel_dir}/{field_str(e.get('path')) or ''}", field_str(e.get("page")))
