"""`memplane`: the command line. The only modules that print or exit are the ones in this folder (cli/).

Exit codes (also in `memplane --help` and docs/operating.md):
  0  ok
  1  problems found (verify), or the operation failed
  2  bad usage (unknown command or option, a value out of range)
  3  cannot write: the tree is read-only, the disk is full, or a file is not writable
  4  no memory root: the path does not exist, is not a folder, or is not a memory tree (only `init` makes one)
"""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any, NoReturn

from memory_plane.lifecycle import (
    MAX_CLOCK_LEAP,
    MemoryPlaneError,
    NoRootError,
    StorageError,
    UsageError,
    format_ts,
    resolve_root,
)

from ..bench import DATA_HELP
from ..sim import DEFAULT_DEMO_ROOT
from ._common import (
    EXIT_CODES,
    EXIT_NO_ROOT,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_STORAGE,
    EXIT_USAGE,
    positive_int,
    print_json,
)
from ._fleet import add_fleet_command
from ._ops import cmd_bench, cmd_demo, cmd_import, cmd_init, cmd_lifecycle, cmd_mcp, log_line
from ._read import cmd_device, cmd_episodes, cmd_memory, cmd_retrieve

__all__ = ["EXIT_NO_ROOT", "EXIT_OK", "EXIT_PROBLEMS", "EXIT_STORAGE", "EXIT_USAGE", "build_parser", "main"]

ITEM_TYPES = ["device_profile", "app_profile", "procedure", "navigation", "calibration", "failure", "ui_anchor"]


Command = Callable[..., argparse.ArgumentParser]
"""Adds one command to the parser: (name, help, **_subparser's options) -> its parser."""


ROOT_HELP = "memory root (default: $MEMPLANE_ROOT, then /userdata/agent/memory)"


def _global_options(p: argparse.ArgumentParser, *, top: bool, root_help: str | None = ROOT_HELP) -> None:
    # The same options before or after the command (`memplane --root D gc` and `memplane gc --root D`):
    # on a command's parser they default to "not given", so the value given before it stands.
    default = None if top else argparse.SUPPRESS
    if root_help is not None:
        p.add_argument("--root", default=default, help=root_help)
    p.add_argument("-v", "--verbose", action="store_true", default=False if top else argparse.SUPPRESS,
                   help="log warnings and details to stderr")


