"""Bounded tool arguments: any nesting, size or list length past the documented limits is a quick, clear error
answer, never a RecursionError, a ten-second lookup, or silence.

It reaches inside `_tool_args` and `cli/_mcp` for the limits themselves and the MCP server's flattening of deep
messages, which no public name offers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane
from memory_plane._tool_args import MAX_ARG_CHARS, MAX_ARG_DEPTH, MAX_LIST_ITEMS, json_depth
from memory_plane.cli._mcp import TOO_DEEP, flatten_deep


@pytest.fixture
def plane(tmp_path: Path):  # type: ignore[no-untyped-def]
    with MemoryPlane.open(tmp_path / "m") as p:
        p.long_term.save_memory(content="Always confirm before paying", type="rule")
        yield p


def nested(depth: int) -> dict[str, object]:
    """{"query": [[[...]]]} built without recursion, ``depth`` levels in all."""
    inner: object = "x"
    for _ in range(depth - 1):
        inner = [inner]
    return {"query": inner}


def test_fifty_thousand_ids_are_refused_quickly_and_say_the_maximum(plane: MemoryPlane) -> None:
    ids = [f"proc_{i:05d}" for i in range(50_000)]
    for name in ("recall_device_memory", "recall_memory"):
        t0 = time.monotonic()
        res = plane.tools.call(name, {"ids": ids})
        assert res.is_error and f"at most {MAX_LIST_ITEMS}" in res.text and "50000" in res.text
        assert time.monotonic() - t0 < 1.0
    ok = plane.tools.call("recall_device_memory", {"ids": ids[:MAX_LIST_ITEMS]})
    assert not ok.is_error


def test_a_list_sent_as_json_text_is_capped_too(plane: MemoryPlane) -> None:
    res = plane.tools.call("recall_memory", {"ids": json.dumps([f"mem_{i}" for i in range(MAX_LIST_ITEMS + 1)])})
    assert res.is_error and f"at most {MAX_LIST_ITEMS}" in res.text


@pytest.mark.parametrize("as_text", [False, True])
def test_arguments_nested_fifty_thousand_deep_get_a_clear_error(plane: MemoryPlane, as_text: bool) -> None:
    n = 40_000 if as_text else 50_000  # as text, 40,000 levels still fit the size limit: the depth is what stops it
    args: object = '{"query": ' + "[" * n + "]" * n + "}" if as_text else nested(n)
    t0 = time.monotonic()
    res = plane.tools.call("recall_memory", args)
    assert res.is_error and f"deeper than {MAX_ARG_DEPTH} levels" in res.text
    assert time.monotonic() - t0 < 2.0


def test_arguments_over_the_size_limit_get_a_clear_error(plane: MemoryPlane) -> None:
    for args in ({"query": "x" * (MAX_ARG_CHARS + 1)}, json.dumps({"query": "x" * (MAX_ARG_CHARS + 1)}),
                 {"tags": ["y" * 3000] * 40}):
        res = plane.tools.call("recall_memory", args)
        assert res.is_error and str(MAX_ARG_CHARS) in res.text


@settings(max_examples=200, deadline=None)
@given(depth=st.integers(min_value=1, max_value=3 * MAX_ARG_DEPTH), as_text=st.booleans())
def test_any_depth_is_answered_and_refused_exactly_past_the_limit(tmp_path_factory: pytest.TempPathFactory,
                                                                  depth: int, as_text: bool) -> None:
    root = tmp_path_factory.mktemp("d") / "m"
    with MemoryPlane.open(root) as plane:
        args = nested(depth)
        res = plane.tools.call("recall_memory", json.dumps(args) if as_text else args)
    # The arguments object is level 1; each list around the query adds one.
    refused = f"deeper than {MAX_ARG_DEPTH} levels" in res.text
    assert refused == (depth > MAX_ARG_DEPTH)


@settings(max_examples=300, deadline=None)
@given(value=st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='ab[]{}"\\,: ', max_size=6),
                          lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids,
                                                                                       max_size=3), max_leaves=30),
       limit=st.integers(min_value=1, max_value=6))
def test_flattening_keeps_any_message_valid_json_and_within_the_limit(value: object, limit: int) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": 7, "params": {"arguments": value}})
    out = flatten_deep(line, limit)
    parsed = json.loads(out)
    assert json_depth(out) <= limit
    assert parsed["id"] == 7
    if json_depth(line) <= limit:
        assert out == line
    else:
        assert TOO_DEEP in out
