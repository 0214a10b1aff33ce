"""What an index rebuild keeps of every parsed item file (its id, its place, its index line), in a temporary SQLite
file instead of memory: verify and the rebuild stream through a store of any size in bounded memory.

A store whose index order can be written as bytes (``ItemCollection.sort_bytes``) has its index compared with the
file on disk and written again in that order from the table, line by line; any other store (a few items) gets its
entries as a list, ordered and compared as before.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import FileProblemError, UnsafePathError
from ._guarded import open_dir
from ._index import INDEX_HEADER, IndexFile, NotOneLinePerEntry, entry_lines, format_entry
from ._index_lines import valid_entry
from ._item_read import same_path, stat_key

if TYPE_CHECKING:
    import sqlite3

_SCHEMA = """
CREATE TABLE items (path TEXT PRIMARY KEY, k1 INTEGER, k2 INTEGER, k3 INTEGER, id TEXT NOT NULL, expected TEXT,
                    canonical INTEGER NOT NULL, sort BLOB, line BLOB, seq INTEGER NOT NULL, gen INTEGER NOT NULL);
CREATE INDEX items_id ON items (id, seq);
CREATE INDEX items_sort ON items (sort, seq);
CREATE INDEX items_seq ON items (seq);
CREATE TABLE cur (sort BLOB NOT NULL, line BLOB NOT NULL);
CREATE INDEX cur_sort ON cur (sort);
CREATE TABLE marks (id TEXT PRIMARY KEY, path TEXT NOT NULL, changes TEXT NOT NULL);
"""
# The orders the table is read in are its indexes' (no query sorts the whole table): SQLite never writes a sorter's
# temporary file, which would go to the system's temporary folder (a phone may have none it can write).
TABLE_DIR = ".cache/verify"
"""Where under the memory root a table's SQLite file is made (and unlinked at once: nothing stays there)."""
_counter = itertools.count()
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_BUFFER = 1 << 20


def order_bytes(*parts: int | str | datetime) -> bytes:
    """A tuple of ints, texts and aware datetimes as bytes that sort (bytewise) as the tuple sorts."""
    out = bytearray()
    for part in parts:
        if isinstance(part, datetime):
            part = (part - _EPOCH) // timedelta(microseconds=1)
        if isinstance(part, int):
            digits = str(abs(part))
            if part >= 0:
                out += b"\x02" + f"{len(digits):05d}{digits}".encode("ascii")
            else:  # more digits, then larger digits, sort first
                flipped = digits.translate(str.maketrans("0123456789", "9876543210"))
                out += b"\x01" + f"{99999 - len(digits):05d}{flipped}".encode("ascii")
        else:
            # UTF-8 bytes sort as the code points do; a NUL inside is escaped above the separator.
            out += str(part).encode("utf-8", "surrogatepass").replace(b"\x00", b"\x00\x02")
        out += b"\x00\x01"
    return bytes(out)


def _open_table(root: Path | None) -> sqlite3.Connection:
    """A new, empty table of digests. With ``root``: in a SQLite file made under the tree's own ``TABLE_DIR``
    (guarded: never through a link) and unlinked as soon as it is open, so a kill leaves nothing behind; without
    (or when the tree cannot take it): in SQLite's private temporary file."""
    import sqlite3  # loaded by the walks of verify and GC, not by a process that only retrieves

    if root is not None:
        try:
            return _table_in(Path(root))
        except (OSError, UnsafePathError, sqlite3.Error):
            pass  # a read-only or full tree (verify reports it), or a link planted there: SQLite's own file
    db = sqlite3.connect("", isolation_level=None)
    db.execute("PRAGMA temp_store = MEMORY")
    db.executescript(_SCHEMA)
    db.execute("BEGIN")
    return db


def _table_in(root: Path) -> sqlite3.Connection:
    """A new table in a SQLite file under the tree's ``TABLE_DIR``, unlinked as soon as it is open."""
    import sqlite3
    folder = root / TABLE_DIR
    dfd = open_dir(root, folder, create=True)
    try:
        name = f"digests.{time.time_ns()}.{os.getpid()}.{next(_counter)}.sqlite"
        # O_EXCL|O_NOFOLLOW: a new file of ours, never one planted there (nor a link).
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600, dir_fd=dfd)
        try:
            db = sqlite3.connect(os.fspath(folder / name), isolation_level=None)
            try:
                # No journal beside it (the table is thrown away, never recovered), no temporary file anywhere.
                db.execute("PRAGMA journal_mode = OFF")
                db.execute("PRAGMA temp_store = MEMORY")
                db.executescript(_SCHEMA)  # the file is open (and written) from here on
                # SQLite opened it by name: still our file, not one swapped in meanwhile.
                if os.stat(name, dir_fd=dfd, follow_symlinks=False).st_ino != os.fstat(fd).st_ino:
                    raise UnsafePathError(f"{TABLE_DIR}/{name}", "replaced while it was opened")
            except BaseException:
                db.close()
                raise
        finally:
            os.close(fd)
            os.unlink(name, dir_fd=dfd)
    finally:
        os.close(dfd)
    db.execute("BEGIN")
    return db


