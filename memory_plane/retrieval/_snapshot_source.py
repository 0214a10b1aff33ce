"""A source's generation started from its snapshot, and the snapshot made of a generation.

``start`` builds a ``Generation`` whose entries are the index file's lines, parsed on first use, from a loaded
``Snapshot``: the facts retrieval asks of every line, the postings read token by token, the rules' settled
verdicts. ``make_job`` captures what a generation knows (on the caller's thread) for a writer thread to turn
into a snapshot file (``SnapJob.run``).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_plane.lifecycle import (
    LockTimeout,
    MemoryPlaneError,
    field_num,
    field_str,
    field_text,
    index_stamp,
    known_matching,
    mark_matching,
    paths_doubt,
)

from .._contradiction import stance
from .._inverted_index import InvertedIndex
from .._long_term import USER_WORD_TYPES
from ._candidates import Cand, Settled
from ._drops import DropCall
from ._features import said_text
from ._generation import Generation
from ._index_bytes import line_offsets, read_index
from ._line_entries import NO_ENTRY, IndexLines, LazyTexts, parse_line
from ._rules_said import filing_word
from ._snapshot import (
    Free,
    FreeVerdict,
    LineFacts,
    SnapData,
    Snapshot,
    SnapshotFile,
    StaleSnapshot,
    word_key,
)
from ._sources import always_recalled

if TYPE_CHECKING:
    from ._scoring import Scorer
    from ._sources import Source
    from ._user_rules import RuleScope

log = logging.getLogger("memory_plane")

SETTLED_AT = datetime(2000, 1, 1, tzinfo=timezone.utc)
"""The time a rule of no clock-bound field is settled at: its verdict does not depend on it (``Scorer._settle``)."""


class SnapPostings(dict[str, list[int]]):
    """Postings read from a snapshot token by token as they are asked for (and the lines appended since, added as
    usual). A snapshot written anew since it was loaded answers nothing more: the generation is then marked stale
    and the next retrieve starts another."""

    def __init__(self, snap: Snapshot, gen: Generation) -> None:
        super().__init__()
        self._snap = snap
        self._gen = gen
        self._absent: set[str] = set()

    def get(self, token: str, default: Any = None) -> Any:  # type: ignore[override]
        """The lines holding ``token`` (read from the snapshot the first time), else ``default``."""
        plist = dict.get(self, token)
        if plist is None and token not in self._absent:
            plist = self._fetch([token]).get(token)
        return default if plist is None else plist

    def prefetch(self, tokens: Iterable[str]) -> None:
        """Read the postings of these tokens at once (the ones not read yet)."""
        want = sorted(t for t in tokens if not dict.__contains__(self, t) and t not in self._absent)
        if want:
            self._fetch(want)

    def _fetch(self, tokens: list[str]) -> dict[str, list[int]]:
        """Read these tokens' postings from the snapshot and keep them (a token no line holds, as absent)."""
        try:
            found = {tokens[0]: self._snap.posting(tokens[0])} if len(tokens) == 1 else self._snap.postings_of(tokens)
        except (StaleSnapshot, ValueError) as exc:
            # Not served as "no memory holds it": the retrieve starts again from the index read whole.
            log.info("retrieve snapshot: %s; the index is read whole", exc)
            self._gen.stale = True
            raise StaleSnapshot(str(exc)) from exc
        out = {}
        for t in tokens:
            plist = found.get(t)
            if plist is None:
                self._absent.add(t)
            else:
                dict.__setitem__(self, t, plist)
                out[t] = plist
        return out

    def __getitem__(self, token: str) -> list[int]:
        plist = self.get(token)
        if plist is None:
            raise KeyError(token)
        return plist  # type: ignore[no-any-return]

    def __contains__(self, token: object) -> bool:
        return isinstance(token, str) and self.get(token) is not None

    def __setitem__(self, token: str, plist: list[int]) -> None:
        self._absent.discard(token)
        dict.__setitem__(self, token, plist)

    def setdefault(self, token: str, default: Any = None) -> Any:  # type: ignore[override]
        """The lines holding ``token``, ``default`` put in first when none does."""
        plist = self.get(token)
        if plist is None:
            self[token] = plist = default
        return plist

    def all(self) -> dict[bytes, list[int]]:
        """Every word's postings by its key under the snapshot's salt: the snapshot's, with the ones added since (a
        writer's full copy)."""
        out = self._snap.all_postings()
        salt = self._snap.salt
        for t, plist in list(dict.items(self)):  # a copy: the caller's thread may read more words meanwhile
            out[word_key(salt, t)] = plist  # a word read from the snapshot and appended to since: the whole list
        return out


