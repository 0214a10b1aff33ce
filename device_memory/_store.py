"""DeviceMemory: one collection per memory type under device/, plus device profiles."""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from memory_plane.lifecycle import (
    ABSENT,
    DEFAULT_LOCK_TIMEOUT,
    Clock,
    ConfigError,
    ConflictLog,
    FileProblemError,
    GcReport,
    ItemCollection,
    ItemRead,
    ParseError,
    ProfileLayout,
    Retention,
    TombstoneLog,
    UnsafePathError,
    UsageError,
    VerifyReport,
    YamlCollection,
    atomic_write,
    dump_yaml,
    format_ts,
    has_symlink,
    index_writes,
    is_safe_id,
    load_retention,
    load_yaml,
    read_item_text,
    slug_id,
    system_clock,
    validate_record,
)

from ._apps import AppCatalog, shipped_catalog
from ._history import ItemHistory, Revision, change_cause, fields_at, snapshot
from ._items import FOLDER, ITEM_TYPES, AppProfile, DeviceItem, DeviceProfile, Failure, Procedure, type_of_id
from ._lookup import EntryLookup

T = TypeVar("T", bound=DeviceItem)
SUMMARY_CHARS = 240


def index_entry(item: DeviceItem) -> dict[str, Any]:
    """The index line of a device memory: what retrieval needs without opening the file."""
    app = item.applicability or {}
    entry: dict[str, Any] = {
        "id": item.id,
        "type": item.type,
        "status": item.status,
        "title": item.title,
        "app": item.app_id,
        "app_name": item.app_name,
        "page": item.page_name,
        "intent": getattr(item, "intent", None),
        "goal": getattr(item, "goal_pattern", None),
        "stale": (item.model_extra or {}).get("stale_key"),
        "device_id": item.device_id,
        "applicability": dict(app) or None,
        "confidence": round(item.confidence, 3),
        "success_count": item.success_count or None,
        "failure_count": item.failure_count or None,
        "evidence": len(item.evidence_refs),
        "expires_at": _ts(item.expires_at),
        "updated_at": _ts(item.updated_at),
        "last_validated_at": _ts(item.last_validated_at),
        "superseded_by": item.superseded_by,
        "conflicts_with": item.conflicts_with or None,
        "tags": item.tags[:8] or None,
        "tools": item.required_tools() or None,
        "summary": item.shown_line()[:SUMMARY_CHARS],
        "source": (item.model_extra or {}).get("source"),
        "traceability": (item.model_extra or {}).get("traceability"),
        "verified": False if (item.model_extra or {}).get("verified") is False else None,
        # A procedure's goals with their values masked: what retrieval compares a new goal with.
        "goal_shapes": item.goal_shapes()[-5:] or None if isinstance(item, Procedure) else None,
        # Its path's tools in order, as a digest: a path of other tools is told apart without opening the file.
        "path_tools": item.path_tools() if isinstance(item, Procedure) else None,
        # What else the app was called here (shown, or as a goal wrote it): the catalog learns these.
        "names": [str(n) for n in [*item.display_names, *item.aliases]][:12] or None
        if isinstance(item, AppProfile) else None,
        # The procedures a failure was met on (empty: none): the lessons of a path find the failures that
        # name it through this line instead of opening every failure of the app.
        "led_by": item.led_by() if isinstance(item, Failure) else None,
        "path": f"{item.id}.yaml",
    }
    return {k: v for k, v in entry.items() if v is not None}


def led_by_line(entry: dict[str, Any]) -> list[str] | None:
    """The procedures a failure's index line says it was met on; None when the line does not say (written
    before lines carried it): the caller reads the item file."""
    led = entry.get("led_by")
    return [str(x) for x in led] if isinstance(led, list) else None


def _ts(v: Any) -> str | None:
    if v is None:
        return None
    return v if isinstance(v, str) else format_ts(v)


