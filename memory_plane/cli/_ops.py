"""`memplane init | lifecycle | import | bench | demo`: the operator's commands (cron, set-up, data)."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from typing import Any

from memory_plane.lifecycle import UsageError, counted, format_ts, init_tree, parse_ts, resolve_root

from ._common import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEMS, EXIT_STORAGE, invoked_as, open_plane, print_json


def log_line(args: argparse.Namespace, exit_code: int, **fields: Any) -> dict[str, Any]:
    """The one JSON line a cron run appends to its log: when, which tree, which command, how it ended."""
    command = " ".join(x for x in (args.command, getattr(args, "action", None), getattr(args, "what", None)) if x)
    return {"ts": format_ts(datetime.now(timezone.utc)), "root": str(resolve_root(args.root)),
            "command": command, "exit_code": exit_code, **fields}


def cmd_init(args: argparse.Namespace) -> int:
    """`memplane init`: create the tree, filling in what is missing."""
    root = resolve_root(args.root)
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root} exists and is not a folder")
    created = init_tree(root)
    if args.json:
        print_json({"root": str(root), "created": created})
    else:
        print(f"memory tree at {root}: {counted(len(created), 'path')} created" + (":" if created
                                                                                  else " (already complete)"))
        for c in created:
            print(f"  + {c}")
    return EXIT_OK


def cmd_lifecycle(args: argparse.Namespace) -> int:
    """`memplane lifecycle verify|gc|quarantine`: what cron runs, and the way back from quarantine."""
    with open_plane(args) as plane:
        if args.action == "quarantine":
            return _quarantine(plane, args)
        now = _given_now(args.now)
        if args.action == "verify":
            rep = plane.verify(fix=args.fix, now=now)
            code = EXIT_OK if rep.ok else EXIT_PROBLEMS
            # Without --fix a read-only tree is only reported on (every finding, each with its file); --fix was
            # asked to write, so a file it could not write is exit 3, named.
            error = (f"cannot write {rep.not_written[0]}" + (f" (and {len(rep.not_written) - 1} more)"
                                                              if len(rep.not_written) > 1 else "")
                     + ": the tree is read-only, full or not writable") if args.fix and rep.not_written else None
            if error is not None:
                code = EXIT_STORAGE
            if args.json:
                print_json(log_line(args, code, **rep.to_dict(), **({"error": error} if error else {})),
                           one_line=True)
                return code
            for line in verify_lines(rep):
                print(line)
            if error is not None:
                print(f"memplane: {error}", file=sys.stderr)
            return code
        gc = plane.gc(dry_run=args.dry_run, now=now)
        code = EXIT_OK if not gc.errors else EXIT_PROBLEMS
        if args.json:
            print_json(log_line(args, code, **gc.to_dict()), one_line=True)
        else:
            for line in gc.lines():
                print(line)
        return code


_STAT_LINES = (("expired_marked", "marked expired"),
               ("excerpt_only", "marked excerpt_only (the episodes they came from are gone)"),
               ("refresh_candidates", "expired but helped tasks succeed (worth re-validating)"),
               ("jobs_caught_up", "episodes whose background jobs ran now (a crash or an overflow had skipped them)"))
"""What `verify --json` lists beside its problems and repairs, with the words a person reads. (Episodes closed as
interrupted are among the repairs; failed jobs and pending transcripts among the problems.)"""


def verify_lines(rep: Any) -> list[str]:
    """`lifecycle verify` for people: every problem, every repair and rebuilt index, and each list `--json` gives
    (memories marked expired, episodes closed, ...), then the summary line."""
    out = [str(p) for p in rep.problems]
    out += [f"fixed: {f}" for f in rep.fixed]
    out += [f"rebuilt index: {r}" for r in rep.rebuilt_indexes]
    for key, words in _STAT_LINES:
        listed = rep.stats.get(key) or []
        if listed:
            out.append(f"{words}: " + ", ".join(_stat_item(x) for x in listed))
    out.append(f"checked {counted(rep.checked, 'file')}: "
               + ("ok" if rep.ok else counted(len(rep.problems), "problem")))
    return out


def _stat_item(x: Any) -> str:
    """One entry of a verify list: an id, or a record named by its id."""
    return str(x.get("id") if isinstance(x, dict) else x)


def _given_now(text: str | None) -> datetime | None:
    """--now as an aware datetime (None when not given); a value that is no timestamp is a usage error."""
    if text is None:
        return None
    try:
        return parse_ts(text)
    except ValueError:
        raise UsageError(f"--now must be an RFC 3339 timestamp such as 2026-12-01T00:00:00Z, not {text!r}") from None


def _quarantine(plane: Any, args: argparse.Namespace) -> int:
    """`memplane lifecycle quarantine list | show NAME | restore NAME [--force]`."""
    what = args.what or "list"
    if args.force and what != "restore":
        raise UsageError("--force goes with `lifecycle quarantine restore NAME`")
    if what == "list":
        items = plane.quarantined()
        if args.json:
            print_json([q.to_dict() for q in items])
        elif not items:
            print("quarantine is empty")
        else:
            for q in items:
                print(f"{q.name}\n    from {q.original} at {q.quarantined_at or '?'}: {q.reason or '(no reason kept)'}")
            print(f"({counted(len(items), 'file')}; `{invoked_as()} lifecycle quarantine restore NAME` "
                  "puts one back)")
        return EXIT_OK
    if not args.name:
        raise UsageError(f"lifecycle quarantine {what} needs the NAME shown by `quarantine list`")
    if what == "show":
        from memory_plane.lifecycle import QUARANTINE_DIR, find_quarantined, read_bytes_nofollow

        q = find_quarantined(plane.root, args.name)
        text = read_bytes_nofollow(plane.root / QUARANTINE_DIR / q.name).decode("utf-8", "replace")
        if args.json:
            print_json({**q.to_dict(), "content": text})
        else:
            print(f"# {q.name} (from {q.original}, {q.quarantined_at or '?'}): {q.reason or ''}")
            print(text, end="" if text.endswith("\n") else "\n")
        return EXIT_OK
    result = plane.restore(args.name, force=args.force)
    if args.json:
        print_json(result)
    else:
        print(f"restored {result['restored']}" + (" (re-indexed)" if result["reindexed"] else "")
              + (f"; still a problem: {result['problem']}" if result["problem"] else ""))
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    """`memplane import androidcontrol FILE`: public task data as episodes (re-importing adds nothing twice)."""
    from .._androidcontrol import import_androidcontrol

    progress = _progress_printer() if sys.stderr.isatty() and not args.json else None
    with open_plane(args) as plane:
        rep = import_androidcontrol(plane, args.file, limit=args.limit, progress=progress)
    if progress is not None:
        print(file=sys.stderr)
    d = rep.to_dict()
    if rep.interrupted:
        # Ctrl-C: what was committed stays (running it again imports the rest, nothing twice), and is said.
        message = (f"interrupted: imported {counted(d['imported'], 'episode')}, "
                   f"skipped {counted(d['skipped'], 'line')} "
                   f"({d['already_imported']} already imported); run it again to import the rest")
        if args.json:
            print_json(log_line(args, EXIT_INTERRUPTED, error="interrupted", **d), one_line=True)
        else:
            print(f"memplane: {message}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.json:
        print_json(d)
    else:
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(d["skipped_lines_by_reason"].items())) or "none"
        print(f"imported {counted(d['episodes'], 'episode')} ({counted(d['steps'], 'step')}, "
              f"{counted(d['skipped_actions'], 'empty action')} skipped) "
              f"in {d['seconds']}s; already imported {d['already_imported']}; lines skipped: {skipped}; "
              f"items created {d['items_created']}, duplicates avoided {d['duplicates_avoided']}")
    return EXIT_OK


def _progress_printer() -> Any:
    """A progress line (count, rate, ETA) rewritten in place on a terminal."""
    t0 = time.monotonic()
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < 0.5 and done < total:
            return
        last[0] = now
        rate = done / max(now - t0, 1e-6)
        eta = (total - done) / rate if rate > 0 else 0.0
        print(f"\r  {done}/{total} lines, {rate:.0f}/s, ETA {eta:.0f}s   ", end="", file=sys.stderr, flush=True)

    return show


def cmd_bench(args: argparse.Namespace) -> int:
    """`memplane bench NAME`: run a benchmark."""
    from ..bench import run_bench

    if args.root is not None:
        # Benchmarks build their own trees in a temporary folder (sizes, ages and faults they control):
        # a --root would be silently ignored, so it is refused.
        me = invoked_as()
        raise UsageError(f"bench builds its own trees in a temporary folder and takes no --root; to look at your own "
                         f"tree run `{me} --root DIR lifecycle verify` or `{me} --root DIR retrieve GOAL`")
    result = run_bench(args.name, args)
    if args.json:
        print_json(result)
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    """`memplane mcp`: serve this tree's memory to MCP clients over stdio."""
    from .._plane import MemoryPlane
    from ._mcp import serve_stdio

    # Without --allow-write the server never writes: not even a stale index it would otherwise rebuild.
    with MemoryPlane.open(args.root, create=False, read_only=not args.allow_write) as plane:
        serve_stdio(plane, allow_write=args.allow_write)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    """`memplane demo`: the simulated phone."""
    from ..sim import run_demo

    return run_demo(args, command=invoked_as())
