"""`bench fuzz --shapes`: the tree's shape is wrong, not a field: every public path must still hold.

One path of the realistic fuzz tree (a file or a folder) gets one shape fault: a file becomes a folder
(empty, or holding a file), a folder becomes a file (empty, or junk), a dangling symlink takes its place, a
named pipe (FIFO) or a Unix socket takes a file's place. Then the public paths run: open, retrieve, a
recorder-driven episode commit, the memory tools (save, recall, forget, inspect), verify (dry and fix), GC (dry
run and real), and every reader `bench fuzz` runs.

Counted per example: ``raises`` (as in `bench fuzz`, and a tool that could not run or a commit that failed
outside the faulted part of the tree), ``hangs`` (a step still running after the watchdog's time: opening a
FIFO blocks until a writer comes), ``lost`` (an item that is not at or under the faulted path missing
after ``verify --fix``, or not read back by id) and ``unnamed`` (verify did not name the odd path). All must
be 0.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from ._fuzz import Fixture, _FallbackWatch, exercise, inventory

SHAPES = ("file_to_empty_dir", "file_to_full_dir", "dir_to_empty_file", "dir_to_junk_file", "dangling_symlink",
          "fifo", "socket")
FILE_SHAPES = ("file_to_empty_dir", "file_to_full_dir", "dangling_symlink", "fifo", "socket")
DIR_SHAPES = ("dir_to_empty_file", "dir_to_junk_file", "dangling_symlink")
HANG_SECONDS = 15.0
MAX_FAILURES = 20


@dataclass(frozen=True)
class ShapeFault:
    """One path of the tree (relative to the root) and what takes its place."""

    path: str
    how: str

    def describe(self) -> str:
        """One line for a report."""
        return f"{self.path}: {self.how}"


@dataclass
class ShapeOutcome:
    """What one example did: readers that raised or hung, items lost, an odd path verify did not name."""

    raises: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing raised or hung, nothing lost, the odd path named."""
        return not (self.raises or self.hangs or self.lost or self.unnamed)

    def brief(self) -> dict[str, Any]:
        """The first findings of each kind (for an assertion message or a report)."""
        return {"raises": self.raises[:2], "hangs": self.hangs[:1], "lost": self.lost[:3], "unnamed": self.unnamed}


# -- the paths and the faults ---------------------------------------------------------------------------------


def _shape_key(rel: str) -> str:
    # Paths that differ only by an id, a date or a step number are one case: keep two of each.
    return re.sub(r"[0-9a-f]{8,}|\d+", "#", rel)


def shape_catalogue(root: Path) -> list[tuple[str, str]]:
    """(path, "file" | "dir") for the entries of the template worth faulting (two of each kind of path)."""
    seen: dict[str, int] = {}
    out: list[tuple[str, str]] = []
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if rel.startswith(".cache") or p.is_symlink():
            continue
        key = _shape_key(rel)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= 2:
            out.append((rel, "dir" if p.is_dir() else "file"))
    return out


def faults_of(cat: list[tuple[str, str]]) -> list[ShapeFault]:
    """Every fault that applies to every path of the catalogue."""
    return [ShapeFault(rel, how) for rel, kind in cat for how in (FILE_SHAPES if kind == "file" else DIR_SHAPES)]


def _unix_socket(path: Path) -> None:
    # A socket's path must be short (108 bytes): bind in a short folder, then move it into place.
    short = Path(tempfile.mkdtemp(prefix="mps"))
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(str(short / "s"))
        finally:
            s.close()
        os.replace(short / "s", path)
    finally:
        shutil.rmtree(short, ignore_errors=True)


def apply_shape(root: Path, f: ShapeFault) -> None:
    """Put the fault in place (as a person, a full disk or a sync tool might)."""
    path = root / f.path
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    if f.how == "file_to_empty_dir":
        path.mkdir()
    elif f.how == "file_to_full_dir":
        path.mkdir()
        (path / "stray.yaml").write_text("id: stray\n")
    elif f.how == "dir_to_empty_file":
        path.write_bytes(b"")
    elif f.how == "dir_to_junk_file":
        path.write_bytes(b"\x00junk\xff\n" * 7)
    elif f.how == "dangling_symlink":
        os.symlink(os.path.join("..", "gone", "nowhere-" + path.name), path)
    elif f.how == "fifo":
        os.mkfifo(path)
    elif f.how == "socket":
        _unix_socket(path)
    else:
        raise ValueError(f.how)


