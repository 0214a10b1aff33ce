"""Segments close early on a long pause, a new strategy or an important result from outside the screen, read from
the records' structure (times, plan revisions, tool names, validator results), never from their words."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.episodes.transcript import OfflineCapsuleLens, OfflineVisualLens, TranscriptConfig
from memory_plane.lifecycle import read_jsonl

from helpers import episode_ledger


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 1, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def ledger(tmp_path: Path, clock: Clock):
    config = TranscriptConfig.from_mapping({"chunking": {"max_steps": 50, "target_source_tokens": 10**6}})
    return episode_ledger(tmp_path, lens=OfflineVisualLens(), config=config, clock=clock,
                          capsule_lens=OfflineCapsuleLens())


def segments(led) -> list[tuple[int, int, str]]:
    return [(r["start"], r["end"], r["reason"]) for r in read_jsonl(led.dir / "steps.jsonl").records
            if r["kind"] == "segment"]


def act(led, clock: Clock, *, gap_s: float = 15, action: str = "tap", args: dict[str, Any] | None = None,
        result: str = "ok", validator: dict[str, Any] | None = None, revision: int | None = None,
        subgoal: str = "g1") -> None:
    clock.now += timedelta(seconds=gap_s)
    led.stage(package="com.a", activity="Main", ui_text=["item"])
    led.commit(action=action, args=args if args is not None else {"x": 10, "y": 20}, result=result,
               validator=validator or {"executed": True}, plan_revision=revision, subgoal_hash=subgoal)


def test_a_long_pause_closes_the_segment_before_the_step_after_it(tmp_path: Path) -> None:
    clock = Clock()
    led, _ = ledger(tmp_path, clock)
    for _ in range(4):
        act(led, clock)
    act(led, clock, gap_s=20 * 60)  # the agent waited twenty minutes (a scheduled task, a user away)
    act(led, clock)
    assert segments(led) == [(1, 4, "pause")]


def test_a_rewritten_plan_for_the_same_subgoal_is_a_new_strategy(tmp_path: Path) -> None:
    clock = Clock()
    led, _ = ledger(tmp_path, clock)
    for _ in range(4):
        act(led, clock, revision=1)
    act(led, clock, revision=2)
    assert segments(led) == [(1, 4, "strategy_change")]


def test_another_tool_after_failed_steps_is_a_new_strategy(tmp_path: Path) -> None:
    clock = Clock()
    led, _ = ledger(tmp_path, clock)
    act(led, clock)
    act(led, clock)
    act(led, clock, validator={"executed": False})
    act(led, clock, validator={"executed": False})
    act(led, clock, action="open_deep_link", args={"uri": "app://settings/sound"})
    assert segments(led) == [(1, 4, "strategy_change")]


def test_a_large_result_from_outside_the_screen_closes_the_segment_after_it(tmp_path: Path) -> None:
    clock = Clock()
    led, _ = ledger(tmp_path, clock)
    act(led, clock)
    act(led, clock)
    act(led, clock, action="read_inbox", args={"limit": 50}, result="\n".join(f"sms {i}: code {i:06d}"
                                                                             for i in range(12000)))
    act(led, clock)
    assert segments(led) == [(1, 3, "external_result")]


def test_ordinary_steps_close_nothing(tmp_path: Path) -> None:
    clock = Clock()
    led, _ = ledger(tmp_path, clock)
    for i in range(10):
        act(led, clock, gap_s=5 + i * 20, revision=1,
            validator={"executed": i % 3 != 0, "facts": ["seen"] if i == 4 else []})
    assert segments(led) == []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 2000), st.booleans()), min_size=1, max_size=14))
def test_one_tool_closes_early_exactly_at_the_long_pauses(tmp_path_factory, steps) -> None:
    # One screen tool, any mix of outcomes and gaps, one plan: the only early closes are the pauses of 300 s or
    # more, each right before the step after it.
    clock = Clock()
    led, _ = ledger(tmp_path_factory.mktemp("p"), clock)
    for gap, ok in steps:
        act(led, clock, gap_s=gap, revision=1, validator={"executed": ok})
    expected = [n for n, (gap, _) in enumerate(steps, start=1) if n > 1 and gap >= 300]
    assert [end + 1 for _, end, _ in segments(led)] == expected
    assert {reason for _, _, reason in segments(led)} <= {"pause"}


def test_a_back_key_or_a_short_answer_is_not_an_external_result(tmp_path: Path) -> None:
    clock = Clock()
    led, _ = ledger(tmp_path, clock)
    act(led, clock)
    act(led, clock, action="back", args={}, result="pressed", validator={"executed": True, "facts": ["list shown"]})
    act(led, clock, action="get_battery", args={"detail": "level"}, result="83%")
    act(led, clock, action="read_inbox", args={"limit": 3}, result="sms: code 482913 " * 60)  # ~270 tokens
    act(led, clock)
    assert segments(led) == [(1, 4, "external_result")]