class DeviceCollection(YamlCollection[T]):
    """One folder of device memories whose every write also records a revision in the item's history."""

    def __init__(self, root: Path, rel_dir: str, model: type[T], *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 clock: Clock = system_clock) -> None:
        super().__init__(root, rel_dir, model, index_entry=index_entry, lock_timeout=lock_timeout, clock=clock)
        self.history = ItemHistory(self.root, self.layout.items_dir, clock)  # type: ignore[attr-defined]
        self._peeked: OrderedDict[str, tuple[tuple[int, int, int], T]] = OrderedDict()
        self._peek_guard = threading.Lock()

    records_writes = True
    gc_reads_index = True  # its index lines carry status, expires_at, updated_at and last_validated_at
    PEEK_KEPT = 256
    """Parsed items ``peek`` keeps (the most recently read): bounded, whatever the size of the store."""

    def peek(self, item_id: str) -> T | None:
        """An item as its file is now, for reading only: never change what it returns (it is shared). A file
        unchanged since this collection last parsed it (the same size, mtime and inode) is not parsed again:
        the lessons of one goal read the same procedures and failures episode after episode."""
        try:
            path = self.path_of(item_id)
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        except (OSError, UnsafePathError):
            return self.get(item_id)  # get decides (a refused id raises, a symlink on the way reads nothing)
        if not stat.S_ISREG(st.st_mode):
            return self.get(item_id)
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        with self._peek_guard:
            hit = self._peeked.get(item_id)
            if hit is not None and hit[0] == key:
                self._peeked.move_to_end(item_id)
                return hit[1]
        item = self.get(item_id)
        try:
            after = os.lstat(path)
        except OSError:
            return item
        if item is not None and (after.st_mtime_ns, after.st_size, after.st_ino) == key:
            with self._peek_guard:  # kept only when the file did not change while it was read
                self._peeked[item_id] = (key, item)
                self._peeked.move_to_end(item_id)
                while len(self._peeked) > self.PEEK_KEPT:
                    self._peeked.popitem(last=False)
        return item

    def before_write(self, current: T | None) -> Any:
        """The fields of an item before a write (what its revision compares against)."""
        return snapshot(current)

    def written(self, item_id: str, before: Any, new: T) -> None:
        """Every item write is a revision in the item's history."""
        self.history.record(item_id, before, snapshot(new) or {})

    def delete(self, item_id: str) -> bool:
        """Remove an item's index line, then its file, then its history; True if it existed."""
        with self.lock(), index_writes(self):
            gone = super().delete(item_id)
            self.history.remove(item_id)
            return gone

    def collect(self, retention: Retention, report: GcReport, now: Any, dry_run: bool, *,
                items: list[ItemRead[T]] | None = None) -> list[str]:
        """GC of the items (see ItemCollection.collect); the histories of the items it removed go with them."""
        removed = super().collect(retention, report, now, dry_run, items=items)
        if has_symlink(self.root, self.history.dir):
            return removed  # a linked collection folder: its items were skipped, nothing of it is touched
        # A GC or forget killed between an item and its history leaves a history with no item: what it said goes
        # as the item did. Only for an item with a tombstone: a quarantined item keeps its history for its
        # restore (the item is written first, so under the lock no history here is being written).
        # No link on the way to the history folder (checked above), inside the item folder: a plain join will do.
        def present(item_id: str) -> bool:
            return os.path.lexists(self.layout.expected_path(item_id))

        gone = self.history.orphans(present)
        left = sorted((set(gone) - set(removed)) & TombstoneLog(self.root).ids()) if set(gone) - set(removed) else []
        for item_id in left:
            report.note(self.layout.rel(self.history.path_of(item_id)), "history of an item no longer here")
        if dry_run or not (removed or left):
            return removed
        with self.lock():
            self.history.remove_many(i for i in [*removed, *left] if is_safe_id(i) and not present(i))
        return removed

    def verify(self, report: Any, now: Any) -> None:
        """Verify the items (see ItemCollection.verify), then their histories."""
        super().verify(report, now)
        self.history.check(report, self.layout.rel)

    def revisions(self, item_id: str) -> list[Revision]:
        """The item's kept revisions, oldest first."""
        return self.history.read(item_id)


