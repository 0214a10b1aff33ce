"""`memplane lifecycle verify`: find what is wrong with the tree, each finding with the repair it needs; then,
with `--fix` only, ``repair_findings`` carries those repairs out."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ._digest_table import DigestTable, index_problems
from ._errors import UnsafePathError
from ._guarded import guarded_move
from ._index import IndexFile
from ._index_check import mark_matching
from ._index_proof import prove_index
from ._item_read import ItemRead, Problem, Repair, same_path
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
    not_written: list[str] = field(default_factory=list)
    """Files a finding needed written (a mark, an index rebuild) that could not be: a read-only or full tree.
    Each is also a problem (category ``io``) saying what was found there."""
    traced: set[str] | None = field(default=None, repr=False)
    """Episodes that still hold their trace (set by the episode store's verify; None: not known). Not reported:
    the memories' excerpt-only rule reads it."""

    @property
    def ok(self) -> bool:
        """True when nothing is left to report."""
        return not self.problems

    def add(self, category: str, path: str, line: int | None, message: str, repair: Repair | None = None) -> None:
        """Record one finding (and the repair `--fix` makes for it, if any)."""
        self.problems.append(Problem(category, path, line, message, repair))

    def add_not_written(self, path: str, finding: str, exc: BaseException) -> None:
        """Record a finding whose write (a mark, an index rebuild) failed, naming the file it needed."""
        why = getattr(exc, "strerror", None) or str(exc)
        self.add("io", path, None, f"{finding}; not written: {why}")
        if path not in self.not_written:
            self.not_written.append(path)

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
            "not_written": self.not_written,
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

    def digests(self) -> DigestTable:
        """An empty table of what the index rebuild and the name check keep of each parsed item (never the record)."""
        ...

    def rebuild_index(self, items: Any = None) -> bool:
        """Rewrite the index from the item files (reusing the parses or the table of digests in ``items``); True if
        it changed."""
        ...


def repair_findings(report: VerifyReport) -> None:
    """Carry out the repairs the findings need (`--fix`), each once, in the order they were found; the findings
    a repair settled leave the report, and a repair that could not be made says why in a finding of its own."""
    ran: set[Repair] = set()
    settled: set[Repair] = set()
    for finding in list(report.problems):
        repair = finding.repair
        if repair is None or repair in ran:
            continue
        ran.add(repair)
        if repair.apply(report):
            settled.add(repair)
    report.problems = [p for p in report.problems if p.repair is None or p.repair not in settled]


def _check_names(root: Path, coll: CheckedStore, parsed: DigestTable, report: VerifyReport,
                 relp: Callable[[Path], str]) -> None:
    """A file whose name is not its id, or two files holding one id: named, with a rename to repair it when
    that is safe (the folder is the same and no file has the name)."""
    if not coll.named_by_id:
        return
    for item_id in parsed.odd_ids():
        files = parsed.files_of(item_id)
        expected = files[0][1]
        if expected is None:
            continue  # its id gives no place (expected_path refused it)
        odd = [path for path, _ in files if not same_path(path, expected)]
        # The file offered is the one named after the id, else the first by name (as the index has it).
        offered = expected if len(odd) < len(files) else odd[0]
        for path in odd:
            if path != offered:
                report.add("duplicate_id", relp(path), None,
                           f"holds id {item_id!r} like {relp(offered)}; only that one is offered (merge or delete "
                           "by hand)")
                continue
            repair = None
            if expected.parent == path.parent and not os.path.lexists(expected):
                repair = Repair("rename", _renamer(root, coll, path, expected, relp))
            report.add("name_mismatch", relp(path), None,
                       f"holds id {item_id!r}; the file should be named {expected.name} (verify --fix renames it)",
                       repair)


def _renamer(root: Path, coll: CheckedStore, path: Path, expected: Path,
             relp: Callable[[Path], str]) -> Callable[[VerifyReport], bool]:
    """The repair of a file not named after its id: renamed, then the index rebuilt to name the new file."""

    def rename(report: VerifyReport) -> bool:
        try:
            # Never replaces a file that appeared meanwhile, never moves through a link.
            guarded_move(root, path, expected, create=False)
        except (OSError, UnsafePathError) as exc:
            report.add("name_mismatch", relp(path), None, f"cannot rename to {expected.name}: {exc}")
            return True  # the finding above says what is left
        report.fixed.append(f"renamed {relp(path)} -> {relp(expected)} (its id)")
        _rebuild(root, coll, None, report, relp)
        return True

    return rename


def verify_collections(
    root: Path,
    collections: Iterable[CheckedStore],
    *,
    report: VerifyReport | None = None,
    rel: Callable[[Path], str] | None = None,
    on_item: Callable[[CheckedStore, Any], None] | None = None,
) -> VerifyReport:
    """Parse every item of every collection, report problems (with their repairs), rebuild indexes."""
    report = report or VerifyReport()
    for coll in collections:
        check_collection(root, coll, report=report, rel=rel, on_item=on_item)
    # A symlink is reported every time (it is never fixed automatically), but index problems
    # vanish with the rebuild, so a second verify after --fix comes back clean.
    return report


def check_collection(root: Path, coll: CheckedStore, *, report: VerifyReport,
                     rel: Callable[[Path], str] | None = None,
                     on_item: Callable[[Any, Any], None] | None = None, table: DigestTable | None = None) -> None:
    """One collection's files: parse every item (the broken to be quarantined), names, symlinks, index. The
    digests of the items go into ``table`` when given (the caller closes it), else into a table of its own."""
    relp = rel or (lambda p: str(Path(p).relative_to(root)) if is_within(root, Path(p)) else str(p))
    since = time.time_ns()  # before any item file is read: what the index is proved against (``prove_index``)
    parsed = table if table is not None else coll.digests()
    try:
        _check_items(root, coll, parsed, report, relp, on_item)
        _check_names(root, coll, parsed, report, relp)
        for link in coll.symlinks():
            report.add("symlink", relp(link), None, "symlink inside the tree (never followed)")
        if coll.indexed:
            # Line by line: the index is not held (or cached) whole to find that it has no problem.
            for prob in index_problems(coll.index):
                report.add("index", relp(Path(prob.path or coll.index.path)), prob.line, prob.message)
        _rebuild(root, coll, parsed, report, relp, since)
    finally:
        if parsed is not table:
            parsed.close()


def _rebuild(root: Path, coll: CheckedStore, parsed: DigestTable | None, report: VerifyReport,
             relp: Callable[[Path], str], since: int | None = None) -> None:
    """Rebuild a collection's index (reusing ``parsed``, the files as read from ``since`` on; without them the
    rebuild reads every file from now on), named in the report when it changed."""
    if parsed is None or since is None:
        since = time.time_ns()
    try:
        changed = coll.rebuild_index(items=parsed)
    except OSError as exc:
        report.add_not_written(relp(coll.index.path), "index out of date with the item files", exc)
        return
    if coll.indexed:
        # Just compared with the item files, or made from them: a reader (catch-up of jobs) need not check again.
        mark_matching(coll)
        linked = getattr(coll, "linked", None)
        if not (getattr(coll, "guard_linked", False) and linked is not None and linked()):
            prove_index(coll.index.path, since)  # a linked folder's index was never compared: nothing proved
    if changed and coll.name not in report.rebuilt_indexes:
        report.rebuilt_indexes.append(coll.name)


def _check_items(root: Path, coll: CheckedStore, parsed: DigestTable, report: VerifyReport,
                 relp: Callable[[Path], str], on_item: Callable[[Any, Any], None] | None) -> None:
    """Every item file parsed, one at a time: the loaded ones added to ``parsed`` as digests (their records are not
    kept, so a store of any size is checked in bounded memory), the broken ones reported (to be quarantined)."""
    for item in coll.iter_items():
        report.checked += 1
        if item.problem is None:
            # Loaded, with a field of the wrong shape set aside: named, never quarantined.
            for fp in field_problems(item.record):
                report.add("field", relp(item.path), fp.line, fp.message)
            parsed.add(item.path, item.stat_key, item.record)
            if on_item is not None:
                on_item(coll, item)
            continue
        cat = type(item.problem).__name__.replace("Error", "").lower() or "parse"
        report.add(cat, relp(item.path), item.problem.line, item.problem.message,
                   Repair("quarantine", _quarantiner(root, item.path, item.problem.message, relp)))


def _quarantiner(root: Path, path: Path, why: str, relp: Callable[[Path], str]) -> Callable[[VerifyReport], bool]:
    """The repair of a file that does not load: moved to lifecycle/quarantine/ with why, for a person."""

    def move(report: VerifyReport) -> bool:
        if not path.is_file():
            return False
        try:
            target = quarantine(root, path, reason=why)
        except UnsafePathError as exc:
            report.add("symlink", relp(path), None,
                       f"not quarantined: {exc.name} is a symlink (nothing is moved out of the tree)")
            return False
        except OSError as exc:
            report.add("io", relp(path), None, f"cannot quarantine: {exc.strerror or exc}")
            return False
        report.fixed.append(f"quarantined {relp(path)} -> {relp(target)}")
        return True

    return move
