"""Which active memories a save must look at: a derived index from a memory's words to its file.

A save compares the new text with the active memories of its type (the same text, a broader memory, one it
replaces, one it contradicts, one on the same subject). Reading every memory file for that makes a save cost
seconds at ten thousand memories. This index keeps, per active memory, keys that every such memory must share
with the new text, so a save reads only the files that may match and decides on them exactly as before:

- ``h``: the normalised text's digest (the same text);
- ``w``/``c``/``wp``/``ws``: its words, CJK character pairs, and the first and last four letters of each word
  (a broader memory holds the new text: an inner word of it is a word of the memory, an edge word the start or
  end of one);
- ``p``: the digest of its first ``T`` characters, ``T`` the largest power of two from 4 not over its length
  (the memory is inside the new text: some piece of the new text starts with those characters);
- ``e``/``g``: its entities and tags (the same subject needs both);
- for rules and preferences, with whether they are negated: ``t`` the tokens of the text without its negation
  and obligation words and ``tl`` their number, ``q`` the character trigrams of that text without spaces and
  ``ql`` its length (two rules that say the opposite share enough of these; see ``_contradiction_keys``).

The item files stay the truth. The index lives in ``long_term/candidates.sqlite``, records each file's mtime
and size, and the memory folder's mtime after its last write: a save that finds the folder changed since
(a file added, removed or renamed by another hand) brings the index up to date from the files first, and
``verify`` compares every file with its row and rebuilds what differs. Deleted rows are overwritten
(``secure_delete``): a forgotten memory's words do not stay in the file's free pages.

Beside them, ``lines`` says where each memory's index.yaml line was last seen to start: a forget blanks the line
there in place (``IndexFile.blank_out`` checks the line before it trusts the place) instead of searching the file.
A save notes the line it appended; a rebuild of the index notes every line (``meta.lines`` names the index file
they were noted in, so a rebuild that left the file as it was does not note them again).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sqlite3
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memory_plane.lifecycle import UnsafePathError, open_dir, own_fd_like_folder

from ._contradiction import _strip, meaning_length
from ._long_term_model import GENERIC_ENTITIES, PROFILE_TYPES, USER_WORD_TYPES, LongTermMemory, _norm
from ._long_term_opposites import _missing, _opposite
from ._tokens import token_set

__all__ = ["CANDIDATES_NAME", "CandidateIndex", "Probe"]

log = logging.getLogger("memory_plane")

CANDIDATES_NAME = "candidates.sqlite"
_VERSION = "5"  # 5: a rule's token count (4: each replaced memory's successor, which a forget finds here)
_COMMON = 2000  # a key held by this many memories counts as common (a count never reads further)
_BATCH = 500  # keys per query (SQLite's limit on bound values is 999 in old builds)
_WORD = re.compile(r"[a-z0-9]+")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (name TEXT PRIMARY KEY, id TEXT NOT NULL, type TEXT NOT NULL, status TEXT NOT NULL,
                                  priority INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL,
                                  superseded_by TEXT);
CREATE TABLE IF NOT EXISTS keys (k TEXT NOT NULL, name TEXT NOT NULL, PRIMARY KEY (k, name)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS keys_name ON keys (name);
CREATE INDEX IF NOT EXISTS items_order ON items (status, priority DESC, id);
CREATE INDEX IF NOT EXISTS items_successor ON items (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE TABLE IF NOT EXISTS lines (name TEXT PRIMARY KEY, at INTEGER NOT NULL) WITHOUT ROWID;
"""


def _version(db: sqlite3.Connection) -> str | None:
    try:
        row = db.execute("SELECT value FROM meta WHERE name = 'version'").fetchone()
    except sqlite3.OperationalError:
        return None  # a new file
    return str(row[0]) if row else None


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def _tiers(n: int) -> Iterator[int]:
    t = 4
    while t <= n:
        yield t
        t *= 2


def _words(norm: str) -> list[tuple[str, bool, bool]]:
    """Each run of Latin letters and digits: (the run, whether it touches the start, the end)."""
    return [(m.group(), m.start() == 0, m.end() == len(norm)) for m in _WORD.finditer(norm)]


def _is_cjk(c: str) -> bool:
    # Compared, not matched: a regex class over these blocks takes milliseconds to compile at import.
    return "\u3400" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff"


