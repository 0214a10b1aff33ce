"""`fleet pack` and `fleet pull`: lessons verified on enough devices, and how a phone takes them in."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_plane.device_memory import ID_PREFIX, ITEM_TYPES, DeviceItem, DeviceMemory
from memory_plane.episodes import TaskEpisodeStore
from memory_plane.lifecycle import UsageError, atomic_write, content_hash, format_ts, is_safe_id

from ._rows import FLEET_TYPES, fleet_key, personal_values, shareable
from ._source import FleetSource

FLEET_CONFIDENCE = 0.6
"""The most confidence a lesson from the fleet starts with on a phone: below what the phone's own first success
gives (0.75), so its own evidence weighs more; its own successes raise it like any lesson's."""

PREFIX = {t: p for p, t in ID_PREFIX.items()}
APPLICABILITY_MATCH = ("app", "app_version", "language", "screen_class")
"""What two devices' lessons must share to count as one lesson verified on both (besides their lesson key)."""


def _newest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest row of each (device, id): an export repeats a lesson whenever it changed."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        k = (str(r.get("device")), str(r.get("id")))
        if k not in best or str(r.get("export_id")) >= str(best[k].get("export_id")):
            best[k] = r
    return list(best.values())


def build_pack(src: FleetSource, *, min_devices: int, now: Any) -> dict[str, Any]:
    """The lessons active and verified on at least ``min_devices`` devices with matching applicability, none
    forgotten on any device; a lesson a phone only pulled from the fleet is no device's evidence for it."""
    forgotten_ids = {(str(t.get("device")), str(t.get("id"))) for t in src.rows("tombstones")}
    forgotten_keys = {k for t in src.rows("tombstones") for k in t.get("lesson_keys") or [] if isinstance(k, str)}
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in _newest(src.rows("lessons")):
        if (str(r.get("device")), str(r.get("id"))) in forgotten_ids or r.get("type") not in FLEET_TYPES:
            continue
        if r.get("status") != "active" or r.get("verified") is False or r.get("source") == "fleet":
            continue
        groups.setdefault((r.get("lesson_key"), *(r.get(k) for k in APPLICABILITY_MATCH)), []).append(r)
    lessons = []
    for key, rows in sorted(groups.items(), key=lambda kv: str(kv[0])):
        devices = sorted({str(r["device"]) for r in rows})
        if len(devices) < min_devices or key[0] in forgotten_keys:
            continue
        best = max(rows, key=lambda r: (int(r.get("success_count") or 0), str(r.get("device"))))
        lessons.append({
            "lesson_key": key[0], "type": best["type"], "devices": len(devices),
            "confidence": round(statistics.median(float(r.get("confidence") or 0) for r in rows), 3),
            # The exact screen of the lesson it holds: its coordinates are that screen's.
            "applicability": {**{k: v for k, v in zip(APPLICABILITY_MATCH, key[1:]) if v is not None},
                              **({"screen": best["screen"]} if best.get("screen") else {})},
            "item": best.get("item") or {},
        })
    lessons = _one_path_per_goal(lessons)
    body = json.dumps(lessons, sort_keys=True, ensure_ascii=False, default=str)
    return {"pack_id": "pack_" + content_hash(body, length=16), "created_at": format_ts(now),
            "min_devices": int(min_devices), "lessons": lessons}