def _subparser(sub: Any, name: str, help: str, *, description: str | None = None,
               root_help: str | None = ROOT_HELP) -> argparse.ArgumentParser:
    """A command's or an action's parser: its help (or a longer ``description``) as description, the exit codes as
    epilog, the global options (``root_help``: what --root means to this command; None: it takes no --root)."""
    s = sub.add_parser(name, help=help, description=description or help, epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _global_options(s, top=False, root_help=root_help)
    return s


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `memplane` (every command and option has help)."""
    p = argparse.ArgumentParser(prog="memplane", description="The memory of an on-device phone agent, as plain files.",
                                epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    _global_options(p, top=True)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
        return _subparser(sub, name, help, **kwargs)

    _read_commands(command)
    _memory_command(command)
    _ops_commands(command)
    _bench_command(command)
    add_fleet_command(command, lambda s: _actions(s))

    s = command("mcp", "serve this device's memory to MCP clients over stdio (needs the mcp extra)")
    s.add_argument("--allow-write", action="store_true",
                   help="also offer save_memory and forget_memory (read-only by default)")
    s.set_defaults(func=cmd_mcp)

    # The demo replaces its previous tree: it never writes into the real one ($MEMPLANE_ROOT is not read).
    s = command("demo", "run the simulated phone twice with memory, then after a language change",
                root_help=f"where the demo writes its memory tree: an empty or new folder (default "
                          f"{DEFAULT_DEMO_ROOT}, replaced on every run; $MEMPLANE_ROOT is not used, so the demo "
                          "never writes into a real tree)")
    s.add_argument("--tasks", type=positive_int, default=None, help="tasks a round (default 3)")
    s.add_argument("--seed", type=int, default=0, help="rotates the task targets")
    s.set_defaults(func=cmd_demo)
    return p


def _read_commands(command: Command) -> None:
    """init, retrieve, episodes and device: the commands that show what the tree holds."""
    s = command("init", "create the memory tree (fills in only what is missing; the only command that creates a root)")
    s.add_argument("--json", action="store_true", help="print what was created as JSON")
    s.set_defaults(func=cmd_init)

    s = command("retrieve", "show what memory retrieval gives a goal (the prompt block the agent would get)")
    s.add_argument("goal", help="the task goal, as the user said it")
    s.add_argument("--app", help="the app in the foreground (a hint, like the runtime's current_hints.app)")
    s.add_argument("--language", help="the phone's UI language, e.g. zh-CN or en-US")
    s.add_argument("--screen", help="screen size WxH, e.g. 640x1200")
    s.add_argument("--device", default=None, help="device id (default: default)")
    s.add_argument("--json", action="store_true", help="print hits, refs and the block as JSON")
    s.add_argument("--explain", action="store_true",
                   help="show every hit's score factors and each dropped candidate with its reason (a table; "
                        "JSON with --json)")
    s.set_defaults(func=cmd_retrieve)

    s = command("episodes", "list past tasks or show one (inspect_episode)")
    acts = _actions(s)
    a = acts("list", "list past tasks, newest first")
    _no_id(a)
    a.add_argument("--limit", type=positive_int, default=50, help="show at most N, newest first (default 50)")
    a.add_argument("--app", help="only episodes about this app (any of its names)")
    a.add_argument("--failed", action="store_true", help="only episodes that did not succeed")
    a.add_argument("--since", help="only episodes started since a date (2026-11-30) or a duration ago (7d)")
    a.add_argument("--json", action="store_true", help="print the index entries as JSON")
    a = acts("show", "show one past task and its events")
    a.add_argument("id", help="the episode id")
    a.add_argument("--json", action="store_true", help="print the episode and its events as JSON")
    s.set_defaults(func=cmd_episodes)

    s = command("device", "list device memories, show one, its history, or revert it to a revision")
    acts = _actions(s)
    a = acts("list", "list device memories")
    _no_id(a)
    a.add_argument("--type", choices=ITEM_TYPES, help="only this kind of memory")
    a.add_argument("--app", help="only memories about this app (any of its names)")
    a.add_argument("--json", action="store_true", help="print the index entries as JSON")
    a = acts("show", "show one device memory")
    a.add_argument("id", help="the memory id (proc_..., nav_..., app_...)")
    a.add_argument("--json", action="store_true", help="print the item as JSON")
    a = acts("history", "show the recorded changes of one device memory (its last 20 revisions), oldest first")
    a.add_argument("id", help="the memory id (proc_..., nav_..., app_...)")
    a.add_argument("--json", action="store_true", help="print the revisions as JSON")
    a = acts("revert", "put one device memory back as it was after a revision of its history (a change of its "
                       "own, recorded there too)")
    a.add_argument("id", help="the memory id (proc_..., nav_..., app_...)")
    a.add_argument("--to", type=positive_int, required=True, metavar="N",
                   help="the revision to go back to (its number in `device history ID`)")
    a.add_argument("--json", action="store_true", help="print the revision the revert recorded as JSON")
    s.set_defaults(func=cmd_device)


def _actions(s: argparse.ArgumentParser) -> Command:
    """A command's actions, each its own parser with only its own options (an option of another action is a
    usage error, not silently ignored)."""
    sub = s.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help: str) -> argparse.ArgumentParser:
        return _subparser(sub, name, help)

    return action


def _no_id(a: argparse.ArgumentParser) -> None:
    """A list action takes no id: one given is refused with a pointer to `show` (not silently ignored)."""
    a.add_argument("stray", nargs="*", metavar="", help=argparse.SUPPRESS)


def _memory_command(command: Command) -> None:
    """memory save | recall | forget: the user's long-term memories."""
    s = command("memory", "save, recall or forget a long-term memory")
    s.set_defaults(func=cmd_memory)
    # One parser per action, so that `memory recall --type rule` needs no query while `memory save --type rule
    # TEXT` still takes its text after the options.
    acts = s.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help: str) -> argparse.ArgumentParser:
        a = _subparser(acts, name, help)
        a.add_argument("--json", action="store_true", help="machine-readable output")
        return a

    kinds = ["profile", "rule", "preference", "procedure", "fact"]
    a = action("save", "save TEXT as the user's memory")
    a.add_argument("text", help="what to remember")
    a.add_argument("--type", default="fact", choices=kinds,
                   help="what kind of memory (default fact; rules and preferences that apply to a goal reach its "
                        "prompt first, and a model's save never replaces them)")
    a.add_argument("--title", help="a short title")
    a.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
    a.add_argument("--entity", action="append", default=[], help="a person, app or thing it is about (repeatable)")
    a.add_argument("--force", action="store_true",
                   help="save even a text that was forgotten on purpose before (its tombstone blocks it)")
    a.add_argument("--overrides", action="append", default=[], metavar="ID",
                   help="(rule) an automatic memory this rule overrides (it becomes a caution)")
    a = action("recall", "recall memories matching QUERY, or list every memory of a --type")
    a.add_argument("text", nargs="?", metavar="QUERY", help="words of what you need (optional with --type)")
    a.add_argument("--type", choices=kinds, help="only this kind (without a query: all active ones, by priority)")
    a.add_argument("--limit", type=positive_int,
                   help="at most N memories (default 5; 50 when listing a --type without a query)")
    a = action("forget", "forget memory ID everywhere (a tombstone without its text is kept)")
    a.add_argument("text", metavar="ID", help="the memory id (mem_...)")
    a.add_argument("--reason", default="forgotten on request", help="the reason kept in the tombstone")