def _cjk_pairs(norm: str) -> set[str]:
    return {norm[i:i + 2] for i in range(len(norm) - 1) if _is_cjk(norm[i]) and _is_cjk(norm[i + 1])}


def _compact(text: str) -> tuple[str, bool]:
    """(the text without negation and obligation words and without spaces, whether it was negated)."""
    stripped, negated = _strip(text)
    return stripped.replace(" ", ""), negated


def memory_keys(kind: str, norm: str, entities: Iterable[str], tags: Iterable[str]) -> set[str]:
    """The keys an active memory of this type, text (normalised), entities and tags is found by."""
    keys = {f"h:{_digest(norm)}"}
    tier = max(_tiers(len(norm)), default=0)
    if tier:
        keys.add(f"p:{_digest(norm[:tier])}")
    for word, _, _ in _words(norm):
        keys.add(f"w:{word}")
        if len(word) >= 4:
            keys.update((f"wp:{word[:4]}", f"ws:{word[-4:]}"))
    keys.update(f"c:{pair}" for pair in _cjk_pairs(norm))
    keys.update(f"e:{e.lower()}" for e in entities)
    keys.update(f"g:{t.lower()}" for t in tags)
    if kind in USER_WORD_TYPES:
        stripped, negated = _strip(norm)
        compact = stripped.replace(" ", "")
        n = int(negated)
        toks = token_set(stripped)
        keys.update(f"t{n}:{tok}" for tok in toks)
        keys.add(f"tl{n}:{len(toks)}")
        keys.update(f"q{n}:{compact[i:i + 3]}" for i in range(len(compact) - 2))
        keys.add(f"ql{n}:{len(compact)}")
    return {f"{kind}|{k}" for k in keys}


@dataclass
class Probe:
    """What a save looks for: its type, its normalised text, its entities and tags."""

    type: str
    norm: str
    entities: list[str]
    tags: list[str]


