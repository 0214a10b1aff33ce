"""The drop log: why each candidate a filter turned away was not offered (counted; named for ``--explain``)."""

from __future__ import annotations

from typing import Any, NamedTuple

from ._features import ENV_KEYS


class DropLog:
    """Why candidates were not offered: a count per reason and, with ``explain``, each one named."""

    LIMIT = 500  # named candidates kept for --explain (the counts go on)

    def __init__(self, explain: bool = False) -> None:
        self.explain = explain
        self.counts: dict[str, int] = {}
        self.items: list[dict[str, Any]] = []  # {id, reason, detail}, only with explain

    def __call__(self, reason: str, item_id: Any = None, detail: str | None = None) -> None:
        """Count one candidate turned away for ``reason`` (and name it, with explain)."""
        self.counts[reason] = self.counts.get(reason, 0) + 1
        if self.explain and item_id is not None and len(self.items) < self.LIMIT:
            self.items.append({"id": item_id, "reason": reason, **({"detail": detail} if detail else {})})

    def many(self, reason: str, item_ids: list[Any], detail: str | None = None) -> None:
        """Count each of ``item_ids`` turned away for one reason, as one call per id would."""
        if self.explain:
            for item_id in item_ids:
                self(reason, item_id, detail)
        elif item_ids:
            self.counts[reason] = self.counts.get(reason, 0) + len(item_ids)


    def add(self, reason: str, n: int) -> None:
        """Count ``n`` candidates turned away for one reason, unnamed (only where ``explain`` is off)."""
        assert not self.explain, "an explain log names each candidate: use many()"
        if n:
            self.counts[reason] = self.counts.get(reason, 0) + n


class DropCall(NamedTuple):
    """One call made to a drop log, to be made again into another."""

    reason: str
    item_id: Any
    detail: str | None


class CallLog(DropLog):
    """A drop log that keeps each call as made, to be replayed into another."""

    def __init__(self) -> None:
        super().__init__(explain=True)
        self.calls: list[DropCall] = []

    def __call__(self, reason: str, item_id: Any = None, detail: str | None = None) -> None:
        self.calls.append(DropCall(reason, item_id, detail))


def mismatch(appl: tuple[str | None, ...], env: tuple[str | None, ...]) -> str:
    """Which applicability keys of a memory differ from the request's (for --explain)."""
    diffs = [f"{k} {a} ≠ {b}" for k, a, b in zip(ENV_KEYS, appl, env) if a is not None and b is not None and a != b]
    return "; ".join(diffs) or "not applicable here"
