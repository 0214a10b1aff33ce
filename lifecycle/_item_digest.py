"""What an index rebuild keeps of one parsed item file instead of its record, so a store is checked in one
streaming pass whose memory holds index lines, never every record."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import FileProblemError
from ._item_read import same_path, stat_key


@dataclass(frozen=True, slots=True)
class ItemDigest:
    """One readable item file as an index rebuild needs it: its id, whether it lies where its id says, its index
    entry (None: not indexable) and the stat key that tells whether the file changed since."""

    path: Path
    stat_key: tuple[int, int, int] | None
    id: str
    expected: Path | None
    """Where a file named after its id would lie (None: the id gives no place, ``expected_path`` refused it)."""
    entry: dict[str, Any] | None

    record = None
    """A digest holds no record: a reader that needs one (the candidates index) loads the file."""
    problem = None

    @property
    def canonical(self) -> bool:
        """Whether the file is the one named after its id."""
        return self.expected is not None and same_path(self.expected, self.path)


def digest_of(path: Path, key: tuple[int, int, int] | None, record: Any, *, expected: Callable[[Any], Path],
              indexable: Callable[[Any], bool], entry_for: Callable[[Any], dict[str, Any]]) -> ItemDigest:
    """The digest of one parsed record."""
    try:
        where: Path | None = Path(expected(record))
    except ValueError:
        where = None
    return ItemDigest(path, key, str(record.id), where, dict(entry_for(record)) if indexable(record) else None)


def chosen_entries(digests: Iterable[ItemDigest], rel: Callable[[Path], str]) -> list[dict[str, Any]]:
    """One index entry per id, with the real path of its file (``entries_by_file`` over digests): a file named
    after its id is offered before another holding the same id, else the first."""
    chosen: dict[str, ItemDigest] = {}
    for d in digests:
        if d.entry is None:
            continue
        prev = chosen.get(d.id)
        if prev is None or (d.canonical and not prev.canonical):
            chosen[d.id] = d
    return [{**d.entry, "path": rel(d.path)} for d in chosen.values() if d.entry is not None]


def fresh_digests(items: Iterable[Any] | None, current: list[Path], load: Callable[[Path], Any],
                  digest: Callable[[Path, tuple[int, int, int] | None, Any], ItemDigest]) -> list[ItemDigest]:
    """The readable item files present now as digests (``fresh_items`` without the records): a digest or a parse
    in ``items`` whose file is unchanged is reused, the rest loaded.

    Called again under the collection lock with its own result, so an item written between a first, lock-free
    pass and the index rewrite is never left out, and nothing unchanged is parsed twice.
    """
    known = {str(i.path): i for i in items or [] if isinstance(i, ItemDigest) or i.record is not None}
    out: list[ItemDigest] = []
    for p in current:
        prev = known.pop(str(p), None)
        key = stat_key(p)  # taken before the load: a change during it shows as a new key next time
        if prev is not None and prev.stat_key is not None and prev.stat_key == key:
            out.append(prev if isinstance(prev, ItemDigest) else digest(prev.path, prev.stat_key, prev.record))
            continue
        try:
            record = load(p)
        except (FileProblemError, OSError):
            continue
        out.append(digest(p, key, record))
    return out