class CandidateIndex:
    """``long_term/candidates.sqlite``: the keys of each active memory file, and each file's mtime and size."""

    def __init__(self, folder: Path, items_dir: Path, root: Path) -> None:
        self.path = Path(folder) / CANDIDATES_NAME
        self.items_dir = Path(items_dir)
        self.root = Path(root)

    # -- the file ---------------------------------------------------------------

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        # SQLite opens its file by path: a link planted there would be followed, so it is refused first, and a
        # new file is made here, through the folder's descriptor, owned like its folder (a command run by root
        # leaves the tree its owner's).
        try:
            if stat.S_ISLNK(os.lstat(self.path).st_mode):
                raise UnsafePathError(str(self.path), "the candidates index is a symlink; nothing is written there")
        except FileNotFoundError:
            self._create()
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA secure_delete = ON")  # a forgotten memory's words do not stay in free pages
            db.execute("PRAGMA journal_mode = DELETE")
            db.execute("PRAGMA synchronous = FULL")
            if _version(db) not in (None, _VERSION):
                # Made by another version of this module: derived data, made again from the files.
                db.executescript("DROP TABLE IF EXISTS keys; DROP TABLE IF EXISTS items; DROP TABLE IF EXISTS meta; "
                                "DROP TABLE IF EXISTS lines;")
            db.executescript(_SCHEMA)
            yield db
        finally:
            db.close()

    def _create(self) -> None:
        dfd = open_dir(self.root, self.path.parent, create=True)
        try:
            try:
                fd = os.open(self.path.name, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644,
                             dir_fd=dfd)
            except FileExistsError:
                return  # made by another process meanwhile
            try:
                own_fd_like_folder(dfd, fd)
            finally:
                os.close(fd)
        finally:
            os.close(dfd)

    def _folder_stamp(self) -> str:
        try:
            st = os.stat(self.items_dir)
        except FileNotFoundError:
            return "absent"
        return f"{st.st_mtime_ns}:{st.st_ino}"

    def current(self) -> bool:
        """Whether the index exists, is of this version, and the memory folder is as it last saw it."""
        if not self.path.is_file():
            return False
        try:
            with self._db() as db:
                meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
        except sqlite3.Error:
            return False
        return meta.get("version") == _VERSION and meta.get("folder") == self._folder_stamp()

    # -- writing ----------------------------------------------------------------

    def put(self, path: Path, mem: LongTermMemory, line_at: int | None = None) -> None:
        """Record one memory file as it is now (the caller holds the store's lock and wrote it); ``line_at``: where
        its index line starts, when the write appended it."""
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            self._put(db, path, mem, line_at)
            self._seal(db)
            db.execute("COMMIT")

    def drop(self, names: Iterable[str], *, seal: bool = True) -> None:
        """Forget the rows of these memory files (removed). ``seal=False``: the index was behind the folder before
        (it stays so: the rows go, the folder is not recorded as seen)."""
        if not self.path.is_file():
            return
        try:
            with self._db() as db:
                db.execute("BEGIN IMMEDIATE")
                for name in names:
                    self._drop(db, name)
                if seal:
                    self._seal(db)
                db.execute("COMMIT")
        except sqlite3.DatabaseError:
            if seal:
                raise
            # A file SQLite cannot read may still hold the words: derived data, made again from the items.
            self.path.unlink(missing_ok=True)

    def note_lines(self, index_file: str, starts: Iterable[tuple[str, int]]) -> None:
        """Record where each memory file's index line starts (file name, byte offset) in the index file
        ``index_file`` names (``lines_stamp``): the hints a forget finds the lines by (``IndexFile.blank_out``
        checks each before use)."""
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT OR REPLACE INTO lines VALUES (?, ?)", starts)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('lines', ?)", (index_file,))
            db.execute("COMMIT")

    def lines_noted(self, index_file: str) -> bool:
        """Whether the hints were noted in the index file ``index_file`` names (it was not rewritten since)."""
        if not self.path.is_file():
            return False
        try:
            with self._db() as db:
                row = db.execute("SELECT value FROM meta WHERE name = 'lines'").fetchone()
        except sqlite3.Error:
            return False
        return row is not None and row[0] == index_file

    def new_line_safe(self, name: str) -> bool:
        """Whether a save of this memory file may append its index.yaml line without reading the index: the index
        has no row of it, and no file was found removed by another hand since index.yaml was last rebuilt."""
        with self._db() as db:
            behind, row = db.execute("SELECT (SELECT value FROM meta WHERE name = 'index_behind'), "
                                     "(SELECT 1 FROM items WHERE name = ?)", (name,)).fetchone()
        return behind is None and row is None

    def index_caught_up(self) -> None:
        """Say that index.yaml was just rebuilt from the files (``new_line_safe``); nothing is written when it was
        not said to be behind (a tree that cannot be written is read, verified and left as it is)."""
        if not self.path.is_file():
            return
        try:
            with self._db() as db:
                if db.execute("SELECT 1 FROM meta WHERE name = 'index_behind'").fetchone() is not None:
                    db.execute("DELETE FROM meta WHERE name = 'index_behind'")
        except sqlite3.Error as exc:  # a tree that cannot be written: saves read the index until it can be
            log.info("%s: the rebuilt index was not noted: %s", self.path, exc)

    def line_hints(self, names: Iterable[str]) -> dict[str, int]:
        """Memory id -> where its index line was last seen to start, for these files (those that have a hint)."""
        wanted = list(names)
        out: dict[str, int] = {}
        with self._db() as db:
            for i in range(0, len(wanted), _BATCH):
                part = wanted[i:i + _BATCH]
                marks = ",".join("?" * len(part))
                out.update((str(mem_id), int(at)) for mem_id, at in db.execute(
                    f"SELECT items.id, lines.at FROM lines JOIN items USING (name) WHERE name IN ({marks})", part))
        return out

    def _put(self, db: sqlite3.Connection, path: Path, mem: LongTermMemory, line_at: int | None = None) -> None:
        name = Path(path).name
        try:
            st = os.stat(path)
        except FileNotFoundError:
            self._drop(db, name)
            return
        # Its rows made again; where its index line starts is kept unless the write says anew (a hint, checked before
        # use: a save that left the line as it was keeps it right).
        self._drop(db, name, keep_line=True)
        successor = mem.superseded_by if mem.status == "replaced" and isinstance(mem.superseded_by, str) else None
        db.execute("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (name, mem.id, mem.type, mem.status, mem.priority, st.st_mtime_ns, st.st_size, successor))
        if line_at is not None:
            db.execute("INSERT OR REPLACE INTO lines VALUES (?, ?)", (name, line_at))
        if mem.status == "active":
            keys = memory_keys(mem.type, _norm(mem.content), mem.entities, mem.tags)
            db.executemany("INSERT OR IGNORE INTO keys VALUES (?, ?)", ((k, name) for k in keys))

    @staticmethod
    def _drop(db: sqlite3.Connection, name: str, *, keep_line: bool = False) -> None:
        db.execute("DELETE FROM keys WHERE name = ?", (name,))
        db.execute("DELETE FROM items WHERE name = ?", (name,))
        if not keep_line:
            db.execute("DELETE FROM lines WHERE name = ?", (name,))

    def _seal(self, db: sqlite3.Connection) -> None:
        db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                       [("version", _VERSION), ("folder", self._folder_stamp())])

    def differences(self, paths: Iterable[Path]) -> tuple[list[str], list[str]]:
        """(the files whose row is missing or says another mtime or size, the rows of files that are gone).

        A list of paths is looked up in the rows read whole; any other iterable must come sorted by name, and is
        merged with the rows read in that order (a large store's rows are never all held)."""
        if not isinstance(paths, list):
            return self._merged_differences(paths)
        rows = self._rows()
        changed: list[str] = []
        seen: set[str] = set()
        for p in paths:
            seen.add(p.name)
            try:
                st = os.stat(p)
            except FileNotFoundError:
                continue
            if rows.get(p.name) != (st.st_mtime_ns, st.st_size):
                changed.append(p.name)
        return changed, sorted(set(rows) - seen)

    def _merged_differences(self, paths: Iterable[Path]) -> tuple[list[str], list[str]]:
        changed: list[str] = []
        gone: list[str] = []
        rows = self._sorted_rows()
        row = next(rows, None)
        for p in paths:
            name = p.name
            while row is not None and row[0] < name:
                gone.append(row[0])
                row = next(rows, None)
            have = None
            if row is not None and row[0] == name:
                have = (row[1], row[2])
                row = next(rows, None)
            try:
                st = os.stat(p)
            except FileNotFoundError:
                continue
            if have != (st.st_mtime_ns, st.st_size):
                changed.append(name)
        while row is not None:
            gone.append(row[0])
            row = next(rows, None)
        return changed, sorted(gone)

    def _sorted_rows(self) -> Iterator[tuple[str, int, int]]:
        """(name, mtime_ns, size) of every row, by name; none when the file is missing or cannot be read."""
        if not self.path.is_file():
            return
        try:
            with self._db() as db:
                yield from db.execute("SELECT name, mtime_ns, size FROM items ORDER BY name")
        except sqlite3.DatabaseError:
            return  # the files left count as rowless (changed): refresh makes the file again

    def _rows(self) -> dict[str, tuple[int, int]]:
        if not self.path.is_file():
            return {}
        try:
            with self._db() as db:
                return {n: (m, s) for n, m, s in db.execute("SELECT name, mtime_ns, size FROM items")}
        except sqlite3.DatabaseError:
            return {}

    def refresh(self, records: dict[str, LongTermMemory | None], gone: Iterable[str], *,
                index_behind: bool = False) -> None:
        """Rewrite the rows of these files (None: a file that does not load, left out) and drop the gone;
        ``index_behind``: index.yaml may still have lines of the gone ones (until ``index_caught_up``)."""
        try:
            self._refresh(records, gone, index_behind)
        except sqlite3.DatabaseError:
            # A file SQLite cannot read (torn, hand-edited) is derived data: made again from the items.
            self.path.unlink(missing_ok=True)
            self._refresh(records, gone, index_behind)

    def _refresh(self, records: dict[str, LongTermMemory | None], gone: Iterable[str], index_behind: bool) -> None:
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            if index_behind:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('index_behind', '1')")
            for name in gone:
                self._drop(db, name)
            for name, mem in records.items():
                if mem is None:
                    self._drop(db, name)
                else:
                    self._put(db, self.items_dir / name, mem)
            self._seal(db)
            db.execute("COMMIT")

    # -- reading ----------------------------------------------------------------

    def names_of(self, types: Iterable[str]) -> list[str]:
        """The files of the active memories of these types, by name."""
        wanted = list(types)
        with self._db() as db:
            marks = ",".join("?" * len(wanted))
            return sorted(n for (n,) in db.execute(
                f"SELECT name FROM items WHERE status = 'active' AND type IN ({marks})", wanted))

    def replaced_by(self, mem_id: str) -> list[str]:
        """The ids of the replaced memories whose file names ``mem_id`` as what replaced them (along an index: as
        many rows as there are, whatever the store)."""
        with self._db() as db:
            return sorted(i for (i,) in db.execute(
                "SELECT id FROM items WHERE superseded_by = ? AND status = 'replaced'", (mem_id,)))

    def profile_order(self, limit: int) -> list[tuple[str, str]]:
        """(file name, id) of the first ``limit`` active profile, rule and preference memories, in profile.md's
        order (read along the index on status, priority and id: as many rows as asked, whatever the store)."""
        with self._db() as db:
            rows = db.execute("SELECT name, id FROM items WHERE status = 'active' AND type IN (?, ?, ?) "
                              "ORDER BY priority DESC, id LIMIT ?", (*PROFILE_TYPES, limit)).fetchall()
        return [(n, i) for n, i in rows]

    def candidates(self, probe: Probe) -> list[str] | None:
        """The files of the active memories a save of this text may match, by name (None: every one may)."""
        with self._db() as db:
            look = _Lookup(db, probe.type)
            found = look.union([f"h:{_digest(probe.norm)}"])
            found |= look.union(_inside_keys(probe.norm))
            if meaning_length(probe.norm) >= 8:
                broader = _broader_keys(probe.norm)
                if broader is None:
                    return None
                # A broader memory holds every one of these keys: the files holding all the chosen ones.
                every = look.sharing(dict.fromkeys(broader, 1), 0)
                found |= set(every.held_by) if every is not None else set()
            ents = [f"e:{e.lower()}" for e in probe.entities if e.lower() not in GENERIC_ENTITIES]
            if ents and probe.tags:
                found |= look.union(ents) & look.union([f"g:{t.lower()}" for t in probe.tags])
            if probe.type in USER_WORD_TYPES:
                found |= _opposite(look, probe.norm)
        return sorted(found)


