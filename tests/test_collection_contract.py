"""One contract, every store: create, hand-edit, delete the index, rebuild, verify, fix, verify clean, collect.

Run against each device collection type, device profiles, episodes, long-term memory, and a minimal fake
store built on the collection base alone (its own file format, nothing else), as restic runs one backend
test suite against every backend.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memory_plane import LongTermMemory, LongTermStore
from memory_plane.device_memory import FOLDER, ITEM_TYPES, DeviceMemory, DeviceProfile
from memory_plane.episodes import TaskEpisode, TaskEpisodeStore
from memory_plane.lifecycle import (
    QUARANTINE_DIR,
    Collection,
    FlatLayout,
    GcReport,
    ItemCollection,
    ParseError,
    Record,
    VerifyReport,
    field_str,
    list_quarantined,
    load_retention,
    read_item_text,
    read_jsonl,
    repair_findings,
)

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
PREFIX = {"app_profile": "app_", "procedure": "proc_", "navigation": "nav_", "calibration": "cal_",
          "failure": "fail_", "ui_anchor": "ui_"}


class NoteStore(ItemCollection[Record]):
    """The fake: ``notes/<id>.json`` files on the collection base, with nothing of its own but its format."""

    def __init__(self, root: Path) -> None:
        super().__init__(FlatLayout(root, "notes", suffix=".json"), name="notes", clock=lambda: NOW)

    def load_path(self, path: Path) -> Record:
        text = read_item_text(path)
        try:
            return Record.model_validate(json.loads(text))
        except (ValueError, TypeError) as exc:
            raise ParseError(path, None, f"not a note: {exc}") from None

    def dump(self, record: Record, old_text: str | None) -> str:
        return json.dumps(record.model_dump(mode="json", exclude_none=True), sort_keys=True) + "\n"

    def entry_for(self, record: Record) -> dict[str, Any]:
        return {"id": record.id, "status": record.status, "title": record.title,
                "path": self.layout.name_for(record.id)}


@dataclass
class Case:
    """How the contract drives one store: make it, write an item (``gone``: one GC removes), say its text."""

    name: str
    make: Callable[[Path], Any]
    put: Callable[[Any, str, str, bool], str]  # (store, key, title, gone) -> item id
    path: Callable[[Any, str], Path] = lambda store, item_id: store.path_of(item_id)  # type: ignore[no-any-return]
    indexed: bool = True
    collected: bool = True
    tombstone_kind: str = ""


def _device(item_type: str) -> Case:
    def make(root: Path) -> Any:
        return DeviceMemory(root, clock=lambda: NOW).collections[item_type]

    def put(store: Any, key: str, title: str, gone: bool) -> str:
        item = ITEM_TYPES[item_type](id=f"{PREFIX[item_type]}{key}", type=item_type, title=title,
                                      status="deleted" if gone else "active", created_at=NOW, updated_at=NOW)
        store.save(item)
        return item.id

    return Case(item_type, make, put, tombstone_kind=f"device/{FOLDER[item_type]}")


def _profiles() -> Case:
    def make(root: Path) -> Any:
        (root / "device" / "profile.yaml").unlink()  # the template's default profile: only this test's count
        return DeviceMemory(root, clock=lambda: NOW).profiles

    def put(store: Any, key: str, title: str, gone: bool) -> str:
        prof = DeviceProfile(id=f"device_{key}", type="device_profile", device_id=f"phone-{key}", title=title,
                             status="deleted" if gone else "active", created_at=NOW, updated_at=NOW)
        store.save(prof)
        return prof.id

    def path(store: Any, item_id: str) -> Path:
        return store.path_for(f"phone-{item_id.removeprefix('device_')}")  # named after the device

    return Case("device_profile", make, put, path, indexed=False, collected=False)


def _episodes() -> Case:
    def make(root: Path) -> Any:
        return TaskEpisodeStore(root, clock=lambda: NOW)

    def put(store: Any, key: str, title: str, gone: bool) -> str:
        # An episode GC removes is one past its summary TTL (180 days).
        start = NOW - timedelta(days=400 if gone else 1)
        ep = TaskEpisode(id=f"ep_{start:%Y%m%d}_{key:0>10}", status="active", user_goal=title,
                         started_at=start, ended_at=start)
        store.write(ep)
        return ep.id

    return Case("episodes", make, put, tombstone_kind="episode")


def _long_term() -> Case:
    def make(root: Path) -> Any:
        return LongTermStore(root, clock=lambda: NOW)

    def put(store: Any, key: str, title: str, gone: bool) -> str:
        mem = LongTermMemory(id=f"mem_{key}", type="fact", title=title, content=f"{title} body",
                             status="deleted" if gone else "active", created_at=NOW, updated_at=NOW)
        store.save(mem)
        return mem.id

    return Case("long_term", make, put, tombstone_kind="long_term")


def _notes() -> Case:
    def put(store: Any, key: str, title: str, gone: bool) -> str:
        store.save(Record(id=f"note_{key}", type="note", title=title, status="deleted" if gone else "active",
                          created_at=NOW, updated_at=NOW))
        return f"note_{key}"

    return Case("fake_notes", NoteStore, put, tombstone_kind="notes")


CASES = [*(_device(t) for t in FOLDER), _profiles(), _episodes(), _long_term(), _notes()]


def _titles(store: Any) -> dict[str, str]:
    """Id -> title (or goal) as the store answers now: its index lines, or its records when it has no index."""
    if not store.indexed:
        return {i.record.id: i.record.title for i in store.iter_items() if i.record is not None}
    return {str(e["id"]): field_str(e.get("title")) or field_str(e.get("goal")) or "" for e in store.entries()}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_store_keeps_the_collection_contract(case: Case, root: Path) -> None:
    store = case.make(root)
    assert isinstance(store, Collection)
    # create
    a = case.put(store, "a", "Title A", False)
    b = case.put(store, "b", "Title B", False)
    path_a, path_b = case.path(store, a), case.path(store, b)
    assert path_a.is_file() and store.layout.owns(store.rel(path_a)) and not store.layout.owns("lifecycle/x.yaml")
    assert _titles(store) == {a: "Title A", b: "Title B"}
    # a hand edit, then the index deleted: the rebuild indexes the file as the person left it
    path_a.write_text(path_a.read_text("utf-8").replace("Title A", "Edited A"), "utf-8")
    store.index.path.unlink(missing_ok=True)
    assert store.rebuild_index() is case.indexed
    assert store.index.path.exists() is case.indexed
    assert store.rebuild_index() is False  # idempotent: a second rebuild changes nothing
    assert _titles(store) == {a: "Edited A", b: "Title B"}
    # verify reports a broken file and changes nothing without fix
    path_b.write_text("id: [broken\n", "utf-8")
    report = VerifyReport()
    store.verify(report, NOW)
    assert report.checked == 2
    assert [(p.category, p.path) for p in report.problems] == [("parse", store.rel(path_b))]
    assert path_b.exists() and report.fixed == []
    # the repair it carries quarantines it, and the next verify is clean
    fixed = VerifyReport()
    store.verify(fixed, NOW)
    repair_findings(fixed)
    assert fixed.fixed and fixed.fixed[0].startswith(f"quarantined {store.rel(path_b)} -> {QUARANTINE_DIR}/")
    assert not path_b.exists() and [q.original for q in list_quarantined(root)] == [store.rel(path_b)]
    clean = VerifyReport()
    store.verify(clean, NOW)
    assert clean.ok and clean.checked == 1 and clean.rebuilt_indexes == []
    assert _titles(store) == {a: "Edited A"}
    # collect: what retention is done with goes (a dry run first), tombstone before index line and file
    c = case.put(store, "c", "Title C", True)
    path_c = case.path(store, c)
    retention = load_retention(None)
    dry = GcReport(dry_run=True)
    assert store.collect(retention, dry, NOW, True) == ([c] if case.collected else [])
    assert path_c.exists() and dry.tombstones_written == 0
    real = GcReport()
    gone = store.collect(retention, real, NOW, False)
    if not case.collected:
        assert gone == [] and real.removed == [] and path_c.exists()  # a device's profile is never collected
        return
    assert gone == [c] and real.tombstones_written == 1
    assert [r["path"] for r in real.removed] == [store.rel(path_c.parent if case.name == "episodes" else path_c)]
    assert not path_c.exists() and set(_titles(store)) == {a}
    tombs = read_jsonl(root / "lifecycle" / "tombstones.jsonl").records
    assert [(t["ref"]["type"], t["ref"]["id"], t["reason"]) for t in tombs] == [(case.tombstone_kind, c, "gc")]
    # idempotent: a second GC finds nothing more and writes no second tombstone
    again = GcReport()
    assert store.collect(retention, again, NOW, False) == [] and again.tombstones_written == 0


def test_the_fake_store_is_the_base_alone() -> None:
    """The fake adds a format and nothing else: the skeleton is the base's."""
    own = {k for k, v in vars(NoteStore).items() if callable(v)} - {"__init__"}
    assert own == {"load_path", "dump", "entry_for"}
