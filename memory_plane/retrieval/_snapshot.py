"""A large index's retrieval snapshot: what a fresh process needs of it, kept beside it and read lazily.

A fresh process used to parse every line of a large index, make every line's text, load its postings and judge
every rule before its first answer (two seconds at 100,000 memories). The snapshot keeps, in
``<root>/.cache/retrieve/<source>.sqlite``, for the index's lines as one version of the file holds them:

- where each line starts, and the few fields retrieval asks of every line (id, app, path, type, status, source,
  priority), so a line is parsed only when a query looks at it (``_line_entries``);
- the postings (token -> line numbers), read token by token as queries ask for them;
- the verdict of each always-recalled rule of no environment at similarity 0 (``Scorer.settle_free``), and the
  lowercase text a goal's names are looked for in, read only when a goal names something.

It is derived and rebuildable, never the truth: a file whose version, tokenizer or shape is not this one's is not
used, deleting it loses nothing. It is valid for the index file whose (mtime, size, inode) it records; after
another change it is checked byte for byte (a digest per block of the file), and lines appended since are read from
the file. A save that appends moves the recorded version on (``note_appended``); a forget removes the forgotten
lines' postings and text from it before their lines are blanked (``forget_lines``: deleted rows are overwritten,
``secure_delete``), so no forgotten word stays here. It is written whole to a new file and renamed into place under
the store's lock, once the index is still the version it was made from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
import os
import secrets
import stat
import sys
import threading
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote

from memory_plane.lifecycle import has_symlink, open_dir, own_fd_like_folder, stat_key, temp_name

from .._tokens import tokenizer_fingerprint
from ._index_bytes import Version, block_digests, digest, read_index
from ._postings_cache import CACHE_DIR

if TYPE_CHECKING:
    import sqlite3

log = logging.getLogger(__name__)

FORMAT = "5"  # 2: a rule's filing word; 3: postings in chunks of lines; 4: the apps a rule names; 5: words keyed
BLOCK = 1 << 18  # bytes of the index file per digest: a forget re-hashes one block, not the file
HEAD = 1 << 16  # bytes at the file's start hashed beside the version (a same-size rewrite within one mtime tick)
MAX_COL = 256 << 20  # a column larger than this once inflated is not read
CHUNK = 1 << 12  # lines per row of a token's postings: a forget rewrites one row of a common word, not all of it

_U32 = next(code for code in "IL" if array(code).itemsize == 4)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blocks (b INTEGER PRIMARY KEY, digest BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS cols (name TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS postings (token BLOB NOT NULL, chunk INTEGER NOT NULL, docs BLOB NOT NULL,
                                     PRIMARY KEY (token, chunk)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS texts (n INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS said (n INTEGER PRIMARY KEY, word TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS apps (n INTEGER PRIMARY KEY, apps TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS gone (n INTEGER PRIMARY KEY);
"""


Stamps = tuple[Any, Any] | None
"""The index's ``index_stamp`` before and after a writer's change that kept it matching its item files."""


class StaleSnapshot(Exception):
    """The snapshot file was written anew since it was loaded: what it answers now is of another index."""


class LineFacts(NamedTuple):
    """What retrieval asks of every line, per line of the file (a line that is no entry: None, False, 0.0)."""

    ids: list[str | None]
    apps: list[Any]  # the ``app`` field as the line holds it
    paths: list[Any]  # the ``path`` field as the line holds it
    types: list[str | None]  # ``field_str`` of the type
    models: list[bool]  # whether the source is "model"
    priorities: list[float]  # ``field_num`` of the priority, 0 by default
    not_active: list[int]  # entry lines whose status is anything but "active"
    always: list[int]  # entry lines recalled for every goal (``Source.always_types``, calibration, failures)
    stale_app: bool


FreeVerdict = tuple[tuple[tuple[str, str | None], ...], tuple[str, float, float, float, float] | None] | None
"""A settled verdict as kept: the drops it counts (reason, detail) and its (section, score, app match, applicability,
bonus), or None for a rule whose verdict the clock decides."""


class Free(NamedTuple):
    """The settled verdicts of the always-recalled lines of no environment, as ``Scorer.settle_free`` made them."""

    lines: list[int]
    verdicts: list[FreeVerdict]


