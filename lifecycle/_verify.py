"""`memplane lifecycle verify`: report what is wrong with the tree; repair only with fix=True."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ._errors import UnsafePathError
from ._guarded import guarded_move
from ._index import IndexFile
from ._item_read import ItemRead, Problem, same_path
from ._paths import is_within
from ._quarantine import quarantine
from ._validate import field_problems


@dataclass
class VerifyReport:
    """Findings of one verify run, by category, plus what was repaired."""

    checked: int = 0
    problems: list[Problem] = field(default_factory=list)
    rebuilt_indexes: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    jsonl_files: list[Path] = field(default_factory=list, repr=False)
    """jsonl files a store hands to the tree-wide torn-line check (the events of every episode). Not reported."""
    clock_doubt: str | None = field(default=None, repr=False)
    """Why the clock cannot be believed (then nothing is marked expired); the report also names it as a problem."""
    traced: set[str] | None = field(default=None, repr=False)
    """Episodes that still hold their trace (set by the episode store's verify; None: not known). Not reported:
    the memories' excerpt-only rule reads it."""

    @property
    def ok(self) -> bool:
        """True when nothing is left to report."""
        return not self.problems

    def add(self, category: str, path: str, line: int | None, message: str) -> None:
        """Record one finding."""
        self.problems.append(Problem(category, path, line, message))

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the report (the `--json` output)."""
        by_cat: dict[str, int] = {}
        for p in self.problems:
            by_cat[p.category] = by_cat.get(p.category, 0) + 1
        return {
            "ok": self.ok,
            "checked": self.checked,
            "problem_counts": by_cat,
            "problems": [p.to_dict() for p in self.problems],
            "rebuilt_indexes": self.rebuilt_indexes,
            "fixed": self.fixed,
            **self.stats,
        }


class CheckedStore(Protocol):
    """What verify reads of a store of item files; every ``ItemCollection`` offers it.

    ``rebuild_index`` must be idempotent and must include item files that appeared since ``items`` were parsed.
    """

    name: str
    dir: Path
    index: IndexFile
    indexed: bool
    """Whether the store keeps an index file (device profiles do not): only then is ``index`` checked."""
    named_by_id: bool
    """Whether an item's file is named after its id: only then are names checked (and renamed with fix)."""

    def iter_items(self) -> Iterator[ItemRead[Any]]:
        """Every item file with its parsed record or its problem."""
        ...

    def expected_path(self, record: Any) -> Path:
        """Where the file of an item named after its id lives."""
        ...

    def symlinks(self) -> list[Path]:
        """Symlinks in the store's folders (never followed)."""
        ...

    def rebuild_index(self, items: list[ItemRead[Any]] | None = None) -> bool:
        """Rewrite the index from the item files (reusing the parses in ``items``); True if it changed."""
        ...


def _check_names(root: Path, coll: CheckedStore, parsed: list[Any], report: VerifyReport,
                 relp: Callable[[Path], str], fix: bool) -> None:
    """A file whose name is not its id, or two files holding one id: named, and renamed with fix when safe."""
    if not coll.named_by_id:
        return
    by_id: dict[str, list[Any]] = {}
    for item in parsed:
        by_id.setdefault(item.record.id, []).append(item)
    for item_id, items in by_id.items():
        try:
            expected = Path(coll.expected_path(items[0].record))
        except ValueError:
            continue
        odd = [i for i in items if not same_path(i.path, expected)]
        if not odd:
            continue
        # The file offered is the one named after the id, else the first by name (as the index has it).
        offered = expected if len(odd) < len(items) else odd[0].path
        for item in odd:
            if item.path != offered:
                report.add("duplicate_id", relp(item.path), None,
                           f"holds id {item_id!r} like {relp(offered)}; only that one is offered (merge or delete "
                           "by hand)")
                continue
            if fix and expected.parent == item.path.parent and not os.path.lexists(expected):
                try:
                    # Never replaces a file that appeared meanwhile, never moves through a link.
                    guarded_move(root, item.path, expected, create=False)
                except (OSError, UnsafePathError) as exc:
                    report.add("name_mismatch", relp(item.path), None, f"cannot rename to {expected.name}: {exc}")
                    continue
                report.fixed.append(f"renamed {relp(item.path)} -> {relp(expected)} (its id)")
                item.path = expected
                continue
            report.add("name_mismatch", relp(item.path), None,
                       f"holds id {item_id!r}; the file should be named {expected.name} (verify --fix renames it)")


def verify_collections(
    root: Path,
    collections: Iterable[CheckedStore],
    *,
    fix: bool = False,
    report: VerifyReport | None = None,
    rel: Callable[[Path], str] | None = None,
    on_item: Callable[[CheckedStore, Any], None] | None = None,
) -> VerifyReport:
    """Parse every item of every collection, report problems, rebuild indexes."""
    report = report or VerifyReport()
    for coll in collections:
        check_collection(root, coll, fix=fix, report=report, rel=rel, on_item=on_item)
    # A symlink is reported every time (it is never fixed automatically), but index problems
    # vanish with the rebuild, so a second verify after --fix comes back clean.
    return report


def check_collection(root: Path, coll: CheckedStore, *, fix: bool, report: VerifyReport,
                     rel: Callable[[Path], str] | None = None,
                     on_item: Callable[[Any, Any], None] | None = None) -> None:
    """One collection's files: parse every item (quarantine the broken with fix), names, symlinks, index."""
    relp = rel or (lambda p: str(Path(p).relative_to(root)) if is_within(root, Path(p)) else str(p))
    parsed = _check_items(root, coll, report, relp, fix, on_item)
    _check_names(root, coll, parsed, report, relp, fix)
    for link in coll.symlinks():
        report.add("symlink", relp(link), None, "symlink inside the tree (never followed)")
    if coll.indexed:
        for prob in coll.index.read().problems:
            report.add("index", relp(Path(prob.path or coll.index.path)), prob.line, prob.message)
    try:
        changed = coll.rebuild_index(items=parsed)
    except OSError as exc:
        report.add("io", relp(coll.dir), None, f"cannot rebuild index: {exc}")
        return
    if changed:
        report.rebuilt_indexes.append(coll.name)


def _check_items(root: Path, coll: CheckedStore, report: VerifyReport, relp: Callable[[Path], str], fix: bool,
                 on_item: Callable[[Any, Any], None] | None) -> list[Any]:
    """Every item file parsed: the loaded ones returned, the broken ones reported (and quarantined with fix)."""
    parsed: list[Any] = []
    for item in coll.iter_items():
        report.checked += 1
        if item.problem is None:
            # Loaded, with a field of the wrong shape set aside: named, never quarantined.
            for fp in field_problems(item.record):
                report.add("field", relp(item.path), fp.line, fp.message)
            parsed.append(item)
            if on_item is not None:
                on_item(coll, item)
            continue
        cat = type(item.problem).__name__.replace("Error", "").lower() or "parse"
        report.add(cat, relp(item.path), item.problem.line, item.problem.message)
        if fix and item.path.is_file():
            try:
                target = quarantine(root, item.path, reason=item.problem.message)
            except UnsafePathError as exc:
                report.add("symlink", relp(item.path), None,
                           f"not quarantined: {exc.name} is a symlink (nothing is moved out of the tree)")
                continue
            except OSError as exc:
                report.add("io", relp(item.path), None, f"cannot quarantine: {exc.strerror or exc}")
                continue
            report.fixed.append(f"quarantined {relp(item.path)} -> {relp(target)}")
    return parsed
