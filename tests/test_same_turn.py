"""Same-turn budgets: tool outputs read before a decision are bounded by a soft and a hard limit."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.episodes.transcript import OfflineVisualLens, TranscriptConfig, estimate_text_tokens

from helpers import episode_ledger


def ledger(tmp_path: Path, soft: int = 2000, hard: int = 2800):
    config = TranscriptConfig.from_mapping({"transcript": {"same_turn_soft_tokens": soft,
                                                           "same_turn_hard_tokens": hard}})
    led, ep = episode_ledger(tmp_path, lens=OfflineVisualLens(), config=config, system_prompt="sys")
    led.stage(package="com.a", activity="Main", ui_text=["Inbox", "Search"])
    return led, ep


def output(i: int, lines: int = 80) -> str:
    return "\n".join(f"log {i}.{k}: value {k * 37 % 1000:03d} from the device shell" for k in range(lines))


def tail(led) -> str:
    return next(m for m in led.render() if m.zone == "T").text()


def test_defaults_are_the_designs_20k_and_28k() -> None:
    t = TranscriptConfig().transcript
    assert (t.same_turn_soft_tokens, t.same_turn_hard_tokens) == (20_000, 28_000)


def test_below_the_soft_budget_outputs_are_shown_whole_and_nothing_is_said(tmp_path: Path) -> None:
    led, _ = ledger(tmp_path)
    shown = led.tool_output("read_note", output(1, 20))
    assert shown == output(1, 20) and output(1, 20) in tail(led)
    assert "Same-turn" not in tail(led) and not led.decision_forced


def test_past_the_soft_budget_older_outputs_become_excerpts_and_the_context_says_so(tmp_path: Path) -> None:
    led, ep = ledger(tmp_path)
    led.tool_output("shell", output(1, 120))  # ~1260 tokens
    led.tool_output("shell", output(2, 120))  # past 2000: the first gives way to an excerpt
    t = tail(led)
    assert "Same-turn budget" in t and "Prefer deciding" in t
    assert output(2, 120) in t and output(1, 120) not in t and "log 1.0" in t  # the older: head, tail, file
    assert not led.decision_forced
    refs = list((ep / "transcript" / "envelopes").glob("*.txt"))
    assert any(p.read_text() == output(1, 120) for p in refs)  # the full output stays on disk


def test_at_the_hard_limit_a_decision_is_forced(tmp_path: Path) -> None:
    led, ep = ledger(tmp_path)
    for i in range(1, 4):
        led.tool_output("shell", output(i, 120))
    assert led.decision_forced
    t = tail(led)
    assert "Same-turn hard limit reached" in t and "turn-ending action now" in t
    refused = led.tool_output("shell", output(9, 120))
    assert "not shown" in refused and output(9, 120) not in tail(led)
    assert any(p.read_text() == output(9, 120) for p in (ep / "transcript" / "envelopes").glob("*.txt"))
    # The decision ends the turn: the next one starts with its whole budget, and the step keeps excerpts.
    rec = led.commit(action="tap", args={"x": 1, "y": 2}, result="ok")
    assert rec.same_turn and len(rec.same_turn) == 4 and all("ref" in o for o in rec.same_turn[2:])
    led.stage(package="com.a", activity="Main")
    assert not led.decision_forced and "Same-turn" not in tail(led)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=1, max_size=12), st.integers(200, 3000), st.integers(0, 3000))
def test_a_turn_never_shows_much_more_than_its_hard_limit(tmp_path_factory, sizes, soft, extra) -> None:
    hard = soft + extra
    led, _ = ledger(tmp_path_factory.mktemp("s"), soft=soft, hard=hard)
    for i, n in enumerate(sizes):
        led.tool_output("shell", output(i, n))
    shown = estimate_text_tokens(tail(led))
    # An envelope has a floor (its head and tail lines): one of them and the notes may pass the limit.
    assert shown <= hard + 1200
    assert led.decision_forced == (led.same_turn.used(led._tail_tokens()) >= hard)
