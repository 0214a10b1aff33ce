"""The event reader that builds simple documents must give exactly what the safe constructor gives.

It reaches inside `lifecycle._yaml` and `_yaml_events`: the fast loader is checked against ruamel's own.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.lifecycle import ParseError, emit_block_yaml, load_yaml
from memory_plane.lifecycle._yaml import MAX_DEPTH, NODE_BUDGET, _CSafeLoader
from memory_plane.lifecycle._yaml_events import FALLBACK, from_events

pytestmark = pytest.mark.skipif(_CSafeLoader is None, reason="needs ruamel.yaml.clib")

SCALARS = ["010", "0o17", "0x1F", "0b101", "1_000", "1e3", "1E-3", ".5", "+1", "-0", "0", "1.", "1.50", ".inf",
           "-.Inf", ".nan", "2026-01-01", "2026-01-01T10:00:00Z", "2026-01-01 10:00:00", "12:30", "12:30:45",
           "yes", "no", "on", "off", "y", "n", "True", "TRUE", "tRUE", "false", "Null", "NULL", "null", "~",
           "<<", "=", "-1.5", "1.5e3", "0.0000001", "123456789012345678901234567890", "-12", "007", "+.5",
           "3.14159265358979323846", "1,000", "0.", "-", "a:b", "微信", "- x", "? x", "'q'", '"q"', "#c", "x #c",
           "!!str 5", "!!int '5'", "!!float 1", "!!binary aGk=", "!!set {a, b}", "&a x", "@x", "`x", "%x", ""]


def constructed(text: str) -> Any:
    loader = _CSafeLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def fast(text: str) -> Any:
    loader = _CSafeLoader(text)
    try:
        return from_events(loader, NODE_BUDGET, MAX_DEPTH)
    finally:
        loader.dispose()


def same(text: str) -> None:
    try:
        want: Any = constructed(text)
    except Exception as exc:
        with pytest.raises(type(exc)):
            got = fast(text)
            if got is FALLBACK:
                constructed(text)
        return
    got = fast(text)
    if got is not FALLBACK:
        assert repr(got) == repr(want), text
        assert type(got) is type(want)


@pytest.mark.parametrize("scalar", SCALARS)
def test_every_kind_of_scalar_reads_as_the_constructor_reads_it(scalar: str) -> None:
    for text in (f"k: {scalar}\n", f"- {scalar}\n", f"{scalar}: v\n", f"k: [{scalar}]\n", f"k: {{a: {scalar}}}\n",
                 f"{scalar}\n"):
        same(text)


def test_documents_the_reader_leaves_to_the_constructor() -> None:
    for text in ["a: &x 1\nb: *x\n", "a: 1\na: 2\n", "base: &b {x: 1}\nd:\n  <<: *b\n", "? [a]\n: 1\n",
                 "--- 1\n--- 2\n", "a: !!set {x, y}\n", "1: a\ntrue: b\n", "k: 2026-01-01\n"]:
        assert fast(text) is FALLBACK, text
        same(text)


def test_nesting_past_the_limit_is_still_a_bomb() -> None:
    deep = "a: " + "[" * 80 + "]" * 80 + "\n"
    with pytest.raises(ParseError):
        load_yaml(deep, "deep.yaml")


values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20) | st.sampled_from(SCALARS),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=4),
    max_leaves=20)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=10), values, max_size=6))
def test_what_the_project_writes_reads_back_the_same_either_way(doc: dict[str, Any]) -> None:
    same(emit_block_yaml(doc))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*SCALARS, "k:", "  - ", "- ", "\n", ": ", "a", " ", "{", "}", "[", "]", ","]),
                max_size=12))
def test_hand_typed_fragments_read_the_same_or_fail_the_same(parts: list[str]) -> None:
    same("".join(parts))


def _nested(depth: int, width: int) -> str:
    """A document ``depth`` lists deep whose innermost list holds ``width`` scalars (flow style)."""
    return "a: " + "[" * depth + ", ".join(["x"] * width) + "]" * depth + "\n"


@settings(max_examples=200, deadline=None)
@given(st.integers(0, MAX_DEPTH + 3), st.integers(0, 40), st.integers(NODE_BUDGET // 2, NODE_BUDGET + 10))
def test_a_document_built_from_events_is_within_the_budget_the_walk_would_check(depth: int, width: int,
                                                                               budget: int) -> None:
    # What load_yaml no longer walks again: a document the event reader built (under any node budget) never
    # breaks the node or depth limit that check_budget enforces.
    from memory_plane.lifecycle._yaml import check_budget

    for text in (_nested(depth, width), emit_block_yaml({"k": [{"a": ["x"] * width}] * (depth + 1)})):
        loader = _CSafeLoader(text)
        try:
            got = from_events(loader, budget, MAX_DEPTH)
        finally:
            loader.dispose()
        if got is not FALLBACK:
            check_budget(got, "doc.yaml")  # raises if a built document broke a limit


def test_a_simple_document_is_not_walked_again_and_an_alias_bomb_still_is(monkeypatch) -> None:
    import memory_plane.lifecycle._yaml as yaml_mod

    walked: list[Any] = []
    real = yaml_mod.check_budget
    monkeypatch.setattr(yaml_mod, "check_budget", lambda obj, path=None: (walked.append(obj), real(obj, path)))
    assert load_yaml("id: x\nrefs:\n  - a\n  - b\n", "item.yaml") == {"id": "x", "refs": ["a", "b"]}
    assert walked == []  # built from events: counted as it was built
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdef", "bcdefg"))
    with pytest.raises(ParseError):  # aliases go through the constructor, and its result is walked
        load_yaml(bomb, "bomb.yaml")
    assert walked
