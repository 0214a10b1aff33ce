"""Simple YAML documents built straight from the C parser's events (the safe constructor's result, faster).

The safe constructor spends most of a load on per-node bookkeeping (tags, marks, merge and duplicate
checks) that the files this project writes never need: plain mappings, sequences and scalars. Such a
document is built straight from the parser's events; anything else (an anchor, an alias, an explicit
tag, a merge key, a duplicate key, a date, an octal or any scalar the YAML 1.2 rules could read two
ways) makes the whole document go through the constructor, so the result is always what it returns.
"""

from __future__ import annotations

import functools
import re
from typing import Any

FALLBACK: Any = object()  # "this document needs the full constructor"
_SIMPLE_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})\Z")
_SIMPLE_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]{0,14})\.[0-9]{1,15}\Z")
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_NULLS = frozenset(["", "~", "null", "Null", "NULL"])
_STR_TAG = "tag:yaml.org,2002:"


def _implicit_rules() -> dict[Any, list[tuple[str, Any]]]:
    from ruamel.yaml.resolver import Resolver

    table = Resolver.yaml_implicit_resolvers
    tail = list(table.get(None, []))
    # What Resolver.resolve tries for a plain scalar starting with each character, in its order.
    return {c: [(str(tag), rx) for tag, rx in [*table.get(c, []), *tail]] for c in table if c is not None}


_RULES = _implicit_rules()


@functools.lru_cache(maxsize=8192)
def _plain_scalar(value: str) -> Any:
    """A plain scalar as the resolver and the safe constructor read it, or FALLBACK when not simple.

    Kept per text (a bounded cache; every answer is immutable): item files repeat their keys and most of their
    values (``status: active``, ``type: procedure``), and a verify or GC reads tens of thousands of them."""
    if value in _NULLS:
        return None
    rules = _RULES.get(value[0])
    if rules is None:
        return value  # no implicit type starts with this character: a string
    for tag, rx in rules:
        if rx.match(value):
            kind = tag[len(_STR_TAG):] if tag.startswith(_STR_TAG) else tag
            if kind == "bool" and value in _BOOLS:
                return _BOOLS[value]
            if kind == "int" and _SIMPLE_INT.match(value):
                return int(value)
            if kind == "float" and _SIMPLE_FLOAT.match(value):
                return float(value)
            return FALLBACK
    return value


def from_events(loader: Any, max_nodes: int, max_depth: int) -> Any:
    """The document built from parser events, or FALLBACK when it needs the full constructor."""
    from ruamel.yaml.events import (
        DocumentEndEvent,
        DocumentStartEvent,
        MappingEndEvent,
        MappingStartEvent,
        ScalarEvent,
        SequenceEndEvent,
        SequenceStartEvent,
        StreamEndEvent,
        StreamStartEvent,
    )

    get = loader.get_event
    if type(get()) is not StreamStartEvent:
        return FALLBACK
    ev = get()
    if type(ev) is StreamEndEvent:
        return None  # an empty file
    if type(ev) is not DocumentStartEvent:
        return FALLBACK
    # Each open collection: [container, pending mapping key or FALLBACK when none, is_mapping].
    stack: list[list[Any]] = []
    root: Any = FALLBACK
    nodes = 0
    while True:
        ev = get()
        t = type(ev)
        if t is ScalarEvent:
            if ev.tag is not None or ev.anchor is not None:
                return FALLBACK
            value = _plain_scalar(ev.value) if ev.implicit[0] else ev.value
            if value is FALLBACK:
                return FALLBACK
        elif t is MappingStartEvent or t is SequenceStartEvent:
            if ev.tag is not None or ev.anchor is not None or len(stack) >= max_depth:
                return FALLBACK
            nodes += 1
            stack.append([{} if t is MappingStartEvent else [], FALLBACK, t is MappingStartEvent])
            continue
        elif t is MappingEndEvent or t is SequenceEndEvent:
            value = stack.pop()[0]
        elif t is DocumentEndEvent:
            break
        else:  # an alias, or anything else this reader does not build
            return FALLBACK
        nodes += 1
        if nodes > max_nodes:
            return FALLBACK
        if not stack:
            root = value
            continue
        top = stack[-1]
        if not top[2]:
            top[0].append(value)
        elif top[1] is FALLBACK:
            if isinstance(value, (dict, list)):
                return FALLBACK  # a complex key: the constructor's to judge
            top[1] = value
        else:
            key, top[1] = top[1], FALLBACK
            if key in top[0]:
                return FALLBACK  # a duplicate key: the constructor names it
            top[0][key] = value
    if type(get()) is not StreamEndEvent:
        return FALLBACK  # a second document: the constructor refuses it
    return root
