"""The app of every lesson is what the phone showed: a word of the goal names an app only when the episode
reached that app, and a system screen (a launcher) is never the app a task's lessons are filed under."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.device_memory import AppProfile, Procedure

EN = CurrentEnvironmentHints(language="en-US", screen_width=1080, screen_height=2400)
LAUNCHER = {"app": "Launcher", "page": "Home", "package": "com.android.launcher3"}


def run(plane: MemoryPlane, goal: str, steps: list[tuple[Any, ...]], *, success: bool = True, **finish: Any) -> Any:
    """One task as the runtime records it, retrieve first: (tool, input, label, observed_state) per step."""
    req = MemoryRetrieveRequest(input=goal, current_hints=EN)
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    for tool, ti, label, obs in steps:
        rec.tool_call(tool, ti, target_label=label)
        rec.tool_result(tool, observed_state=obs)
    ep = rec.finish(success=success, **finish)
    plane.commit_episode(ep)
    assert plane.flush(30)
    return ep


def written(plane: MemoryPlane, ep: Any) -> list[Any]:
    """The items an episode's lessons wrote."""
    got = plane.episodes.get(ep.id)
    assert got is not None
    items = [plane.device.get(i) for i in got.reusable_lessons]
    return [i for i in items if i is not None]


def diary(page: str) -> dict[str, str]:
    return {"app": "Activity Diary", "page": page, "package": "de.rampro.activitydiary"}


def test_settings_words_in_another_apps_goal_file_its_steps_under_that_app(plane: MemoryPlane) -> None:
    steps = [("launch_app", {"app": "Activity Diary"}, None, diary("Main")),
             ("tap", {"x": 60, "y": 120}, "Navigate up", diary("Drawer")),
             ("tap", {"x": 200, "y": 900}, "Settings", diary("Settings")),
             ("tap", {"x": 900, "y": 400}, "Use location", {**diary("Settings"), "visible_text": ["on"]})]
    ep = run(plane, "Adjust the settings of the activity diary app so that it uses the location", steps)
    items = written(plane, ep)
    diary_id = plane.device.catalog.app_id_for("Activity Diary")
    assert {getattr(i, "app_id", None) for i in items} <= {diary_id, None}
    proc = next(i for i in items if isinstance(i, Procedure))
    assert proc.app_id == diary_id and proc.title.startswith("Activity Diary")
    assert not [e for e in plane.device.entries("app_profile") if e["id"] == "app_settings"]


def test_an_app_the_goal_names_but_the_episode_never_reached_gets_no_lesson(plane: MemoryPlane) -> None:
    shown = {"app": "Eventbrite", "page": "Event", "package": "com.eventbrite.attendee"}
    steps = [("launch_app", {"app": "Eventbrite"}, None, {**shown, "page": "Home"}),
             ("tap", {"x": 500, "y": 600}, "Tech Meetup", shown),
             ("tap", {"x": 1000, "y": 150}, "Share", {**shown, "dialogs": ["Sign in to share"]})]
    ep = run(plane, "Open the Tech Meetup event in Eventbrite and share to Google Keep Notes", steps,
             success=False, failure_phase="state_mismatch", failure_reason="sharing needs an account")
    items = written(plane, ep)
    assert items and all(getattr(i, "app_id", None) != "keep_notes" for i in items)
    assert not plane.device.entries("app_profile", "keep_notes")
    prof = next(i for i in items if isinstance(i, AppProfile))
    # The failure is counted where it happened: in the app the phone showed.
    assert prof.app_name == "Eventbrite" and prof.known_issues == ["sharing needs an account"]


def test_a_path_entered_through_the_launcher_is_filed_under_the_app_it_reached(plane: MemoryPlane) -> None:
    hotels = {"app": "Hotels.com", "package": "com.hcom.android"}
    steps = [("home", {}, None, LAUNCHER),
             ("tap", {"x": 300, "y": 1500}, "Hotels.com", {**hotels, "page": "Home"}),
             ("tap", {"x": 540, "y": 400}, "Going to", {**hotels, "page": "Destination"}),
             ("keyboard_text", {"text": "Paris"}, None, {**hotels, "page": "Destination", "visible_text": ["Paris"]}),
             ("tap", {"x": 540, "y": 600}, "Paris, France", {**hotels, "page": "Results"}),
             ("tap", {"x": 540, "y": 900}, "Reserve", {**hotels, "page": "Checkout"})]
    ep = run(plane, "Reserve a room in Paris for tonight", steps)
    items = written(plane, ep)
    hotels_id = plane.device.catalog.app_id_for("Hotels.com")
    proc = next(i for i in items if isinstance(i, Procedure))
    assert proc.app_id == hotels_id and not proc.title.startswith("Launcher")
    assert all(not (isinstance(i, AppProfile) and i.app_name == "Launcher") for i in items)