def _ops_commands(command: Command) -> None:
    """lifecycle and import: the operator's commands."""
    s = command("lifecycle", "verify the tree, collect garbage (run from cron), or restore from quarantine")
    acts = _actions(s)
    now_help = ("the time to act on (RFC 3339, e.g. 2026-12-01T00:00:00Z), believed as given. Without it the system "
                "clock is checked first: before the build date, behind the newest write in the tree, or more than "
                f"{MAX_CLOCK_LEAP.days} days after it, gc removes nothing and exits 1, and verify marks nothing "
                "expired and reports a clock problem")
    json_help = "one JSON line (ts, root, command, exit_code, report) for a cron log"
    a = acts("verify", "rebuild indexes, report bad files, mark expired, close crashed episodes")
    a.add_argument("--json", action="store_true", help=json_help)
    a.add_argument("--fix", action="store_true", help="move unreadable files to lifecycle/quarantine/")
    a.add_argument("--now", metavar="TIMESTAMP", default=None, help=now_help)
    a = acts("gc", "remove what retention says is done with")
    a.add_argument("--json", action="store_true", help=json_help)
    a.add_argument("--dry-run", action="store_true", help="report what would be removed, remove nothing")
    a.add_argument("--now", metavar="TIMESTAMP", default=None, help=now_help)
    a = acts("quarantine", "files `verify --fix` set aside, and the way back")
    a.add_argument("what", nargs="?", choices=["list", "show", "restore"],
                   help="list (default), show NAME, restore NAME")
    a.add_argument("name", nargs="?", help="show|restore: a name from `quarantine list` (or the original path)")
    a.add_argument("--json", action="store_true", help="print the list, the file or the result as JSON")
    a.add_argument("--force", action="store_true", help="restore: put the file back even if it "
                   "still does not load (verify will report it)")
    s.set_defaults(func=cmd_lifecycle)

    s = command("import", "import public task data as episodes (running it again adds nothing twice)")
    s.add_argument("format", choices=["androidcontrol"], help="the data's format")
    s.add_argument("file", help="an AndroidControl export: one JSON episode per line")
    s.add_argument("--limit", type=positive_int, help="import at most N episodes")
    s.add_argument("--json", action="store_true", help="print the summary (counts, skipped lines by reason) as JSON")
    s.set_defaults(func=cmd_import)


