"""The warm path's shortcuts answer what judging every candidate answers.

A retrieve replays the user's rules from a plan made once per index, environment and goal apps
(``_rule_plan``), and leaves out device memories bound to another app before judging them
(``Source.app_bound``). ``explain`` judges every long-term candidate one by one; the reference below also
judges every device candidate. On a store with rules that name apps, expire, were validated at a time,
conflict, do not apply to the language, and device memories whose app field is missing, empty, a number or
of an odd status, every hit, score factor and drop count must be the same, for goals drawn with and without
an app, a quoted name, a foreground app and excluded ids.

It reaches inside retrieval/ to switch its shortcuts off, and the retrieve bench's store builder.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.bench._retrieve import build_store
from memory_plane.lifecycle import IndexFile, collection_lock, init_tree
from memory_plane.retrieval import _sources

from helpers import built_once

NOW = datetime(2026, 11, 2, tzinfo=timezone.utc)
APPS = ["WeChat", "微信", "Settings", "Amazon", "京东", "Alipay", "Maps"]


class Store:
    """A small tree of every kind, its indexes edited into the odd cases above."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="memplane-shortcuts-")
        self.root = Path(self._tmp.name) / "memory"
        init_tree(self.root)
        self.goals = build_store(self.root, 300, 400, 160, None, seed=11)
        self.lt_ids = self._edit("long_term", self._long_term)
        for folder in ("navigation", "ui_anchors", "apps", "procedures", "failures"):
            self._edit(f"device/{folder}", self._device)
        self.plane = MemoryPlane(self.root, clock=lambda: NOW)

    def _edit(self, rel: str, change: Any) -> list[str]:
        index = IndexFile(self.root / rel / "index.yaml")
        entries = [dict(e) for e in index.read().entries]
        for k, e in enumerate(entries):
            change(k, e)
        with collection_lock(self.root / rel):
            index.write(entries)  # written after the item files: each still stands as indexed
        return [e["id"] for e in entries]

    @staticmethod
    def _long_term(k: int, e: dict[str, Any]) -> None:
        if k % 7 == 0:
            e["expires_at"] = "2027-01-01T00:00:00Z" if k % 14 else "2026-10-01T00:00:00Z"
        if k % 11 == 0:
            e["last_validated_at"] = "2026-10-20T00:00:00Z"
        if k % 13 == 0:
            e["status"] = "conflicted"
        if k % 17 == 0:
            e["applicability"] = {"language": "en-US"}
        if k % 5 == 0:
            # "WeChatPay" holds the name WeChat but not its word: a goal naming it reaches the rule only by name.
            e["summary"] = f"In {APPS[k % len(APPS)]}{'Pay' if k % 10 else ''}: {e['summary']}"
        if k % 19 == 0:
            e["source"] = "model"
        if k % 23 == 0:
            e["status"] = "inactive"

    @staticmethod
    def _device(k: int, e: dict[str, Any]) -> None:
        odd: list[Any] = [None, "", 12306, ["wechat"], "wechat"]
        if k % 6 == 0:
            e["app"] = odd[(k // 6) % len(odd)]
        if k % 9 == 0:
            e["status"] = ["Conflicted ", "inactive", "conflicted"][(k // 9) % 3]

    def close(self) -> None:
        self._tmp.cleanup()


store, _cleanup = built_once(Store)


def _seen(plane: MemoryPlane, req: MemoryRetrieveRequest, explain: bool) -> tuple[Any, ...]:
    memory = plane.explain(req) if explain else plane.retrieve(req)
    hits = [h.model_dump() for h in memory.common.all_hits()]
    return hits, dict(sorted(memory.dropped.items())), memory.common.user_rules_left_out, memory.render()


def _judge_every_device_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sources.Source, "app_bound", lambda self, found, apps: found)


goals = st.one_of(
    st.sampled_from(range(200)).map(lambda k: store().goals[k]),
    st.builds(lambda app, words, name: " ".join(x for x in (f"Open {app}" if app else "", words,
                                                            f"'{name}'" if name else "") if x),
              st.sampled_from([None, *APPS]), st.sampled_from(["send a message", "turn on wifi", "check balance",
                                                               "remember", "搜索 商品", ""]),
              st.sampled_from([None, "Zhang San", "机场", "phone", "WeChat", "Settings", "Amazon"])),
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(goal=goals, hint=st.sampled_from([None, "WeChat", "Settings", "京东"]),
       language=st.sampled_from(["zh-CN", "en-US"]), excluded=st.lists(st.integers(0, 159), max_size=4))
def test_the_shortcuts_answer_what_judging_every_candidate_answers(
        goal: str, hint: str | None, language: str, excluded: list[int]) -> None:
    s = store()
    req = MemoryRetrieveRequest(input=goal, exclude_ids=[s.lt_ids[k] for k in excluded],
                                current_hints=CurrentEnvironmentHints(language=language, screen_width=640,
                                                                      screen_height=1200, app=hint))
    warm = _seen(s.plane, req, explain=False)
    with pytest.MonkeyPatch.context() as mp:
        _judge_every_device_candidate(mp)
        reference = _seen(s.plane, req, explain=True)
    assert warm == reference
    assert _seen(s.plane, req, explain=False) == warm  # a plan reused is the plan made


def test_a_rule_saved_after_the_plan_was_made_is_in_the_next_block(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    init_tree(root)
    build_store(root, 50, 40, 60, None, seed=3)
    plane = MemoryPlane(root, clock=lambda: NOW)
    req = MemoryRetrieveRequest(input="check the weather", current_hints=CurrentEnvironmentHints(language="zh-CN"))
    before = plane.retrieve(req)
    assert plane.long_term.save_memory(type="rule", content="Never pay without asking me first",
                                       priority=90).status == "saved"
    after = plane.retrieve(req)
    texts = [h.text for h in after.common.long_term]
    assert any("Never pay without asking me first" in t for t in texts), texts
    assert after.common.user_rules_left_out >= before.common.user_rules_left_out
