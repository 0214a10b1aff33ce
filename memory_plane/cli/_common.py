"""What every `memplane` command shares: exit codes, opening the tree, printing."""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
from typing import Any

from memory_plane.lifecycle import UsageError, field_num

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_STORAGE, EXIT_NO_ROOT = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports it
EXIT_CODES = """exit codes:
  0  ok
  1  problems found (verify), or the operation failed
  2  bad usage (unknown command or option, a value out of range)
  3  cannot write: read-only tree, full disk, or a file that is not writable
  4  no memory root: the path does not exist, is not a folder, or is not a memory tree (only `init` makes one)"""


def invoked_as(argv0: str | None = None, python: str | None = None) -> str:
    """The command as the user ran it, for the hints a command prints ("try: memplane ... retrieve ..."):
    ``memplane`` when that name on $PATH is this program, the path it was run by otherwise (``.venv/bin/memplane``),
    and ``python -m memory_plane`` (the interpreter by the name $PATH gives it, else by its path) when run so."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    python = sys.executable if python is None else python
    name = os.path.basename(argv0)
    if name == "__main__.py" and os.path.basename(os.path.dirname(argv0)) == "memory_plane":  # python -m memory_plane
        short = os.path.basename(python)
        found = shutil.which(short) if short else None
        interp = short if found and _same_file(found, python) else (python or "python3")
        return f"{shlex.quote(interp)} -m memory_plane"
    if not name.startswith("memplane"):
        return "memplane"  # called from Python (a test, another program): the installed command's name
    found = shutil.which(name)
    if found and _same_file(found, argv0):
        return shlex.quote(name)
    return shlex.quote(argv0)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def print_json(data: Any, *, one_line: bool = False) -> None:
    """Print JSON (one line for logs that cron appends to, indented for people)."""
    if one_line:
        print(json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str))
    else:
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def open_plane(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The tree at --root; a missing root, or a folder that is not a memory tree, is refused (exit 4: only `init`
    and the runtime make a tree)."""
    from .._plane import MemoryPlane

    return MemoryPlane.open(args.root, create=False)


def hints(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """CurrentEnvironmentHints from --app, --language and --screen."""
    from .._retrieve_types import CurrentEnvironmentHints

    w = h = None
    if getattr(args, "screen", None):
        try:
            w, h = (int(x) for x in args.screen.lower().split("x"))
        except ValueError:
            raise UsageError(f"--screen must look like 640x1200, not {args.screen!r}") from None
    return CurrentEnvironmentHints(app=args.app, language=args.language, screen_width=w, screen_height=h)


def cell(value: Any, width: int) -> str:
    """A table cell from any value a hand-edited file may hold (never a format error)."""
    return ("" if value is None else str(value))[:width].ljust(width)


def conf(value: Any) -> str:
    """A confidence as two decimals ("?" when it is not a number)."""
    x = field_num(value, math.nan)
    return "  ? " if math.isnan(x) else f"{x:.2f}"


def positive_int(text: str) -> int:
    """argparse type: an integer ≥ 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n