def _bench_command(command: Command) -> None:
    """bench NAME: the benchmarks and their sizes."""
    s = command("bench", "run a benchmark (index, commit, extract, retrieve, retrieval-quality, ...)",
                description="run a benchmark (index, commit, extract, retrieve, retrieval-quality, ...). Benchmarks "
                            "build their own trees in a temporary folder and take no --root; to look at your own "
                            "tree, run `memplane --root DIR lifecycle verify` or `memplane --root DIR retrieve GOAL`.",
                root_help=None)
    s.add_argument("name", help="index, commit, extract, retrieve, retrieval-quality, lifecycle, replay, "
                   "compaction, crash, concurrency, lessons, fuzz, scale, summaries, fleet, or all")
    s.add_argument("--json", action="store_true", help="print the figures as JSON")
    s.add_argument("--entries", type=positive_int, default=10_000, help="index: entries in the index")
    s.add_argument("--episodes", type=positive_int, default=10_000, help="stored episodes")
    s.add_argument("--items", type=positive_int, default=20_000, help="lifecycle: memory files")
    s.add_argument("--steps", type=positive_int, default=150,
                   help="compaction: steps of the long task; summaries: steps of its fixed session (at most 240)")
    s.add_argument("--kills", type=positive_int, default=300, help="crash: SIGKILLs")
    s.add_argument("--examples", type=positive_int, default=500, help="fuzz: broken trees to try")
    s.add_argument("--shapes", action="store_true",
                   help="fuzz: break the tree's shape instead (a folder, a pipe, a socket or a dangling symlink "
                   "where a file or folder was), every fault of every path up to --examples")
    s.add_argument("--sizes", default=None, metavar="N,N,...",
                   help="scale: the long-term store sizes to build and measure (default 1000,10000)")
    s.add_argument("--episode-sizes", default=None, metavar="N,N,...",
                   help="scale: also trees of this many episodes, measured by verify and GC (default none)")
    s.add_argument("--short", action="store_true", help="smaller sizes (CI and `bench all`)")
    s.add_argument("--devices", type=positive_int, default=1000,
                   help="fleet: simulated phones (--short: 8); needs the fleet extra")
    s.add_argument("--no-spark", action="store_true", help="fleet: leave out the Spark report (DuckDB only)")
    s.add_argument("--pack", default=None, metavar="PACK",
                   help="replay: pull this fleet pack (`memplane fleet pack`) into the phone's tree first")
    s.add_argument("--limit", type=positive_int, default=None,
                   help="lessons: read only the first N AndroidControl episodes (default all; --short: 150)")
    s.add_argument("--data", default=None, metavar="PATH",
                   help=DATA_HELP)
    s.add_argument("--seed", type=int, default=0, help="random seed (lessons: of the generated trajectory set)")
    s.add_argument("--set", default=None,
                   help="retrieval-quality: only these task sets (comma-separated, e.g. spa-bench-chn,android-lab); "
                        "lessons: only these trajectory sets (androidcontrol, trajectories)")
    s.add_argument("--variants", default=None,
                   help="retrieval-quality: also ask every goal as these variants of its text, ours and FTS5 "
                        "trigram alike (typo, inflection, no_app_name, comma-separated, or all)")
    s.add_argument("--lens", choices=["offline", "gemini-fake"], default="offline",
                   help="compaction: the lenses to run (gemini-fake: the real SDK against a local fake server)")
    s.add_argument("--budget", type=positive_int, default=12_000, help="compaction: the context budget in tokens")
    s.add_argument("--rate-limit", action="store_true",
                   help="compaction --lens gemini-fake: the fake server answers 429 with a retryDelay")
    s.add_argument("--turn-seconds", type=float, default=1.0,
                   help="compaction --lens gemini-fake: the agent's own turn between steps, during which "
                        "background summaries may land (0: steps back to back)")
    s.set_defaults(func=cmd_bench)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `memplane` and `python -m memory_plane`."""
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    if _wants_json(words):
        # A cron log read by `jq` must get its one line even for a typo: argparse's usage would be the only
        # output, so it is kept quiet and its message goes into the line.
        _quiet_usage(parser)
    try:
        args = parser.parse_args(words)
    except _UsageExit as exc:
        print_json(_usage_line(parser, words, exc.message), one_line=True)
        return EXIT_USAGE
    except SystemExit as exc:  # argparse: 0 for --help, 2 for bad usage
        return int(exc.code or 0)
    as_json = bool(getattr(args, "json", False))
    # With --json, stdout is one JSON line and stderr stays quiet (cron logs both with 2>&1, and a human
    # line there breaks `jq`): what went wrong is in the JSON. -v still asks for the log, on stderr.
    quiet = logging.CRITICAL + 1 if as_json else logging.ERROR
    logging.basicConfig(level=logging.INFO if args.verbose else quiet, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        if as_json:
            _report_failure(args, as_json, 130, "interrupted")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except (MemoryPlaneError, OSError) as exc:
        code, message = _failure(exc)
        return _report_failure(args, as_json, code, message)
    except Exception as exc:  # a bug must still end in one line and an exit code cron sees
        message = f"internal error: {type(exc).__name__}: {exc} (run with -v for the traceback)"
        if args.verbose:
            logging.getLogger("memory_plane").error("memplane failed", exc_info=True)
        return _report_failure(args, as_json, EXIT_PROBLEMS, message)


def _report_failure(args: argparse.Namespace, as_json: bool, code: int, message: str) -> int:
    """Say a failed command's message where its reader looks (stderr, or one JSON line) and return its code."""
    if not as_json:
        print(f"memplane: {message}", file=sys.stderr)
    else:
        # A cron log gets its line even when the run failed: what failed is greppable there too.
        print_json(log_line(args, code, error=message), one_line=True)
    return code