@dataclass
class SnapData:
    """Everything a snapshot file holds, as a writer hands it over (line numbers are the file's lines)."""

    version: Version
    raw: bytes  # the index file's bytes (the first ``len(raw)`` of them, whole lines)
    offsets: Sequence[int]  # where each line starts, and one past the last
    facts: LineFacts
    postings: dict[bytes, list[int]]  # keyed by ``word_key`` under ``salt``
    salt: bytes
    free: Free | None
    texts: dict[int, str]  # the lowercase text of each settled line (the ones a goal's names are looked for in)
    said: dict[int, str]  # the filing word of each settled rule or preference ("": none, ``RulesSaid``)
    apps: dict[int, frozenset[str]]  # the apps each settled rule or preference names (``RuleScope.apps``)
    catalog: str  # the app catalog they were named under (``AppCatalog.fingerprint``)
    config: str
    checked: Any  # the folder stamp the index was found to match its item files at (None: not known)


class Snapshot:
    """A snapshot file as loaded for one version of its index: the lines it covers, their facts, the settled
    verdicts; postings and texts are read on demand (``posting``, ``texts``) from the same file, as written then."""

    def __init__(self, db: sqlite3.Connection, wid: str, raw: bytes, version: Version, offsets: array,
                 facts: LineFacts, free: Free | None, checked: Any, where: tuple[Path, int, str],
                 salt: bytes) -> None:
        self._db = db
        self.salt = salt  # what its words are keyed under (``word_key``)
        self._wid = wid
        self._where = where  # (the file, its inode, its count of forgets) as loaded
        self.damaged = False  # a read failed on the file as loaded (not one written anew since)
        self._guard = threading.Lock()
        self.raw = raw
        self.version = version
        self.offsets = offsets
        self.covered = len(offsets) - 1
        self.facts = facts
        self.free = free
        self.checked = checked

    def vouches(self, version: Version) -> bool:
        """Whether the file is still the one loaded, no forget changed it since, and it is of the index's ``version``
        (a writer that appended lines since moved it on: the lines this process read before are still as read)."""
        import sqlite3

        path, ino, forgets = self._where
        try:
            if os.lstat(path).st_ino != ino:
                return False
            with self._guard:
                row = self._db.execute("SELECT (SELECT v FROM meta WHERE k = 'stat'), (SELECT v FROM meta WHERE "
                                       "k = 'forgets'), (SELECT v FROM meta WHERE k = 'wid')").fetchone()
        except (OSError, sqlite3.Error):
            return False
        return tuple(row) == (json.dumps(version), forgets, self._wid)

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        import sqlite3

        with self._guard:
            try:
                self._db.execute("BEGIN")
                try:
                    wid = self._db.execute("SELECT v FROM meta WHERE k = 'wid'").fetchone()
                    rows = self._db.execute(sql, args).fetchall()
                finally:
                    self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self.damaged = True
                raise StaleSnapshot(str(exc)) from exc
        if wid is None or wid[0] != self._wid:
            raise StaleSnapshot("written anew since it was loaded")
        return rows

    def posting(self, token: str) -> list[int] | None:
        """The lines holding ``token`` (None: none); StaleSnapshot when the file is no longer the one loaded."""
        import sqlite3  # with a snapshot only: a start that has none never loads SQLite

        # One statement is one read of one state of the file: the version and the postings agree.
        with self._guard:
            try:
                rows = self._db.execute("SELECT -1, v FROM meta WHERE k = 'wid' UNION ALL "
                                        "SELECT chunk, docs FROM postings WHERE token = ? ORDER BY 1",
                                        (word_key(self.salt, token),)).fetchall()
            except sqlite3.Error as exc:
                self.damaged = True
                raise StaleSnapshot(str(exc)) from exc
        if not rows or rows[0][1] != self._wid:
            raise StaleSnapshot("written anew since it was loaded")
        return _joined(d for _, d in rows[1:]) if len(rows) > 1 else None

    def postings_of(self, tokens: Sequence[str]) -> dict[str, list[int]]:
        """The lines holding each of ``tokens`` that any line holds; StaleSnapshot as ``posting``."""
        out: dict[str, list[bytes]] = {}
        for k in range(0, len(tokens), 500):  # SQLite's limit on bound values is 999 in old builds
            keys = {word_key(self.salt, t): t for t in tokens[k:k + 500]}
            rows = self._read("SELECT token, docs FROM postings WHERE token IN "
                              f"({','.join('?' * len(keys))}) ORDER BY token, chunk", tuple(keys))
            for key, d in rows:
                out.setdefault(keys[key], []).append(d)
        return {t: _joined(ds) for t, ds in out.items()}

    def all_postings(self) -> dict[bytes, list[int]]:
        """Every word's lines, by its key; StaleSnapshot when the file is no longer the one loaded."""
        out: dict[bytes, list[bytes]] = {}
        for key, d in self._read("SELECT token, docs FROM postings ORDER BY token, chunk"):
            out.setdefault(key, []).append(d)
        return {key: _joined(ds) for key, ds in out.items()}

    def filing_words(self) -> dict[int, str]:
        """The filing word of each settled rule ("": none); StaleSnapshot when the file is no longer the one
        loaded."""
        return dict(self._read("SELECT n, word FROM said"))

    def rule_apps(self, catalog: str) -> dict[int, frozenset[str]] | None:
        """The apps each settled rule names, when named under ``catalog`` (None: under another one); StaleSnapshot
        when the file is no longer the one loaded."""
        rows = self._read("SELECT -1, v FROM meta WHERE k = 'catalog' UNION ALL SELECT n, apps FROM apps")
        if not rows or rows[0][0] != -1 or rows[0][1] != catalog:
            return None
        return {n: frozenset(a.split("\x1f")) if a else frozenset() for n, a in rows[1:]}

    def texts(self) -> dict[int, str]:
        """The lowercase text of each settled line; StaleSnapshot when the file is no longer the one loaded."""
        return dict(self._read("SELECT n, text FROM texts"))

    def close(self) -> None:
        """Let go of the file."""
        with self._guard:
            self._db.close()