class DigestTable:
    """One row per readable item file: path, stat key, id, where a file of that id would lie, index line, order.

    ``entry_of`` gives a record's index line (None: not indexable); ``expected_of`` where its file should lie
    (ValueError: its id gives no place); ``sort_of`` an entry's order as bytes (None: the store has no such order);
    ``rel`` the path an index line names.
    """

    def __init__(self, *, entry_of: Callable[[Any], dict[str, Any] | None], expected_of: Callable[[Any], Path],
                 sort_of: Callable[[dict[str, Any]], bytes | None], rel: Callable[[Path], str],
                 root: Path | None = None) -> None:
        self._entry_of, self._expected_of, self._sort_of, self._rel = entry_of, expected_of, sort_of, rel
        # Its page cache is what stays in memory; the rest of the table lies in its file.
        self._db = _open_table(root)
        self._db.execute("PRAGMA cache_size = -2048")
        self._seq = 0
        self._gen = 0
        self.sortable = True
        """Whether every indexable row has its order as bytes (then the index is streamed)."""

    def close(self) -> None:
        """Drop the table (its file goes with it)."""
        self._db.close()

    def add(self, path: Path, key: tuple[int, int, int] | None, record: Any) -> None:
        """Keep what the rebuild and the name check need of one parsed item file (replacing its earlier row)."""
        try:
            expected = self._expected_of(record)
            where: Path | None = expected if isinstance(expected, Path) else Path(expected)
        except ValueError:
            where = None
        entry = self._entry_of(record)
        line = sort = None
        if entry is not None:
            full = {**entry, "path": self._rel(path)}
            line = format_entry(full).encode("utf-8", "surrogatepass")
            sort = self._sort_of(full)
            if sort is None:
                self.sortable = False
        self._seq += 1
        k1, k2, k3 = key if key is not None else (None, None, None)
        self._db.execute("INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (str(path), k1, k2, k3, str(record.id), None if where is None else str(where),
                          int(where is not None and same_path(where, path)), sort, line, self._seq, self._gen))

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM items").fetchone()[0])

    # -- verify's marks -----------------------------------------------------------

    def mark(self, item_id: str, path: Path, changes: dict[str, Any]) -> None:
        """Keep the lifecycle marks verify decided for an item (a later file holding the id replaces them)."""
        self._db.execute("INSERT INTO marks VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET path = excluded.path, "
                         "changes = excluded.changes", (item_id, str(path), json.dumps(changes)))

    def marks(self) -> Marks:
        """The marks kept, by id, in the order first marked (read from the table as they are used)."""
        return Marks(self._db)

    # -- the name check ---------------------------------------------------------

    def odd_ids(self) -> list[str]:
        """The ids held by a file not named after them (a copy, a rename), in the order their first file was parsed."""
        return [i for (i,) in self._db.execute(
            "SELECT id FROM items WHERE id IN (SELECT id FROM items WHERE canonical = 0 AND expected IS NOT NULL) "
            "GROUP BY id ORDER BY min(seq)")]

    def files_of(self, item_id: str) -> list[tuple[Path, Path | None]]:
        """(path, where a file of its id would lie) of each file holding this id, in the order parsed."""
        return [(Path(p), None if e is None else Path(e)) for p, e in self._db.execute(
            "SELECT path, expected FROM items WHERE id = ? ORDER BY seq", (item_id,))]

    # -- the rebuild ------------------------------------------------------------

    def refresh(self, current: Iterable[Path], load: Callable[[Path], Any]) -> None:
        """Bring the rows in step with the item files present now: an unchanged file (same stat key) keeps its row,
        a changed or new one is loaded again (one that no longer loads is left out), a gone one is dropped.

        Called again under the collection lock, so an item written between a first, lock-free pass and the index
        rewrite is never left out, and nothing unchanged is parsed twice."""
        self._gen += 1
        self._seq = 0  # the rows take the order of ``current``, as the files present now are listed
        db = self._db
        for p in current:
            key = stat_key(p)  # taken before the load: a change during it shows as a new key next time
            row = db.execute("SELECT k1, k2, k3 FROM items WHERE path = ?", (str(p),)).fetchone()
            if row is not None and key is not None and tuple(row) == key:
                self._seq += 1
                db.execute("UPDATE items SET gen = ?, seq = ? WHERE path = ?", (self._gen, self._seq, str(p)))
                continue
            try:
                record = load(p)
            except (FileProblemError, OSError):
                continue
            self.add(p, key, record)
        db.execute("DELETE FROM items WHERE gen != ?", (self._gen,))

    def _chosen(self, order: str) -> Iterator[bytes]:
        """The index lines, one per id, in ``order`` ("seq" or "sort, seq": an index of the table's): of the files
        holding one id, the one named after it first, else the first parsed (as entries_by_file chooses)."""
        twins = self._twin_choice()
        for line, item_id, seq in self._db.execute(
                f"SELECT line, id, seq FROM items WHERE line IS NOT NULL ORDER BY {order}"):
            if item_id in twins and twins[item_id] != seq:
                continue
            yield bytes(line)

    def _twin_choice(self) -> dict[str, int]:
        """For each id more than one indexable file holds (a copy, a hand rename: few), the seq of the one chosen."""
        db = self._db
        twins = [i for (i,) in db.execute(
            "SELECT id FROM items WHERE line IS NOT NULL GROUP BY id HAVING count(*) > 1")]
        return {i: db.execute("SELECT seq FROM items WHERE id = ? AND line IS NOT NULL ORDER BY canonical DESC, seq "
                              "LIMIT 1", (i,)).fetchone()[0] for i in twins}

    def chosen_entries(self) -> list[dict[str, Any]]:
        """One index entry per id, in the order parsed (the caller orders them)."""
        return [json.loads(line[2:]) for line in self._chosen("seq")]

    def chosen_lines(self) -> Iterator[bytes]:
        """The index lines, one per id, in the index's order (``sortable`` tables only)."""
        return self._chosen("sort, seq")

    def every_entry(self) -> Iterator[dict[str, Any]]:
        """Every indexable file's entry (a second file holding an id included), in the order parsed."""
        for (line,) in self._db.execute("SELECT line FROM items WHERE line IS NOT NULL ORDER BY seq"):
            yield json.loads(line[2:])

    def same_as_index(self, index: IndexFile, sort_of: Callable[[dict[str, Any]], bytes | None]) -> bool | None:
        """Whether the index file holds these lines' entries, in any order (its entries equal as values); None when
        the file is not one JSON entry per line after its header (then it is read whole)."""
        db = self._db
        db.execute("DELETE FROM cur")
        reader = entry_lines(index.path)
        try:
            with reader as lines:
                if lines is None:
                    return False  # no index file
                for raw in lines:
                    entry = json.loads(raw[2:])
                    if not valid_entry(entry):
                        return None
                    sort = sort_of(entry)
                    if sort is None:
                        return None
                    db.execute("INSERT INTO cur VALUES (?, ?)", (sort, raw))
        except (ValueError, NotOneLinePerEntry):
            return None
        if reader.blanks:
            return False  # lines a forget blanked out: the rebuild writes the file without them
        new = self._chosen("sort, seq")
        old = self._db.cursor().execute("SELECT line FROM cur ORDER BY sort, rowid")
        while True:
            a, b = next(new, None), old.fetchone()
            if a is None or b is None:
                return a is None and b is None
            if a != b[0] and json.loads(a[2:]) != json.loads(b[0][2:]):
                return False

    def write_index(self, index: IndexFile) -> None:
        """Write the index file from the table, line by line (the caller holds the collection lock)."""

        def chunks() -> Iterator[bytes]:
            buf = bytearray(INDEX_HEADER.encode("utf-8"))
            for line in self.chosen_lines():
                buf += line
                buf += b"\n"
                if len(buf) >= _BUFFER:
                    yield bytes(buf)
                    buf.clear()
            yield bytes(buf)

        index.write_chunks(chunks())


