"""`fleet export`: what a phone's tree learned since its last export, as table files and a manifest written last."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from memory_plane.device_memory import DeviceItem, DeviceMemory
from memory_plane.episodes import TaskEpisode, TaskEpisodeStore
from memory_plane.lifecycle import Clock, content_hash, format_ts

from ._dest import FleetDest, device_part, jsonl_gz, sha256
from ._rows import FLEET_TYPES, episode_row, lesson_row, mask, personal_values

EXPORTED_STATUSES = ("active", "interrupted")
"""Episodes a phone exports: finished ones (a recording in flight, an expired, deleted or switched-off one stays)."""


@dataclass
class ExportResult:
    """What one export wrote: its id, rows per table, the files and the manifest (None: nothing was new)."""

    export_id: str
    device: str
    rows: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    manifest: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON data."""
        return {"export_id": self.export_id, "device": self.device, "rows": self.rows, "files": self.files,
                "manifest": self.manifest}


@dataclass
class _Seen:
    """What the device's manifests already name: episode ids, lesson rows by id (their hash and key), tombstones."""

    episodes: set[str] = field(default_factory=set)
    lessons: dict[str, list[str]] = field(default_factory=dict)
    tombstones: set[str] = field(default_factory=set)
    long_term: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, dest: FleetDest, device: str) -> _Seen:
        """What every manifest of ``device`` in ``dest`` names."""
        seen = cls()
        for rel in dest.manifests(device):
            m = dest.manifest(rel)
            seen.episodes.update(str(x) for x in m.get("episodes") or [])
            seen.lessons.update({str(k): list(v) for k, v in (m.get("lessons") or {}).items()})
            seen.tombstones.update(str(x) for x in m.get("tombstones") or [])
            seen.long_term.update({str(k): str(v) for k, v in (m.get("long_term") or {}).items()})
        return seen


def row_hash(row: dict[str, Any]) -> str:
    """A lesson row's content, without the export it came in (a row that did not change is not new)."""
    return content_hash(json.dumps({k: v for k, v in row.items() if k != "export_id"}, sort_keys=True, default=str,
                                   ensure_ascii=False), length=16)


def new_export_id(clock: Clock) -> str:
    """A time-ordered export id: its files sort in the order they were made."""
    return f"{clock().strftime('%Y%m%dT%H%M%SZ')}-{os.urandom(4).hex()}"


