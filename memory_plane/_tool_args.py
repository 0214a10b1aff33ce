"""How the memory tools read their arguments: the way models write them, the Go agent's names, and a clear
error naming the argument when a value cannot be used (nothing is dropped silently)."""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict

from memory_plane.lifecycle import as_text

MAX_ARG_DEPTH = 8
"""How deeply a tool's arguments may nest (the arguments object is level 1; a list of words in it, level 2)."""
MAX_ARG_CHARS = 100_000
"""How many characters a tool's arguments may hold altogether (keys and text; a memory is at most 4,000)."""
MAX_LIST_ITEMS = 50
"""How many items one list argument (ids, tags, terms ...) may hold; ask for more in pages."""

_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth(text: str) -> int:
    """How deeply a JSON text nests (brackets inside strings do not count), without parsing it: a parser recurses
    once per level, and 50,000 levels is a RecursionError, or no answer at all, instead of an error."""
    opens = text.count("[") + text.count("{")
    if opens <= 1:
        return opens  # the common case (a flat object) without a scan
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def text_args_problem(text: str) -> str | None:
    """Why arguments sent as JSON text are refused before parsing (too long, nested too deep), or None."""
    if len(text) > MAX_ARG_CHARS:
        return f"the arguments hold {len(text)} characters; at most {MAX_ARG_CHARS} are read"
    if json_depth(text) > MAX_ARG_DEPTH:
        return f"the arguments nest deeper than {MAX_ARG_DEPTH} levels; send a flat object of named fields"
    return None


def args_problem(args: Any) -> str | None:
    """Why parsed arguments are refused before they are read (nested too deep, too long, a list too long), or None.
    Walked without recursion, so no nesting can exhaust the stack."""
    chars = 0
    todo: list[tuple[Any, int, str]] = [(args, 1, "arguments")]
    while todo:
        value, depth, where = todo.pop()
        if isinstance(value, (dict, list, tuple)):
            if depth > MAX_ARG_DEPTH:
                return f"the arguments nest deeper than {MAX_ARG_DEPTH} levels; send a flat object of named fields"
            if isinstance(value, dict):
                if len(value) > MAX_ARG_CHARS:
                    return f"the arguments hold {len(value)} fields; send only the named fields"
                for k, v in value.items():
                    chars += len(str(k))
                    todo.append((v, depth + 1, str(k)[:40] if depth == 1 else where))
            else:
                if len(value) > MAX_LIST_ITEMS:
                    return (f"{where}: {len(value)} items; at most {MAX_LIST_ITEMS} at a time (ask for the rest in "
                            "another call)")
                todo.extend((v, depth + 1, where) for v in value)
        elif isinstance(value, str):
            chars += len(value)
        else:
            chars += 8
        if chars > MAX_ARG_CHARS:
            return f"the arguments hold more than {MAX_ARG_CHARS} characters; send less at a time"
    return None


class _Bounds:
    """Marks a count argument's range, so an answer can say when a value was brought into it."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi


def _clamped(lo: int, hi: int, default: int) -> Any:
    """A whole number in [lo, hi]: numbers and numeric strings are read, out-of-range values are brought into
    the range (the answer says so); anything else ("many", 2.5, true) is an error naming the argument."""

    def check(v: Any) -> int:
        if v is None or (isinstance(v, str) and not v.strip()):
            return default
        want = f"a whole number {lo}-{hi} (default {default})"
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ValueError(f"expects {want}, not {repr(v)[:40]}")
        try:
            x = float(v.strip()) if isinstance(v, str) else float(v)
        except ValueError:
            raise ValueError(f"expects {want}, not {str(v).strip()[:40]!r}") from None
        if not math.isfinite(x) or x != int(x):
            raise ValueError(f"expects {want}, not {v!r}")
        return max(lo, min(hi, int(x)))

    return BeforeValidator(check)


_ARRAYISH = re.compile(r"""^\[\s*(?:$|\]|["'\[{\d-])""")


def _unwrap_array(v: Any) -> Any:
    """A list sent as the text of a JSON array (``"[\\"a\\"]"``, ``"[]"``, also twice encoded) as the list."""
    for _ in range(3):
        if not isinstance(v, str) or not _ARRAYISH.match(v.strip()):
            return v
        s = v.strip()
        try:
            v = json.loads(s)
            continue
        except ValueError:
            pass
        try:  # a Python-style list with single quotes, as some models write it
            v = ast.literal_eval(s) if len(s) < 20_000 else None
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            v = None
        if not isinstance(v, list):
            raise ValueError(f"expects a list of words; {s[:60]!r} looks like a JSON array but is not one")
    return v


def _words(v: Any) -> list[str]:
    """A list of words: a list, one word for a one-item list, or a JSON array sent as a string."""
    v = _unwrap_array(v)
    if v is None:
        return []
    if isinstance(v, str):
        return [v.strip()] if v.strip() else []
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return [str(v)]
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"expects a list of words, not {type(v).__name__}")
    if len(v) > MAX_LIST_ITEMS:
        raise ValueError(f"takes at most {MAX_LIST_ITEMS} words at a time, not {len(v)} (ask for the rest in another "
                         "call)")
    out = []
    for x in v:
        if x is None:
            continue
        if isinstance(x, bool) or not isinstance(x, (str, int, float)):
            raise ValueError(f"expects a list of words, not a list holding {repr(x)[:40]}")
        if str(x).strip():
            out.append(str(x).strip())
    return out


