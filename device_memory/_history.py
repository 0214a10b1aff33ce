"""Item history: the bounded list of changes each device memory went through, and how to go back to one.

Every write of a device item (a lesson, an outcome, verify's marks, a revert) appends a **revision**:
the fields that changed (each with its old and new value; a value that was absent is left out), the rule
and the episode that caused it when known, and when (the store's clock). The revisions live beside the
item as one JSON line each, ``device/<folder>/.history/<id>.jsonl`` (``device/profiles/.history/`` for
device profiles); only the newest ``HISTORY_LIMIT`` are kept.

The item file stays the truth: the history only says how it got there. A hand edit is not a revision;
going back to a revision undoes the recorded changes made after it, so a field a person edited since keeps
the edit unless a later recorded change touched it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import (
    FolderChain,
    UnsafePathError,
    atomic_write,
    dumps_compact,
    format_ts,
    guarded_unlink,
    is_safe_id,
    read_bytes_nofollow,
)

log = logging.getLogger("memory_plane")

HISTORY_LIMIT = 20
"""Revisions kept per item (the newest; the Go implementation keeps as many per memory)."""
HISTORY_DIR = ".history"
"""The folder beside a collection's item files that holds their histories (hidden: never an item)."""
UNRECORDED = frozenset({"updated_at"})
"""Fields every write changes: recording them would make every revision say the same thing."""


@dataclass(frozen=True)
class Cause:
    """Why items are being written: the rule that decided it and the episode that showed it, when known."""

    rule: str | None = None
    episode: str | None = None
    detail: str | None = None


_CAUSE: contextvars.ContextVar[Cause | None] = contextvars.ContextVar("memory_plane_change_cause", default=None)


@contextlib.contextmanager
def change_cause(rule: str | None = None, episode: str | None = None, detail: str | None = None) -> Iterator[Cause]:
    """Name the rule and episode of every item write made inside the block (they go into the revisions)."""
    cause = Cause(rule, episode, detail)
    token = _CAUSE.set(cause)
    try:
        yield cause
    finally:
        _CAUSE.reset(token)


@dataclass
class Revision:
    """One recorded change of an item: ``rev`` (1, 2, ... never reused), when, why, and the fields changed."""

    rev: int
    at: str | None
    changes: list[dict[str, Any]]
    rule: str | None = None
    episode: str | None = None
    detail: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The revision as its JSON line holds it (keys without a value left out)."""
        out: dict[str, Any] = {"rev": self.rev, "at": self.at, "rule": self.rule, "episode": self.episode,
                               "detail": self.detail, "changes": self.changes}
        return {k: v for k, v in {**self.extra, **out}.items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Revision | None:
        """A revision read back from its line (None when the line is not one: a hand edit broke it)."""
        rev, changes = data.get("rev"), data.get("changes")
        if not isinstance(rev, int) or isinstance(rev, bool) or not isinstance(changes, list):
            return None
        if not all(isinstance(c, dict) and isinstance(c.get("field"), str) for c in changes):
            return None
        known = {"rev", "at", "rule", "episode", "detail", "changes"}
        return cls(rev, _text(data.get("at")), changes, _text(data.get("rule")), _text(data.get("episode")),
                   _text(data.get("detail")), {k: v for k, v in data.items() if k not in known})

    def fields(self) -> list[str]:
        """The names of the fields this revision changed."""
        return [str(c["field"]) for c in self.changes]


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def snapshot(record: Any) -> dict[str, Any] | None:
    """The fields of a record as its file holds them (a fresh copy), or None for no record."""
    if record is None:
        return None
    to_yaml = getattr(record, "to_yaml_dict", None)
    data = to_yaml() if to_yaml else record.model_dump(mode="json", exclude_none=True)
    return json.loads(json.dumps(data, default=str))  # detached from the record: later edits do not leak in


def diff(before: dict[str, Any] | None, after: dict[str, Any]) -> list[dict[str, Any]]:
    """The field changes from ``before`` (None: a new item) to ``after``, in the order of ``after``'s fields."""
    old = before or {}
    out: list[dict[str, Any]] = []
    for key in [*after, *(k for k in old if k not in after)]:
        if key in UNRECORDED:
            continue
        if key in old and key in after and old[key] == after[key]:
            continue
        change: dict[str, Any] = {"field": key}
        if key in old:
            change["old"] = old[key]
        if key in after:
            change["new"] = after[key]
        out.append(change)
    return out