def pack(numbers: Iterable[int]) -> bytes:
    """Line numbers as little-endian uint32."""
    out = array(_U32, numbers)
    if out.itemsize != 4:
        raise ValueError("no 32-bit array type")
    return _le(out).tobytes()


def unpack(raw: Any) -> list[int]:
    """What ``pack`` wrote; ValueError for anything else."""
    return _le(_u32(raw)).tolist()


def word_key(salt: bytes, word: str) -> bytes:
    """What a word's postings are kept under: not the word (SQLite may leave a deleted key's bytes in a page of its
    tree, which secure_delete does not reach; a forgotten word must not be one)."""
    return hashlib.blake2b(word.encode("utf-8", "surrogatepass"), key=salt, digest_size=12).digest()


def _joined(chunks: Iterable[Any]) -> list[int]:
    """A token's lines from its rows, in order."""
    out: list[int] = []
    for d in chunks:
        out += unpack(d)
    return out


def _chunks(docs: list[int]) -> Iterable[tuple[int, bytes]]:
    """A token's lines (ascending) as (chunk, packed lines) rows."""
    start = 0
    while start < len(docs):
        chunk = docs[start] // CHUNK
        end = bisect_left(docs, (chunk + 1) * CHUNK, start)
        yield chunk, pack(docs[start:end])
        start = end


def _u32(raw: Any) -> array:
    if not isinstance(raw, bytes) or len(raw) % 4:
        raise ValueError("packed line numbers are not whole uint32s")
    out = array(_U32)
    out.frombytes(raw)
    return out


def _le(a: array) -> array:
    if sys.byteorder == "big":
        a.byteswap()
    return a


def _offsets(raw: Any) -> array:
    """The line starts a snapshot keeps (little-endian uint64)."""
    if not isinstance(raw, bytes) or len(raw) % 8:
        raise ValueError("the line starts are not whole uint64s")
    out = array("Q")
    out.frombytes(raw)
    if sys.byteorder == "big":
        out.byteswap()
    return out


def _col(value: Any) -> bytes:
    return zlib.compress(marshal.dumps(value), 1)


def _uncol(raw: Any) -> Any:
    if not isinstance(raw, bytes):
        raise ValueError("a column is not bytes")
    d = zlib.decompressobj()
    body = d.decompress(raw, MAX_COL)
    if d.unconsumed_tail or not d.eof:
        raise ValueError("a column is truncated or too large")
    return marshal.loads(body)  # zlib's checksum has vouched for the bytes marshal reads


