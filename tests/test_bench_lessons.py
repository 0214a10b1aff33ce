"""bench lessons: the report's shape, and each metric computed right on hand-made stores and paths.

It reaches inside bench/ for each metric's function: the bench prints the figures, the functions are not exported.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from memory_plane import MemoryPlane
from memory_plane.bench._blame import culprits, demotions, run_scenario
from memory_plane.bench._lesson_paths import Token, action_tokens, lcs_closeness, procedure_tokens, token
from memory_plane.bench._lessons import (
    DATA_FILE,
    asked,
    audit,
    audit_traces,
    evaluate_split,
    read_rows,
    row_asked,
    row_truth,
    run,
)
from memory_plane.device_memory import Calibration, Navigation, Procedure, ProcedureStep, UiAnchor
from memory_plane.episodes import EpisodeRecorder, pair_steps
from memory_plane.lifecycle import EvidenceRef

from conftest import SHARED_DATA

ALARM = "Set an alarm for 7 am in the clock app"
SOUND = "Change the sound of the meeting alarm to Bright Morning"
ALICE = "Send a message to Alice saying hi"
BOB = "Send a message to Bob saying hi"


def _episode(plane: MemoryPlane, goal: str, actions: list[tuple[str, dict[str, Any]]], target: str | None = None,
             episode_id: str | None = None) -> str:
    """An episode written to the store with its events, without extraction (the test makes the lessons)."""
    rec = EpisodeRecorder(plane.episodes, goal, normalized_goal={"intent": "x", "app": "Clock", "target": target},
                          clock=plane.clock, episode_id=episode_id)
    for tool, ti in actions:
        rec.tool_call(tool, ti, content=f"{tool} step")
        rec.tool_result(tool, output="ok", observed_state={"app": "Clock"})
    ep = rec.finish(success=True)
    ep.status = "active"
    plane.episodes.write(ep)
    ep.committed()
    return ep.id


def _steps(actions: list[tuple[str, dict[str, Any]]]) -> list[ProcedureStep]:
    out = []
    for tool, ti in actions:
        coords = f"x={ti['x']},y={ti['y']}" if "x" in ti else None
        out.append(ProcedureStep(tool=tool, action=ti.get("app") or ti.get("button"), coords=coords,
                                 text=ti.get("text"), description=f"{tool} step"))
    return out


def _proc(plane: MemoryPlane, pid: str, goals: list[str], steps: list[ProcedureStep], evidence: list[str],
          target: str | None = None) -> None:
    p = plane.device.new_item(Procedure, pid, app_id="clock", app_name="Clock", title=f"Clock: {pid}",
                              goal_examples=goals, steps=steps, steps_target=target)
    for eid in evidence:
        p.add_evidence(EvidenceRef(type="episode", id=eid))
    plane.device.collection("procedure").save(p)


ALARM_PATH = [("launch_app", {"app": "Clock"}), ("tap", {"x": 100, "y": 200}), ("tap", {"x": 500, "y": 900})]
SOUND_PATH = [("launch_app", {"app": "Clock"}), ("tap", {"x": 540, "y": 1348}), ("tap", {"x": 623, "y": 1988})]


def test_a_procedure_showing_another_tasks_path_is_counted_cross_task(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        a = _episode(plane, ALARM, ALARM_PATH)
        s = _episode(plane, SOUND, SOUND_PATH)
        alice = _episode(plane, ALICE, [("keyboard_text", {"text": "Alice"})], target="Alice")
        bob = _episode(plane, BOB, [("keyboard_text", {"text": "Bob"})], target="Bob")
        # The case that prompted it: the alarm goal's title over the sound task's steps (both goals as examples).
        _proc(plane, "proc_merged", [SOUND, ALARM], _steps(SOUND_PATH), [s, a])
        _proc(plane, "proc_alarm", [ALARM], _steps(ALARM_PATH), [a])
        # One path over a variable target: the same once the contact is masked, so not cross-task.
        _proc(plane, "proc_message", [ALICE, BOB], _steps([("keyboard_text", {"text": "Bob"})]), [alice, bob],
              target="Bob")
        # A tap 30 px off is the same path (the closeness rule), but the steps of no episode at all are not.
        near = [ALARM_PATH[0], ("tap", {"x": 130, "y": 220}), ALARM_PATH[2]]
        _proc(plane, "proc_near", [ALARM], _steps(near), [a])
        _proc(plane, "proc_made_up", [SOUND], _steps([("tap", {"x": 5, "y": 5})]), [s])
        _proc(plane, "proc_empty", [SOUND], [], [])
    rep = audit(root)
    assert rep["procedures"] == 6
    assert rep["cross_task"] == 2  # proc_merged (ALARM's episode took another path) and proc_made_up
    assert {x["id"] for x in rep["cross_task_examples"]} == {"proc_merged", "proc_made_up"}
    merged = next(x for x in rep["cross_task_examples"] if x["id"] == "proc_merged")
    assert merged["goals_off_path"] == [ALARM]
    assert rep["steps_of_no_named_goal"] == 1  # only proc_made_up matches no named goal's path
    assert rep["steps_of_no_evidence_episode"] == 1
    assert rep["traced_by_type"]["procedure"] == {"items": 6, "traced": 0, "untraced": 6, "episode_refs": 7,
                                                  "episode_refs_with_event_ids": 0}
    assert rep["traced"]["all_traced"] is False


def test_traced_counts_items_whose_every_episode_ref_names_event_ids(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        coll = plane.device.collection("calibration")
        for cid, refs in (("cal_a", [["ev_1", "ev_2"]]), ("cal_b", [["ev_1"], []]), ("cal_c", [])):
            c = plane.device.new_item(Calibration, cid, coord_space="pixels")
            for n, ids in enumerate(refs):
                c.add_evidence(EvidenceRef(type="episode", id=f"ep_{cid}_{n}", event_ids=ids))
            c.add_evidence(EvidenceRef(type="outcome", id="ep_other"))  # an outcome ref names no events
            coll.save(c)
        per_type = audit_traces(plane)
    assert per_type["calibration"] == {"items": 3, "traced": 1, "untraced": 2, "episode_refs": 3,
                                       "episode_refs_with_event_ids": 2}


def test_path_closeness_is_a_normalised_lcs_of_action_type_and_target_words() -> None:
    person = action_tokens([
        {"tool": "launch_app", "input": {"app": "Clock"}, "description": "open the clock app"},
        {"tool": "tap", "input": {"x": 10, "y": 10}, "description": "click on the alarm tab"},
        {"tool": "keyboard_text", "input": {"text": "7 am"}, "description": "type 7 am"},
        {"tool": "swipe", "input": {"start": [540, 1800], "end": [540, 600]}, "description": "swipe up"},
    ])
    proc = Procedure(id="proc_x", steps=[
        ProcedureStep(tool="launch_app", action="Clock"),
        ProcedureStep(tool="tap", coords="x=900,y=900", description="Tap the Alarm tab"),  # same words, far away
        ProcedureStep(tool="tap", description="select the sound option"),
        ProcedureStep(tool="swipe", action="up"),
    ])
    # open, alarm tab and swipe up match (3); the typed time has no partner; over the longer length 4.
    assert lcs_closeness(procedure_tokens(proc), person) == 0.75
    assert lcs_closeness(person, person) == 1.0
    assert lcs_closeness([], []) is None and lcs_closeness(person, []) == 0.0
    # Without target words, taps match by the closeness rule of their points.
    def tap(xy: str) -> list[Token]:
        return [token("tap", None, None, None, xy)]

    assert lcs_closeness(tap("x=10,y=10"), tap("x=40,y=20")) == 1
    assert lcs_closeness(tap("x=10,y=10"), tap("x=99,y=10")) == 0


def test_the_split_is_a_stable_hash_of_the_episode_near_one_in_five() -> None:
    goals = [f"goal number {i}" for i in range(2000)]
    share = sum(map(asked, goals)) / len(goals)
    assert 0.17 < share < 0.23
    assert [asked(g) for g in goals[:50]] == [asked(g) for g in goals[:50]]
    assert asked("Open the clock app") is asked("Open the clock app")


def test_demotions_read_status_confidence_and_conflict_lines() -> None:
    before = {"a": ("navigation", "active", 0.8), "b": ("procedure", "active", 0.8),
              "c": ("calibration", "active", 0.8), "d": ("app_profile", "active", 0.8),
              "e": ("failure", "conflicted", 0.5)}
    after = {"a": ("navigation", "conflicted", 0.8), "b": ("procedure", "active", 0.65),
             "c": ("calibration", "active", 0.85), "d": ("app_profile", "active", 0.8),
             "e": ("failure", "active", 0.6), "new": ("failure", "active", 0.8)}
    lines = [{"ids": ["d", "new"], "decision": "conflicted"}, {"ids": ["c"], "decision": "active"}]
    assert demotions(before, after, lines) == {"a", "b", "d"}


def test_culprits_follow_the_designs_rule_on_the_episodes_own_steps(root: Path) -> None:
    def call(n: int, tool: str, ti: dict[str, Any], page: str, visible: list[str]) -> list[dict[str, Any]]:
        return [{"type": "tool_call", "event_id": f"c{n}", "tool_name": tool, "tool_input": ti},
                {"type": "tool_result", "event_id": f"r{n}", "tool_name": tool,
                 "observed_state": {"app": "A", "page": page, "visible_text": visible}}]

    events = [*call(1, "launch_app", {"app": "A"}, "P1", ["Go", "Menu"]),
              *call(2, "mouse_click", {"x": 12, "y": 10}, "P3", ["Back"]),  # said P2, went to P3
              *call(3, "mouse_click", {"x": 500, "y": 500}, "P4", ["Done"])]  # went where the rule says
    steps = pair_steps(events)
    with MemoryPlane.open(root) as plane:
        dev = plane.device
        for item in (
            dev.new_item(Navigation, "nav_wrong", from_app="A", from_page="P1", to_app="A", to_page="P2",
                         tool="mouse_click", coords="x=10,y=10"),
            dev.new_item(Navigation, "nav_right", from_app="A", from_page="P3", to_app="A", to_page="P4",
                         tool="mouse_click", coords="x=500,y=500"),
            dev.new_item(Navigation, "nav_untaken", from_app="A", from_page="P9", to_app="A", to_page="P2",
                         tool="mouse_click", coords="x=10,y=10"),
            dev.new_item(UiAnchor, "ui_missing", app_name="A", page_name="P3", label="Settings"),
            dev.new_item(UiAnchor, "ui_there", app_name="A", page_name="P3", label="Back"),
            dev.new_item(Calibration, "cal_x", coord_space="pixels"),
            dev.new_item(Procedure, "proc_followed", steps=[ProcedureStep(tool="mouse_click", page_name="P1")]),
            dev.new_item(Procedure, "proc_shown", steps=[ProcedureStep(tool="mouse_click", page_name="P1")]),
        ):
            dev.collection(item.TYPE).save(item)
        existing = {"nav_wrong", "nav_right", "nav_untaken", "ui_missing", "ui_there", "cal_x", "proc_followed",
                    "proc_shown"}
        led, undecided = culprits(plane, steps, "proc_followed", existing, missed_taps=0)
        assert led == {"proc_followed", "nav_wrong"} and undecided == {"ui_missing"}
        led, _ = culprits(plane, steps, None, existing, missed_taps=1)  # a tap hit nothing: coordinates
        assert led == {"nav_wrong", "cal_x"}


PLACES = {"click alarm tab": [100, 300], "click add": [900, 2000], "click reports": [300, 2200],
          "click week": [200, 500], "click month": [500, 500], "click today": [800, 500]}


def _episode_id(want_asked: bool, name: str) -> str:
    """A source episode id on the wanted side of the split (the split is by a hash of the episode's id)."""
    return next(f"{name}-{k}" for k in range(1000)
                if row_asked({"episode_id": f"{name}-{k}"}) is want_asked)


def _split_rows() -> list[dict[str, Any]]:
    """Six source episodes: one asked, five recorded (by the hash of their ids), all naming their app."""
    def row(goal: str, app: str, taps: list[str]) -> dict[str, Any]:
        steps = [{"action_content": {"action": "open", "app_name": app}, "step_instruction": f"open {app}"}]
        # Each target sits at its own place on the screen (another target is another tap).
        steps += [{"action_content": {"action": "click", "coordinate": PLACES[t]}, "step_instruction": t}
                  for t in taps]
        return {"goal": goal, "is_successful": True, "steps": steps,
                "episode_id": _episode_id("today" in goal, goal.replace(" ", "-"))}

    rows = []
    for goal, app, taps in [("Set an alarm for 6 am in Clock", "Clock", ["click alarm tab", "click add"]),
                            ("Set an alarm for 9 pm in Clock", "Clock", ["click alarm tab", "click add"]),
                            ("Set an alarm for 5 am in Clock", "Clock", ["click alarm tab", "click add"]),
                            ("Show my spending this week in Bluecoins", "Bluecoins", ["click reports", "click week"]),
                            ("Show my spending this month in Bluecoins", "Bluecoins", ["click reports", "click month"]),
                            ("Show my spending today in Bluecoins", "Bluecoins", ["click reports", "click today"])]:
        rows.append(row(goal, app, taps))
    return rows


def test_the_split_asks_only_unrecorded_goals_and_reports_both_sides(tmp_path: Path) -> None:
    rows = _split_rows()
    assert [row["goal"] for row in rows if row_asked(row)] == ["Show my spending today in Bluecoins"]
    rep = evaluate_split(rows, tmp_path)
    assert rep["recorded"] == 5 and rep["asked_goals"] == 1 and rep["asked_with_app"] == 1
    for side in ("ours_first_procedure", "fts5_trigram_nearest_goal"):
        assert set(rep[side]) == {"coverage", "right_app", "right_app_when_shown", "path_closeness_when_shown",
                                  "path_closeness"}
    # The nearest recorded goal is another Bluecoins one: open and "reports" match, "today" does not: 2/3.
    assert rep["fts5_trigram_nearest_goal"] == {"coverage": 1.0, "right_app": 1.0, "right_app_when_shown": 1.0,
                                                "path_closeness_when_shown": 0.667, "path_closeness": 0.667}
    # Ours shows a Bluecoins procedure (the goal names the app), whose steps are one of those paths.
    assert rep["ours_first_procedure"]["right_app"] == 1.0
    assert rep["ours_first_procedure"]["path_closeness"] == 0.667


def test_blame_scenario_is_valid_and_reports_demotions() -> None:
    rep = run_scenario(short=True)
    # The scenario's own truth holds on any code: every failure failed, the caused ones followed a
    # procedure and executed its steps, the unrelated ones were led by nothing, and the later tasks worked.
    assert rep["failures_that_failed"] == len(rep["failures"]) == 4
    unrelated = [f for f in rep["failures"] if f["kind"] == "unrelated"]
    caused = [f for f in rep["failures"] if f["kind"] == "caused"]
    assert all(not f["led_to_failure"] for f in unrelated)
    assert all(f["followed_procedure"] in f["led_to_failure"] for f in caused)
    assert rep["later_succeeded"] == rep["later_tasks"] and rep["build_succeeded"] == rep["build_tasks"]
    assert rep["collateral_demotions"] == sum(len(f["demoted_collateral"]) for f in rep["failures"])
    assert rep["restored_active"] <= rep["demoted"]
    assert set(rep["traced_by_type"]) >= {"procedure", "navigation", "ui_anchor", "app_profile", "calibration"}
    json.dumps(rep)  # the report is JSON


@pytest.mark.skipif(not SHARED_DATA.joinpath(*DATA_FILE).is_file(), reason="../shared/data/androidcontrol absent")
def test_report_shape_on_a_slice_of_the_real_episodes(monkeypatch: pytest.MonkeyPatch) -> None:
    import memory_plane.bench._blame as blame

    monkeypatch.setattr(blame, "run_scenario", lambda short: {"collateral_demotions": None})  # tested above
    rows = read_rows(SHARED_DATA.joinpath(*DATA_FILE), 12)
    assert len(rows) == 12
    args = argparse.Namespace(data=str(SHARED_DATA), limit=12, short=True, set="androidcontrol")
    rep = run(args)
    assert "trajectories" not in rep  # only the set asked for
    ac = rep["androidcontrol"]
    assert {"lost_work_step", "under_half_path", "one_step", "other_task_text", "wrong_app", "title_from_quotes",
            "shared_titles", "nav_several_actions", "nav_button_unnamed", "failure_modes_by_cause",
            "modes_from_unfinished", "claimed_verified", "unfinished_cautions", "replay_diff"} <= set(ac["classes"])
    assert ac["classes"]["replay_diff"]["count"] == 0  # the import is synchronous: the same lessons twice
    assert set(rep["androidcontrol_closeness"]) == {"ours", "nearest_goal"}
    assert "androidcontrol_every_class_0" in rep["bars"]
    assert ac["episodes"] == 12 and ac["procedures"] >= 1
    assert {"cross_task", "steps_of_no_named_goal", "steps_of_no_evidence_episode", "traced", "traced_by_type",
            "split"} <= set(ac)
    assert ac["traced"]["items"] == sum(v["items"] for v in ac["traced_by_type"].values())
    assert ac["split"]["recorded"] + ac["split"]["asked_goals"] == 12
    assert "collateral_demotions" in rep["blame"]
    json.dumps(rep)


def test_a_source_goal_said_with_other_numbers_case_or_punctuation_is_the_same_task() -> None:
    """AndroidControl has no task labels: its goals are one task when they differ only in numbers, case and
    punctuation ("Delete the event for August 5, 2023." and "delete the event for august 9 2023")."""
    def row(goal: str) -> dict[str, Any]:
        return {"goal": goal, "steps": [{"action_content": {"action": "click", "coordinate": [10, 20]},
                                         "step_instruction": "tap the event"}]}

    a, b = row_truth(row("Delete the event for August 5, 2023. ")), row_truth(row("delete the event for august 9 2023"))
    c = row_truth(row("Create an event for August 9, 2023"))
    assert a.task == b.task != c.task


def test_a_source_goal_whose_typed_value_it_says_in_another_form_is_the_same_task() -> None:
    """The value a demonstration types is masked in its goal whether the goal says it exactly, with other spaces,
    as a plural or with a slip of typing; a short value inside another word, or text the goal does not say, is
    not."""
    def row(goal: str, typed: str) -> dict[str, Any]:
        return {"goal": goal, "steps": [{"action_content": {"action": "type", "text": typed},
                                         "step_instruction": f"type {typed}"}]}

    frame = "I am feeling hungry, search for {} recipe in the Kitchen Stories app"
    tasks = {row_truth(row(frame.format(g), t)).task for g, t in [
        ("Italian pasta salad", "Italian pasta salad"), ("Barecue Salads", "Barecue salad"),
        ("Mediterraneam pasta salad", "Mediterranean pasta salad"),
        ("vegan  spinach lasagna", " vegan spinach lasagna")]}
    assert tasks == {"i am feeling hungry search for {value} recipe in the kitchen stories app"}
    assert row_truth(row("Open the concatenate tool", "cat")).task == "open the concatenate tool"
    assert row_truth(row("Search for hotels", "cheap flights")).values == []
    assert row_truth(row("去北京的机票", "北京")).task == "去{value}的机票"
    assert row_truth(row("Find Tiffins, then directions to Tiffins", "Tiffins")).task == \
        "find {value} then directions to {value}"
    assert row_truth(row("Type value here", "value")).task == "type {value} here"