def _one_path_per_goal(lessons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of the procedures for one goal group of an app (and one applicability), the path held on the most phones,
    then the shortest: a phone needs one path per goal from the fleet (its own runs find others), and two would be
    shown side by side at the same weight."""
    best: dict[str, dict[str, Any]] = {}
    for x in lessons:
        if x["type"] != "procedure":
            continue
        group = json.dumps([x["item"].get("app_id"), x["item"].get("goal_pattern"), x["applicability"]],
                           sort_keys=True, default=str)
        rank = (x["devices"], -len(x["item"].get("steps") or []), x["lesson_key"])
        if group not in best or rank > (best[group]["devices"], -len(best[group]["item"].get("steps") or []),
                                        best[group]["lesson_key"]):
            best[group] = x
    kept = {id(x) for x in best.values()}
    return [x for x in lessons if x["type"] != "procedure" or id(x) in kept]


@dataclass
class PullResult:
    """What a pull did: ids added, and the lessons it left out by why."""

    added: list[str] = field(default_factory=list)
    already_here: int = 0
    forgotten: int = 0
    own_lesson: int = 0
    invalid: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON data."""
        return {"added": self.added, "already_here": self.already_here, "forgotten": self.forgotten,
                "own_lesson": self.own_lesson, "invalid": self.invalid}


def fleet_id(item_type: str, key: str) -> str:
    """The id a pack's lesson has on every phone that pulls it (the same pack lesson, the same id)."""
    return f"{PREFIX[item_type]}fleet_{key.removeprefix('fk_')}"[:80]


def _own_keys(device: DeviceMemory, item_type: str, personal: frozenset[str]) -> set[str]:
    """Fleet keys of the phone's own lessons of a type (a lesson it learned itself needs no copy from the fleet)."""
    out = set()
    for read in device.collection(item_type).iter_items():
        item = read.record
        if item is not None and (item.model_extra or {}).get("source") != "fleet":
            out.add(fleet_key(shareable(item, personal)))
    return out


def _fleet_item(lesson: dict[str, Any], item_id: str, device_id: str, pack: dict[str, Any],
                device: DeviceMemory) -> DeviceItem:
    """The item a pack's lesson becomes on this phone: from the fleet, no local evidence yet, capped confidence."""
    cls = ITEM_TYPES[str(lesson["type"])]
    data = {k: v for k, v in dict(lesson.get("item") or {}).items()
            if k not in ("id", "device_id", "evidence_refs", "expires_at", "created_at", "updated_at", "ttl",
                         "last_validated_at", "conflicts_with", "supersedes", "superseded_by", "stale_key",
                         "stale_reason")}
    appl = {k: v for k, v in dict(lesson.get("applicability") or {}).items() if k in ("app", "language",
                                                                                      "app_version", "screen")}
    now = device.clock()
    data.update(id=item_id, device_id=device_id, lesson_key=lesson["lesson_key"], status="active",
                applicability={**appl, "device_id": device_id}, success_count=0, failure_count=0,
                confidence=min(FLEET_CONFIDENCE, float(lesson.get("confidence") or FLEET_CONFIDENCE)),
                evidence_refs=[{"type": "fleet", "id": str(pack.get("pack_id") or "pack")}], evidence_count=1,
                source="fleet", fleet_devices=int(lesson.get("devices") or 0), created_at=now, updated_at=now,
                ttl=device.retention.ttl_text(cls.TYPE))
    item = cls.model_validate(data)
    item.renew(now)
    item.summary = item.body() if item.type == "procedure" else item.summary
    return item


def _created_only(item: DeviceItem) -> Callable[[DeviceItem | None], DeviceItem | None]:
    """A change that writes ``item`` where there is none and leaves an existing one as it is (what local
    outcomes did to a pulled lesson stays)."""

    def change(cur: DeviceItem | None) -> DeviceItem | None:
        return item if cur is None else None

    return change


def pull_pack(device: DeviceMemory, pack: dict[str, Any], device_id: str,
              episodes: TaskEpisodeStore | None = None) -> PullResult:
    """Add a pack's lessons to this phone as ``source: fleet``: an id or lesson key forgotten here never comes
    back, a lesson the phone learned itself is not copied, one already pulled is left as it is (pulling twice
    changes nothing; what local failures did to it stays)."""
    res = PullResult()
    blocked_ids, blocked_keys = device.tombstones.blocked_ids(), device.tombstones.blocked_hashes()
    own: dict[str, set[str]] = {}
    personal = personal_values(device, episodes)
    for lesson in pack.get("lessons") or []:
        t, key = lesson.get("type") if isinstance(lesson, dict) else None, None
        if isinstance(lesson, dict):
            key = lesson.get("lesson_key")
        if t not in FLEET_TYPES or not isinstance(key, str) or not is_safe_id(key):
            res.invalid.append(str(key)[:80])
            continue
        item_id = fleet_id(t, key)
        if item_id in blocked_ids or key in blocked_keys:
            res.forgotten += 1
            continue
        if key in own.setdefault(t, _own_keys(device, t, personal)):
            res.own_lesson += 1
            continue
        try:
            item = _fleet_item(lesson, item_id, device_id, pack, device)
        except (ValueError, TypeError) as exc:
            res.invalid.append(f"{key}: {str(exc).splitlines()[0][:160]}")
            continue
        written = device.upsert(t, item_id, _created_only(item))
        if written is None:
            res.already_here += 1
        else:
            res.added.append(item_id)
    return res


def write_pack(pack: dict[str, Any], url: str) -> None:
    """Write a pack as one JSON file to a path or an fsspec URL (locally through the atomic write)."""
    data = json.dumps(pack, ensure_ascii=False, sort_keys=True, indent=1).encode("utf-8")
    if "://" not in url or url.startswith("file://"):
        path = Path(url.removeprefix("file://")).absolute()
        atomic_write(path, data, root=path.parent)  # the pack's own folder: no link followed into another
        return
    from fsspec.core import url_to_fs

    fs, path = url_to_fs(url)
    fs.pipe_file(path, data)


def read_pack(url: str) -> dict[str, Any]:
    """A pack from a path or an fsspec URL; one that is not a pack is an error naming it."""
    try:
        if "://" not in url or url.startswith("file://"):
            with open(url.removeprefix("file://"), "rb") as f:
                raw = f.read()
        else:
            from fsspec.core import url_to_fs

            fs, path = url_to_fs(url)
            raw = fs.cat_file(path)
        pack = json.loads(raw)
    except FileNotFoundError:
        raise UsageError(f"{url}: no such pack") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{url}: not a pack ({exc})") from None
    if not isinstance(pack, dict) or not isinstance(pack.get("lessons"), list):
        raise UsageError(f"{url}: not a pack (no list of lessons)")
    return pack