@dataclass
class TreeExport:
    """The stores one export reads (the phone's own tree), and what it may include."""

    device: DeviceMemory
    episodes: TaskEpisodeStore
    clock: Clock
    long_term: Any = None  # the user's memories: exported only when given (``--include-long-term``)
    include_text: bool = False

    def run(self, dest: FleetDest, device_id: str) -> ExportResult:
        """Write what is new since the manifests of ``device_id`` in ``dest``; nothing new writes nothing.

        The table files go first, each named by the export id, the manifest last: an export killed before its
        manifest is not an export (readers trust only what a manifest names), and the next one redoes it whole."""
        dev = device_part(device_id)
        export_id = new_export_id(self.clock)
        seen = _Seen.read(dest, dev)
        forgotten = self.device.tombstones.blocked_ids()
        personal = personal_values(self.device, self.episodes)
        tables: dict[str, list[dict[str, Any]]] = {
            "episodes": self._episodes(dev, export_id, seen, forgotten, personal),
            "lessons": [], "tombstones": [], "long_term": [],
        }
        lesson_state: dict[str, list[str]] = {}
        for item in self._lessons(forgotten):
            row = lesson_row(item, dev, export_id, personal=personal, include_text=self.include_text)
            h = row_hash(row)
            if seen.lessons.get(item.id, [None])[0] != h:
                tables["lessons"].append(row)
                lesson_state[item.id] = [h, row["lesson_key"]]
        tables["tombstones"] = self._tombstones(dev, export_id, seen)
        lt_state = self._long_term(dev, export_id, seen, forgotten, tables["long_term"])
        result = ExportResult(export_id, dev, {t: len(r) for t, r in tables.items() if r})
        if not result.rows:
            return result
        entries = []
        for table, rows in tables.items():
            # Episodes are partitioned by day too: a reader of one week opens one week's files.
            days = sorted({str(r["date"]) for r in rows}) if table == "episodes" else [None]
            for day in days if rows else []:
                where = f"{table}/device={dev}" + (f"/date={day}" if day else "")
                part = [r for r in rows if day is None or r["date"] == day]
                entries.append(self._write(dest, f"{where}/part-{export_id}.jsonl.gz", table, part))
        result.files = [e["path"] for e in entries]
        manifest = {"export_id": export_id, "device": dev, "created_at": format_ts(self.clock()), "files": entries,
                    "episodes": sorted(r["episode_id"] for r in tables["episodes"]), "lessons": lesson_state,
                    "tombstones": sorted(r["id"] for r in tables["tombstones"]), "long_term": lt_state}
        result.manifest = f"manifests/device={dev}/{export_id}.json"
        dest.write(result.manifest, json.dumps(manifest, ensure_ascii=False, sort_keys=True).encode("utf-8"))
        return result

    @staticmethod
    def _write(dest: FleetDest, rel: str, table: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
        data = jsonl_gz(rows)
        dest.write(rel, data)
        return {"path": rel, "table": table, "rows": len(rows), "sha256": sha256(data), "bytes": len(data)}

    def _episodes(self, dev: str, export_id: str, seen: _Seen, forgotten: set[str],
                  personal: frozenset[str]) -> list[dict[str, Any]]:
        rows = []
        for read in self.episodes.iter_items():
            ep = read.record
            if not isinstance(ep, TaskEpisode) or ep.status not in EXPORTED_STATUSES:
                continue
            if ep.id in seen.episodes or ep.id in forgotten:
                continue
            row = episode_row(ep, dev, export_id, followed=self._followed(ep), cause=self._cause(ep, personal),
                              include_text=self.include_text)
            if row["app"]:
                row["app"] = self.device.catalog.app_id_for(str(row["app"]))  # one name per app, any language
            rows.append(row)
        return rows

    def _followed(self, ep: TaskEpisode) -> bool:
        """Whether the episode followed a memory it was shown: one the agent said it used, or a shown lesson its
        own run renewed (its path was the shown one)."""
        shown = set(ep.retrieved_memory_refs)
        if not shown:
            return False
        if any(ref.startswith("proc_") for ref in shown & set(ep.reusable_lessons)):
            return True
        events = self.episodes.events(ep.id).records
        return any(e.get("type") == "memory_used" and e.get("memory_id") in shown for e in events)

    def _cause(self, ep: TaskEpisode, personal: frozenset[str]) -> str | None:
        """The failure mode a failed episode met, as the fleet names it: its one cause as the lesson writer
        labelled it (the symptom, what identifies it, the page; the user's values masked), else its phase."""
        if ep.outcome.success:
            return None
        phase = ep.outcome.failure_phase or "unknown"
        for label in ep.failure_causes:
            if label.startswith(("fail_", f"{phase}:")):
                continue  # an id of an older record, or the runtime's own phase and reason (listed last)
            return mask(label, personal)[:200]
        return phase

    def _lessons(self, forgotten: set[str]) -> list[DeviceItem]:
        out = []
        for t in FLEET_TYPES:
            for read in self.device.collection(t).iter_items():
                item = read.record
                if item is None or item.id in forgotten or item.status in ("deleted", "inactive"):
                    continue
                out.append(item)
        return out

    def _tombstones(self, dev: str, export_id: str, seen: _Seen) -> list[dict[str, Any]]:
        """Forgotten ids not exported yet, with the fleet keys they had (from this device's earlier exports, or
        the pack key of a lesson pulled from the fleet), never their content."""
        rows = []
        known = {i: v[1] for i, v in seen.lessons.items() if len(v) > 1}
        blocked = self.device.tombstones.blocked_ids()
        for rec in self.device.tombstones.records():
            ref = rec.get("ref")
            rid = ref.get("id") if isinstance(ref, dict) else None
            if not isinstance(ref, dict) or not isinstance(rid, str) or rid not in blocked or rid in seen.tombstones:
                continue
            hashes = [h for h in rec.get("content_hashes") or [] if isinstance(h, str)]
            keys = sorted({*(h for h in hashes if h.startswith("fk_")), *([known[rid]] if rid in known else [])})
            rows.append({"id": rid, "device": dev, "export_id": export_id, "type": ref.get("type"),
                         "forgotten_at": rec.get("ts"), "lesson_keys": keys})
        return rows

    def _long_term(self, dev: str, export_id: str, seen: _Seen, forgotten: set[str],
                   out: list[dict[str, Any]]) -> dict[str, str]:
        state: dict[str, str] = {}
        if self.long_term is None:
            return state
        for read in self.long_term.iter_items():
            m = read.record
            if m is None or m.id in forgotten or m.status != "active":
                continue
            row = {"device": dev, "export_id": export_id, **m.model_dump(mode="json", exclude_none=True)}
            h = row_hash(row)
            if seen.long_term.get(m.id) != h:
                out.append(row)
                state[m.id] = h
        return state


def export_tree(tree: TreeExport, dest: str, device_id: str) -> ExportResult:
    """Export ``tree`` to ``dest`` (a folder or an fsspec URL) as ``device_id``; see ``TreeExport.run``."""
    return tree.run(FleetDest.open(dest), device_id)