def infer_cause(before: dict[str, Any] | None, after: dict[str, Any]) -> Cause:
    """What the item itself says caused a change, for writes made outside ``change_cause``: a new demotion
    names its rule and episode; otherwise a new evidence ref names the episode."""
    old = before or {}
    dem = after.get("demotion")
    if isinstance(dem, dict) and dem != old.get("demotion"):
        return Cause(_text(dem.get("rule")), _text(dem.get("episode")))
    if isinstance(after.get("restored"), dict) and after.get("restored") != old.get("restored"):
        return Cause("restored", None)
    seen = {r.get("id") for r in old.get("evidence_refs") or [] if isinstance(r, dict)}
    new = [r.get("id") for r in after.get("evidence_refs") or [] if isinstance(r, dict) and r.get("id") not in seen]
    episode = _text(new[-1]) if new else None
    if before is None:
        return Cause("created", episode)
    return Cause(None, episode)


class ItemHistory:
    """The histories of one collection's items: ``<items folder>/.history/<id>.jsonl``."""

    def __init__(self, root: Path, items_dir: Path, clock: Any, *, limit: int = HISTORY_LIMIT) -> None:
        self.root = Path(root)
        self.dir = Path(items_dir) / HISTORY_DIR
        self.clock = clock
        self.limit = limit

    def path_of(self, item_id: str) -> Path:
        """The history file of an item (the id is a safe id: the collection checked it)."""
        return self.dir / f"{item_id}.jsonl"

    def read(self, item_id: str) -> list[Revision]:
        """The item's kept revisions, oldest first (none when it has no history yet; broken lines skipped)."""
        try:
            raw = read_bytes_nofollow(self.path_of(item_id))
        except (OSError, UnsafePathError):
            return []
        out: list[Revision] = []
        for line in raw.decode("utf-8", "replace").splitlines():
            try:
                data = json.loads(line)
            except ValueError:
                continue
            rev = Revision.from_dict(data) if isinstance(data, dict) else None
            if rev is not None:
                out.append(rev)
        return out[-self.limit:]

    def record(self, item_id: str, before: dict[str, Any] | None, after: dict[str, Any]) -> Revision | None:
        """Append the revision from ``before`` to ``after`` (nothing when no recorded field changed); the caller
        holds the collection's lock and has written the item file already (item first, history after: a crash
        between costs one revision, never the item)."""
        changes = diff(before, after)
        if not changes:
            return None
        given = _CAUSE.get()
        cause = infer_cause(before, after)
        if given is not None:
            cause = Cause(given.rule or cause.rule, given.episode or cause.episode, given.detail)
        kept = self.read(item_id)
        if kept and _undoes(kept[-1], cause.rule, changes):
            # The environment came back before anything else changed the item: the setting aside and its
            # return are one line saying so (counted), so that flip-flops never push real changes out of the
            # bounded history; its number is the newest one's (numbers are never reused).
            times = 1
            if len(kept) > 1 and kept[-2].rule == ROUND_TRIP:
                times += int(kept[-2].extra.get("times", 1))
                kept = [*kept[:-2], kept[-1]]
            back = Revision(kept[-1].rev, format_ts(self.clock()), [], ROUND_TRIP, None,
                            f"set aside for a change of the environment and back ({cause.detail or ''})".strip(),
                            {"times": times})
            return self._write(item_id, [*kept[:-1], back], back)
        rev = Revision(kept[-1].rev + 1 if kept else 1, format_ts(self.clock()), changes, cause.rule, cause.episode,
                       cause.detail)
        return self._write(item_id, [*kept, rev][-self.limit:], rev)

    def _write(self, item_id: str, kept: list[Revision], rev: Revision) -> Revision | None:
        try:
            atomic_write(self.path_of(item_id), "".join(dumps_compact(r.to_dict()) + "\n" for r in kept),
                         root=self.root)
        except (OSError, UnsafePathError) as exc:
            # The item file (the truth) is written; a history that cannot follow is said, not raised.
            log.warning("memory: history of %s not written: %s", item_id, exc)
            return None
        return rev

    def check(self, report: Any, rel: Any) -> None:
        """Verify's look at the histories: a ``.history`` that is not a folder (revisions cannot be recorded)
        and lines that do not read as a revision are named with their file and line (``rel``: a path as the
        report names it). Nothing is repaired: the item files are the truth, a history only says how."""
        if not os.path.lexists(self.dir):
            return
        if os.path.islink(self.dir) or not self.dir.is_dir():
            report.add("shape", rel(self.dir), None,
                       "the item history folder is not a folder: changes are not recorded (remove it; the next "
                       "write makes it again)")
            return
        for path in sorted(self.dir.glob("*.jsonl")):
            try:
                raw = read_bytes_nofollow(path)
            except (OSError, UnsafePathError) as exc:
                report.add("io", rel(path), None, f"item history not readable: {exc}")
                continue
            for n, line in enumerate(raw.decode("utf-8", "replace").splitlines(), start=1):
                try:
                    data = json.loads(line)
                except ValueError:
                    data = None
                if not isinstance(data, dict) or Revision.from_dict(data) is None:
                    report.add("jsonl", rel(path), n, "not a revision of the item's history (skipped when read)")

    def orphans(self, item_exists: Callable[[str], bool]) -> list[str]:
        """The ids whose history is kept though ``item_exists`` says their item is gone (none when ``.history``
        is missing or is not a plain folder: a link is never listed through)."""
        if os.path.islink(self.dir) or not self.dir.is_dir():
            return []
        ids = (p.name[: -len(".jsonl")] for p in self.dir.iterdir() if p.name.endswith(".jsonl"))
        return sorted(i for i in ids if is_safe_id(i) and not item_exists(i))

    def remove(self, item_id: str) -> None:
        """Drop an item's history (its item was forgotten or removed: what it said must go too)."""
        try:
            guarded_unlink(self.root, self.path_of(item_id))
        except (OSError, UnsafePathError) as exc:
            log.warning("memory: history of %s not removed: %s", item_id, exc)

    def remove_many(self, item_ids: Iterable[str]) -> int:
        """Drop the histories of many items (GC removed them) through one guarded descriptor of the history
        folder (opened once, never through a link); the count removed. A history that cannot be removed is
        logged, as ``remove`` does, and the others still go."""
        done = 0
        with FolderChain(self.root) as folders:
            try:
                fd = folders.fd_of(self.dir)
            except FileNotFoundError:
                return 0  # no history folder: nothing recorded
            except (OSError, UnsafePathError) as exc:
                log.warning("memory: histories in %s not removed: %s", self.dir, exc)
                return 0
            for item_id in item_ids:
                if not is_safe_id(item_id):
                    continue  # never a name with a path in it
                try:
                    # A link in a history's place goes as a link (as guarded_unlink does): never followed.
                    os.unlink(f"{item_id}.jsonl", dir_fd=fd)
                    done += 1
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    log.warning("memory: history of %s not removed: %s", item_id, exc)
        return done