class SnapshotFile:
    """``<root>/.cache/retrieve/<name>.sqlite``: one source's snapshot (see the module docstring)."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = Path(root)
        self.path = self.root / CACHE_DIR / f"{name}.sqlite"
        self.disabled = False  # a write failed (a read-only tree, a full disk): not tried again by this process

    def _safe(self) -> bool:
        if has_symlink(self.root, self.path.parent):
            return False
        try:
            return stat.S_ISREG(os.lstat(self.path).st_mode)
        except OSError:
            return False

    # -- reading -----------------------------------------------------------------------------

    def load(self, index_path: Path, config: str) -> Snapshot | None:
        """The snapshot as it stands for the index file now (None: none, not this format, or not of this index);
        its settled verdicts only when made under ``config``."""
        if not self._safe():
            return None
        import sqlite3  # with a snapshot only: a start that has none never loads SQLite

        if os.path.lexists(self.journal):
            return None  # a write was killed: the file may be torn (the next writer drops both)
        try:
            db = sqlite3.connect(self._uri("ro"), uri=True, timeout=5, isolation_level=None,
                                 check_same_thread=False)
        except sqlite3.Error:
            return None
        try:
            snap = self._load(db, index_path, config)
        except (sqlite3.Error, ValueError, TypeError, EOFError, zlib.error, KeyError, IndexError) as exc:
            log.warning("retrieve snapshot %s not used (rebuilt from the index): %s", self.path, exc)
            snap = None
        if snap is None:
            db.close()
        return snap

    def _load(self, db: sqlite3.Connection, index_path: Path, config: str) -> Snapshot | None:
        db.execute("BEGIN")
        try:
            meta = dict(db.execute("SELECT k, v FROM meta").fetchall())
            if meta.get("format") != FORMAT or meta.get("tokenizer") != tokenizer_fingerprint():
                return None
            cols = dict(db.execute("SELECT name, data FROM cols").fetchall())
            blocks = [d for _, d in db.execute("SELECT b, digest FROM blocks ORDER BY b").fetchall()]
            gone = {n for (n,) in db.execute("SELECT n FROM gone").fetchall()}
        finally:
            db.execute("COMMIT")
        read = read_index(index_path)
        if read is None:
            return None
        raw, version = read
        size = int(meta["bytes"])
        if len(raw) < size or raw[size - 1:size] not in (b"\n", b""):
            return None
        if not _as_recorded(meta, blocks, raw, size, version):
            return None
        offsets = _offsets(cols["offsets"])
        if len(offsets) < 1 or offsets[-1] != size:
            raise ValueError("the line starts do not end where the lines do")
        facts = LineFacts(*_uncol(cols["facts"]))
        if any(len(x) != len(offsets) - 1 for x in facts[:6]):
            raise ValueError("a column is not one value per line")
        free = Free(*_uncol(cols["free"])) if meta.get("config") == config and "free" in cols else None
        if gone:
            facts, free = _without(facts, free, gone)
        checked = json.loads(meta["checked"]) if meta.get("checked") else None
        return Snapshot(db, meta["wid"], raw, version, offsets, facts, free, checked,
                        (self.path, os.lstat(self.path).st_ino, meta.get("forgets", "")), bytes.fromhex(meta["salt"]))

    # -- writing -----------------------------------------------------------------------------

    def write(self, data: SnapData, index_path: Path, under_lock: Callable[[Callable[[], None]], bool]) -> bool:
        """Write ``data`` to a new file and put it in place, while ``under_lock`` (the store's lock) holds and the
        index is still the version the data is of; False when it no longer is (nothing put in place). Raises
        OSError or sqlite3.Error when it cannot be written."""
        folder = self.path.parent
        dfd = open_dir(self.root, folder, create=True)
        try:
            tmp = temp_name(self.path).name  # a staging name GC knows as stale debris if a writer was killed
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644, dir_fd=dfd)
            try:
                own_fd_like_folder(dfd, fd)
            finally:
                os.close(fd)
            placed = False
            try:
                self._fill(folder / tmp, data)

                def place() -> None:
                    nonlocal placed
                    if stat_key(index_path) == data.version:
                        # A killed writer's journal would be played back into the new file: it goes first.
                        try:
                            os.unlink(self.journal.name, dir_fd=dfd)
                        except FileNotFoundError:
                            pass
                        os.rename(tmp, self.path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
                        os.fsync(dfd)
                        placed = True

                if not under_lock(place):
                    return False
                return placed
            finally:
                if not placed:
                    try:
                        os.unlink(tmp, dir_fd=dfd)
                    except FileNotFoundError:
                        pass
        finally:
            os.close(dfd)

    def _fill(self, path: Path, data: SnapData) -> None:
        import sqlite3

        raw, offsets = data.raw, data.offsets
        size = offsets[-1]
        with closing(sqlite3.connect(path, isolation_level=None)) as db:
            db.execute("PRAGMA journal_mode = OFF")  # a new file, put in place only once complete
            db.execute("PRAGMA synchronous = OFF")
            db.executescript(_SCHEMA)
            db.execute("BEGIN")
            db.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("format", FORMAT), ("tokenizer", tokenizer_fingerprint()), ("config", data.config), ("forgets", "0"),
                ("salt", data.salt.hex()),
                ("wid", secrets.token_hex(8)), ("bytes", str(size)), ("stat", json.dumps(data.version)),
                ("head", digest(raw[:min(HEAD, size)]).hex()), ("catalog", data.catalog),
                ("checked", json.dumps(data.checked) if data.checked is not None else "")])
            view = memoryview(raw)
            db.executemany("INSERT INTO blocks VALUES (?, ?)", (
                (b, digest(view[b * BLOCK:min(size, (b + 1) * BLOCK)])) for b in range(-(-size // BLOCK))))
            starts = array("Q", offsets)
            if sys.byteorder == "big":
                starts.byteswap()
            cols = {"offsets": starts.tobytes(), "facts": _col(tuple(data.facts))}
            if data.free is not None:
                cols["free"] = _col(tuple(data.free))
            db.executemany("INSERT INTO cols VALUES (?, ?)", cols.items())
            db.executemany("INSERT INTO postings VALUES (?, ?, ?)",
                           ((t, c, d) for t, docs in data.postings.items() for c, d in _chunks(docs)))
            db.executemany("INSERT INTO texts VALUES (?, ?)", data.texts.items())
            db.executemany("INSERT INTO said VALUES (?, ?)", data.said.items())
            db.executemany("INSERT INTO apps VALUES (?, ?)",
                           ((n, "\x1f".join(sorted(a))) for n, a in data.apps.items()))
            db.execute("COMMIT")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- changes made by the store's writers, under its lock -----------------------------------------

    def _open_rw(self) -> sqlite3.Connection | None:
        import sqlite3

        if not self._safe():
            return None
        if os.path.lexists(self.journal):
            self.drop()  # a write was killed: the file may be torn, and the journal holds words as they were
            return None
        db = sqlite3.connect(self._uri("rw"), uri=True, timeout=2, isolation_level=None)
        db.execute("PRAGMA secure_delete = ON")  # a forgotten line's words do not stay in free pages
        db.execute("PRAGMA journal_mode = DELETE")
        db.execute("PRAGMA synchronous = FULL")
        return db

    def note_appended(self, before: Version | None, after: Version | None, stamps: Stamps = None) -> None:
        """A writer appended whole lines to the index (``before`` -> ``after``): when the snapshot was of the version
        before, it stays valid for the one after (the lines it covers did not move); ``stamps``: the index's stamp
        before and after the write (``index_stamp``), which kept it matching its files."""
        import sqlite3  # with a snapshot only: a start that has none never loads SQLite

        if before is None or after is None or not self.path.exists():
            return
        try:
            db = self._open_rw()
            if db is None:
                return
            with closing(db):
                db.execute("PRAGMA synchronous = OFF")  # a torn write leaves the version unknown: checked by blocks
                db.execute("UPDATE meta SET v = ? WHERE k = 'stat' AND v = ?", (json.dumps(after), json.dumps(before)))
                _follow(db, stamps)
        except sqlite3.Error as exc:
            log.info("retrieve snapshot %s: the append was not noted: %s", self.path, exc)

    def forget_lines(self, index_path: Path, lines: Sequence[tuple[int, bytes]],
                     tokens_of: Callable[[bytes], frozenset[str] | None]) -> Callable[[Stamps], None]:
        """Before a forget blanks these lines of the index ((start, the line's bytes) each): their postings, text
        and facts leave the snapshot now (or the whole file goes, when it cannot say which of its lines they are).
        Returns what to call once they are blanked (with the index's stamps before and after the forget): the
        snapshot then vouches for the blanked file."""
        import sqlite3  # with a snapshot only: a start that has none never loads SQLite

        if not self.path.exists() and not self.path.is_symlink():
            return lambda stamps: None
        try:
            return self._forget(index_path, lines, tokens_of)
        except (sqlite3.Error, ValueError, TypeError, EOFError, zlib.error, KeyError, OSError) as exc:
            log.info("retrieve snapshot %s dropped by a forget: %s", self.path, exc)
            self.drop()
            return lambda stamps: None

    def _forget(self, index_path: Path, lines: Sequence[tuple[int, bytes]],
                tokens_of: Callable[[bytes], frozenset[str] | None]) -> Callable[[Stamps], None]:
        import sqlite3

        db = self._open_rw()
        if db is None:
            self.drop()
            return lambda stamps: None
        with closing(db):
            db.execute("BEGIN IMMEDIATE")
            meta = dict(db.execute("SELECT k, v FROM meta").fetchall())
            salt = bytes.fromhex(meta.get("salt", ""))
            before = stat_key(index_path)
            if meta.get("stat") != json.dumps(before) or meta.get("format") != FORMAT:
                db.execute("ROLLBACK")
                raise ValueError("it is not of the index as it is")
            offsets = _offsets(db.execute("SELECT data FROM cols WHERE name = 'offsets'").fetchone()[0])
            size = offsets[-1]
            blocks: set[int] = set()
            for start, old in lines:
                if start >= size:
                    continue  # appended since the snapshot was written: not in it
                n = bisect_left(offsets, start)
                if n >= len(offsets) - 1 or offsets[n] != start or offsets[n + 1] - start != len(old):
                    raise ValueError(f"no line of it starts at byte {start}")
                tokens = tokens_of(old)
                if tokens is None:
                    raise ValueError(f"the line at byte {start} does not parse")
                chunk = n // CHUNK
                for word in tokens:
                    t = word_key(salt, word)
                    row = db.execute("SELECT docs FROM postings WHERE token = ? AND chunk = ?", (t, chunk)).fetchone()
                    if row is None:
                        continue
                    docs = _le(_u32(row[0]))
                    k = bisect_left(docs, n)
                    if k == len(docs) or docs[k] != n:
                        continue
                    del docs[k]
                    if docs:
                        db.execute("UPDATE postings SET docs = ? WHERE token = ? AND chunk = ?",
                                   (_le(docs).tobytes(), t, chunk))
                    else:
                        db.execute("DELETE FROM postings WHERE token = ? AND chunk = ?", (t, chunk))
                db.execute("DELETE FROM texts WHERE n = ?", (n,))
                db.execute("DELETE FROM said WHERE n = ?", (n,))
                db.execute("DELETE FROM apps WHERE n = ?", (n,))
                db.execute("INSERT OR IGNORE INTO gone VALUES (?)", (n,))
                blocks.update(range(start // BLOCK, (start + len(old) - 1) // BLOCK + 1))
            # Unknown until the lines are blanked: a forget killed in between leaves a snapshot checked by blocks.
            db.execute("UPDATE meta SET v = '' WHERE k = 'stat'")
            db.execute("UPDATE meta SET v = CAST(CAST(v AS INTEGER) + 1 AS TEXT) WHERE k = 'forgets'")
            db.execute("COMMIT")

        def blanked(stamps: Stamps) -> None:
            try:
                digests = block_digests(index_path, sorted(blocks), size, BLOCK, HEAD)
                if digests is None:
                    return
                version, fresh, head = digests
                rw = self._open_rw()
                if rw is None:
                    return
                with closing(rw):
                    rw.execute("BEGIN IMMEDIATE")
                    rw.executemany("UPDATE blocks SET digest = ? WHERE b = ?", [(d, b) for b, d in fresh.items()])
                    rw.execute("UPDATE meta SET v = ? WHERE k = 'stat'", (json.dumps(version),))
                    if head is not None:
                        rw.execute("UPDATE meta SET v = ? WHERE k = 'head'", (head,))
                    _follow(rw, stamps)
                    rw.execute("COMMIT")
            except (OSError, sqlite3.Error) as exc:
                log.info("retrieve snapshot %s: the blanked lines were not noted: %s", self.path, exc)

        return blanked

    def drop(self) -> None:
        """Delete the snapshot and any journal a killed write left beside it (derived: the next retrieve that needs
        it writes it again; the journal holds pages as they were, words a forget took out included)."""
        if has_symlink(self.root, self.path.parent):
            return
        for path in (self.journal, self.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("retrieve snapshot %s could not be removed: %s", path, exc)

    @property
    def journal(self) -> Path:
        """Where SQLite keeps a write's pages as they were until it commits (left behind by a killed write)."""
        return self.path.with_name(self.path.name + "-journal")

    def vouches_for(self, version: Version | None) -> bool:
        """Whether the snapshot on disk is of this version of the index (a writer kept it in step)."""
        import sqlite3

        if version is None or not self._safe():
            return False
        try:
            with closing(sqlite3.connect(self._uri("ro"), uri=True, timeout=1)) as db:
                row = db.execute("SELECT (SELECT v FROM meta WHERE k = 'stat'), "
                                 "(SELECT v FROM meta WHERE k = 'format')").fetchone()
        except sqlite3.Error:
            return False
        return tuple(row) == (json.dumps(version), FORMAT)

    def _uri(self, mode: str) -> str:
        return f"file:{quote(str(self.path))}?mode={mode}"


def _follow(db: sqlite3.Connection, stamps: Stamps) -> None:
    """Move the stamp the index was known to match its files at on, when a writer's change kept it matching."""
    if stamps is not None:
        before, after = (json.dumps(x) for x in stamps)
        db.execute("UPDATE meta SET v = ? WHERE k = 'checked' AND v = ?", (after, before))


def _as_recorded(meta: dict[str, str], blocks: list[bytes], raw: bytes, size: int, version: Version) -> bool:
    """Whether the first ``size`` bytes of the index are the ones the snapshot was made of: the version it recorded
    (and the same first bytes), or, for another version, every block as it hashed it."""
    if meta.get("stat") == json.dumps(version) and meta.get("head") == digest(raw[:min(HEAD, size)]).hex():
        return True
    view = memoryview(raw)
    return len(blocks) == -(-size // BLOCK) and all(
        digest(view[b * BLOCK:min(size, (b + 1) * BLOCK)]) == d for b, d in enumerate(blocks))


def _without(facts: LineFacts, free: Free | None, gone: set[int]) -> tuple[LineFacts, Free | None]:
    """The facts and verdicts with the forgotten lines taken out (they read as lines that are no entry)."""
    ids, apps, paths, types = list(facts.ids), list(facts.apps), list(facts.paths), list(facts.types)
    models, priorities = list(facts.models), list(facts.priorities)
    for n in gone:
        if 0 <= n < len(ids):
            ids[n] = apps[n] = paths[n] = types[n] = None
            models[n], priorities[n] = False, 0.0
    facts = LineFacts(ids, apps, paths, types, models, priorities, [n for n in facts.not_active if n not in gone],
                      [n for n in facts.always if n not in gone], facts.stale_app)
    if free is not None:
        kept = [(n, v) for n, v in zip(free.lines, free.verdicts) if n not in gone]
        free = Free([n for n, _ in kept], [v for _, v in kept])
    return facts, free


class SnapshotHook:
    """What the long-term store's writers tell the snapshot (``LongTermStore.index_hook``), under the store's lock."""

    def __init__(self, file: SnapshotFile) -> None:
        self.file = file

    def appended(self, before: Version | None, after: Version | None, stamps: Stamps = None) -> None:
        """A save appended its line (``note_appended``)."""
        self.file.note_appended(before, after, stamps)

    def forgetting(self, index_path: Path, lines: Sequence[tuple[int, bytes]]) -> Callable[[Stamps], None]:
        """A forget is about to blank these lines (``forget_lines``); what to call once they are blanked."""
        from .._tokens import token_set
        from ._features import long_term_text
        from ._line_entries import parse_line

        def tokens(line: bytes) -> frozenset[str] | None:
            try:
                entry = parse_line(line)
            except ValueError:
                return None
            return token_set(long_term_text(entry)) if entry is not None else frozenset()

        return self.file.forget_lines(index_path, lines, tokens)

    def dropped(self) -> None:
        """A forget removed lines otherwise than by blanking them: the snapshot cannot say which of its lines they
        were, and goes (with their words)."""
        self.file.drop()

    @property
    def kept(self) -> str:
        """The snapshot's file name in the cache folder (a forget's scrub keeps it: the hook takes the text out)."""
        return self.file.path.name