def add_lines(lines: IndexLines, piece: bytes, start: int) -> bool:
    """Add the whole lines of ``piece`` (the file's bytes from ``start``, where ``lines`` end) to ``lines``; False
    when one is no one-line entry or the last one has no line break yet (a writer is still at it)."""
    offsets = [start + o for o in line_offsets(piece)]
    if offsets[-1] != start + len(piece):
        return False
    try:
        for a, b in pairwise(offsets):
            parse_line(piece[a - start:b - start])
    except ValueError:
        return False
    if len(offsets) > 1:
        lines.extend(piece, offsets)
    return True


def start(src: Source, snap: Snapshot) -> Generation | None:
    """A generation of ``src`` from its snapshot, the lines appended since read from the file (None: the index
    does not match its item files, or a line appended since is not one entry: it is read whole instead)."""
    store = src.store
    covered, facts = snap.covered, snap.facts
    size = snap.offsets[-1]
    lines = IndexLines(snap.raw, snap.offsets)  # not a copy: the bytes past ``size`` are added as lines below
    if not add_lines(lines, snap.raw[size:], size):
        return None
    if not lines_match(store, facts, snap.checked, lines):
        return None
    gen = Generation(lines)
    gen.version, gen.lines, gen.line_facts, gen.snap = snap.version, lines, facts, snap
    gen.texts = LazyTexts(lines, src.text, covered)
    gen.feats = [None] * covered
    gen.apps = list(facts.apps)
    by_app = gen.by_app
    for i, app in enumerate(gen.apps):
        if isinstance(app, str):
            by_app.setdefault(app, []).append(i)
    gen.not_active = set(facts.not_active)
    gen.always = list(facts.always)
    gen.always_set = set(gen.always)
    gen.stale_app = facts.stale_app
    gen.inv = InvertedIndex.from_postings(SnapPostings(snap, gen), gen.texts)
    gen.inv.holes = covered - sum(1 for i in facts.ids if i is not None)
    if snap.free is not None:
        _settled(src, gen, snap.free, facts)
    if len(lines) > covered:
        src.extend_from(gen, covered)
    return gen


def lines_match(store: Any, facts: LineFacts, checked: Any, lines: IndexLines) -> bool:
    """Whether the index matches its item files, as ``index_doubt`` decides: ``facts`` of the lines a snapshot
    covers, the rest of ``lines`` read from the file; the folder is listed only when the index or a folder changed
    since they were last seen to match (by ``checked``, the stamp the snapshot recorded, or by this process)."""
    stamp = index_stamp(store)
    if checked is not None and json.loads(json.dumps(stamp)) == checked:
        mark_matching(store)
        return True
    covered = len(facts.ids)
    tail = [lines[i] for i in range(covered, len(lines))]
    why = paths_doubt(store, lambda: [*facts.paths, *(e.get("path") for e in tail)],
                      lambda: {*facts.ids, *(e.get("id") for e in tail)} - {None})
    if why is not None:
        log.info("retrieve snapshot of %s not used: %s", store.index.path, why)
    return why is None