def test_a_launch_counts_as_shown_when_the_runtime_reports_no_screen(plane: MemoryPlane) -> None:
    # The goal names one app, the agent launched another: what the phone was told to show is the app.
    steps = [("launch_app", {"app": "YouTube Music"}, None, None), ("tap", {"x": 500, "y": 500}, "Play", None)]
    ep = run(plane, "Play my liked songs on Spotify", steps)
    apps = {getattr(i, "app_id", None) for i in written(plane, ep)}
    assert plane.device.catalog.app_id_for("YouTube Music") in apps and "spotify" not in apps


NAMES = ["WeChat", "微信", "美团", "Settings", "Keep Notes", "Photos", "Launcher", "Activity Diary", "Hotels.com"]
GOAL_WORDS = st.lists(st.sampled_from([*NAMES, "open", "share to", "the", "settings of", "explore all its photos",
                                       "'", "send", "book", "and", "打开", "设置", "app", "notes"]), max_size=10)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(goal=GOAL_WORDS.map(" ".join), shown=st.lists(st.sampled_from(NAMES), min_size=0, max_size=4),
       success=st.booleans())
def test_every_lesson_is_under_an_app_the_phone_showed(shared_plane: MemoryPlane, goal: str, shown: list[str],
                                                      success: bool) -> None:
    steps: list[tuple[Any, ...]] = [("tap", {"x": 100 + 50 * i, "y": 300}, f"item {i}",
                                     {"app": app, "page": f"Page {i}", "package": "com.android.launcher3"
                                      if app == "Launcher" else f"com.example.{i}"})
                                    for i, app in enumerate(shown)]
    steps.append(("keyboard_text", {"text": "hello"}, None, {"app": shown[-1], "page": "Edit"} if shown else None))
    ep = run(shared_plane, goal or "do it", steps, success=success,
             **({} if success else {"failure_phase": "state_mismatch", "failure_reason": "nothing changed"}))
    catalog = shared_plane.device.catalog
    allowed = {catalog.app_id_for(a) for a in shown}
    for item in written(shared_plane, ep):
        assert getattr(item, "app_id", None) in allowed | {None}, (goal, shown, item.id)
        if isinstance(item, (AppProfile, Procedure)) and item.app_id:
            assert item.app_id != catalog.app_id_for("Launcher")  # a system screen is never the task's app


def test_the_tie_goes_to_the_app_the_goal_names_in_any_script(tmp_path: Path) -> None:
    # The phone showed two apps as often; the goal names one in Chinese, which does not lowercase to its id.
    for goal, named, other in (("在美团点一杯奶茶", "美团", "饿了么"), ("打开微信给妈妈发消息", "微信", "QQ")):
        with MemoryPlane.open(tmp_path / named) as plane:
            steps = [("tap", {"x": 100, "y": 100}, None, {"app": other, "page": "首页"}),
                     ("tap", {"x": 100, "y": 200}, None, {"app": named, "page": "首页"})]
            ep = run(plane, goal, steps)
            assert ep.observed_app == named


def test_a_path_on_no_app_never_renews_an_apps_procedure(plane: MemoryPlane) -> None:
    # The same goal and the same taps, once in WeChat and once on the home screen only: the second
    # episode reached no app, so it renews nothing of WeChat's.
    def steps(app: dict[str, str]) -> list[tuple[Any, ...]]:
        return [("tap", {"x": 100, "y": 300}, "item", {**app, "page": "Page 0"}),
                ("keyboard_text", {"text": "hello"}, None, {**app, "page": "Edit"})]

    run(plane, "微信", steps({"app": "微信", "package": "com.tencent.mm"}))
    ep = run(plane, "微信", steps(LAUNCHER))
    assert all(getattr(i, "app_id", None) in ("launcher", None) for i in written(plane, ep))