class _UsageExit(Exception):
    """argparse's usage error, held back from stderr when the output must be one JSON line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _wants_json(words: Sequence[str]) -> bool:
    """Whether the command line asks for --json (also as an abbreviation argparse would accept)."""
    head = words[: words.index("--")] if "--" in words else words
    return any(len(w) > 3 and "--json".startswith(w.split("=", 1)[0]) for w in head)


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and every command's and action's parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _parsers(sub)
    return found


def _quiet_usage(parser: argparse.ArgumentParser) -> None:
    """Make every parser raise _UsageExit instead of printing its usage and exiting."""
    def error(message: str) -> NoReturn:
        raise _UsageExit(message)

    for p in _parsers(parser):
        p.error = error  # type: ignore[method-assign]


def _usage_line(parser: argparse.ArgumentParser, words: Sequence[str], message: str) -> dict[str, object]:
    """The JSON line of a command line argparse refused: which command it was meant for, and why."""
    command: list[str] = []
    p: argparse.ArgumentParser | None = parser
    root: str | None = None
    it = iter(words)
    for w in it:
        if w in ("--root", "--roo", "--ro"):
            root = next(it, None)
        elif w.startswith("--root="):
            root = w.split("=", 1)[1]
        elif p is not None and not w.startswith("-"):
            subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            p = subs[0].choices.get(w) if subs else None
            if p is not None:
                command.append(w)
    return {"ts": format_ts(datetime.now(timezone.utc)), "root": str(resolve_root(root)), "command": " ".join(command),
            "exit_code": EXIT_USAGE, "error": message}


def _failure(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one line to print for an error a command raised."""
    if isinstance(exc, UsageError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, NoRootError):
        return EXIT_NO_ROOT, str(exc)
    if isinstance(exc, StorageError):
        return EXIT_STORAGE, f"cannot write {exc.path}: {exc.message}"
    if isinstance(exc, MemoryPlaneError):
        return EXIT_PROBLEMS, str(exc)
    assert isinstance(exc, OSError)
    # One line, no traceback: which file could not be written, and why (read-only, disk full ...).
    where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
    verb = "write" if exc.errno in _WRITE_ERRORS else "access"
    return EXIT_STORAGE, f"cannot {verb}{where}: {exc.strerror or exc}"


_WRITE_ERRORS = {errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EFBIG}
