"""The simulated phone, the scripted agent and the replay benchmark: deterministic and measured."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from memory_plane import MemoryPlane
from memory_plane.cli import main as cli
from memory_plane.sim import ScriptedAgent, SimPhone, Task, replay_metrics, run_rounds, tasks_for


def _summary(rounds) -> list[tuple]:
    return [(r.task.goal, r.steps, r.true_success, tuple(x for x in r.refs if not x.startswith("ep_")))
            for rnd in rounds for r in rnd.runs]


@pytest.mark.slow
def test_same_seed_same_run(tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        with MemoryPlane.open(tmp_path / f"m{i}") as plane:
            outs.append(_summary(run_rounds(plane, n_tasks=3, seed=2)))
    assert outs[0] == outs[1]


@pytest.mark.slow
def test_metrics_come_from_the_runs(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "a") as plane:
        rounds = run_rounds(plane, n_tasks=3, screen_change=True)
    m = replay_metrics(rounds)
    assert m["steps_first"] == sum(b.steps for b in rounds[1].baselines)
    assert m["steps_second"] == sum(r.steps for r in rounds[1].runs)
    assert m["steps_round1_with_memory"] == sum(r.steps for r in rounds[0].runs)
    assert m["tasks"] == 12
    assert m["step_reduction"] >= 0.5
    assert m["repeat_failure_rate"] == 0 and m["tasks_with_failure_caution"] > 0
    assert m["stale_refs_after_env_change"] == 0
    assert m["steps_after_env_change"] <= 1.1 * m["steps_after_env_change_without_memory"]
    assert m["false_completions"] == 0
    # Without memory the same rounds show no reduction: the figure is measured, not a constant.
    rounds_nomem = run_rounds(None, n_tasks=3)
    assert replay_metrics(rounds_nomem)["step_reduction"] == 0
    # A lying agent is caught as a false completion.
    rounds[0].runs[0].declared_success, rounds[0].runs[0].true_success = True, False
    assert replay_metrics(rounds)["false_completions"] == 1


def test_input_method_rejects_non_ascii_and_pinyin_works() -> None:
    phone = SimPhone()
    phone.call("touch_gesture", {"type": "home"})
    assert not phone.call("keyboard_text", {"text": "微信"}).ok
    res = phone.call("keyboard_text", {"text": "weixin"})
    assert res.ok and "微信" in res.observation["visible_text"]


def test_language_and_resolution_move_and_rename_elements() -> None:
    zh = SimPhone()
    en = SimPhone(language="en-US")
    big = SimPhone(language="en-US", screen=(1080, 2400))
    for p in (zh, en, big):
        p.call("touch_gesture", {"type": "home"})
    assert zh.elements()[0].label == "搜索" and en.elements()[0].label == "Search"
    assert zh.elements()[0].box != en.elements()[0].box != big.elements()[0].box
    assert zh.screenshot()[:3] == b"\xff\xd8\xff"


def test_agent_never_declares_success_without_the_screen(tmp_path: Path) -> None:
    phone = SimPhone()
    with MemoryPlane.open(tmp_path / "m") as plane:
        agent = ScriptedAgent(phone, plane, step_limit=3)
        run = agent.run(Task("打开微信，找到郑十，准备发消息", "chat", "wechat", "郑十"))
        assert not run.declared_success and not run.true_success
        ep = plane.episodes.get(run.episode_id or "")
        assert ep is not None and ep.outcome.failure_phase == "max_iterations"


def test_tasks_are_similar_not_identical_across_rounds() -> None:
    a, b = tasks_for("zh-CN", 0), tasks_for("zh-CN", 1)
    assert [t.kind for t in a][:2] == [t.kind for t in b][:2]
    assert [t.goal for t in a] != [t.goal for t in b]


def test_demo_runs_in_a_fresh_root(tmp_path: Path, capsys) -> None:
    root = tmp_path / "demo" / "memory"
    assert cli(["--root", str(root), "demo", "--tasks", "3"]) == 0
    out = capsys.readouterr().out
    assert "steps without memory" in out and "grep" in out and (root / "episodes" / "index.yaml").exists()
    assert cli(["--root", str(root), "demo"]) == 2  # never overwrites a root that has memory in it


@pytest.mark.slow
@pytest.mark.parametrize("name", ["replay"])
def test_bench_replay_short(name: str) -> None:
    from memory_plane.bench import run_bench

    res = run_bench(name, argparse.Namespace(short=True, seed=0, data=None))
    assert res["step_reduction"] >= 0.5 and res["false_completions"] == 0


@pytest.mark.slow
def test_bench_compaction_with_gemini_lenses_keeps_the_screenshot_bound() -> None:
    # The real SDK against the local fake server; the agent's turn between steps (up to 1 s) is when the
    # summaries of earlier screenshots land, so no more than K + 1 raw screenshots are ever shown.
    from memory_plane.bench import run_bench

    res = run_bench("compaction", argparse.Namespace(steps=60, lens="gemini-fake", turn_seconds=1.0))
    assert res["max_raw_screenshots_in_prompt"] <= res["goal_max_raw_screenshots"]
    assert res["operator_waits"] == 0 and res["orphan_tool_pairs"] == 0
    assert res["max_prompt_tokens_ratio"] <= 0.70
