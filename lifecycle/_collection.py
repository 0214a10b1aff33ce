"""Collections: the Collection protocol, and the base that holds the skeleton of every store once."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

import pydantic

from ._atomic import atomic_write, read_bytes_nofollow
from ._digest_table import DigestTable, Marks
from ._errors import ABSENT, FileProblemError, UnsafePathError
from ._gc import GcReport
from ._index import INDEX_NAME, IndexFile
from ._index_check import index_writes, indexed_entries, known_matching
from ._index_proof import (
    KEPT_PER_STORE,
    ExpiredLine,
    LiveFacts,
    expired_line,
    live_facts,
    prove_live,
    proven_live,
    proven_since,
    unchanged_since,
)
from ._item_read import ItemRead, read_item
from ._layout import Layout
from ._locks import DEFAULT_LOCK_TIMEOUT, LOCK_NAME, collection_lock
from ._paths import has_symlink, is_safe_id
from ._rules import collect_expired, collect_reason, verify_marks

if TYPE_CHECKING:
    from ._retention import Retention
    from ._verify import VerifyReport

R = TypeVar("R", bound=pydantic.BaseModel)


@runtime_checkable
class Collection(Protocol):
    """What lifecycle verify and GC need from any store of memory files.

    Implementations must make ``rebuild_index`` idempotent (two calls give the same file)
    and must never follow symlinks or yield paths outside ``root``.
    """

    name: str
    root: Path

    def iter_items(self) -> Iterator[ItemRead[Any]]:
        """Yield every item file with its parsed record or its problem."""
        ...

    def rebuild_index(self, items: list[ItemRead[Any]] | None = None) -> bool:
        """Rewrite the derived index from the item files; return True if it changed.

        ``items`` (ItemReads just parsed) spare reading unchanged files twice; the rebuild must still include
        whatever appeared since, so it loses nothing.
        """
        ...

    def verify(self, report: VerifyReport, now: Any) -> None:
        """Check every item file into ``report``, each finding with the repair it needs (quarantine, rename), and
        rebuild the index.

        Must change nothing but derived files and lifecycle marks (expired, excerpt_only): repairs are made
        later, by ``repair_findings``, and only with --fix.
        """
        ...

    def collect(self, retention: Retention, report: GcReport, now: Any, dry_run: bool) -> list[str]:
        """Remove what retention says is done with, noted in ``report`` (nothing removed with dry_run); the ids.

        Must be idempotent, and write each removal's tombstone before its index line and its files.
        """
        ...


class ItemCollection(Generic[R]):
    """A store of item files laid out by a Layout, with a derived one-line-per-item index and one lock.

    A store adds what is its own: ``load_path`` (a file to its record), ``dump`` (a record to its text),
    ``entry_for`` (its index line) and, if it needs them, the ordering and rules of its index and lifecycle.
    """

    name: str
    indexed = True
    """Whether the store keeps an index file (device profiles do not)."""
    named_by_id = True
    """Whether an item's file is named after its id (verify names and renames the others)."""
    guard_linked = False
    """Whether a symlinked folder refuses the lock and the rebuild (YAML collections); the other stores only
    refuse to read through it."""
    read_only = False
    """Whether this process only reads the store (an MCP server without --allow-write): a stale or missing index is
    then read around from the item files, never rewritten."""

    def __init__(self, layout: Layout, *, name: str, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 clock: Callable[[], Any] | None = None) -> None:
        self.layout = layout
        self.root = layout.root
        self.name = name
        self.dir = layout.dir
        # The symlink check of the item folder covers the store's own folder when it lies on the way there.
        self._items_under_dir = layout.items_dir.is_relative_to(layout.dir)
        self.index = IndexFile(self.dir / INDEX_NAME, self.root)
        self.lock_timeout = lock_timeout
        self.clock = clock

    # -- what a store adds ------------------------------------------------------

    def load_path(self, path: Path) -> R:
        """Load and validate one item file; ParseError/ValidationError on bad content."""
        raise NotImplementedError

    def dump(self, record: R, old_text: str | None) -> str:
        """The text of a record's file (keeping the comments of ``old_text``, the file as it was)."""
        raise NotImplementedError

    def entry_for(self, record: R) -> dict[str, Any]:
        """The index line of a record."""
        raise NotImplementedError

    def order_entries(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Index entries in the order the index keeps them (by id unless a store says otherwise)."""
        return sorted(entries, key=lambda e: str(e.get("id", "")))

    def indexable(self, record: R) -> bool:
        """Whether a record has an index line (an episode being recorded has none yet)."""
        return True

    def sort_bytes(self, entry: dict[str, Any]) -> bytes | None:
        """An index entry's place in ``order_entries`` as bytes that sort the same (``order_bytes``), so a large
        index is compared and rewritten streamed; None (the default): the store's entries are ordered as a list."""
        return None

    def derived_records(self, entries: Iterable[dict[str, Any]]) -> list[R]:
        """The records the files derived beside the index are built from, picked by the index entries of every
        indexable file and read again (none by default: a store with derived files says which; they must be few)."""
        return []

    def derived_current(self, records: list[R]) -> bool:
        """Whether the files derived beside the index (long-term profile.md) match these records."""
        return True

    def write_derived(self, records: list[R]) -> None:
        """Rewrite the files derived beside the index from these records (under the lock)."""

    # -- paths and locks --------------------------------------------------------

    def lock(self):  # type: ignore[no-untyped-def]
        """Return the context manager holding this collection's lock."""
        # The lock file is a write too: never created through a link on the way to the collection's folder.
        if (self.guard_linked and self.linked()) or has_symlink(self.root, self.dir):
            raise UnsafePathError(self.layout.rel_dir, "the collection folder is a symlink; nothing is written there")
        return collection_lock(self.dir, self.lock_timeout)

    @property
    def lock_path(self) -> Path:
        """Path of this collection's lock file."""
        return self.dir / LOCK_NAME

    def linked(self) -> bool:
        """Whether the item folder is (under) a symlink: never read then."""
        return has_symlink(self.root, self.layout.items_dir)

    def rel(self, path: Path) -> str:
        """Path relative to the memory root, for reports and hits."""
        return self.layout.rel(path)

    def path_of(self, item_id: str) -> Path:
        """The file of an item."""
        return self.layout.path_of(item_id)

    def expected_path(self, record: R) -> Path:
        """Where an item file named after its id lives (a record's id is already known to be safe)."""
        return self.layout.expected_path(record.id)  # type: ignore[attr-defined]

    def item_names(self) -> list[str]:
        """Names of the item files present now, relative to the folder (the index check)."""
        return self.layout.item_names()

    def item_paths(self) -> list[Path]:
        """Paths of the item files present now (symlinks excluded)."""
        return self.layout.item_paths()

    def stamp_dirs(self) -> list[Path]:
        """The folders whose mtimes change when an item file appears or goes (index checks)."""
        return self.layout.stamp_dirs()

    def symlinks(self) -> list[Path]:
        """Symlinks found in the item folder (never followed, reported by verify)."""
        folder = self.layout.items_dir
        if self.linked():
            return [folder]
        try:
            with os.scandir(folder) as it:
                return [Path(e.path) for e in it if stat.S_ISLNK(e.stat(follow_symlinks=False).st_mode)]
        except ABSENT:
            return []

    # -- reading ----------------------------------------------------------------

    def get(self, item_id: str) -> R | None:
        """Return an item by id, or None when the file does not exist (or lies through a symlink)."""
        try:
            path = self.path_of(item_id)
        except UnsafePathError:
            if not is_safe_id(item_id):
                raise  # an id that would leave the folder is the caller's error
            return None  # a symlink on the way: nothing is read through it (verify names the link)
        try:
            return self.load_path(path)
        except FileNotFoundError:
            return None

    def iter_items(self) -> Iterator[ItemRead[R]]:
        """Yield every item file (symlinks skipped) with its record or problem."""
        if self.linked():
            return
        for path in self.layout.iter_item_paths():
            yield read_item(path, self.load_path)

    def entries(self) -> list[dict[str, Any]]:
        """Index entries, checked against the item files (rebuilt when missing or wrong)."""
        if self.linked():
            return []
        return indexed_entries(self, folder_checked=self._items_under_dir)

    def iter_entries(self) -> Iterator[dict[str, Any]]:
        """``entries`` one by one: an index known to match the item files (a verify just compared them) is read
        line by line and kept nowhere; any other is checked (and rebuilt) as ``entries`` does."""
        if self.linked():
            return iter(())
        if not has_symlink(self.root, self.dir) and known_matching(self):
            return self.index.iter_entries()
        return iter(self.entries())

    # -- writing ----------------------------------------------------------------

    def _old_text(self, path: Path) -> str | None:
        try:
            return read_bytes_nofollow(path).decode("utf-8", "replace")
        except FileNotFoundError:
            return None

    def save_locked(self, record: R, *, new_line: bool = False) -> Path:
        """Write an item file then its index line (the caller holds the lock). ``new_line``: the caller knows the
        index holds no line of this item: it is appended without the index being read (a large index is not parsed
        for one new line)."""
        path = self.path_of(record.id)  # type: ignore[attr-defined]
        old_text = self._old_text(path)
        with index_writes(self):
            # Item first, index after: a crash in between leaves an orphan the next verify indexes.
            atomic_write(path, self.dump(record, old_text), root=self.root)
            entry = self.entry_for(record)
            entry["path"] = self.layout.name_of(path)
            if new_line and old_text is None and self.index.path.exists():
                self.index.append(entry)
            else:
                self.index.upsert(entry)
        return path

    records_writes = False
    """Whether ``before_write``/``written`` see each write (a collection that keeps a history of its items)."""

    def before_write(self, current: R | None) -> Any:
        """What a subclass keeps of an item just before it is written (``records_writes`` only)."""
        return None

    def written(self, item_id: str, before: Any, new: R) -> None:
        """Called under the lock after each item write with what ``before_write`` kept (``records_writes`` only)."""

    def _current_for_write(self, item_id: str) -> R | None:
        try:
            return self.get(item_id)
        except FileProblemError:
            return None  # a broken file is replaced whole

    def save(self, record: R) -> Path:
        """Write an item file then its index line, under the collection lock."""
        with self.lock():
            item_id = str(record.id)  # type: ignore[attr-defined]
            before = self.before_write(self._current_for_write(item_id)) if self.records_writes else None
            path = self.save_locked(record)
            if self.records_writes:
                self.written(item_id, before, record)
            return path

    def update(self, item_id: str, change: Callable[[R | None], R | None]) -> R | None:
        """Read-modify-write one item under the lock; ``change`` gets None for a new item."""
        with self.lock():
            current = self.get(item_id)
            # Taken first: ``change`` may edit the record it is given in place.
            before = self.before_write(current) if self.records_writes else None
            new = change(current)
            if new is not None:
                self.save_locked(new)
                if self.records_writes:
                    self.written(item_id, before, new)
            return new

    def _write_many(self, changes: Mapping[str, Callable[[R], R | None]]) -> dict[str, dict[str, Any]]:
        """Apply changes to existing items (under the lock); the index lines of the items written, by id."""
        return {item_id: {**self.entry_for(new), "path": self.layout.name_of(path)}
                for item_id, path, new in self._write_each(changes)}

    def _write_each(self, changes: Mapping[str, Callable[[R], R | None]]) -> Iterator[tuple[str, Path, R]]:
        """Apply changes to existing items (under the lock), one at a time: each item written, with its file."""
        for item_id, change in changes.items():
            cur = self.get(item_id)
            if cur is None:
                continue
            before = self.before_write(cur) if self.records_writes else None
            new = change(cur)
            if new is None:
                continue
            path = self.path_of(item_id)
            old_text = read_bytes_nofollow(path).decode("utf-8", "replace")
            atomic_write(path, self.dump(new, old_text), root=self.root)
            if self.records_writes:
                self.written(item_id, before, new)
            yield item_id, path, new

    def update_many(self, changes: Mapping[str, Callable[[R], R | None]], *, known: DigestTable | None = None) -> int:
        """Apply changes to many items under one lock, then rewrite the index once; return items written.
        (``known``, the digests of a verify just made, serves a store that rebuilds its index instead.)"""
        with self.lock(), index_writes(self):
            changed = self._write_many(changes)
            written = len(changed)
            if changed:
                # One index rewrite for the batch: the changed lines replaced, every other line kept.
                current = self.index.read()
                self.index.write([changed.pop(e["id"], e) if e["id"] in changed else e for e in current.entries]
                                 + list(changed.values()))
        return written

    def digests(self, items: DigestTable | list[ItemRead[R]] | None = None) -> DigestTable:
        """A table of what the index rebuild keeps of each item (``items``, ItemReads just parsed, added first);
        a table given is returned as it is. The caller closes it."""
        if isinstance(items, DigestTable):
            return items
        table = DigestTable(entry_of=lambda r: self.entry_for(r) if self.indexable(r) else None,
                            expected_of=self.expected_path, sort_of=self.sort_bytes, rel=self.layout.name_of,
                            root=self.root)
        for item in items or []:
            if item.record is not None:
                table.add(item.path, item.stat_key, item.record)
        return table

    def rebuild_index(self, items: DigestTable | list[ItemRead[R]] | None = None) -> bool:
        """Rewrite the index from the item files (reusing the unchanged parses or digests in ``items``); True if it
        changed."""
        if self.guard_linked and self.linked():
            return False
        table = self.digests(items)
        try:
            return self._rebuild_from(table)
        finally:
            if table is not items:
                table.close()

    def _rebuild_from(self, table: DigestTable) -> bool:
        def derive() -> list[R]:
            # Digests, not records: the rebuild holds no parsed item, and (in a sortable store) no index line.
            table.refresh(self.layout.iter_item_paths(), self.load_path)
            # Every indexable file, a second one holding an id included, as the derived files always saw them.
            return self.derived_records(table.every_entry())

        def same() -> tuple[bool, list[dict[str, Any]] | None]:
            # Same entries in another order (appends come in creation order) is not a change.
            if table.sortable:
                streamed = table.same_as_index(self.index, self.sort_bytes)
                if streamed is not None:
                    return streamed, None
            entries = self.order_entries(table.chosen_entries())
            current = self.index.read()
            return (current.exists and not current.problems and self.order_entries(current.entries) == entries,
                    entries)

        # Checked without the lock first: an index that is right is never rewritten, or even locked
        # (verify on a read-only tree answers instead of failing on the lock file).
        records = derive()
        if same()[0] and self.derived_current(records):
            return False
        with self.lock():
            records = derive()
            self.write_derived(records)
            unchanged, entries = same()
            if unchanged:
                return False
            if entries is None and table.sortable:
                table.write_index(self.index)
            else:
                self.index.write(entries if entries is not None else self.order_entries(table.chosen_entries()))
            return True

    # -- verify and GC ----------------------------------------------------------

    def verify_item(self, item: ItemRead[R], report: VerifyReport, now: Any) -> dict[str, Any] | None:
        """Verify's look at one parsed item: the lifecycle marks to write on it (the default rules)."""
        return verify_marks(item.record, report, now)

    def verify(self, report: VerifyReport, now: Any) -> None:
        """Check every item file, rebuild the index, then write the lifecycle marks decided on the way."""
        from ._verify import check_collection

        # The marks go into the table of digests with them: a store of any size is checked in bounded memory.
        table = self.digests()
        since = time.time_ns()  # before any file is read: what the live memories found are proved against
        live: dict[str, LiveFacts] | None = {} if self.gc_reads_index else None

        def on_item(_coll: Any, item: ItemRead[R]) -> None:
            changes = self.verify_item(item, report, now)
            if changes:
                table.mark(item.record.id, item.path, changes)  # type: ignore[union-attr]
            elif live is not None and item.record is not None and len(live) < KEPT_PER_STORE:
                facts = live_facts(item.record, now)
                if facts is not None:
                    live[self.layout.name_of(item.path)] = facts

        try:
            check_collection(self.root, self, report=report, on_item=on_item, table=table)
            marks = table.marks()
            if marks:
                self.apply_marks(marks, report, _MarkPaths(marks), known=table)
            if live is not None:
                prove_live(self.layout.items_dir, since, now, live)
        finally:
            table.close()

    def apply_marks(self, changes: Mapping[str, dict[str, Any]], report: VerifyReport,
                    paths: Mapping[str, Path] | None = None, *, known: DigestTable | None = None) -> None:
        """Write verify's lifecycle marks (field -> value, by id); an unwritable tree is reported, each item
        with its file (from ``paths``) and the mark it needed. ``known``: the digests verify just made of the
        store (a store that rebuilds its index after the marks reuses them)."""
        try:
            self.update_many(_Setters(changes), known=known)
        except OSError as exc:  # a read-only or full tree: reported, the rest of verify still runs
            for item_id, ch in changes.items():
                where = self.layout.rel(paths[item_id]) if paths and item_id in paths else self.layout.rel(self.dir)
                report.add_not_written(where, f"{item_id} is {_marks_text(ch)}", exc)

    gc_reads_index = False
    """Whether GC may take an expired item's index line for its file when a verify of this process proved it
    (``gc_items``): a store whose line carries status, expiry and update time as its records have them."""

    def gc_items(self, retention: Retention, now: Any) -> Iterator[ItemRead[Any]]:
        """``iter_items`` for GC: a file whose index line a verify of this process proved (``proven_since``), still
        unchanged since, and marked expired is not parsed: its line says all GC needs (not live, so no evidence;
        removable or not by its expiry and grace), as an ``ExpiredLine`` record. Every other file is parsed."""
        if self.linked():
            return
        lines = self._expired_lines(retention, now) if self.gc_reads_index and self.indexed else None
        live = proven_live(self.layout.items_dir, now) if self.gc_reads_index else None
        if not lines and not live:
            yield from self.iter_items()
            return
        line_since, by_name = lines or (0, {})
        live_since, live_by_name = live or (0, {})
        for path in self.layout.iter_item_paths():
            name = self.layout.name_of(path)
            known: tuple[int, Any] | None = None
            line = by_name.get(name)
            facts = live_by_name.get(name)
            if line is not None:
                known = (line_since, line)
            elif facts is not None and not facts.is_expired(now):
                known = (live_since, facts)  # still live: what it cites is what verify read (expired: parsed)
            if known is not None:
                try:
                    st = os.lstat(path)
                except OSError:
                    st = None
                if st is not None and unchanged_since(st, known[0]):
                    yield ItemRead(path, known[1], None, (st.st_mtime_ns, st.st_size, st.st_ino))
                    continue
            yield read_item(path, self.load_path)

    def _expired_lines(self, retention: Retention, now: Any) -> tuple[int, dict[str, ExpiredLine]] | None:
        """(when the proof began, the expired lines of a proven index by file name), or None: the index is not
        proved (or changed while it was read)."""
        since = proven_since(self.index.path)
        if since is None:
            return None
        grace = retention.grace_of("expired")
        by_name: dict[str, ExpiredLine] = {}
        for entry in self.index.iter_entries():
            line = expired_line(entry, grace, now)
            name = entry.get("path")
            if line is not None and isinstance(name, str):
                by_name[name] = line
                if len(by_name) >= KEPT_PER_STORE:
                    break  # the others are parsed
        # Read while nothing changed it: the same index, still as verify left it, from first line to last.
        return (since, by_name) if proven_since(self.index.path) == since else None

    def gc_candidate(self, item: ItemRead[R], retention: Retention, now: Any) -> bool:
        """Whether ``collect`` needs this parsed item: one it may remove, or a symlink it names. GC keeps only
        these as it streams through the store, and hands them to ``collect`` as ``items``."""
        return item.record is not None and (item.path.is_symlink()
                                            or collect_reason(item.record, retention, now) is not None)

    def collect(self, retention: Retention, report: GcReport, now: Any, dry_run: bool, *,
                items: list[ItemRead[R]] | None = None) -> list[str]:
        """Remove items deleted, replaced or expired past their grace (tombstones first); the ids removed.

        ``items`` are this store's items as GC parsed them already (each store is parsed once per GC): all of
        them, or only those ``gc_candidate`` keeps (the others are never removed).
        """
        return collect_expired(self, retention, report, now, dry_run,
                               list(self.iter_items()) if items is None else items)


def _marks_text(changes: dict[str, Any]) -> str:
    """What verify's marks say of an item: ``expired``, ``traceability excerpt_only``."""
    return ", ".join(str(v) if k == "status" else f"{k} {v}" for k, v in changes.items())


class _Setters(Mapping[str, Callable[[Any], Any]]):
    """Each item's marks as the change that writes them, made as it is used (thousands are never all held)."""

    def __init__(self, marks: Mapping[str, dict[str, Any]]) -> None:
        self._marks = marks

    def __getitem__(self, item_id: str) -> Callable[[Any], Any]:
        return _setter(self._marks[item_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._marks)

    def __len__(self) -> int:
        return len(self._marks)

    def items(self) -> Iterator[tuple[str, Callable[[Any], Any]]]:  # type: ignore[override]
        """(id, the change that writes its marks), one at a time."""
        for item_id, changes in self._marks.items():
            yield item_id, _setter(changes)


class _MarkPaths(Mapping[str, Path]):
    """The file each item's marks were decided on (for a report of marks that could not be written)."""

    def __init__(self, marks: Marks) -> None:
        self._marks = marks

    def __getitem__(self, item_id: str) -> Path:
        path = self._marks.path_of(item_id)
        if path is None:
            raise KeyError(item_id)
        return path

    def __iter__(self) -> Iterator[str]:
        return iter(self._marks)

    def __len__(self) -> int:
        return len(self._marks)


def _setter(changes: dict[str, Any]) -> Callable[[Any], Any]:
    def change(cur: Any) -> Any:
        for k, v in changes.items():
            setattr(cur, k, v)
        return cur

    return change
