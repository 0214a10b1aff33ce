"""Layered compaction: triggers, capsule checks, gated swap, eras, periods, snapshot, recall, hints.

It reaches inside bench/ for the FIFO watchdog the named-pipe test shares with the shape fuzzer.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memory_plane.episodes.transcript import (
    RECALL_HISTORY_TOOL,
    Capsule,
    OfflineCapsuleLens,
    OfflineVisualLens,
    TranscriptConfig,
    TranscriptLedger,
    check_capsule,
    coverage_problem,
)
from memory_plane.lifecycle import UsageError

from helpers import episode_ledger, screenshot


def cfg(**chunking) -> TranscriptConfig:
    return TranscriptConfig.from_mapping({"chunking": chunking})


def make(tmp_path: Path, config: TranscriptConfig, capsule_lens=None) -> tuple[TranscriptLedger, Path]:
    return episode_ledger(tmp_path, lens=OfflineVisualLens(), config=config, system_prompt="sys",
                          capsule_lens=capsule_lens, goal="test goal")


def step(led: TranscriptLedger, ep: Path, n: int, *, package: str = "com.a", subgoal: str | None = None,
         boundary: str | None = None, facts: list[str] | None = None, recovery=None, user=(), notes=(),
         dhash: str | None = None) -> None:
    ref = f"artifacts/step_{n:03d}.jpg"
    (ep / ref).write_bytes(screenshot(f"c{n}", (200, 400)))
    led.stage(screenshot=ref, width=200, height=400, package=package, activity="P", ui_text=[f"item {n}"],
              user_instructions=user, dhash=dhash)
    led.commit(action="tap", args={"x": n, "y": n}, thought=f"thinking about step {n} " * 8, result=f"ok {n}",
               validator={"executed": True, "facts": facts or []}, subgoal_hash=subgoal, boundary=boundary,
               failure_recovery=recovery or [], notes_written=notes)


def addressable(textv: str, n: int) -> bool:
    """Step n has its own row, or lies in a "Steps a–b" range of the text."""
    import re

    return f"- Step {n} (" in textv or any(int(a) <= n <= int(b) for a, b in re.findall(r"Steps (\d+)–(\d+)", textv))


def segments(led: TranscriptLedger) -> list[tuple[int, int, str]]:
    from memory_plane.lifecycle import read_jsonl

    return [(r["start"], r["end"], r["reason"]) for r in read_jsonl(led.dir / "steps.jsonl").records
            if r["kind"] == "segment"]


def test_size_trigger_closes_at_max_steps(tmp_path: Path) -> None:
    led, ep = make(tmp_path, cfg(max_steps=6, target_source_tokens=10**6))
    for n in range(1, 14):
        step(led, ep, n)
    assert segments(led)[:2] == [(1, 6, "size"), (7, 12, "size")]


def test_milestone_boundary_needs_a_stamped_step(tmp_path: Path) -> None:
    led, ep = make(tmp_path, cfg(max_steps=100, target_source_tokens=10**6))
    for n in range(1, 4):
        step(led, ep, n, subgoal="login")
    led.plan_event("settings")  # a plan write: only a hint
    step(led, ep, 4, subgoal="login")  # the next stamped step says the plan did not really move
    assert segments(led) == []
    step(led, ep, 5, subgoal="settings")
    assert segments(led) == [(1, 4, "milestone")]


@pytest.mark.parametrize(("kw", "reason", "end"), [
    ({"package": "com.b"}, "package_change", 3),
    ({"boundary": "goal_change"}, "goal_change", 3),
    ({"boundary": "irreversible"}, "irreversible", 4),
])
def test_boundary_events(tmp_path: Path, kw: dict, reason: str, end: int) -> None:
    led, ep = make(tmp_path, cfg(max_steps=100, target_source_tokens=10**6))
    for n in range(1, 4):
        step(led, ep, n)
    step(led, ep, 4, **kw)
    assert segments(led) == [(1, end, reason)]


def test_recovery_boundary(tmp_path: Path) -> None:
    led, ep = make(tmp_path, cfg(max_steps=100, target_source_tokens=10**6))
    step(led, ep, 1)
    step(led, ep, 2, recovery=[{"action": "dismiss dialog"}])
    step(led, ep, 3)
    assert segments(led) == [(1, 2, "recovery_boundary")]


def test_soft_threshold_closes_and_keeps_min_active(tmp_path: Path) -> None:
    led, ep = make(tmp_path, cfg(max_steps=100, target_source_tokens=10**6, context_budget_tokens=3000))
    for n in range(1, 30):
        step(led, ep, n)
        led.flush(5)
    assert any(reason == "soft_threshold" for _, _, reason in segments(led))
    raw = [m.step for m in led.render() if m.zone == "A" and m.role == "user"]
    assert len(raw) >= 5 and raw[-1] == 29  # min_active_steps stay raw


def test_capsule_checks_reject_gaps_overlaps_and_missing_notes(tmp_path: Path) -> None:
    assert coverage_problem(["- Steps 1–3: a", "- Step 5: b"], 1, 5) == "steps not covered: [4]"
    assert "twice" in (coverage_problem(["- Steps 1–3: a", "- Steps 3–5: b"], 1, 5) or "")
    assert "outside" in (coverage_problem(["- Steps 1–6: a"], 1, 5) or "")
    assert coverage_problem(["- Steps 1–4: a", "- Step 5: b"], 1, 5) is None
    led, ep = make(tmp_path, cfg())
    step(led, ep, 1, notes=["notes/login_flow.md"])
    rec = led.turns[0].record
    assert check_capsule(Capsule(intervals=["- Step 1: x"]), [rec]) is not None  # note key missing in ①
    assert check_capsule(OfflineCapsuleLens().capsule([rec], {}), [rec]) is None


class BadThenGoodLens:
    name = "flaky"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.calls = 0

    def capsule(self, records, summaries):
        self.calls += 1
        self.gate.wait(10)
        cap = OfflineCapsuleLens().capsule(records, summaries)
        if self.calls == 1:
            cap.intervals = cap.intervals[:-1]  # a gap: must be rejected and retried
        return cap


def test_swap_waits_for_a_ready_capsule(tmp_path: Path) -> None:
    lens = BadThenGoodLens()
    led, ep = make(tmp_path, cfg(max_steps=4, target_source_tokens=10**6, context_budget_tokens=4000), lens)
    for n in range(1, 16):
        step(led, ep, n)
    assert led.compaction.folded_until == 0  # capsules not ready: raw turns stay
    assert any(m.step == 1 for m in led.render() if m.zone == "A")
    lens.gate.set()
    led.flush(10)
    for n in range(16, 20):
        step(led, ep, n)
    assert led.compaction.folded_until >= 4 and lens.calls >= 2
    f = "\n".join(m.text() for m in led.render() if m.zone == "F")
    assert "Steps 1–4" in f or "Step 1 (" in f


def test_era_merge_and_period_paragraph_keep_ranges_and_user_rows(tmp_path: Path) -> None:
    led, ep = make(tmp_path, cfg(max_steps=3, target_source_tokens=10**6, context_budget_tokens=2600,
                                 max_chunks=2, max_eras=1))
    for n in range(1, 41):
        step(led, ep, n, user=["use the work account"] if n == 2 else (), facts=["OTP 482913"] if n == 4 else None)
        led.flush(5)
    f = "\n".join(m.text() for m in led.render() if m.zone == "F")
    assert led.compaction.eras and any(e.paragraph for e in led.compaction.eras)
    para = next(e for e in led.compaction.eras if e.paragraph).render()
    first_period = next(e for e in led.compaction.eras if e.paragraph)
    assert f"Steps {first_period.start}–" in para and "recall_history(step_range=" in para
    assert 'User @ Step 2: "use the work account"' in f  # never evicted, even from a period paragraph
    assert "OTP 482913" in f


def test_every_step_addressable_at_every_level(tmp_path: Path) -> None:
    led, ep = make(tmp_path, cfg(max_steps=3, target_source_tokens=10**6, context_budget_tokens=2500,
                                 max_chunks=3, max_eras=8))
    for n in range(1, 41):
        step(led, ep, n)
        led.flush(5)
    assert led.compaction.eras and not any(e.paragraph for e in led.compaction.eras)
    context = "\n".join(m.text() for m in led.render())
    raw_steps = {m.step for m in led.render() if m.zone == "A" and m.step}
    for n in range(1, 41):
        assert f"- Step {n} (" in context or n in raw_steps, n
    rows = led.recall_history(step_range=[10, 12]).results
    assert [r["step"] for r in rows] == [10, 11, 12] and all(r["kind"] == "ledger" for r in rows)


def test_emergency_snapshot_keeps_a_step_index(tmp_path: Path) -> None:
    led, ep = make(tmp_path, cfg(max_steps=100, target_source_tokens=10**6, context_budget_tokens=1200,
                                 soft_ratio=0.95, hard_ratio=0.5))
    for n in range(1, 25):
        step(led, ep, n, facts=["OTP 482913"] if n == 3 else None)
    assert led.compaction.snapshot and "[Session snapshot]" in led.compaction.snapshot
    assert "overall_goal: test goal" in led.compaction.snapshot and addressable(led.compaction.snapshot, 3)
    assert "OTP 482913" in led.compaction.snapshot  # carried through every later snapshot
    raw = [m.step for m in led.render() if m.zone == "A" and m.role == "user"]
    assert len(raw) >= 5
    again = TranscriptLedger.open(led.dir, lens=OfflineVisualLens(), config=led.config)
    assert [m.key() for m in again.render() if m.zone != "T"] == [m.key() for m in led.render() if m.zone != "T"]


def test_recall_bounds_and_usage_errors(tmp_path: Path) -> None:
    led, ep = make(tmp_path, cfg())
    for n in range(1, 12):
        step(led, ep, n, facts=[f"fact number {n}"])
    led.flush(5)
    with pytest.raises(UsageError):
        led.recall_history()
    res = led.recall_history(query="fact number", max_results=50)
    assert 0 < len(res.results) <= 5 and all("step" in r for r in res.results)
    res = led.recall_history(query="fact number 7", include_images=True)
    assert res.results[0]["step"] == 7 and res.images == ["artifacts/step_007.jpg"]
    (ep / "artifacts" / "step_007.jpg").unlink()
    assert led.recall_history(query="fact number 7", include_images=True).images == []  # only files that exist
    big = led.recall_history(step_range=[1, 11], include_details=True)
    from memory_plane.episodes.transcript import estimate_text_tokens

    assert sum(estimate_text_tokens(str(r)) for r in big.results) <= 2600
    assert RECALL_HISTORY_TOOL["name"] == "recall_history" and "step_range" in RECALL_HISTORY_TOOL["parameters"][
        "properties"]


def test_similarity_hint_fires_and_stays_silent(tmp_path: Path) -> None:
    led, ep = make(tmp_path, cfg())
    def h(n: int) -> str:
        return f"{(n * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF:016x}"  # far apart for different n

    for n in range(1, 10):
        step(led, ep, n, dhash=h(n))

    def tail() -> str:
        return next(m for m in led.render() if m.zone == "T").text()

    near_2 = f"{int(h(2), 16) ^ 0b101:016x}"  # two bits away from step 2's screen
    led.stage(screenshot=None, dhash=near_2)
    assert "closely resembles the screen of Step 2" in tail()
    led.stage(screenshot=None, dhash=h(8))  # one of the last 3 steps: no hint
    assert "resembles" not in tail()
    led.stage(screenshot=None, dhash=f"{int(h(2), 16) ^ 0xFFFF:016x}")  # 16 bits away: too far
    assert "resembles" not in tail()


def test_a_pipe_in_place_of_a_chunk_is_a_named_missing_chunk_not_a_hang(tmp_path: Path) -> None:
    # A cold start reads each folded chunk back; a named pipe left where one was would block that read forever.
    import os

    from memory_plane.bench._fuzz_shapes import release_fifos, watchdog
    from memory_plane.lifecycle import NotAFileError

    led, ep = make(tmp_path, cfg(max_steps=3, target_source_tokens=10**6, context_budget_tokens=2600))
    for n in range(1, 21):
        step(led, ep, n)
    led.flush(10)
    assert led.compaction.folded_until > 0
    chunk = sorted((led.dir / "chunks").glob("*.md"))[0]
    chunk.unlink()
    os.mkfifo(chunk)
    try:
        with watchdog(10), pytest.raises(NotAFileError, match=chunk.name):
            TranscriptLedger.open(led.dir, lens=OfflineVisualLens())
    finally:
        release_fifos(tmp_path)


def _chunk(start: int, end: int, capsule: Capsule | None, title: str | None = None):
    from memory_plane.episodes.transcript import Chunk

    return Chunk(start, end, f"T+00:{start:02d}", f"T+00:{end:02d}", "size", capsule,
                 [f"- Step {n} (T+00:{n:02d}): tap" for n in range(start, end + 1)], [], milestone_title=title)


def test_period_paragraph_tells_the_first_sentence_of_each_did_and_the_first_four_facts() -> None:
    from memory_plane.episodes.transcript import Era

    a = Capsule(doing="Open the settings to change the ringtone", did="I opened Settings via the gear. Then I "
                "scrolled twice past Display.", verified_facts=["fact A1", "fact A2", "fact A3"])
    b = Capsule(doing="Pick a ringtone", did="我进入了铃声页面。随后试听了三首。",
                verified_facts=["fact B1", "fact B2", "fact B3"])
    era = Era([_chunk(1, 4, a), _chunk(5, 8, None, title="Sound settings"), _chunk(9, 12, b)], paragraph=True,
              number=1)
    para = era.render()
    head = para.splitlines()[0]
    # The first sentence of each chunk's "did" (a missing capsule gives its milestone title), not "doing".
    assert "I opened Settings via the gear" in head and "Then I scrolled" not in head
    assert "我进入了铃声页面" in head and "随后试听了三首" not in head
    assert "Sound settings" in head and "Pick a ringtone" not in head
    assert head.count("Open the settings to change the ringtone") == 1  # the era's doing: the first one said
    # The first four verified facts, in the order they were established.
    assert "fact A1; fact A2; fact A3; fact B1" in head and "fact B2" not in head and "fact B3" not in head
    assert "Steps 1–12" in head and "T+00:01 → T+00:12" in head


def test_a_failed_capsule_keeps_its_raw_turns_under_soft_pressure(tmp_path: Path) -> None:
    class Down:
        name = "down"

        def capsule(self, records, summaries):  # type: ignore[no-untyped-def]
            raise RuntimeError("model unavailable")

    config = cfg(max_steps=4, target_source_tokens=10**6, context_budget_tokens=4000, soft_ratio=0.2,
                 hard_ratio=0.99)
    led, ep = make(tmp_path, config, capsule_lens=Down())
    for n in range(1, 11):
        step(led, ep, n)
        led.flush(5)
    assert led.prompt_tokens() >= config.chunking.close_ratio() * 4000  # past the soft close point ...
    assert led.prompt_tokens() < config.chunking.hard_ratio * 4000  # ... not at the hard limit
    # The segment whose summary failed is not replaced by a fallback: its raw turns stay in the transcript.
    raw = {m.step for m in led.render() if m.zone == "A"}
    assert {1, 2, 3, 4} <= raw and led.compaction.folded_until == 0
    assert not led.compaction.snapshot