def index_problems(index: IndexFile) -> list[FileProblemError]:
    """The problems of an index file (``IndexFile.read``'s), found by reading it line by line when it is one JSON
    entry per line (then it has none, and nothing is kept of it); any other file is read whole."""
    try:
        with entry_lines(index.path) as lines:
            for raw in lines or ():
                if not valid_entry(json.loads(raw[2:])):
                    raise NotOneLinePerEntry()
        return []
    except (ValueError, NotOneLinePerEntry):
        return index.read().problems


class Marks(Mapping[str, dict[str, Any]]):
    """Verify's lifecycle marks (id -> field -> value) as kept in a ``DigestTable``: read row by row, never held."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __getitem__(self, item_id: str) -> dict[str, Any]:
        row = self._db.execute("SELECT changes FROM marks WHERE id = ?", (item_id,)).fetchone()
        if row is None:
            raise KeyError(item_id)
        return dict(json.loads(row[0]))

    def __iter__(self) -> Iterator[str]:
        for (item_id,) in self._db.execute("SELECT id FROM marks ORDER BY rowid"):
            yield item_id

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM marks").fetchone()[0])

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:  # type: ignore[override]
        """(id, marks) in the order first marked, read row by row."""
        for item_id, changes in self._db.execute("SELECT id, changes FROM marks ORDER BY rowid"):
            yield item_id, dict(json.loads(changes))

    def path_of(self, item_id: str) -> Path | None:
        """The file an item's marks were decided on."""
        row = self._db.execute("SELECT path FROM marks WHERE id = ?", (item_id,)).fetchone()
        return None if row is None else Path(row[0])
