"""bench retrieval-quality: the runtime's public path, leave-one-out, ours beside FTS5 (no shared data needed).

It reaches inside bench/ (`_quality`, `_perturb`) for the metrics and altered goals the bench computes but does not
export.
"""

from __future__ import annotations

from memory_plane.bench._quality import _fts_match, _metrics, _report, evaluate

GOALS = {
    ("Bluecoins", "com.rammigsoftware.bluecoins"): ["How much did I spend on May 3?", "Add an expense of 20 for lunch",
                                                    "What did I spend on taxis this week?", "Show my spending"],
    ("Clock", None): ["Set an alarm for 7 am", "Start a timer for ten minutes", "Turn off the 6 am alarm",
                      "Add a clock for Tokyo"],
    ("哔哩哔哩", None): ["在B站搜一下“巴黎奥运会”", "在B站搜一下“泡面番推荐”", "打开哔哩哔哩看热门视频",
                     "在B站关注老番茄"],
}
TASKS = [{"goal": g, "app": app, "package": pkg} for (app, pkg), goals in GOALS.items() for g in goals]


def test_every_goal_is_asked_through_retrieve_with_its_own_episode_left_out() -> None:
    ev = evaluate(TASKS)
    runs = ev["runs"]
    for name in ("ours", "ours_p5", "strict", "strict_p5", "fts5_trigram", "fts5_unicode61"):
        assert len(runs[name]) == len(TASKS)
        assert all(n not in hits for n, hits in enumerate(runs[name]))  # never the task's own episode
    rep = _report(TASKS, runs, list(range(len(TASKS))))
    ours = rep["ours_strict"]
    # Twelve goals, three apps: the device's own goals tell which app each new goal is about, even with
    # the goal's own episode left out of everything the ranking learns from (the headline protocol).
    # ("Add an expense of 20 for lunch" shares no word with the other spending goals: it has no evidence.)
    assert ours["hit_at_1"] >= 0.8 and ours["precision_at_5"] >= 0.5 and ours["no_right_app_share"] <= 0.2
    assert set(rep["bars"]) == {"precision_at_5", "hit_at_1", "precision_at_2"}
    loose = rep["ours_loose"]
    assert loose["hit_at_1"] >= 0.9 and loose["no_right_app_share"] <= 0.1
    assert set(rep["bars_loose"]) == set(rep["bars"])


def test_the_bars_and_deltas_are_those_of_the_strict_protocol() -> None:
    tasks = [{"goal": "a", "app": "x"}, {"goal": "b", "app": "x"}, {"goal": "c", "app": "y"}]
    right, wrong = [[1], [0], []], [[2], [2], [0]]
    runs = {"strict": wrong, "strict_p5": wrong, "ours": right, "ours_p5": right,
            "fts5_trigram": right, "fts5_unicode61": right}
    rep = _report(tasks, runs, [0, 1, 2])
    assert rep["ours_strict"]["hit_at_1"] == 0.0 and rep["ours_loose"]["hit_at_1"] == round(2 / 3, 3)
    assert rep["bars"] == {"precision_at_5": False, "hit_at_1": False, "precision_at_2": False}
    assert rep["bars_loose"]["hit_at_1"] and rep["delta_vs_trigram"]["hit_at_1"] == round(-2 / 3, 3)


def test_metrics_count_a_missing_hit_as_wrong() -> None:
    tasks = [{"goal": "a", "app": "x"}, {"goal": "b", "app": "x"}, {"goal": "c", "app": "y"}]
    m = _metrics(tasks, [[1], [], [0, 1]], [0, 1, 2])
    assert m["hit_at_1"] == round(1 / 3, 3) and m["precision_at_5"] == round((1 / 5) / 3, 3)
    assert m["mean_hits"] == 1.0 and m["no_right_app_share"] == 0.5  # task 1 had task 0 and was shown nothing


def test_fts_queries_quote_every_term() -> None:
    assert _fts_match('say "hi"', "trigram").count(" OR ") == len({'say', 'ay ', 'y "', ' "h', '"hi', 'hi"'}) - 1
    assert _fts_match("打开 微信", "unicode61") == '"打开" OR "微信"'
    assert _fts_match("", "trigram") == ""


def test_variants_ask_the_altered_goals_of_ours_and_trigram_alike() -> None:
    import pytest

    from memory_plane.bench._perturb import VARIANTS, variant_goals
    from memory_plane.bench._quality import _variant_report, _variants, answerable
    from memory_plane.lifecycle import UsageError

    goals, apps = [t["goal"] for t in TASKS], [t["app"] for t in TASKS]
    for v in VARIANTS:
        once = variant_goals(goals, apps, v)
        assert once == variant_goals(goals, apps, v) and len(once) == len(goals)  # deterministic, one per goal
    assert variant_goals(["Open Bluecoins and show my spending"], ["Bluecoins"], "no_app_name") == [
        "Open and show my spending"]
    assert variant_goals(["Bluecoins"], ["Bluecoins"], "no_app_name") == ["Bluecoins"]  # nothing else left
    assert any(a != b for a, b in zip(goals, variant_goals(goals, apps, "inflection")))
    assert _variants("all") == VARIANTS and _variants(None) == ()
    with pytest.raises(UsageError, match="typos"):
        _variants("typos")
    ev = evaluate(TASKS, loose=False, variants=("typo",))
    runs = ev["runs"]
    assert {"strict@typo", "strict@typo_p5", "fts5_trigram@typo"} <= set(runs)
    assert all(n not in hits for name in ("strict@typo", "fts5_trigram@typo") for n, hits in enumerate(runs[name]))
    rep = _variant_report(TASKS, runs, "typo", answerable(TASKS))
    assert set(rep) == {"ours_strict", "fts5_trigram", "delta_vs_trigram", "bars"}


def test_only_goals_whose_app_has_another_goal_are_asked() -> None:
    from memory_plane.bench._quality import answerable

    tasks = [{"goal": "a", "app": "X"}, {"goal": "b", "app": "x"}, {"goal": "c", "app": "y"}]
    assert answerable(tasks) == [0, 1]


def test_a_set_with_no_answerable_goal_is_reported_not_measured(monkeypatch, tmp_path) -> None:
    import argparse

    from memory_plane.bench import _quality

    sets = {"one-each": [{"goal": "open the map", "app": "Maps", "package": None},
                         {"goal": "play a song", "app": "Music", "package": None}],
            "pairs": TASKS}
    monkeypatch.setattr(_quality, "labelled_sets", lambda data: sets)
    out = _quality.run(argparse.Namespace(data=str(tmp_path), set=None, short=True, variants="no_app_name"))
    assert out["sets"]["one-each"]["queries"] == 0 and "skipped" in out["sets"]["one-each"]
    assert set(out["bars_met_per_set"]) == {"pairs"} and out["pooled"]["queries"] == len(TASKS)
    assert set(out["variant_bars_met"]) == {"pairs"}