def _settled(src: Source, gen: Generation, free: Free, facts: LineFacts) -> None:
    """The snapshot's settled verdicts as the generation keeps them (their text read only when a goal names
    something: ``Source.rule_texts``)."""
    ids = facts.ids
    out = gen.settled_free
    for n, v in zip(free.lines, free.verdicts):
        if v is None:
            out[n] = False
            continue
        calls, verdict = v
        item_id = ids[n] or ""
        cand = None if verdict is None else (verdict[0], Cand(verdict[1], src, n, "long_term", 0.0, verdict[2],
                                                               verdict[3], verdict[4], 0.0, item_id))
        out[n] = Settled(tuple(DropCall(reason, item_id, detail) for reason, detail in calls), cand, None)
    gen.free_at = len(gen.always)


# -- writing ------------------------------------------------------------------------------------


def _facts_of(entries: Iterable[dict[str, Any]], always_types: Any, first: int) -> LineFacts:
    """The line facts of entries (``NO_ENTRY`` for a line that is none) numbered from ``first``."""
    ids: list[str | None] = []
    apps: list[Any] = []
    paths: list[Any] = []
    types: list[str | None] = []
    models: list[bool] = []
    priorities: list[float] = []
    not_active: list[int] = []
    always: list[int] = []
    stale = False
    for n, e in enumerate(entries, first):
        if e is NO_ENTRY:
            ids.append(None)
            apps.append(None)
            paths.append(None)
            types.append(None)
            models.append(False)
            priorities.append(0.0)
            continue
        ids.append(str(e["id"]))
        app, t = e.get("app"), e.get("type")
        apps.append(app)
        paths.append(e.get("path"))
        types.append(field_str(t))
        models.append(e.get("source") == "model")
        priorities.append(field_num(e.get("priority"), 0))
        if e.get("status") != "active":
            not_active.append(n)
        if always_recalled(t, app, always_types):
            always.append(n)
        stale = stale or e.get("stale") == "app"
    return LineFacts(ids, apps, paths, types, models, priorities, not_active, always, stale)