class _Lookup:
    """Postings of one type's keys."""

    def __init__(self, db: sqlite3.Connection, kind: str) -> None:
        self.db = db
        self.kind = kind
        self._counts: dict[str, int] = {}

    def union(self, keys: Iterable[str]) -> set[str]:
        """The files holding any of these keys."""
        found: set[str] = set()
        batch = [f"{self.kind}|{k}" for k in dict.fromkeys(keys)]
        for i in range(0, len(batch), _BATCH):
            part = batch[i:i + _BATCH]
            found.update(n for (n,) in self.db.execute(
                f"SELECT name FROM keys WHERE k IN ({','.join('?' * len(part))})", part))
        return found

    def count(self, key: str) -> int:
        """How many files hold a key, counted up to ``_COMMON``."""
        if key not in self._counts:
            row = self.db.execute("SELECT COUNT(*) FROM (SELECT 1 FROM keys WHERE k = ? LIMIT ?)",
                                  (f"{self.kind}|{key}", _COMMON)).fetchone()
            self._counts[key] = int(row[0])
        return self._counts[key]

    def rarest(self, keys: list[str]) -> str:
        """The key the fewest files hold."""
        return min(keys, key=self.count)

    def by_rarity(self, keys: Iterable[str]) -> list[str]:
        """The keys, the one the fewest files hold first."""
        return sorted(keys, key=self.count)

    def sharing(self, places: dict[str, int], broken: int) -> Shared | None:
        """The files holding enough of these keys that a match may be among them (None: no choice narrows).

        ``places`` says, per key of the new text, at how many of its places it stands; a match has at most
        ``broken`` of the text's places broken, and lacks a key only when every place of it is broken. So of
        any chosen keys a match lacks at most as many as the fewest-placed of them whose places add up to no
        more than ``broken`` (``_missing``), and holds the rest: the files holding fewer are no match. The
        rarest keys are chosen until they cover more places than can break (then a match holds one of them),
        and further rare keys while their files stay within ``_BUDGET`` rows (each raises the count a match
        must reach); a key held by ``_COMMON`` files is read only when nothing rarer covers enough.
        """
        chosen: list[str] = []
        covered = rows = 0
        for key in self.by_rarity(places):
            held = self.count(key)
            if covered > broken:  # enough already: a further key only while it is rare and the rows few
                if held >= _COMMON or rows + held > _BUDGET:
                    break
                rows += held
            chosen.append(key)
            covered += places[key]
        if covered <= broken:
            return None
        need = len(chosen) - _missing([places[k] for k in chosen], broken)
        held_by: dict[str, int] = {}
        batch = [f"{self.kind}|{k}" for k in chosen]
        marks = ",".join("?" * len(batch))
        # One grouped scan of the chosen keys' postings (SQLite counts rows far faster than a file is parsed).
        for name, n in self.db.execute(
                f"SELECT name, COUNT(*) FROM keys WHERE k IN ({marks}) GROUP BY name HAVING COUNT(*) >= ?",
                [*batch, need]):
            held_by[name] = int(n)
        return Shared(chosen, held_by)

    def holding(self, key: str, keys: Iterable[str], need: int, scan: list[str] | None = None,
                at_least: int = 1) -> set[str]:
        """The files holding ``key`` and at least ``need`` of ``keys``, read along the postings of ``key``, or,
        given ``scan`` (some of ``keys``, of which such a file holds ``at_least``), along those of ``scan``
        (whichever the caller found fewer); each file's keys are then counted along the index by file name."""
        batch = [f"{self.kind}|{k}" for k in keys]
        marks = ",".join("?" * len(batch))
        held = f"(SELECT COUNT(*) FROM keys WHERE name = o.name AND k IN ({marks})) >= ?"
        if scan is not None:
            wide = [f"{self.kind}|{k}" for k in scan]
            sql = (f"SELECT name FROM keys AS o WHERE k IN ({','.join('?' * len(wide))}) GROUP BY name "
                   f"HAVING COUNT(*) >= ? AND EXISTS (SELECT 1 FROM keys WHERE k = ? AND name = o.name) AND {held}")
            args = [*wide, at_least, f"{self.kind}|{key}", *batch, need]
        else:
            sql = f"SELECT name FROM keys AS o WHERE k = ? AND {held}"
            args = [f"{self.kind}|{key}", *batch, need]
        return {n for (n,) in self.db.execute(sql, args)}

    def values(self, names: Iterable[str], prefix: str) -> dict[str, str]:
        """Per file, the rest of its key that starts with ``prefix`` (one such key per file: a length or a
        count), read along the index by file name."""
        lo = f"{self.kind}|{prefix}"
        out: dict[str, str] = {}
        for name in names:
            row = self.db.execute("SELECT k FROM keys INDEXED BY keys_name WHERE name = ? AND k >= ? AND k < ?",
                                  (name, lo, lo + "\uffff")).fetchone()
            if row is not None:
                out[name] = str(row[0])[len(lo):]
        return out


