"""Item files as read: the record or its problem, the stat key that tells a file changed, index entries by file."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import pydantic

from ._errors import FileProblemError, ParseError

R = TypeVar("R", bound=pydantic.BaseModel)


@dataclass(eq=False, frozen=True)
class Repair:
    """What `verify --fix` does about one finding or several (a file's torn lines share one rewrite).

    ``apply(report)`` makes the change and says so in ``report.fixed``, or, when it cannot, says why in a
    finding of its own; it answers whether its findings are settled (then they leave the report)."""

    what: str
    apply: Callable[[Any], bool]


@dataclass
class Problem:
    """A finding about one file: category, path relative to the root, line, message, and the repair it needs
    (None: `--fix` changes nothing for it; a rebuild or a person does)."""

    category: str
    path: str
    line: int | None
    message: str
    repair: Repair | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form used by `--json` reports."""
        return {"category": self.category, "path": self.path, "line": self.line, "message": self.message}

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"[{self.category}] {where}: {self.message}"


@dataclass
class ItemRead(Generic[R]):
    """One item file as read: the record, or the problem that kept it from loading."""

    path: Path
    record: R | None
    problem: FileProblemError | None = None
    stat_key: tuple[int, int, int] | None = None


def read_item(path: Path, load: Callable[[Path], R]) -> ItemRead[R]:
    """One item file as read: its record, or the problem (parse, validation, I/O) that kept it out."""
    try:
        key = stat_key(path)
        return ItemRead(path, load(path), None, key)
    except FileProblemError as exc:
        return ItemRead(path, None, exc)
    except OSError as exc:
        return ItemRead(path, None, ParseError(path, None, f"unreadable: {exc.strerror or exc}"))


def stat_key(path: Path) -> tuple[int, int, int] | None:
    """(mtime_ns, size, inode) of a file, or None if it is gone."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def fresh_items(items: list[ItemRead[Any]] | None, current: list[Path],
                load: Callable[[Path], Any]) -> list[ItemRead[Any]]:
    """The readable item files present now: reuse a parse whose file is unchanged, load the rest.

    Called again under the collection lock with its own result, so an item written between a first,
    lock-free pass and the index rewrite is never left out, and nothing unchanged is parsed twice.
    """
    known = {str(i.path): i for i in items or [] if i.record is not None}
    out: list[ItemRead[Any]] = []
    for p in current:
        prev = known.get(str(p))
        key = stat_key(p)  # taken before the load: a change during it shows as a new key next time
        if prev is not None and prev.stat_key is not None and prev.stat_key == key:
            out.append(prev)
            continue
        try:
            out.append(ItemRead(p, load(p), None, key))
        except (FileProblemError, OSError):
            continue
    return out


def same_path(a: Path | str, b: Path | str) -> bool:
    """Whether two paths name the same place (string compare first: both usually come from one folder)."""
    sa, sb = str(a), str(b)
    return sa == sb or os.path.normpath(sa) == os.path.normpath(sb)


def entries_by_file(pairs: list[tuple[Path, Any]], entry_for: Callable[[Any], dict[str, Any]],
                    expected: Callable[[Any], Path], rel: Callable[[Path], str]) -> list[dict[str, Any]]:
    """One index entry per id, with the real path of its file.

    A file whose name is not its id (a copy, a rename) is indexed under its own name; when two files
    hold the same id, the one named after it is offered and the other is left to verify to report,
    so an item never shows twice in the prompt or a listing.
    """
    chosen: dict[str, tuple[bool, Path, Any]] = {}
    for path, rec in pairs:
        try:
            canonical = same_path(expected(rec), path)
        except ValueError:
            canonical = False
        prev = chosen.get(rec.id)
        if prev is None or (canonical and not prev[0]):
            chosen[rec.id] = (canonical, path, rec)
    out = []
    for _, path, rec in chosen.values():
        entry = dict(entry_for(rec))
        entry["path"] = rel(path)
        out.append(entry)
    return out

