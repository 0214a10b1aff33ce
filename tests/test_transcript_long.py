"""Long tasks: emergencies that compose, bounded layers, exact recall, capsule inputs, records."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memory_plane.episodes.transcript import (
    RECALL_HISTORY_TOOL,
    OfflineVisualLens,
    TranscriptConfig,
    TranscriptLedger,
    estimate_text_tokens,
)

from helpers import episode_ledger


def ledger(tmp_path: Path, capsule_lens: Any = None, **chunking: Any) -> TranscriptLedger:
    cfg = TranscriptConfig.from_mapping({"chunking": chunking, "transcript": {"visual_summaries": False}})
    return episode_ledger(tmp_path, lens=OfflineVisualLens(), config=cfg, system_prompt="sys",
                          capsule_lens=capsule_lens, goal="a long task")[0]


def step(led: TranscriptLedger, n: int, *, facts: list[str] | None = None, recovery: list[dict[str, Any]] = (),
         user: tuple[str, ...] = (), activity: str = "Main", thought: str | None = None,
         notes: tuple[str, ...] = ()) -> None:
    led.stage(package="com.shop", activity=activity, ui_text=[f"item {n}", "Search"], user_instructions=user,
              plan=f"subgoal {n // 20}\n- detail")
    led.commit(action="tap", args={"x": n, "y": 2 * n}, thought=thought or f"step {n}: looking at item {n}",
               result=f"ok {n}", validator={"executed": True, "facts": facts or []},
               failure_recovery=list(recovery), subgoal_hash=f"sg{n // 20}", notes_written=notes)


def in_range(textv: str, n: int) -> bool:
    return f"- Step {n} (" in textv or any(int(a) <= n <= int(b) for a, b in re.findall(r"Steps (\d+)–(\d+)", textv))


def context(led: TranscriptLedger) -> str:
    return "\n".join(m.text() for m in led.render())


# -- 1. a second emergency keeps what the first one kept ---------------------------------------------------------

def test_second_emergency_keeps_the_facts_of_the_first(tmp_path: Path) -> None:
    led = ledger(tmp_path, max_steps=6, target_source_tokens=10**6, context_budget_tokens=6000)
    budget = 6000
    for n in range(1, 61):
        if n in (20, 45):
            led.observe_usage(int(0.95 * budget))  # the runtime measured a prompt past the hard ratio
        step(led, n, facts=["OTP 482913"] if n == 3 else None, user=("use the work account",) if n == 5 else ())
        led.flush(5)
    snaps = [e for e in led.compaction.events if e["kind"] == "snapshot"]
    assert len(snaps) == 2
    assert led.compaction.snapshot is not None and "OTP 482913" in led.compaction.snapshot
    assert 'User @ Step 5: "use the work account"' in led.compaction.snapshot  # never evicted
    assert "OTP 482913" in context(led)
    for n in range(1, 41):  # every folded step is still addressable: a row or a range of the index
        assert in_range(led.compaction.snapshot, n), n
    # Rebuilt from its files, the ledger shows the same F zone (the snapshot's state is persisted).
    again = TranscriptLedger.open(led.dir, lens=OfflineVisualLens(), config=led.config)
    assert again.compaction.snapshot == led.compaction.snapshot
    assert again.compaction.snapshot_state == led.compaction.snapshot_state


# -- 2. the snapshot is bounded and the prompt stays back under the soft ratio -----------------------------------

def test_late_snapshot_is_bounded_and_not_rebuilt_on_the_next_steps(tmp_path: Path) -> None:
    budget = 8000
    led = ledger(tmp_path, max_steps=8, target_source_tokens=10**6, context_budget_tokens=budget)
    for n in range(1, 301):
        if n >= 280 and not led.compaction.snapshot:
            led.observe_usage(int(0.95 * budget))  # until an emergency happens (a fold may relieve the first)
        step(led, n, facts=[f"code C{n:04d}"] if n % 50 == 0 else None)
        if n % 10 == 0:
            led.flush(5)
    snaps = [e for e in led.compaction.events if e["kind"] == "snapshot"]
    assert len(snaps) == 1 and 280 <= snaps[0]["at"] < 290  # and never rebuilt on the steps after it
    assert led.compaction.snapshot is not None
    assert estimate_text_tokens(led.compaction.snapshot) < 0.25 * budget  # not a row for each of 275 steps
    assert snaps[0]["after"] < led.config.chunking.soft_ratio * budget
    for n in range(1, 276):
        assert in_range(led.compaction.snapshot, n), n
    assert all(f"code C{n:04d}" in led.compaction.snapshot for n in (50, 100, 150, 200, 250))


# -- 3. period paragraphs are bounded, numbered and carry their note references ---------------------------------

def test_period_paragraphs_merge_and_every_layer_stays_bounded(tmp_path: Path) -> None:
    budget = 5000
    led = ledger(tmp_path, max_steps=4, target_source_tokens=10**6, context_budget_tokens=budget, max_chunks=2,
                 max_eras=2, max_periods=3, period_max_facts=4)
    worst = 0.0
    for n in range(1, 241):
        step(led, n, facts=[f"fact F{n:03d}"] if n % 10 == 0 else None, notes=(f"notes/n{n}.md",) if n == 7 else (),
             user=("pay by card",) if n == 9 else ())
        led.flush(5)
        worst = max(worst, led.estimated_tokens() / budget)
    periods = [e for e in led.compaction.eras if e.paragraph]
    assert not led.compaction.snapshot and periods
    assert len(periods) <= 3
    assert worst <= led.config.chunking.soft_ratio
    assert led.compaction.frozen_tokens() <= led.config.chunking.frozen_ratio * budget
    first = periods[0].render()
    assert first.startswith("[Era 1") and f"Steps {periods[0].start}–{periods[0].end}" in first
    assert "notes/n7.md" in first and 'User @ Step 9: "pay by card"' in first
    assert len(re.findall(r"fact F\d{3}", first)) <= 4 and "later verified facts" in first
    assert "T+" in first  # its times
    again = TranscriptLedger.open(led.dir, lens=OfflineVisualLens(), config=led.config)
    assert [m.text() for m in again.render() if m.zone == "F"] == [m.text() for m in led.render() if m.zone == "F"]


# -- 4. recall is exact ------------------------------------------------------------------------------------------

def test_recall_range_steps_belong_to_their_rows_after_recovery_and_user_rows(tmp_path: Path) -> None:
    led = ledger(tmp_path, max_steps=100, target_source_tokens=10**6)
    for n in range(1, 21):
        step(led, n, recovery=[{"action": "press back", "why": "popup"}] if n == 3 else (),
             user=("only the blue one",) if n == 4 else ())
    res = led.recall_history(step_range=[1, 12], include_details=True)
    assert [r["step"] for r in res.results] == list(range(1, 13))  # all of them, not at most 5
    for r in res.results:
        assert r["text"].startswith(f"- Step {r['step']} (")
        assert r["details"]["thought"].startswith(f"step {r['step']}:")
    assert "recovery: press back" in res.results[2]["text"] and "only the blue one" in res.results[3]["text"]


def test_recall_query_filters_a_range_and_finds_screens_and_recovery(tmp_path: Path) -> None:
    led = ledger(tmp_path, max_steps=100, target_source_tokens=10**6)
    for n in range(1, 31):
        step(led, n, activity="CheckoutActivity" if n in (8, 22) else "Main",
             recovery=[{"action": "dismiss the rating dialog"}] if n == 15 else ())
    res = led.recall_history(query="CheckoutActivity", step_range=[1, 20])
    assert [r["step"] for r in res.results] == [8]
    assert 15 in [r["step"] for r in led.recall_history(query="rating dialog").results]
    assert 22 in [r["step"] for r in led.recall_history(query="CheckoutActivity").results]


def test_recall_counts_everything_it_returns(tmp_path: Path) -> None:
    led = ledger(tmp_path, max_steps=100, target_source_tokens=10**6)
    led.config.recall.max_text_tokens = 300
    for n in range(1, 8):
        step(led, n, thought=f"step {n}: " + "思考很长的中文推理内容。" * 40)
    res = led.recall_history(step_range=[1, 7], include_details=True)
    assert res.results and estimate_text_tokens(json.dumps(res.to_dict(), ensure_ascii=False)) <= 300


def test_recall_tool_trims_rows_instead_of_replacing_the_answer(tmp_path: Path) -> None:
    from memory_plane import MemoryTools

    led = ledger(tmp_path, max_steps=100, target_source_tokens=10**6)
    led.config.recall.max_text_tokens = 4000
    for n in range(1, 6):
        step(led, n, thought=f"step {n}: " + "在结算页面上查看订单详情和优惠券。" * 30)
    # recall_history reads only the ledger: no plane is needed behind the tools.
    tools = MemoryTools(None, ledger=led, budget_tokens=2000)
    out = tools.call("recall_history", {"step_range": [1, 5], "include_details": True, "max_results": 5})
    assert not out.is_error, out.text
    data = json.loads(out.text)
    assert data["results"] and data["results"][0]["step"] == 1 and data["truncated"]
    assert estimate_text_tokens(out.text) <= 2000


def test_recall_tool_description_says_when_to_recall() -> None:
    d = RECALL_HISTORY_TOOL["description"]
    assert "exact value" in d and "ordinary steps" in d



# -- 6. records as designed ------------------------------------------------------------------------------------

def test_chunk_files_and_headers_carry_the_designed_fields(tmp_path: Path) -> None:
    from memory_plane.lifecycle import parse_frontmatter

    led = ledger(tmp_path, max_steps=4, target_source_tokens=10**6)
    for n in range(1, 10):
        step(led, n)
    led.flush(5)
    files = sorted((led.dir / "chunks").glob("chunk_0001_0004.v*.md"))
    assert files
    meta, body = parse_frontmatter(files[-1].read_text("utf-8"), files[-1])
    assert meta["session_id"] == led.session_id and meta["chunk_number"] == 1
    assert meta["source_step_ids"] == ["step_0001", "step_0002", "step_0003", "step_0004"]
    assert meta["created_at"] and "model" in meta and meta["milestone_title"] == "subgoal 0"
    assert "[Chunk 1 | Steps 1–4 |" in body and "milestone subgoal 0" in body and "milestone sg0" not in body


def test_step_records_keep_refs_point_labels_and_revision_labels(tmp_path: Path) -> None:
    led = ledger(tmp_path)
    led.stage(package="com.a", elements=[{"label": "Photo 1", "bounds": [0, 0, 100, 100]},
                                         {"label": "Trash", "bounds": [0, 900, 100, 1000]}])
    rec = led.commit(action="swipe", args={"start": [50, 50], "end": [50, 950]}, plan_revision="rev-1",
                     native_thinking_ref="transcript/thinking/step_0001.json", post_ui_ref="artifacts/ui_0001.xml")
    assert rec.plan_revision == "rev-1"
    assert rec.native_thinking_ref == "transcript/thinking/step_0001.json"
    assert rec.post_ui_ref == "artifacts/ui_0001.xml"
    assert rec.point_labels == ["Photo 1", "Trash"] and "'Photo 1'→'Trash'" in rec.action_line()
    again = TranscriptLedger.open(led.dir, lens=OfflineVisualLens(), config=led.config)
    assert again.turns[0].record.plan_revision == "rev-1" and again.turns[0].record.point_labels == ["Photo 1", "Trash"]


def test_soft_ratio_moves_where_segments_close() -> None:
    moved = TranscriptConfig.from_mapping({"transcript": {"soft_ratio": 0.8}}).chunking
    assert moved.close_ratio() == 0.8 - 0.1
    assert TranscriptConfig().chunking.close_ratio() == 0.7 - 0.1  # the measured default, unchanged
    pinned = TranscriptConfig.from_mapping({"chunking": {"soft_ratio": 0.8, "segment_close_ratio": 0.5}}).chunking
    assert pinned.close_ratio() == 0.5


# -- 7. the long-task benchmark, shortened -----------------------------------------------------------------------

@pytest.mark.slow
def test_bench_compaction_long_task_short_version() -> None:
    import argparse

    from memory_plane.bench import run_bench

    res = run_bench("compaction", argparse.Namespace(steps=180, budget=12000, lens="offline"))
    assert res["emergency_snapshots"] == 2 and res["snapshots_on_consecutive_steps"] == 0
    assert res["max_prompt_tokens_ratio"] <= 0.70
    assert all(s <= 3 for s in res["steps_back_under_soft_ratio_after_emergency"])
    assert res["prefix_breaks_outside_events"] == 0 and res["orphan_tool_pairs"] == 0
    assert res["recall_answers_checked"] > 0 and res["recall_answers_with_wrong_steps"] == 0
    assert res["facts_retained_in_context"] >= 0.95 and res["facts_retained_with_recall"] == 1.0