def release_fifos(root: Path) -> None:
    """Open every FIFO of the tree for writing once, so a reader blocked on it sees end-of-file and goes on."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                if stat.S_ISFIFO(os.lstat(full).st_mode):
                    os.close(os.open(full, os.O_WRONLY | os.O_NONBLOCK))  # ENXIO: nobody waits


# -- the watchdog ---------------------------------------------------------------------------------------------


class Hang(BaseException):
    """A step ran past the watchdog's time (a BaseException: no `except Exception` in the code swallows it)."""


@contextlib.contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Raise Hang in the main thread when the block runs longer than ``seconds``."""

    def ring(_sig: int, _frame: FrameType | None) -> None:
        raise Hang(f"still running after {seconds:g}s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# -- the public paths -----------------------------------------------------------------------------------------


_CLEAR = ("StorageError", "UnsafePathError", "NotAFileError", "LockTimeout", "ParseError", "ConfigError")


def clear_about(text: str, f: ShapeFault) -> bool:
    """Whether a failure is one of ours and names the faulted path (or a path under it): that is an answer."""
    named = re.search(r"(^|[/' ])" + re.escape(f.path) + r"($|[/' :)])", text)
    return named is not None and any(name in text[:300] for name in _CLEAR)


def _under(rel: str, fault: str) -> bool:
    return rel == fault or rel.startswith(fault.rstrip("/") + "/")


def _writes(plane: Any, f: ShapeFault, out: ShapeOutcome) -> str | None:
    """A recorder-driven commit and the write tools; return the id of the committed episode (None: failed)."""
    from .._retrieve_types import MemoryRetrieveRequest

    req = MemoryRetrieveRequest(input="open wechat and send hello to zhang san")
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "WeChat"})
    rec.tool_result("launch_app", output="ok", observed_state={"app": "WeChat", "page": "chats"})
    ep = rec.finish(success=True)
    committed = plane.commit_episode(ep)
    plane.flush(HANG_SECONDS)
    if not committed and not _under(f.path, "episodes") and f.path not in ("lifecycle", "lifecycle/.lock"):
        out.raises.append(f"commit_episode failed with the fault outside episodes/ ({ep.id})")
    saved = plane.tools.call("save_memory", {"content": "The parking spot is B12", "type": "fact"})
    first: dict[str, Any] = next(iter(plane.episodes.entries()), {})
    calls = [("recall_memory", {"query": "parking spot"}),
             ("inspect_episode", {"episode_id": first.get("id") or ep.id})]
    if saved.refs:
        calls.append(("forget_memory", {"memory_id": saved.refs[0], "reason": "shape fuzz"}))
    for name, args in [("save_memory", None), *calls]:
        r = saved if args is None else plane.tools.call(name, args)
        if ("could not run" in r.text and not clear_about(r.text, f)) or "Traceback" in r.text:
            out.raises.append(f"tool {name}: {r.text[:300]}")
    return ep.id if committed else None


def _repaired(path: Path, how: str) -> bool:
    """Whether the path has its own shape again (a file where a file was, a folder where a folder was)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    if how == "dangling_symlink":
        return not stat.S_ISLNK(mode)
    return stat.S_ISDIR(mode) if how.startswith("dir_") else stat.S_ISREG(mode)


def _named(plane: Any, f: ShapeFault, out: ShapeOutcome) -> None:
    """verify (dry) names the odd path, or a path under it."""
    rep = plane.verify()
    if _repaired(plane.root / f.path, f.how):
        return  # a derived file (an index, profile.md) rebuilt in the odd entry's place: nothing is left to name
    if not any(_under(p.path or "", f.path) for p in rep.problems):
        out.unnamed.append(f"{f.describe()}: verify named only {[str(p) for p in rep.problems][:4]}")


