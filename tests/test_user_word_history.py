"""The user's word keeps its history: a model save never writes over a memory file of the user's, active or
replaced, and no new memory takes the id of a file of the other source."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane

TEXTS = ("Always pay with Alipay", "Never pay with Alipay", "Never share the OTP code",
         "Never share the OTP code with anyone, not even the bank")


def _files(plane: MemoryPlane) -> dict[str, dict[str, Any]]:
    """Every memory file's record, by id."""
    out = {}
    for item in plane.long_term.iter_items():
        mem = item.record
        assert mem is not None, item
        out[mem.id] = {"source": mem.source, "created_at": mem.created_at, "content": mem.content,
                       "status": mem.status, "type": mem.type}
    return out


def test_the_models_save_of_a_users_replaced_rule_leaves_that_rule_as_the_user_wrote_it(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        lt = plane.long_term
        old = lt.save_memory(type="rule", content="Always pay with Alipay")
        new = lt.save_memory(type="rule", content="Never pay with Alipay")
        assert new.status == "superseded" and new.superseded == [old.id]
        before = _files(plane)[old.id]
        again = lt.save_memory(type="rule", content="Always pay with Alipay", source="model")
        after = _files(plane)
        assert after[old.id] == before  # still the user's, replaced, created when the user said it
        assert again.id != old.id and after[again.id]["source"] == "model"
        assert again.status == "conflicted"  # the user's newer word stands against it
        assert lt.get(new.id).supersedes == old.id and after[new.id]["status"] == "active"
        assert after[old.id]["source"] == "user" and lt.get(old.id).superseded_by == new.id


_SAVE = st.tuples(st.sampled_from(("user", "model")), st.sampled_from(("rule", "fact")), st.sampled_from(TEXTS))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(saves=st.lists(_SAVE, min_size=1, max_size=8))
def test_no_save_writes_over_a_file_of_the_other_source(saves: list[tuple[str, str, str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp, MemoryPlane.open(Path(tmp) / "m") as plane:
        for source, kind, text in saves:
            before = _files(plane)
            res = plane.long_term.save_memory(type=kind, content=text, source=source)
            after = _files(plane)
            for mid, was in before.items():
                now = after[mid]
                theirs = (was["source"] or "user") != source
                taken_over = (source == "user" and was["status"] == "active" and was["content"] == text
                              and res.id == mid and res.status == "saved")  # the user adopting the model's words
                if theirs and not taken_over:
                    assert {k: now[k] for k in ("source", "created_at", "content")} == \
                        {k: was[k] for k in ("source", "created_at", "content")}, (mid, was, now)
                if source == "model" and (was["source"] or "user") == "user" and was["type"] == "rule":
                    assert now["status"] == was["status"]  # the model never retires the user's rule
            if res.status in ("saved", "superseded", "conflicted") and res.id not in before:
                assert after[res.id]["source"] == source and after[res.id]["content"] == text
