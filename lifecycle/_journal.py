"""Append-only journals of the lifecycle: tombstones (what was forgotten) and conflict decisions."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from ._atomic import append_lines
from ._clock import Clock, format_ts, system_clock
from ._errors import ABSENT, UnsafePathError
from ._jsonl import dumps_compact, read_jsonl
from ._locks import DEFAULT_LOCK_TIMEOUT, collection_lock
from ._paths import has_symlink, safe_join

SAVED_AGAIN = "saved_again"
"""The reason of a tombstone-log record that lifts an earlier forget of the same id (a save with force)."""


class _Journal:
    filename = ""

    def __init__(self, root: Path, *, clock: Clock = system_clock, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
        self.root = Path(root)
        # A symlink in place of lifecycle/ must not make the whole plane fail: the log is then neither read
        # nor written (verify names the link).
        self.dir = safe_join(self.root, "lifecycle", follow_symlinks=True)
        self.path = self.dir / self.filename
        self.clock = clock
        self.lock_timeout = lock_timeout
        self._cache: tuple[tuple[int, int, int], list[dict[str, Any]]] | None = None
        self._derived: tuple[list[dict[str, Any]], dict[str, str]] | None = None
        self._left: tuple[list[dict[str, Any]], frozenset[str]] | None = None

    def _append(self, record: dict[str, Any]) -> dict[str, Any]:
        record = {"ts": format_ts(self.clock()), **record}
        self._append_lines([dumps_compact({k: v for k, v in record.items() if v is not None})])
        return record

    def _append_lines(self, lines: list[str]) -> None:
        """Append whole lines under the lifecycle lock, never through a link nor into a hard-linked file."""
        # Checked before the lock too: taking it would create .lock through a symlinked lifecycle/.
        if has_symlink(self.root, self.dir):
            raise UnsafePathError("lifecycle", "the lifecycle folder is a symlink; nothing is written there")
        with collection_lock(self.dir, self.lock_timeout):
            append_lines(self.path, lines, root=self.root)

    def records(self) -> list[dict[str, Any]]:
        """Every record (cached until the file changes; a torn last line is skipped)."""
        if has_symlink(self.root, self.dir):
            return []
        try:
            st = os.stat(self.path)
        except ABSENT:
            return []
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if self._cache and self._cache[0] == key:
            return self._cache[1]
        recs = read_jsonl(self.path).records
        self._cache = (key, recs)
        return recs


class TombstoneLog(_Journal):
    """lifecycle/tombstones.jsonl: one line per forgotten or collected memory, never its content."""

    filename = "tombstones.jsonl"

    def add(self, ref_type: str, ref_id: str, *, reason: str, content_hashes: Iterable[str] = (),
            at: datetime | None = None) -> dict[str, Any]:
        """Record that a memory is gone; the hashes block re-learning it from the same evidence."""
        hashes = sorted({h for h in content_hashes if h})
        ts = format_ts(at or self.clock())
        return self._append({"id": f"tomb_{os.urandom(6).hex()}", "ts": ts, "reason": reason,
                             "ref": {"type": ref_type, "id": ref_id}, "content_hashes": hashes or None})

    def add_many(self, ref_type: str, ref_ids: list[str], *, reason: str) -> int:
        """Record many removals (no content hashes) in one locked append; returns the count."""
        if not ref_ids:
            return 0
        ts = format_ts(self.clock())
        lines = [dumps_compact({"id": f"tomb_{os.urandom(6).hex()}", "ts": ts, "reason": reason,
                                "ref": {"type": ref_type, "id": rid}}) for rid in ref_ids]
        self._append_lines(lines)
        return len(lines)

    def blocked_hashes(self) -> set[str]:
        """Content hashes that must not be re-learned."""
        out: set[str] = set()
        for r in self.records():
            hs = r.get("content_hashes")
            if isinstance(hs, list):
                out.update(h for h in hs if isinstance(h, str))
        return out

    def saved_again(self, ref_type: str, ref_id: str) -> dict[str, Any]:
        """Record that a forgotten id was saved again on purpose (``force``): its file is no longer forgotten."""
        return self._append({"id": f"tomb_{os.urandom(6).hex()}", "reason": SAVED_AGAIN,
                             "ref": {"type": ref_type, "id": ref_id}})

    def ids(self) -> set[str]:
        """Every id a tombstone names, whatever its reason (collected, forgotten or saved again since)."""
        out: set[str] = set()
        for r in self.records():
            ref = r.get("ref")
            if isinstance(ref, dict) and isinstance(ref.get("id"), str):
                out.add(ref["id"])
        return out

    def blocked_ids(self) -> set[str]:
        """Ids of memories deleted on purpose (forgotten) and not saved again since.

        The newest record of an id decides (GC's own tombstones decide nothing): a file of such an id is what a
        forget killed before its unlink left behind, never served and removed by the next forget, verify
        --fix or GC."""
        return set(self._forgotten())

    def forgotten_of(self, ref_type: str) -> list[str]:
        """The forgotten ids (as ``blocked_ids``) whose tombstone names this type, sorted."""
        return sorted(k for k, t in self._forgotten().items() if t == ref_type)

    def left_behind(self, present: Callable[[str, str], bool]) -> frozenset[str]:
        """Forgotten ids whose file ``present(type, id)`` finds still there: a killed forget's leftovers
        (asked once per change of the log, not on every read)."""
        recs = self.records()
        if self._left is not None and self._left[0] is recs:
            return self._left[1]
        out = frozenset(i for i, t in self._forgotten().items() if present(t, i))
        self._left = (recs, out)
        return out

    def _forgotten(self) -> dict[str, str]:
        """Forgotten ids and the type their tombstone names (computed once per change of the file)."""
        recs = self.records()
        if self._derived is not None and self._derived[0] is recs:
            return self._derived[1]
        state: dict[str, str | None] = {}
        for r in recs:
            ref = r.get("ref")
            if not isinstance(ref, dict) or not isinstance(ref.get("id"), str) or r.get("reason") == "gc":
                continue
            state[ref["id"]] = None if r.get("reason") == SAVED_AGAIN else str(ref.get("type"))
        out = {k: t for k, t in state.items() if t is not None}
        self._derived = (recs, out)
        return out


class ConflictLog(_Journal):
    """lifecycle/conflicts.jsonl: one line per conflict decision (ids, rule, evidence, decision)."""

    filename = "conflicts.jsonl"

    def add(self, ids: Iterable[str], *, rule: str, decision: str, evidence: Any = None,
            detail: str | None = None) -> dict[str, Any]:
        """Record one decision about conflicting memories."""
        return self._append({"ids": list(ids), "rule": rule, "decision": decision, "evidence": evidence,
                             "detail": detail})