ROUND_TRIP = "environment_round_trip"
"""The rule of a revision standing for an environment change and its return (no field changed in the end)."""
ENVIRONMENT_RULES = {"environment_restored": "environment_changed"}
"""A rule whose change, right after one of the other rule, takes it back exactly (the two become one line)."""


def _undoes(last: Revision, rule: str | None, changes: list[dict[str, Any]]) -> bool:
    """Whether ``changes`` (made by ``rule``) take back exactly the last revision, made by the rule it undoes."""
    if rule not in ENVIRONMENT_RULES or last.rule != ENVIRONMENT_RULES[rule]:
        return False
    back = [{k: v for k, v in (("field", c["field"]), ("old", c.get("new", _NONE)), ("new", c.get("old", _NONE)))
             if v is not _NONE} for c in last.changes]
    return sorted(map(_key, back)) == sorted(map(_key, changes))


_NONE = object()


def _key(change: dict[str, Any]) -> str:
    return json.dumps(change, sort_keys=True, default=str)


def fields_at(current: dict[str, Any], revisions: list[Revision], rev: int) -> dict[str, Any]:
    """The fields an item had right after revision ``rev``: the current fields with every later recorded change
    undone, newest first. ``rev`` must be one of ``revisions`` (the caller checks)."""
    out = json.loads(json.dumps(current, default=str))
    for r in reversed(revisions):
        if r.rev <= rev:
            break
        for c in reversed(r.changes):
            name = str(c["field"])
            if "old" in c:
                out[name] = c["old"]
            else:
                out.pop(name, None)
    return out
