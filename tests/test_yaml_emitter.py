"""The fast block emitter: everything it writes loads back to the same data (hypothesis).

It reaches inside `lifecycle._yaml` for the float rounding and to forbid its comment-keeping path.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.lifecycle import dump_yaml, emit_block_yaml, load_yaml
from memory_plane.lifecycle._yaml import round_float

keys = st.text(min_size=1, max_size=12)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40))
data = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(keys, inner, max_size=4)), max_leaves=20)


def _rounded(v: object) -> object:
    if isinstance(v, float):
        return round_float(v)
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.dictionaries(keys, data, max_size=6))
def test_emitter_roundtrips(d: dict) -> None:
    # Floats come back as written: to 15 significant digits (0.1 + 0.2 is stored 0.3).
    assert load_yaml(emit_block_yaml(d)) == _rounded(d)


def test_float_noise_is_not_written() -> None:
    text = emit_block_yaml({"c": 0.1 + 0.2, "d": 0.85 + 2e-16, "e": 1000000000001.0})
    assert text == "c: 0.3\nd: 0.85\ne: 1000000000001.0\n"


def test_tricky_strings_stay_strings() -> None:
    d = {"a": "yes", "b": "2026-01-01T00:00:00Z", "c": "1e3", "d": "- x", "e": "#x", "f": "a: b", "g": "0x10",
         "h": "", "i": " lead", "j": "微信 登录", "k": "multi\nline", "l": "null", "m": "12:30", "n": "@x",
         "o": "\u2028", "p": "\x85", "q": "'q'", "r": "[1]", "s": "{a}", "t": "*ref", "u": "&a", "v": "!tag"}
    text = emit_block_yaml(d)
    assert load_yaml(text) == d
    assert "j: 微信 登录" in text


def test_untouched_files_use_fast_path_and_edited_ones_keep_comments() -> None:
    d = {"id": "x", "type": "procedure", "n": 1}
    fast = dump_yaml(d, emit_block_yaml({"id": "x", "type": "procedure", "n": 0}))
    assert fast == emit_block_yaml(d)
    edited = "type: procedure  # mine\nid: x\nn: 0\n"
    out = dump_yaml(d, edited)
    assert "# mine" in out and out.index("type") < out.index("id:")


def test_a_hash_in_a_value_is_not_a_comment(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # "Call #3" in a file the emitter wrote: rewritten by the emitter, not by the comment-keeping path.
    import memory_plane.lifecycle._yaml as y

    def no_round_trip():  # type: ignore[no-untyped-def]
        raise AssertionError("the comment-keeping rewrite was used")

    old = emit_block_yaml({"id": "x", "title": "Call #3", "tags": ["#work"], "count": 0})
    new = {"id": "x", "title": "Call #3", "tags": ["#work"], "count": 1}
    monkeypatch.setattr(y, "_rt", no_round_trip)
    assert dump_yaml(new, old) == emit_block_yaml(new)
    monkeypatch.undo()
    commented = old.replace("count: 0", "count: 0  # counted by hand")
    assert commented != old
    assert "# counted by hand" in dump_yaml(new, commented)


def test_noncharacters_are_escaped() -> None:
    from memory_plane.lifecycle import format_entry, parse_index

    d = {"\ufffe": "\uffff", "k": "a\ufffeb"}
    assert load_yaml(emit_block_yaml(d)) == d
    entry = {"id": "x", "title": "a\ufffe\uffffb"}
    assert load_yaml(format_entry(entry)) == [entry] and parse_index(format_entry(entry)).entries == [entry]