def _query_text(v: Any) -> Any:
    """Query text; a list of words (or a JSON array sent as text) is joined, never cut to its first word."""
    v = _unwrap_array(v) if isinstance(v, str) else v
    if isinstance(v, (list, tuple)):
        return " ".join(_words(list(v)))
    return as_text(v) if v is not None else ""


def _int_pair(v: Any) -> Any:
    return _unwrap_array(v)


Words = Annotated[list[str], BeforeValidator(_words)]
TextArg = Annotated[str, BeforeValidator(lambda v: as_text(v) if v is not None else "")]
QueryArg = Annotated[str, BeforeValidator(_query_text)]
OptText = Annotated[str | None, BeforeValidator(as_text)]


class ToolArgs(BaseModel):
    """Base of a tool's arguments: Go's names as aliases, a primary argument for a bare value."""

    # Unknown keys are kept aside (and named in the answer), never a reason to refuse the call.
    model_config = ConfigDict(defer_build=True, extra="allow")

    # The Go tools' argument names read as ours (alias -> field); documented in each declaration.
    ALIASES: ClassVar[dict[str, str]] = {}
    # The argument a bare string stands for (Go's inspect_episode takes ``"ep_…"`` alone).
    PRIMARY: ClassVar[str | None] = None


def problem_text(e: Any, aliases: dict[str, str]) -> str:
    """One validation error as "argument: what it expects" (a missing one names its aliases)."""
    where = ".".join(map(str, e["loc"])) or "arguments"
    msg = str(e["msg"]).removeprefix("Value error, ")
    if e.get("type") == "missing":
        also = [a for a, f in aliases.items() if f == where]
        msg = "required" + (f" (also read from {', '.join(also)})" if also else "")
    return f"{where}: {msg}"


def clamp_notes(model: type[ToolArgs], args: dict[str, Any], parsed: ToolArgs) -> list[str]:
    """Say so when a count was brought into its range (500 -> 30): a value is never changed silently."""
    notes = []
    for fname, info in model.model_fields.items():
        bounds = next((m for m in info.metadata if isinstance(m, _Bounds)), None)
        raw = args.get(fname)
        if bounds is None or raw is None or isinstance(raw, bool):
            continue
        try:
            asked = float(raw)
        except (TypeError, ValueError):
            continue
        got = getattr(parsed, fname)
        if math.isfinite(asked) and asked != got:
            notes.append(f"{fname} {raw} is outside {bounds.lo}-{bounds.hi}: {got} used")
    return notes


class _Args(ToolArgs, BaseModel):
    """The memory tools' arguments (BaseModel named again so linters see pydantic fields, not class data)."""


class RecallMemoryArgs(_Args):
    """Arguments of recall_memory (the Go tool's tags, entities and types are accepted too)."""

    PRIMARY = "query"
    query: QueryArg = ""
    tags: Words = []
    entities: Words = []
    types: Words = []
    ids: Words = []
    limit: Annotated[int, _clamped(1, 20, 5), _Bounds(1, 20)] = 5
    offset: Annotated[int, _clamped(0, 1000, 0), _Bounds(0, 1000)] = 0


class SaveMemoryArgs(_Args):
    """Arguments of save_memory (Go's priority too)."""

    content: TextArg
    type: OptText = "fact"
    title: OptText = None
    tags: Words = []
    entities: Words = []
    priority: Annotated[int, _clamped(0, 100, 0), _Bounds(0, 100)] = 0  # 0: the type's default
    force: bool = False


class ForgetMemoryArgs(_Args):
    """Arguments of forget_memory (Go's ``id`` too)."""

    ALIASES = {"id": "memory_id"}
    memory_id: TextArg
    reason: TextArg


class RecallDeviceArgs(_Args):
    """Arguments of recall_device_memory (the Go tool's terms, tags, entities, types and device_id too)."""

    PRIMARY = "query"
    query: Annotated[str | None, BeforeValidator(_query_text)] = None
    terms: Words = []
    tags: Words = []
    entities: Words = []
    app: OptText = None
    type: OptText = None
    types: Words = []
    ids: Words = []
    device_id: OptText = None
    limit: Annotated[int, _clamped(1, 30, 8), _Bounds(1, 30)] = 8
    offset: Annotated[int, _clamped(0, 1000, 0), _Bounds(0, 1000)] = 0


class InspectEpisodeArgs(_Args):
    """Arguments of inspect_episode (Go's ``id``, or the id alone, too)."""

    ALIASES = {"id": "episode_id"}
    PRIMARY = "episode_id"
    episode_id: TextArg
    max_events: Annotated[int, _clamped(0, 200, 20), _Bounds(0, 200)] = 20
    offset: Annotated[int, _clamped(0, 100_000, 0), _Bounds(0, 100_000)] = 0


class RecallSessionArgs(_Args):
    """Arguments of recall_session_chunks (tags, entities and chunk_ids as the Go tool takes them; app_name is
    not a filter: what was said in one app is often needed in another)."""

    PRIMARY = "query"
    query: QueryArg = ""
    tags: Words = []
    entities: Words = []
    chunk_ids: Words = []
    app_name: OptText = None
    include_archived: bool = False
    limit: Annotated[int, _clamped(1, 10, 3), _Bounds(1, 10)] = 3
    offset: Annotated[int, _clamped(0, 1000, 0), _Bounds(0, 1000)] = 0


class RecallHistoryArgs(_Args):
    """Arguments of recall_history."""

    query: OptText = None
    step_range: Annotated[list[int] | None, BeforeValidator(_int_pair)] = None
    include_details: bool = False
    include_images: bool = False
    max_results: Annotated[int, _clamped(1, 5, 5), _Bounds(1, 5)] = 5
    screen_hash: OptText = None
    image: OptText = None