def _readable(plane: Any, ids: list[str]) -> list[str]:
    """The ids that cannot be read back one by one."""
    gone = []
    for item_id in ids:
        if item_id.startswith("ep_"):
            got = plane.episodes.get(item_id)
        elif item_id.startswith("mem_"):
            got = plane.long_term.get(item_id)
        else:
            got = plane.device.get(item_id)
        if got is None:
            gone.append(item_id)
    return gone


def exercise_shape(root: Path, f: ShapeFault, clean: dict[str, str]) -> ShapeOutcome:
    """Run every public path on a tree with one shape fault; what went wrong."""
    import logging

    from .._plane import MemoryPlane

    out = ShapeOutcome()
    watch = _FallbackWatch()
    logger = logging.getLogger("memory_plane")
    logger.addHandler(watch)
    try:
        with watchdog(HANG_SECONDS):
            committed: str | None = None
            with MemoryPlane.open(root) as plane:
                for name, run in (("commit and tools", lambda: _writes(plane, f, out)),
                                  ("verify names it", lambda: _named(plane, f, out))):
                    try:
                        got = run()
                    except Exception as exc:  # counting raises is the point
                        if not clear_about(f"{type(exc).__name__}: {exc}", f):
                            out.raises.append(f"{name}: {type(exc).__name__}: {exc}")
                    else:
                        committed = got if name == "commit and tools" else committed
            res, _ = exercise(root, None)
            out.raises.extend(r for r in res.raises if not clear_about(r, f))
            with MemoryPlane.open(root) as plane:
                after = inventory(plane)
                keep = [i for i, where in sorted(clean.items()) if not _under(where, f.path)]
                out.lost = [f"{i} ({clean[i]})" for i in keep if i not in after]
                out.lost += [f"{i} ({clean[i]}) not read back" for i in _readable(plane, [i for i in keep
                                                                                         if i in after])]
                if committed is not None and committed not in after:
                    out.lost.append(f"{committed} (the episode committed in this example)")
    except Hang as exc:
        import traceback

        out.hangs.append(f"{f.describe()}: {exc} | {traceback.format_exc(limit=-4)[-900:]}")
    except Exception as exc:  # counting raises is the point
        out.raises.append(f"after verify --fix: {type(exc).__name__}: {exc}")
    finally:
        logger.removeHandler(watch)
    out.raises.extend(f"logged with a traceback: {s}" for s in watch.seen if not clear_about(s, f))
    return out


class ShapeFixture(Fixture):
    """The fuzz template and its catalogue of paths to fault."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes = shape_catalogue(self.template)

    def run_shape(self, f: ShapeFault) -> ShapeOutcome:
        """Apply one shape fault to a copy and run every public path on it."""
        root = self.copy()
        try:
            apply_shape(root, f)
            return exercise_shape(root, f, self.clean)
        finally:
            release_fifos(root)
            shutil.rmtree(root.parent, ignore_errors=True)


def shape_strategy(cat: list[tuple[str, str]]) -> Any:
    """A hypothesis strategy of ShapeFaults over a catalogue of paths."""
    from hypothesis import strategies as st

    return st.sampled_from(faults_of(cat))


def run_shapes(examples: int, seed: int) -> dict[str, Any]:
    """examples, raises, hangs, items_lost, unnamed (goals: 0) over every fault of every path (or a sample)."""
    fx = ShapeFixture()
    faults = faults_of(fx.shapes)
    random.Random(seed).shuffle(faults)
    totals: dict[str, Any] = {"examples": 0, "raises": 0, "hangs": 0, "items_lost": 0, "unnamed": 0,
                              "paths_in_catalogue": len(fx.shapes), "faults_possible": len(faults)}
    failures: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    try:
        for f in faults[:examples]:
            out = fx.run_shape(f)
            totals["examples"] += 1
            totals["raises"] += bool(out.raises)
            totals["hangs"] += bool(out.hangs)
            totals["items_lost"] += len(out.lost)
            totals["unnamed"] += bool(out.unnamed)
            if not out.ok and len(failures) < MAX_FAILURES:
                failures.append({"fault": f.describe(), **out.brief()})
    finally:
        fx.close()
    totals["seconds"] = round(time.perf_counter() - t0, 1)
    totals["failures"] = failures
    return totals