@dataclass
class Shared:
    """What ``_Lookup.sharing`` chose: the keys, and how many of them each file that holds enough holds."""

    keys: list[str]
    held_by: dict[str, int]


_BUDGET = 4000  # posting rows read beyond what a choice needs, to raise the count a match must reach


def _inside_keys(norm: str) -> list[str]:
    """Keys of the memories that may lie inside this text: each piece of it as long as a tier."""
    return [f"p:{_digest(norm[i:i + t])}" for t in _tiers(len(norm)) for i in range(len(norm) - t + 1)]


def _broader_keys(norm: str) -> list[str] | None:
    """Keys every memory holding this text has, each of them (any one alone narrows); None when the text is a
    single word with no CJK pair, which any memory may hold inside a longer word."""
    keys = [f"c:{pair}" for pair in sorted(_cjk_pairs(norm))]
    for word, at_start, at_end in _words(norm):
        if not at_start and not at_end:
            keys.append(f"w:{word}")  # bounded on both sides inside the text: a whole word of the memory
        elif at_end and not at_start and len(word) >= 4:
            keys.append(f"wp:{word[:4]}")  # the text ends inside a word of the memory that starts so
        elif at_start and not at_end and len(word) >= 4:
            keys.append(f"ws:{word[-4:]}")  # the text starts inside a word of the memory that ends so
    return keys or None