class DeviceProfileStore(ItemCollection[DeviceProfile]):
    """Device profiles: device/profile.yaml for ``default``, device/profiles/<id>.yaml for others (no index)."""

    indexed = False
    named_by_id = False  # a profile's file is named after its device

    def __init__(self, root: Path, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT, clock: Clock | None = None) -> None:
        super().__init__(ProfileLayout(Path(root), slug_id), name="device/profiles", lock_timeout=lock_timeout,
                         clock=clock)
        self.history = ItemHistory(self.root, self.root / "device" / "profiles", clock or system_clock)

    def path_for(self, device_id: str) -> Path:
        """File of a device's profile (never shared between two devices)."""
        return self.layout.path_of(device_id)

    def load_path(self, path: Path) -> DeviceProfile:
        """Load one profile file."""
        text = read_item_text(path)
        return validate_record(DeviceProfile, load_yaml(text, path), path, text)

    def dump(self, record: DeviceProfile, old_text: str | None) -> str:
        """A profile's YAML, keeping the comments a person added."""
        return dump_yaml(record.to_yaml_dict(), old_text)

    def entry_for(self, record: DeviceProfile) -> dict[str, Any]:
        """What a listing shows of a profile (profiles have no index file)."""
        return index_entry(record)

    def save(self, profile: DeviceProfile) -> Path:
        """Write a profile (keeping comments a person added)."""
        with self.lock():
            path = self.path_for(profile.device_id or "default")
            before = snapshot(self._profile_at(path))
            atomic_write(path, self.dump(profile, self._old_text(path)), root=self.root)
            self.history.record(profile.id, before, snapshot(profile) or {})
            return path

    def verify(self, report: Any, now: Any) -> None:
        """Verify the profiles (see ItemCollection.verify), then their histories."""
        super().verify(report, now)
        self.history.check(report, self.layout.rel)

    def _profile_at(self, path: Path) -> DeviceProfile | None:
        try:
            return self.load_path(path)
        except (FileNotFoundError, FileProblemError):
            return None

    def update(self, device_id: str, change: Callable[[DeviceProfile | None], DeviceProfile | None]) -> Any:
        """Read-modify-write a profile under the lock."""
        with self.lock():
            try:
                cur = self.get(device_id)
            except FileProblemError:
                cur = None  # a broken profile is rebuilt from new evidence; verify reports the old one
            before = snapshot(cur)  # taken first: ``change`` may edit the record it is given in place
            new = change(cur)
            if new is not None:
                path = self.path_for(new.device_id or "default")
                atomic_write(path, self.dump(new, self._old_text(path)), root=self.root)
                self.history.record(new.id, before, snapshot(new) or {})
            return new

    def revisions(self, item_id: str) -> list[Revision]:
        """A profile's kept revisions, oldest first."""
        return self.history.read(item_id)

    def iter_items(self) -> Iterator[ItemRead[DeviceProfile]]:
        """The default profile and every other device's profile."""
        for p in self.layout.item_paths():
            if not p.exists():
                continue
            try:
                yield ItemRead(p, self.load_path(p))
            except FileProblemError as exc:
                yield ItemRead(p, None, exc)
            except OSError as exc:
                yield ItemRead(p, None, ParseError(p, None, f"unreadable: {exc}"))

    def entries(self) -> list[dict[str, Any]]:
        """What a listing shows of every readable profile (there is no index file to read)."""
        return [index_entry(p) for p in self.all()]

    def all(self) -> list[DeviceProfile]:
        """Every readable profile."""
        return [i.record for i in self.iter_items() if i.record is not None]

    def sole_device_id(self) -> str | None:
        """The device of a tree that knows exactly one besides ``default`` (a phone's own tree), else None."""
        ids = {p.device_id for p in self.all() if p.device_id and p.device_id != "default"}
        return ids.pop() if len(ids) == 1 else None

    def rebuild_index(self, items: Any = None) -> bool:
        """Profiles have no index (there are few); nothing to rebuild."""
        return False

    def symlinks(self) -> list[Path]:
        """Not checked here: the tree-wide symlink walk of verify names them."""
        return []

    def apply_marks(self, changes: Mapping[str, dict[str, Any]], report: VerifyReport,
                    paths: Mapping[str, Path] | None = None, *, known: Any = None) -> None:
        """Device profiles expire like every other memory (one file per device, no index)."""
        try:
            for prof_id, ch in changes.items():
                dev_id = next((p.device_id or "default" for p in self.all() if p.id == prof_id), None)
                if dev_id:
                    self.update(dev_id, partial(_set, changes=ch))
        except OSError as exc:  # a read-only or full tree: reported, the rest of verify still runs
            for prof_id in changes:
                where = paths.get(prof_id) if paths else None
                report.add_not_written(self.layout.rel(where) if where else self.layout.rel(self.dir),
                                       f"{prof_id} is {', '.join(str(v) for v in changes[prof_id].values())}", exc)

    def gc_candidate(self, item: ItemRead[DeviceProfile], retention: Retention, now: Any) -> bool:
        """No profile is a GC candidate (see ``collect``)."""
        return False

    def collect(self, retention: Retention, report: GcReport, now: Any, dry_run: bool, *,
                items: list[ItemRead[DeviceProfile]] | None = None) -> list[str]:
        """A device's profile is never removed by GC (verify marks it expired; new evidence renews it)."""
        return []


