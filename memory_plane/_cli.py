"""`memplane`: the command line. The only module that prints or exits.

Exit codes (also in `memplane --help` and the README):
  0  ok
  1  problems found (verify), or the operation failed
  2  bad usage (unknown command, bad option value)
  3  cannot write: the tree is read-only, the disk is full, or a file is not writable
  4  no memory root: the path does not exist or is not a folder (only `init` creates one)
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lifecycle import MemoryPlaneError, NoRootError, UsageError, field_num, init_tree, resolve_root

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_STORAGE, EXIT_NO_ROOT = 0, 1, 2, 3, 4
EXIT_CODES = """exit codes:
  0  ok
  1  problems found (verify), or the operation failed
  2  bad usage
  3  cannot write: read-only tree, full disk, or a file that is not writable
  4  no memory root: the path does not exist or is not a folder (only `init` creates one)"""


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def _open(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from ._plane import MemoryPlane

    # Only `init` (and the runtime) create a root: a typo or an unmounted path is refused here.
    return MemoryPlane.open(args.root, create=False)


def _hints(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from ._types import CurrentEnvironmentHints

    w = h = None
    if getattr(args, "screen", None):
        try:
            w, h = (int(x) for x in args.screen.lower().split("x"))
        except ValueError:
            raise UsageError(f"--screen must look like 640x1200, not {args.screen!r}") from None
    return CurrentEnvironmentHints(app=args.app, language=args.language, screen_width=w, screen_height=h)


# -- commands ----------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    """`memplane init`: create the tree, filling in what is missing."""
    root = resolve_root(args.root)
    created = init_tree(root)
    if args.json:
        _print_json({"root": str(root), "created": created})
    else:
        print(f"memory tree at {root}: {len(created)} paths created" + (":" if created else " (already complete)"))
        for c in created:
            print(f"  + {c}")
    return EXIT_OK


def cmd_retrieve(args: argparse.Namespace) -> int:
    """`memplane retrieve GOAL`: what the agent would get for a goal."""
    from ._types import MemoryRetrieveRequest

    req = MemoryRetrieveRequest(input=args.goal, device_id=args.device, current_hints=_hints(args))
    with _open(args) as plane:
        ctx = plane.retrieve(req)
    if args.explain:
        _print_json(ctx.explain())
    elif args.json:
        _print_json(ctx.to_dict())
    else:
        print(ctx.render(), end="")
    return EXIT_OK


def _cell(value: Any, width: int) -> str:
    """A table cell from any value a hand-edited file may hold (never a format error)."""
    return ("" if value is None else str(value))[:width].ljust(width)


def _conf(value: Any) -> str:
    x = field_num(value, math.nan)
    return "  ? " if math.isnan(x) else f"{x:.2f}"


def cmd_episodes(args: argparse.Namespace) -> int:
    """`memplane episodes list|show`: past tasks."""
    with _open(args) as plane:
        if args.action == "list":
            items = plane.episodes.newest(limit=args.limit)
            if args.json:
                _print_json(items)
            else:
                for e in items:
                    mark = "ok  " if e.get("success") is True else "FAIL"
                    print(f"{e['id']}  {mark}  {_cell(e.get('started_at'), 24)}  {_cell(e.get('goal'), 70).rstrip()}")
                print(f"({len(items)} episodes)")
            return EXIT_OK
        if not args.id:
            raise UsageError("episodes show needs an episode id")
        ep = plane.episodes.get(args.id)
        if ep is None:
            print(f"no episode {args.id}", file=sys.stderr)
            return EXIT_PROBLEMS
        events = plane.episodes.events(args.id).records
        if args.json:
            _print_json({"episode": ep.to_yaml_dict(), "events": events})
        else:
            path = plane.episodes.episode_dir(args.id)
            print((path / "episode.yaml").read_text("utf-8"), end="")
            print(f"# {len(events)} events in {path / 'events.jsonl'}")
            for ev in events:
                what = ev.get("tool_name") or ev.get("content") or ""
                extra = ev.get("screenshot_ref") or ""
                print(f"  {ev.get('event_id')} {_cell(ev.get('type'), 18)} {str(what)[:60]} {extra}")
    return EXIT_OK


def cmd_device(args: argparse.Namespace) -> int:
    """`memplane device list|show`: device memories."""
    with _open(args) as plane:
        if args.action == "list":
            app = plane.device.catalog.app_id_for(args.app) if args.app else None
            entries = plane.device.entries(args.type, app)
            if args.json:
                _print_json(entries)
            else:
                for e in entries:
                    print(f"{e['id']:28} {_cell(e.get('type'), 14)} {_cell(e.get('status'), 10)} "
                          f"{_conf(e.get('confidence', 0))}  {str(e.get('summary') or e.get('title') or '')[:70]}")
                print(f"({len(entries)} items)")
            return EXIT_OK
        if not args.id:
            raise UsageError("device show needs an item id")
        item = plane.device.get(args.id)
        if item is None:
            print(f"no device memory {args.id}", file=sys.stderr)
            return EXIT_PROBLEMS
        if args.json:
            _print_json(item.to_yaml_dict())
        else:
            from lifecycle import dump_yaml

            print(dump_yaml(item.to_yaml_dict()), end="")
    return EXIT_OK


def cmd_memory(args: argparse.Namespace) -> int:
    """`memplane memory save|recall|forget`: long-term memory."""
    with _open(args) as plane:
        if args.action == "save":
            if args.overrides and args.type != "rule":
                raise UsageError("--overrides goes with --type rule")
            if args.type == "rule":
                r = plane.save_rule(args.text, overrides=args.overrides, title=args.title, tags=args.tag,
                                    entities=args.entity)
            else:
                r = plane.long_term.save_memory(type=args.type, content=args.text, title=args.title, tags=args.tag,
                                                entities=args.entity)
            out = {"id": r.id, "status": r.status, "reason": r.reason, "superseded": r.superseded}
            _print_json(out) if args.json else print(f"{r.status}: {r.id}" + (f" ({r.reason})" if r.reason else ""))
            return EXIT_OK
        if args.action == "recall":
            hits = plane.long_term.recall_memory(args.text, limit=args.limit)
            if args.json:
                _print_json([h.model_dump() for h in hits])
            else:
                for h in hits:
                    print(f"[{h.id} type={h.type} score={h.score:.2f}] {h.text}")
            return EXIT_OK
        ok = plane.forget(args.text, reason=args.reason)
        print("forgotten" if ok else f"no memory {args.text}", file=sys.stdout if ok else sys.stderr)
        return EXIT_OK if ok else EXIT_PROBLEMS


def cmd_lifecycle(args: argparse.Namespace) -> int:
    """`memplane lifecycle verify|gc|quarantine`: what cron runs, and the way back from quarantine."""
    with _open(args) as plane:
        if args.action == "quarantine":
            return _quarantine(plane, args)
        if args.what or args.name:
            raise UsageError(f"lifecycle {args.action} takes no further arguments")
        if args.action == "verify":
            rep = plane.verify(fix=args.fix)
            if args.json:
                _print_json(rep.to_dict())
            else:
                for p in rep.problems:
                    print(p)
                for f in rep.fixed:
                    print(f"fixed: {f}")
                for r in rep.rebuilt_indexes:
                    print(f"rebuilt index: {r}")
                print(f"checked {rep.checked} files: " + ("ok" if rep.ok else f"{len(rep.problems)} problems"))
            return EXIT_OK if rep.ok else EXIT_PROBLEMS
        gc = plane.gc(dry_run=args.dry_run)
        if args.json:
            _print_json(gc.to_dict())
        else:
            for line in gc.lines():
                print(line)
        return EXIT_OK if not gc.errors else EXIT_PROBLEMS


def _quarantine(plane: Any, args: argparse.Namespace) -> int:
    """`memplane lifecycle quarantine list | show NAME | restore NAME [--force]`."""
    what = args.what or "list"
    if what == "list":
        items = plane.quarantined()
        if args.json:
            _print_json([q.to_dict() for q in items])
        elif not items:
            print("quarantine is empty")
        else:
            for q in items:
                print(f"{q.name}\n    from {q.original} at {q.quarantined_at or '?'}: {q.reason or '(no reason kept)'}")
            print(f"({len(items)} files; `memplane lifecycle quarantine restore NAME` puts one back)")
        return EXIT_OK
    if not args.name:
        raise UsageError(f"lifecycle quarantine {what} needs the NAME shown by `quarantine list`")
    if what == "show":
        from lifecycle import QUARANTINE_DIR, find_quarantined, read_bytes_nofollow

        q = find_quarantined(plane.root, args.name)
        text = read_bytes_nofollow(plane.root / QUARANTINE_DIR / q.name).decode("utf-8", "replace")
        if args.json:
            _print_json({**q.to_dict(), "content": text})
        else:
            print(f"# {q.name} (from {q.original}, {q.quarantined_at or '?'}): {q.reason or ''}")
            print(text, end="" if text.endswith("\n") else "\n")
        return EXIT_OK
    result = plane.restore(args.name, force=args.force)
    if args.json:
        _print_json(result)
    else:
        print(f"restored {result['restored']}" + (" (re-indexed)" if result["reindexed"] else "")
              + (f"; still a problem: {result['problem']}" if result["problem"] else ""))
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    """`memplane import androidcontrol FILE`: public task data as episodes."""
    from ._import import import_androidcontrol

    if args.format != "androidcontrol":
        raise UsageError(f"unknown import format {args.format!r} (known: androidcontrol)")
    with _open(args) as plane:
        rep = import_androidcontrol(plane, args.file, limit=args.limit)
    if args.json:
        _print_json(rep.to_dict())
    else:
        d = rep.to_dict()
        print(f"imported {d['episodes']} episodes ({d['steps']} steps, {d['skipped_actions']} empty actions skipped) "
              f"in {d['seconds']}s; items created {d['items_created']}, duplicates avoided {d['duplicates_avoided']}")
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    """`memplane bench NAME`: run a benchmark."""
    from .bench import run_bench

    result = run_bench(args.name, args)
    if args.json:
        _print_json(result)
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    """`memplane demo`: the simulated phone."""
    from .sim import run_demo

    return run_demo(args)


# -- parser --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `memplane` (every command has --help)."""
    p = argparse.ArgumentParser(prog="memplane", description="The memory of an on-device phone agent, as plain files.",
                                epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", help="memory root (default: $MEMPLANE_ROOT or /userdata/agent/memory)")
    p.add_argument("-v", "--verbose", action="store_true", help="log warnings and details to stderr")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("init", help="create the memory tree (fills in only what is missing)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_init)

    s = sub.add_parser("retrieve", help="show what memory retrieval gives a goal")
    s.add_argument("goal")
    s.add_argument("--app")
    s.add_argument("--language")
    s.add_argument("--screen", help="WxH, e.g. 640x1200")
    s.add_argument("--device", default=None)
    s.add_argument("--json", action="store_true")
    s.add_argument("--explain", action="store_true", help="show every hit's score factors and what was dropped")
    s.set_defaults(func=cmd_retrieve)

    s = sub.add_parser("episodes", help="list episodes or show one (inspect_episode)")
    s.add_argument("action", choices=["list", "show"])
    s.add_argument("id", nargs="?")
    s.add_argument("--limit", type=int, default=50)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_episodes)

    s = sub.add_parser("device", help="list device memories or show one (recall_device_memory)")
    s.add_argument("action", choices=["list", "show"])
    s.add_argument("id", nargs="?")
    s.add_argument("--type", choices=["device_profile", "app_profile", "procedure", "navigation", "calibration",
                                      "failure", "ui_anchor"])
    s.add_argument("--app")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_device)

    s = sub.add_parser("memory", help="save, recall or forget a long-term memory")
    s.add_argument("action", choices=["save", "recall", "forget"])
    s.add_argument("text", help="content (save), query (recall) or id (forget)")
    s.add_argument("--type", default="fact", choices=["profile", "rule", "preference", "procedure", "fact"])
    s.add_argument("--title")
    s.add_argument("--tag", action="append", default=[])
    s.add_argument("--entity", action="append", default=[])
    s.add_argument("--limit", type=int, default=5)
    s.add_argument("--reason", default="forgotten on request")
    s.add_argument("--overrides", action="append", default=[], metavar="ID",
                   help="save (rule): an automatic memory this rule overrides (it becomes a caution)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_memory)

    s = sub.add_parser("lifecycle", help="verify the tree, collect garbage (run from cron), or restore from quarantine")
    s.add_argument("action", choices=["verify", "gc", "quarantine"])
    s.add_argument("what", nargs="?", choices=["list", "show", "restore"],
                   help="quarantine: list (default), show NAME, restore NAME")
    s.add_argument("name", nargs="?", help="quarantine show|restore: a name from `quarantine list` (or the "
                   "original path)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--fix", action="store_true", help="verify: move broken files to lifecycle/quarantine/")
    s.add_argument("--dry-run", action="store_true", help="gc: report what would be removed, remove nothing")
    s.add_argument("--force", action="store_true", help="quarantine restore: put the file back even if it "
                   "still does not load (verify will report it)")
    s.set_defaults(func=cmd_lifecycle)

    s = sub.add_parser("import", help="import public task data as episodes")
    s.add_argument("format", choices=["androidcontrol"])
    s.add_argument("file")
    s.add_argument("--limit", type=int)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_import)

    s = sub.add_parser("bench", help="run a benchmark (index, commit, extract, retrieve, retrieval-quality, ...)")
    s.add_argument("name")
    s.add_argument("--json", action="store_true")
    s.add_argument("--entries", type=int, default=10_000)
    s.add_argument("--episodes", type=int, default=10_000)
    s.add_argument("--items", type=int, default=20_000)
    s.add_argument("--steps", type=int, default=150)
    s.add_argument("--kills", type=int, default=300)
    s.add_argument("--short", action="store_true", help="smaller sizes (CI and `bench all`)")
    s.add_argument("--data", default=None, help="path of ../shared/data (default: beside the checkout)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--set", default=None,
                   help="retrieval-quality: only these task sets (comma-separated, e.g. spa-bench-chn,android-lab)")
    s.add_argument("--lens", choices=["offline", "gemini-fake"], default="offline",
                   help="compaction: the lenses to run (gemini-fake: the real SDK against a local fake server)")
    s.set_defaults(func=cmd_bench)

    s = sub.add_parser("demo", help="run the simulated phone twice with memory, then after a language change")
    s.add_argument("--tasks", type=int, default=None, help="tasks a round (default 3)")
    s.add_argument("--seed", type=int, default=0, help="rotates the task targets")
    s.set_defaults(func=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `memplane` and `python -m memory_plane`."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 0 for --help, 2 for bad usage
        return int(exc.code or 0)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"memplane: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NoRootError as exc:
        print(f"memplane: {exc}", file=sys.stderr)
        return EXIT_NO_ROOT
    except MemoryPlaneError as exc:
        print(f"memplane: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    except OSError as exc:
        # One line, no traceback: which file could not be written, and why (read-only, disk full ...).
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"memplane: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_STORAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


def _data_dir(explicit: str | None) -> Path:
    """../shared/data beside the checkout (or $MEMPLANE_SHARED_DATA, or --data)."""
    import os

    if explicit:
        return Path(explicit)
    env = os.environ.get("MEMPLANE_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent.parent / "shared" / "data"
