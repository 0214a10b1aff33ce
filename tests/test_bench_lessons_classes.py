"""bench lessons, per set: the generated trajectory set and each class counter, on hand-made bad and good items.

It reaches inside bench/ for the generator and each counter: the bench prints the figures, the functions are not
exported.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from memory_plane import MemoryPlane
from memory_plane.bench._lesson_classes import (
    EpisodeTruth,
    claimed_verified,
    cut_targets,
    failure_modes,
    lost_work,
    navigation_actions,
    other_task_text,
    replay_diff,
    shared_titles,
    short_paths,
    taught_by_unfinished,
    title_from_quotes,
    truth_token,
    wrong_app,
)
from memory_plane.bench._lessons import run
from memory_plane.bench._trajectory_set import generate
from memory_plane.device_memory import Failure, Navigation, Procedure, ProcedureStep
from memory_plane.episodes import EpisodeRecorder
from memory_plane.lifecycle import EvidenceRef

# -- the generated set ------------------------------------------------------------------------


def _fingerprint(seed: int) -> list[Any]:
    return [(t.goal, t.language, t.held_out, t.path(), t.work(), t.truth.__dict__, [a.after.observed() for a in t.acts])
            for t in generate(seed, goals_per_task=3, failures_per_cause_task=2)]


def test_the_generator_is_deterministic_and_the_seed_matters() -> None:
    assert _fingerprint(5) == _fingerprint(5)
    assert _fingerprint(5) != _fingerprint(6)


def test_the_set_holds_every_shape_the_classes_need() -> None:
    trajs = generate(7)
    truths = [t.truth for t in trajs]
    # Each failure cause is met by two or more different goals of two or more tasks.
    by_cause: dict[str, set[tuple[str, str]]] = {}
    for t in trajs:
        if t.truth.cause:
            by_cause.setdefault(t.truth.cause, set()).add((t.goal, t.truth.task))
    assert set(by_cause) == {"page_unchanged", "input_rejected", "element_missing", "dialog", "sign_in_wall",
                             "timeout"}
    for cause, met in by_cause.items():
        assert len({g for g, _ in met}) >= 2 and len({k for _, k in met}) >= 2, cause
    assert {t.ending for t in truths if not t.finished} == {"interrupted", "dropped", "truncated"}
    assert sum(1 for t in truths if t.reported_success and not t.success) >= 4  # claimed successes
    assert any(t.names_unreached_app and t.names_unreached_app not in t.apps_shown for t in truths)
    assert any("settings" in t.goal.lower() and t.truth.app == "Daybook" for t in trajs)
    # Create and edit tasks come back to the page they started on, after typing and a commit tap.
    back = [t for t in trajs if t.truth.success and t.acts and t.acts[-1].after.page == t.start.page
            and t.acts[-1].commit and any(a.tool == "keyboard_text" for a in t.acts)]
    assert {t.truth.task for t in back} >= {"daybook_create", "daybook_edit", "riji_create", "cards_sync"}
    assert any(a.sensitive and a.input.get("sensitive") for t in trajs for a in t.acts)  # the password
    assert any(len(str(a.input.get("app", ""))) > 40 for t in trajs for a in t.acts if a.tool == "launch_app")
    assert {t.language for t in trajs} == {"en", "zh-CN"}
    for t in trajs:  # every tap names an element of the screen it was made on, at that element's place
        screen = t.start
        for a in t.acts:
            if a.tool == "tap":
                assert a.label in screen.labels and screen.center(a.label) == a.input
            screen = a.after
        assert all(v in t.goal for v in t.truth.values.values())
    held = [t for t in trajs if t.held_out]
    assert 0.1 < len(held) / sum(1 for t in trajs if t.truth.success) < 0.35
    assert all(t.truth.success for t in held)


# -- the counters, each on a bad item and a good one ------------------------------------------------


def _truth(goal: str, path: list[tuple[str, str | None]], *, task: str = "t", apps: tuple[str, ...] = ("Daybook",),
           work: list[tuple[str, str | None]] | None = None, values: tuple[str, ...] = (), **kw: Any) -> EpisodeTruth:
    toks = [truth_token(k, v) for k, v in path]
    return EpisodeTruth(goal=goal, task=task, apps=list(apps), success=kw.pop("success", True),
                        reported_success=kw.pop("reported_success", True), finished=kw.pop("finished", True),
                        path=toks, work=[truth_token(k, v) for k, v in (work or [])], values=list(values), **kw)


CREATE = [("tap", "New entry"), ("tap", "Title"), ("type", "Gym workout"), ("tap", "Mood: Calm"), ("tap", "Save")]


def _step(kind: str, value: str | None, **kw: Any) -> ProcedureStep:
    if kind == "type":
        return ProcedureStep(tool="keyboard_text", text=value, **kw)
    if kind == "open":
        return ProcedureStep(tool="launch_app", action=value, **kw)
    if kind == "button":
        return ProcedureStep(tool="system_button", action=value, **kw)
    return ProcedureStep(tool=kind, description=f"tap {value}", target_label=value, **kw)


def _proc(pid: str, steps: list[ProcedureStep], evidence: list[str], **fields: Any) -> Procedure:
    p = Procedure(id=pid, steps=steps, app_id=fields.pop("app_id", "daybook"), **fields)
    for eid in evidence:
        p.add_evidence(EvidenceRef(type="episode", id=eid))
    return p


TRUTHS = {"ep_create": _truth("Add a new entry named Gym workout", CREATE, values=("Gym workout",),
                              work=[("type", "Gym workout"), ("tap", "Save")])}


def test_a_procedure_that_lost_its_typing_or_save_is_counted() -> None:
    whole = _proc("proc_whole", [_step(k, v) for k, v in CREATE], ["ep_create"])
    slotted = _proc("proc_slot", [_step(k, "{title}" if k == "type" else v) for k, v in CREATE], ["ep_create"])
    no_save = _proc("proc_no_save", [_step(k, v) for k, v in CREATE[:-1]], ["ep_create"])
    swipe = _proc("proc_swipe", [ProcedureStep(tool="swipe", action="down")], ["ep_create"])
    rep = lost_work([whole, slotted, no_save, swipe], TRUTHS)
    assert (rep["count"], rep["of"]) == (2, 4) and rep["examples"] == ["proc_no_save", "proc_swipe"]
    short = short_paths([whole, no_save, swipe], TRUTHS)
    assert short["under_half"]["count"] == 1 and short["one_step"]["examples"] == ["proc_swipe"]


def test_a_goals_own_value_left_unmarked_is_another_tasks_text() -> None:
    literal = _proc("proc_literal", [_step(k, v) for k, v in CREATE], ["ep_create"])
    slotted = _proc("proc_slot", [_step(k, "{title}" if k == "type" else v) for k, v in CREATE], ["ep_create"])
    marked = _proc("proc_marked", [_step(k, v, **({"slot": "title"} if k == "type" else {})) for k, v in CREATE],
                   ["ep_create"])
    label = _proc("proc_label", [_step("tap", "Gym workout")], ["ep_create"])  # a label holding the value
    rep = other_task_text([literal, slotted, marked, label], TRUTHS)
    assert rep["count"] == 2 and rep["examples"] == ["proc_label", "proc_literal"]


def test_a_fixed_label_holding_a_short_value_of_another_goal_is_not_another_tasks_text() -> None:
    truths = {"ep_create": TRUTHS["ep_create"],
              "ep_mom": _truth("Text mom hello", [("type", "mom")], values=("mom",)),
              "ep_backup": _truth("Turn off Backup", [("tap", "Backup")], values=("Backup",))}
    # "Momentum" holds "mom" only as letters; "Backup" is a value of another goal, not of this one's.
    fixed = _proc("proc_fixed", [_step("tap", "Momentum"), _step("tap", "Backup"), _step("tap", "Save")],
                  ["ep_create"])
    held = _proc("proc_held", [_step("tap", "Entry: Gym workout")], ["ep_create"])  # its own goal's value
    rep = other_task_text([fixed, held], truths)
    assert rep["count"] == 1 and rep["examples"] == ["proc_held"]


def test_a_launch_name_stored_cut_short_is_counted() -> None:
    name = "Wavecast Radio, Podcasts, Music, Songs, News"
    truths = {"ep_radio": _truth("Play Jazz", [("open", name)], targets=[name])}
    cut = _proc("proc_cut", [_step("open", name[:40])], ["ep_radio"])
    whole = _proc("proc_whole", [_step("open", name)], ["ep_radio"])
    assert cut_targets([cut, whole], truths)["examples"] == ["proc_cut"]


def test_a_verified_procedure_from_a_claimed_success_is_counted() -> None:
    truths = {"ep_claimed": _truth("Add X", CREATE[:-1], success=False), "ep_real": _truth("Add Y", CREATE)}
    claimed = _proc("proc_claimed", [], ["ep_claimed"])
    pending = _proc("proc_pending", [], ["ep_claimed"], tags=["unverified"])
    backed = _proc("proc_backed", [], ["ep_claimed", "ep_real"])
    marked = _proc("proc_marked", [], ["ep_claimed"], verified=False)  # how outcome doubt marks one
    # Set aside when the UI language changed: served again under its own language, still as verified.
    env = _proc("proc_env", [], ["ep_claimed"], status="conflicted", stale_key="language")
    blamed = _proc("proc_blamed", [], ["ep_claimed"], status="conflicted")
    rep = claimed_verified([claimed, pending, backed, marked, env, blamed], truths)
    assert (rep["count"], rep["of"]) == (2, 6) and rep["examples"] == ["proc_claimed", "proc_env"]


def test_a_title_or_intent_from_quoted_text_is_counted(root: Path) -> None:
    goal = "Create a new flashcard with the question 'What is the capital city of France?'"
    truths = {"ep_card": _truth(goal, [("tap", "Add")], quoted=["What is the capital city of France?"])}
    from_quote = _proc("proc_quote", [], ["ep_card"], title="CardDeck: capital city")
    plain = _proc("proc_plain", [], ["ep_card"], title="CardDeck: create flashcard")
    with MemoryPlane.open(root) as plane:
        rep = title_from_quotes([from_quote, plain], truths, plane.device.catalog)
    assert (rep["count"], rep["of"]) == (1, 2) and rep["examples"] == ["proc_quote"]


def test_a_quoted_app_name_or_value_suffix_in_a_title_is_not_counted(root: Path) -> None:
    goal = 'In the "The SmartNews" app, read the news article on "Android user Warning"'
    truths = {"ep_news": _truth(goal, [("tap", "Android user Warning")],
                                quoted=["The SmartNews", "Android user Warning"])}
    named = _proc("proc_named", [], ["ep_news"], title="SmartNews: in the app read the news article on … (Warning)")
    told = _proc("proc_told", [], ["ep_news"], title="SmartNews: read the android warning")
    with MemoryPlane.open(root) as plane:
        rep = title_from_quotes([named, told], truths, plane.device.catalog)
    assert (rep["count"], rep["of"]) == (1, 2) and rep["examples"] == ["proc_told"]


def test_an_apostrophe_is_no_quote_for_the_title_counter(root: Path) -> None:
    goal = "In the diary app's settings, disable Reminders"
    # A split on ' finds a span between the apostrophe and nothing: the goal quotes nothing.
    truths = {"ep_settings": _truth(goal, [("tap", "Reminders")], quoted=["s settings, disable Reminders"])}
    title = _proc("proc_settings", [], ["ep_settings"], title="Daybook: in the diary app s settings disable reminders")
    with MemoryPlane.open(root) as plane:
        rep = title_from_quotes([title], truths, plane.device.catalog)
    assert (rep["count"], rep["of"]) == (0, 0)


def test_distinct_tasks_sharing_a_title_are_counted() -> None:
    truths = {"ep_a": _truth("Add A", CREATE, task="create"), "ep_b": _truth("Rename B", CREATE[1:], task="edit"),
              "ep_c": _truth("Add C", CREATE, task="create")}
    procs = [_proc("proc_1", [], ["ep_a"], title="Daybook: open_app"),
             _proc("proc_2", [], ["ep_b"], title="Daybook: open_app"),
             _proc("proc_3", [], ["ep_c"], title="Daybook: add entry")]
    assert shared_titles(procs, truths, exact_tasks=True)["count"] == 1
    # Inexact task keys (a masked goal): two keys whose real paths are close are one task.
    truths["ep_b"] = _truth("Add B please", CREATE, task="other words")
    assert shared_titles(procs, truths, exact_tasks=False)["count"] == 0
    assert shared_titles(procs, truths, exact_tasks=True)["count"] == 1
    # ... and so are two long keys, one the other with a few words more, whatever their paths; a word changed
    # for another makes two tasks.
    long_key = "i want to go to a new restaurant a friend recommended so i use maps to find directions to {value}"
    other_path = [("swipe", "up"), ("tap", "Directions"), ("tap", "Car")]
    truths["ep_b"] = _truth("Go B", other_path, task=long_key.replace("so i use", "so i want to use"))
    truths["ep_a"] = _truth("Go A", CREATE, task=long_key)
    assert shared_titles(procs, truths, exact_tasks=False)["count"] == 0
    truths["ep_b"] = _truth("Go B", other_path, task=long_key.replace("directions to", "reviews of"))
    assert shared_titles(procs, truths, exact_tasks=False)["count"] == 1


def _record(plane: MemoryPlane, goal: str, moves: list[tuple[str, dict[str, Any], str | None, str, str]]) -> list[str]:
    """An episode whose steps go page to page; returns its id and the ids of its events."""
    rec = EpisodeRecorder(plane.episodes, goal, clock=plane.clock)
    ids = []
    rec.tool_result("observe_screen", observed_state={"app": "CardDeck", "page": moves[0][3]})
    for tool, ti, label, _, after in moves:
        ids.append(rec.tool_call(tool, ti, target_label=label))
        ids.append(rec.tool_result(tool, output="ok", observed_state={"app": "CardDeck", "page": after}))
    ep = rec.finish(success=True)
    ep.status = "active"
    plane.episodes.write(ep)
    ep.committed()
    return [ep.id, *ids]


def test_a_navigation_rule_mixing_actions_or_naming_no_button_is_counted(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        done = {"x": 500, "y": 900}
        ep1 = _record(plane, "Attach a picture", [("tap", done, "Done", "Multimedia field", "Note editor")])
        ep2 = _record(plane, "Attach a photo", [("system_button", {"button": "back"}, None, "Multimedia field",
                                                 "Note editor")])
        truths = {ep1[0]: _truth("Attach a picture", [("tap", "Done")], apps=("CardDeck",)),
                  ep2[0]: _truth("Attach a photo", [("button", "back")], apps=("CardDeck",))}
        pages = {"from_app": "CardDeck", "from_page": "Multimedia field", "to_app": "CardDeck",
                 "to_page": "Note editor"}
        for nid, tool, refs, desc in [("nav_mixed", "system_button", [ep1, ep2], "Done"),
                                      ("nav_done", "tap", [ep1], "Done"),
                                      ("nav_back", "system_button", [ep2], "press back"),
                                      ("nav_nameless", "system_button", [ep2], None)]:
            nav = plane.device.new_item(Navigation, nid, tool=tool, description=desc, **pages)
            for ref in refs:
                nav.add_evidence(EvidenceRef(type="episode", id=ref[0], event_ids=ref[1:]))
            plane.device.collection("navigation").save(nav)
        rep = navigation_actions(plane, truths)
    assert rep["several_actions"] == {"count": 1, "of": 4, "examples": ["nav_mixed"]}
    assert rep["button_unnamed"]["examples"] == ["nav_mixed", "nav_nameless"]


def test_a_query_the_goal_gave_is_no_part_of_a_typing_rules_action(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        eps = [_record(plane, f"Find mails about {q}", [("keyboard_text", {"text": q}, None, "Search",
                                                          "Search results")]) for q in ("Invoice", "Meeting")]
        fixed = [_record(plane, "Join the channel", [("keyboard_text", {"text": t}, None, "Channel", "Joined")])
                 for t in ("#join", "/join")]
        truths = {eps[0][0]: _truth("Find mails about Invoice", [("type", "Invoice")], values=("Invoice",)),
                  eps[1][0]: _truth("Find mails about Meeting", [("type", "Meeting")], values=("Meeting",)),
                  fixed[0][0]: _truth("Join the channel", [("type", "#join")]),
                  fixed[1][0]: _truth("Join the channel", [("type", "/join")])}
        for nid, refs, pages in [("nav_query", eps, ("Search", "Search results")), ("nav_join", fixed,
                                                                                   ("Channel", "Joined"))]:
            nav = plane.device.new_item(Navigation, nid, tool="keyboard_text", from_app="CardDeck",
                                        from_page=pages[0], to_app="CardDeck", to_page=pages[1])
            for ref in refs:
                nav.add_evidence(EvidenceRef(type="episode", id=ref[0], event_ids=ref[1:]))
            plane.device.collection("navigation").save(nav)
        rep = navigation_actions(plane, truths)
    # Two fixed texts are two actions; two queries the goals gave are one (typing the goal's query).
    assert rep["several_actions"] == {"count": 1, "of": 2, "examples": ["nav_join"]}


def test_items_under_an_app_the_episode_never_showed_are_counted(root: Path) -> None:
    truths = {"ep_share": _truth("Share the mail to Daybook", [("tap", "Share")], apps=("Postbox",)),
              "ep_blind": _truth("Add an entry in Daybook", [("tap", "Add")], apps=())}
    with MemoryPlane.open(root) as plane:
        blind = plane.device.new_item(Procedure, "proc_blind", app_id="daybook", app_name="Daybook")
        blind.add_evidence(EvidenceRef(type="episode", id="ep_blind"))  # the phone never said which app
        plane.device.collection("procedure").save(blind)
        for item in (plane.device.new_item(Procedure, "proc_wrong", app_id="daybook", app_name="Daybook"),
                     plane.device.new_item(Procedure, "proc_right", app_id="postbox", app_name="Postbox"),
                     plane.device.new_item(Failure, "fail_wrong", app_id="launcher", app_name="Launcher"),
                     plane.device.new_item(Failure, "fail_right", app_name="Postbox")):
            item.add_evidence(EvidenceRef(type="episode", id="ep_share"))
            plane.device.collection(item.TYPE).save(item)
        rep = wrong_app(plane, truths)
    assert (rep["count"], rep["of"], rep["evidence_showed_no_app"]) == (3, 5, 1)
    assert rep["by_type"]["procedure"] == {"count": 2, "of": 3} and rep["by_type"]["failure"] == {"count": 1, "of": 2}


def test_failure_modes_split_or_mixed_by_cause_and_those_of_unfinished_runs_are_counted(root: Path) -> None:
    def failed(goal: str, cause: str, finished: bool = True) -> EpisodeTruth:
        return _truth(goal, [("tap", "Pay now")], cause=cause, success=False, reported_success=False,
                      finished=finished)

    truths = {"ep_1": failed("Book a room in Oslo", "Trip/Checkout/page_unchanged"),
              "ep_2": failed("Rent a car in Oslo", "Trip/Checkout/page_unchanged"),
              "ep_3": failed("Show hotels in Rome", "Trip/Loading/timeout"),
              "ep_4": failed("Show flights to Rome", "Trip/Loading/timeout"),
              "ep_5": failed("Book a room in Bern", "", finished=False)}
    with MemoryPlane.open(root) as plane:
        for fid, eids in [("fail_unchanged", ["ep_1", "ep_2"]), ("fail_timeout_a", ["ep_3"]),
                          ("fail_timeout_b", ["ep_4"]), ("fail_crash", ["ep_5"])]:
            f = plane.device.new_item(Failure, fid, app_name="Trip")
            for eid in eids:
                f.add_evidence(EvidenceRef(type="episode", id=eid))
            plane.device.collection("failure").save(f)
        rep = failure_modes(plane, truths)
        assert taught_by_unfinished(plane, "fail_crash", truths) and not taught_by_unfinished(plane, "fail_unchanged",
                                                                                             truths)
        assert taught_by_unfinished(plane, "ep_5", truths)  # an unfinished episode shown as similar
    assert (rep["count"], rep["causes"], rep["failed_episodes"], rep["modes"]) == (1, 2, 4, 4)
    assert rep["causes_split"] == 1 and rep["modes_met_by_2_goals"] == 1
    assert rep["modes_from_unfinished"]["examples"] == ["fail_crash"]
    # One mode holding both causes is counted too.
    mixed = {**truths, "ep_2": failed("Rent a car in Oslo", "Trip/Loading/timeout")}
    with MemoryPlane.open(root) as plane:
        assert failure_modes(plane, mixed)["modes_mixing_causes"] == 1


def test_two_trees_fed_the_same_episodes_are_diffed() -> None:
    a = {"proc_1": ("procedure", "active", 0.8), "fail_1": ("failure", "active", 0.6)}
    assert replay_diff(a, dict(a))["count"] == 0
    b = {"proc_1": ("procedure", "conflicted", 0.65), "fail_2": ("failure", "active", 0.6)}
    rep = replay_diff(a, b)
    assert (rep["ids_only_in_one"], rep["status_differs"], rep["confidence_differs"], rep["demoted_differs"]) == (
        2, 1, 1, 1)
    assert rep["count"] == 3  # items that differ: fail_1, fail_2 and proc_1


# -- the bench -------------------------------------------------------------------------------------------------


def _no_blame(monkeypatch: pytest.MonkeyPatch) -> None:
    import memory_plane.bench._blame as blame

    monkeypatch.setattr(blame, "run_scenario", lambda short: {"collateral_demotions": None})  # tested elsewhere


def test_a_set_whose_data_is_absent_is_skipped_with_a_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_blame(monkeypatch)
    rep = run(argparse.Namespace(data=str(tmp_path / "nowhere"), short=True, set="androidcontrol"))
    assert "no AndroidControl export" in rep["androidcontrol"]["skipped"]
    assert "androidcontrol_every_class_0" not in rep["bars"]
    from memory_plane.lifecycle import UsageError

    with pytest.raises(UsageError, match="unknown set"):
        run(argparse.Namespace(data=None, short=True, set="nonesuch"))


@pytest.mark.slow
def test_the_short_run_of_the_generated_set_reports_every_class(monkeypatch: pytest.MonkeyPatch) -> None:
    import memory_plane.bench._lessons as lessons

    _no_blame(monkeypatch)
    monkeypatch.setattr(lessons, "GOALS_PER_TASK_SHORT", 2)
    monkeypatch.setattr(lessons, "FAILURES_PER_TASK_SHORT", 1)
    rep = run(argparse.Namespace(data=None, short=True, set="trajectories", seed=3))
    part = rep["trajectories"]
    counts = rep["trajectories_classes"]
    assert set(counts) >= {"lost_work_step", "under_half_path", "one_step", "other_task_text", "wrong_app",
                           "title_from_quotes", "shared_titles", "nav_several_actions", "nav_button_unnamed",
                           "failure_modes_by_cause", "modes_from_unfinished", "claimed_verified",
                           "unfinished_cautions", "cross_goal_demotions", "replay_diff", "targets_cut_short"}
    assert all(isinstance(c, int) for c in counts.values())
    eps = part["episodes"]
    assert eps["recorded"] == part["recorded"] and eps["unfinished"] >= 3 and eps["claimed_successes"] >= 3
    assert part["held_out"]["held_out_goals"] == part["held_out_goals"] > 0
    assert rep["bars"]["trajectories_every_class_0"] is (all(c == 0 for c in counts.values()))
    json.dumps(rep)


def test_words_a_goal_quotes_and_says_again_outside_the_quotes_are_its_own(root: Path) -> None:
    goal = 'Learn the history of "Mona Lisa", then view about the Mona Lisa painting'
    truths = {"ep_art": _truth(goal, [("tap", "Mona Lisa")], quoted=["Mona Lisa"])}
    titled = _proc("proc_art", [], ["ep_art"], title="Arts: learn the history of … then view about the mona lisa")
    with MemoryPlane.open(root) as plane:
        rep = title_from_quotes([titled], truths, plane.device.catalog)
    assert (rep["count"], rep["of"]) == (0, 1)