def _set(cur: DeviceProfile | None, changes: dict[str, Any]) -> DeviceProfile | None:
    if cur is None:
        return None
    for k, v in changes.items():
        setattr(cur, k, v)
    return cur


class DeviceMemory:
    """Every device memory of the tree, by type, with tombstones and the conflict log."""

    def __init__(self, root: Path, *, clock: Clock = system_clock, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 catalog: AppCatalog | None = None) -> None:
        self.root = Path(root)
        self.clock = clock
        self.collections: dict[str, DeviceCollection[Any]] = {
            t: DeviceCollection(self.root, f"device/{folder}", ITEM_TYPES[t], lock_timeout=lock_timeout, clock=clock)
            for t, folder in FOLDER.items()
        }
        self.profiles = DeviceProfileStore(self.root, lock_timeout=lock_timeout, clock=clock)
        self.tombstones = TombstoneLog(self.root, clock=clock, lock_timeout=lock_timeout)
        self.conflicts = ConflictLog(self.root, clock=clock, lock_timeout=lock_timeout)
        self._catalog = catalog
        self._catalog_key: tuple[int, int, int] | None = None
        self._catalog_names: list[tuple[str, list[str]]] | None = None
        self._lookups: dict[tuple[str, tuple[str, ...]], EntryLookup] = {}
        try:
            self.retention = load_retention(self.root / "lifecycle" / "retention.yaml")
        except ConfigError:
            # A bad retention.yaml must not stop the agent: defaults apply, verify reports it.
            self.retention = load_retention(None)

    # -- apps -----------------------------------------------------------------

    @property
    def catalog(self) -> AppCatalog:
        """The shipped alias table plus names learned by app profiles (refreshed when they change)."""
        idx = self.collections["app_profile"].index.path
        try:
            st = os.stat(idx)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
        except ABSENT:
            key = (0, 0, 0)
        if self._catalog is None or key != self._catalog_key:
            learned: list[tuple[str, list[str]]] = []
            for entry in self.collections["app_profile"].entries():
                if entry.get("app") and entry.get("app_name"):
                    names = entry.get("names")
                    extra = [str(n) for n in names if isinstance(n, str)] if isinstance(names, list) else []
                    learned.append((str(entry["app"]), [str(entry["app_name"]), *extra]))
            if self._catalog is not None and learned == self._catalog_names:
                # A profile renewed without a new name (every task renews one): the catalog is the same.
                self._catalog_key = key
                return self._catalog
            cat = AppCatalog()
            base = shipped_catalog()
            for app_id in list(base._apps):
                info = base.get(app_id)
                if info:
                    cat.add(info)
            for app_id, app_names in learned:
                cat.learn(app_id, app_names)
            self._catalog, self._catalog_key, self._catalog_names = cat, key, learned
        return self._catalog

    # -- access -------------------------------------------------------------------

    def collection(self, item_type: str) -> DeviceCollection[Any]:
        """The collection holding one memory type."""
        return self.collections[item_type]

    def get(self, item_id: str) -> DeviceItem | None:
        """Any device memory by id (the prefix names its type)."""
        t = type_of_id(item_id)
        if t == "device_profile":
            return next((p for p in self.profiles.all() if p.id == item_id), None)
        if t is None:
            return None
        return self.collections[t].find(item_id)  # type: ignore[no-any-return]

    def history(self, item_id: str) -> list[Revision]:
        """The kept revisions of a device memory, oldest first (at most ``HISTORY_LIMIT``): each names the fields
        it changed with their old and new values, the rule and episode that caused it when known, and when.
        A UsageError names an id no device memory has."""
        self._known(item_id)
        t = type_of_id(item_id)
        if t == "device_profile":
            return self.profiles.revisions(item_id)
        return self.collections[str(t)].revisions(item_id)

    def revert(self, item_id: str, to: int) -> DeviceItem:
        """Put a device memory back as it was right after revision ``to`` of its history and return it.

        The revert is a change of its own: written through the collection's guarded write path under its lock,
        recorded in the history (rule ``revert``), so it can be reverted in turn. A UsageError names an unknown
        id or a revision the history does not hold (the oldest ones are dropped past ``HISTORY_LIMIT``)."""
        self._known(item_id)
        t = str(type_of_id(item_id))

        def change(cur: Any) -> Any:
            if cur is None:
                raise UsageError(f"no device memory {item_id}")
            revs = self.history(item_id)
            if to not in {r.rev for r in revs}:
                kept = f"revisions {revs[0].rev}-{revs[-1].rev}" if revs else "no revisions"
                raise UsageError(f"{item_id} has no revision {to} (its history holds {kept})")
            fields = fields_at(snapshot(cur) or {}, revs, to)
            fields["updated_at"] = format_ts(self.clock())
            return type(cur).model_validate(fields)

        with change_cause("revert", detail=f"back to revision {to}"):
            if t == "device_profile":
                dev = next((p.device_id or "default" for p in self.profiles.all() if p.id == item_id), "default")
                out = self.profiles.update(dev, change)
            else:
                out = self.collections[t].update(item_id, change)
        return out  # type: ignore[no-any-return]

    def _known(self, item_id: str) -> None:
        """Refuse (UsageError) an id no device memory has."""
        if not is_safe_id(item_id) or type_of_id(item_id) is None or self.get(item_id) is None:
            raise UsageError(f"no device memory {str(item_id)[:80]}")

    def entries(self, item_type: str | None = None, app: str | None = None) -> list[dict[str, Any]]:
        """Index entries of one type or all, optionally for one app."""
        types = [item_type] if item_type else list(self.collections)
        out: list[dict[str, Any]] = []
        for t in types:
            if t == "device_profile":
                out += [index_entry(p) for p in self.profiles.all()]
                continue
            out += [e for e in self.collections[t].entries() if app is None or e.get("app") == app]
        return out

    def line_is_current(self, item_type: str, entry: dict[str, Any]) -> bool:
        """Whether an index line says what its file says: the file was written no later than the index (one
        ``lstat``; a file edited after it is to be read instead), as retrieval decides it."""
        coll = self.collections[item_type]
        name = entry.get("path")
        try:
            index_ns = os.stat(coll.index.path).st_mtime_ns
            st = os.lstat(f"{coll.dir}/{name if isinstance(name, str) else entry['id'] + '.yaml'}")
        except (OSError, KeyError, TypeError, ValueError):
            return False
        return bool(st.st_size) and st.st_mtime_ns <= index_ns

    def entries_where(self, item_type: str, **fields: Any) -> list[dict[str, Any]]:
        """The index lines of one type whose fields hold exactly these values (``app=None``: of no app), in
        index order, found through a lookup kept beside the index's parse instead of a pass over every line."""
        names = tuple(sorted(fields))
        look = self._lookups.get((item_type, names))
        if look is None:
            look = self._lookups[(item_type, names)] = EntryLookup(names)
        return look.of(self.collections[item_type].entries(), [fields[n] for n in names])

    def upsert(self, item_type: str, item_id: str, change: Callable[[Any], Any]) -> Any:
        """Create or update one item under its collection lock; forgotten lessons are not re-created."""
        coll = self.collections[item_type]
        blocked = self.tombstones.blocked_ids()

        def guarded(cur: Any) -> Any:
            if item_id in blocked:
                return None  # forgotten (a file still here is a killed forget's leftover: not taught again)
            new = change(cur)
            if new is not None and cur is None and new.lesson_key in self.tombstones.blocked_hashes():
                return None  # forgotten on purpose: the same evidence must not teach it again
            return new

        return coll.update(item_id, guarded)

    def forget(self, item_id: str, reason: str) -> bool:
        """Forget a memory: a tombstone (no content) that blocks re-learning it, appended and fsynced first,
        then its index line and file (a kill between leaves a forgotten file, never served, that
        ``finish_forgets`` removes). An id no memory can have is a UsageError naming it."""
        if not is_safe_id(item_id):
            text = str(item_id)
            raise UsageError(f"no memory can have the id {text[:80]!r}"
                             + (f" (and {len(text) - 80} more characters)" if len(text) > 80 else "")
                             + ": ids are 1-80 characters of a-z, 0-9, _ and -")
        t = type_of_id(item_id)
        if t is None or t == "device_profile":
            return False
        coll = self.collections[t]
        with coll.lock():
            item = coll.get(item_id)
            if item is None:
                return False
            if item_id not in self.tombstones.blocked_ids():  # a leftover forgotten again: one tombstone
                self.tombstones.add(t, item_id, reason=reason, content_hashes=[item.lesson_key or ""])
            coll.delete(item_id)
        return True

    def finish_forgets(self, *, dry_run: bool = False) -> list[str]:
        """Files of forgotten device memories a killed forget left behind, removed unless ``dry_run``; their
        paths relative to the root."""
        out: list[str] = []
        for t, coll in self.collections.items():
            for item_id in self.tombstones.forgotten_of(t):
                try:
                    path = coll.path_of(item_id)
                except UnsafePathError:  # an unsafe id, or a symlink on the way: nothing is removed through it
                    continue
                if not path.exists():
                    continue
                out.append(coll.rel(path))
                if not dry_run:
                    coll.delete(item_id)
        return out

    def all_collections(self) -> list[Any]:
        """Collections for verify and GC (profiles included)."""
        return [*self.collections.values(), self.profiles]

    def new_item(self, cls: type[T], item_id: str, **fields: Any) -> T:
        """A fresh item stamped with creation time and its type's default TTL."""
        now = self.clock()
        item = cls(id=item_id, created_at=now, updated_at=now, ttl=self.retention.ttl_text(cls.TYPE), **fields)
        item.renew(now)
        return item

    def mark_environment_change(self, device_id: str, key: str, old: str | None, new: str | None) -> list[str]:
        """The device's language/screen/input method changed: demote memories made under the old value
        (conflicted with a stale reason, never deleted) and bring back those made under the new one."""
        changed: list[str] = []
        if not old or not new or str(old).lower() == str(new).lower():
            return changed
        for item_type in ("procedure", "navigation", "calibration", "ui_anchor", "failure"):
            coll = self.collections[item_type]
            for e in list(coll.entries()):
                appl = e.get("applicability") or {}
                value = appl.get(key)
                if value is None or appl.get("device_id", device_id) != device_id:
                    continue
                demote = e.get("status") == "active" and str(value).lower() == str(old).lower()
                restore = (e.get("status") == "conflicted" and e.get("stale") == key
                           and str(value).lower() == str(new).lower())
                if not (demote or restore):
                    continue

                def change(cur: Any, demote: bool = demote) -> Any:
                    if cur is None:
                        return None
                    extra = cur.model_extra if cur.model_extra is not None else {}
                    if demote:
                        cur.status = "conflicted"
                        extra["stale_key"] = key
                        extra["stale_reason"] = f"{key} changed from {old} to {new}"
                    else:
                        cur.status = "active"
                        extra.pop("stale_key", None)
                        extra.pop("stale_reason", None)
                    cur.updated_at = self.clock()
                    return cur

                with change_cause("environment_changed" if demote else "environment_restored",
                                  detail=f"{key} {old} → {new}"):
                    written = coll.update(e["id"], change)
                if written is not None:
                    changed.append(e["id"])
                    self.conflicts.add([e["id"]], rule="environment_changed" if demote else "environment_restored",
                                       decision="conflicted" if demote else "active",
                                       evidence={"device_id": device_id, key: [old, new]})
        return changed

    def app_profile_id(self, app: str) -> str:
        """The id of an app's profile: ``app_<canonical id>``."""
        return f"app_{self.catalog.app_id_for(app)}"[:80]