class SnapJob:
    """What a generation knows, captured on the caller's thread, for a writer thread to make a snapshot of."""

    def __init__(self, src: Source, scorer: Scorer, config: str, scope: RuleScope) -> None:
        gen = src.gen
        self.src, self.scorer, self.config, self.scope = src, scorer, config, scope
        self.file: SnapshotFile = src.snap_file  # type: ignore[assignment]
        self.index_path = Path(src.store.index.path)
        self.gen = gen
        self.count = len(gen.texts)  # the entries known now (later appends are not in this snapshot)
        self.version = gen.version if gen.lines is not None else src.store.index.version_of(gen.entries)
        self.always = list(gen.always)
        self.free = dict(gen.settled_free)  # the rest are settled by the writer
        self.checked = index_stamp(src.store) if known_matching(src.store) else None

    def run(self) -> bool:
        """Write the snapshot (False: the index changed since, nothing written); OSError or sqlite3.Error when
        the file cannot be written."""
        if self.version is None:
            return False
        data = self._data()
        if data is None:
            return False
        store = self.src.store

        def under_lock(place: Callable[[], None]) -> bool:
            try:
                with store.lock():
                    place()
            except (LockTimeout, MemoryPlaneError):
                return False
            return True

        return self.file.write(data, self.index_path, under_lock)

    def _data(self) -> SnapData | None:
        gen = self.gen
        assert self.version is not None
        if gen.lines is not None:
            lines: IndexLines = gen.lines
            raw = lines.bytes_upto(self.count)
            entries = [lines[n] for n in range(self.count)]
            line_of = list(range(self.count))
            assert gen.snap is not None and isinstance(gen.inv.postings, SnapPostings)
            salt, keyed = gen.snap.salt, gen.inv.postings.all()
        else:
            read = read_index(self.index_path)
            if read is None or read[1] != self.version:
                return None
            raw = read[0]
            placed = self._lines_of(raw)
            if placed is None:
                return None
            entries, line_of = placed
            salt = secrets.token_bytes(16)
            keyed = {word_key(salt, t): plist for t, plist in list(gen.inv.postings.items())}
        offsets = line_offsets(raw)
        if offsets[-1] != len(raw) or len(offsets) - 1 != len(entries):
            return None
        facts = _facts_of(entries, self.src.always_types, 0)
        count = self.count
        numbered = {t: [line_of[d] for d in plist if d < count] for t, plist in keyed.items()}
        catalog = self.scope.catalog.fingerprint()
        free, texts, said, apps = self._free(entries, line_of)
        if self.src.gen is not self.gen:
            return None  # the generation changed while this was made (what it read of it may be of two)
        checked = self.checked if self.checked is not None and tuple(self.checked[0]) == self.version else None
        return SnapData(self.version, raw, offsets, facts, numbered, salt, free, texts, said, apps, catalog,
                        self.config, checked)

    def _lines_of(self, raw: bytes) -> tuple[list[dict[str, Any]], list[int]] | None:
        """Each line of ``raw`` as an entry (the generation's own, ``NO_ENTRY`` for a comment or blank line), and
        the line of each of the generation's entries; None when the file's lines are not those entries."""
        gen = self.gen
        out: list[dict[str, Any]] = []
        line_of: list[int] = []
        k = 0
        for line in raw.splitlines(keepends=True):
            s = line.strip()
            if not s or s.startswith(b"#"):
                out.append(NO_ENTRY)
            else:
                if k >= self.count or not s.startswith(b"- {"):
                    return None
                e = gen.entries[k]
                try:  # every line as the snapshot's reader will parse it: one JSON entry (no YAML by hand)
                    parsed = parse_line(line)
                except ValueError:
                    return None
                if parsed is None or parsed.get("id") != e.get("id"):
                    return None
                line_of.append(len(out))
                out.append(e)
                k += 1
        return (out, line_of) if k == self.count else None

    def _free(self, entries: list[dict[str, Any]], line_of: list[int]
              ) -> tuple[Free, dict[int, str], dict[int, str], dict[int, frozenset[str]]]:
        """The settled verdict of each always-recalled line of no environment, its text, and a rule's filing word and
        the apps it names."""
        src, scorer = self.src, self.scorer
        known = self.free
        lines: list[int] = []
        verdicts: list[FreeVerdict] = []
        texts: dict[int, str] = {}
        said: dict[int, str] = {}
        apps: dict[int, frozenset[str]] = {}
        for i in self.always:
            if i >= self.count:
                break
            settled = known.get(i)
            if settled is None:
                settled = scorer.settle_free(src, i, SETTLED_AT)
                if settled is None:
                    continue  # of an environment: settled per environment, not kept
            n = line_of[i]
            lines.append(n)
            if settled is False:
                verdicts.append(None)
                continue
            v = settled.verdict
            verdicts.append((tuple((c.reason, c.detail) for c in settled.calls),
                             None if v is None else (v[0], v[1].score, v[1].app_match, v[1].appl, v[1].bonus)))
            text = settled.text if settled.text is not None else field_text(entries[n].get("summary")).lower()
            texts[n] = text
            if field_str(entries[n].get("type")) in USER_WORD_TYPES:
                said[n] = filing_word(stance(said_text(entries[n]))) or ""
                apps[n] = self.scope.apps(entries[n])
        return Free(lines, verdicts), texts, said, apps


def load_generation(src: Source, file: SnapshotFile, config: str) -> Generation | None:
    """A generation of ``src`` started from its snapshot file, when it has one for the index as it is."""
    try:
        snap = file.load(Path(src.store.index.path), config)
    except OSError as exc:
        log.info("retrieve snapshot %s not read: %s", file.path, exc)
        return None
    if snap is None:
        return None
    gen = start(src, snap)
    if gen is None:
        snap.close()
    return gen
