"""Which procedure a goal is shown first: the one learned from goals most like it, values aside; a verified one
before one its success never showed done."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from freezegun import freeze_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.device_memory import type_of_id

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
LIST = {"app": "Daybook", "page": "Entries", "visible_text": ["New entry", "Team lunch", "Budget review"]}
EDITOR = {"app": "Daybook", "page": "Edit entry", "visible_text": ["Title", "Mood: Calm", "Save"]}


def _create(title: str, mood: str) -> list[Any]:
    """New entry → editor: type the title, pick a mood, Save → back on the list, which shows it."""
    return [("tap", {"x": 540, "y": 280, "target_label": "New entry"}, EDITOR),
            ("tap", {"x": 540, "y": 430, "target_label": "Title"}, EDITOR),
            ("keyboard_text", {"text": title}, {**EDITOR, "visible_text": [*EDITOR["visible_text"], title]}),
            ("tap", {"x": 540, "y": 580, "target_label": f"Mood: {mood}"}, EDITOR),
            ("tap", {"x": 540, "y": 880, "target_label": "Save"},
             {**LIST, "visible_text": [*LIST["visible_text"], title]})]


def _rename(old: str, new: str) -> list[Any]:
    """The entry → its editor: type the new title, Save → the list."""
    return [("tap", {"x": 540, "y": 430, "target_label": old}, {**EDITOR, "visible_text": ["Title", old, "Save"]}),
            ("tap", {"x": 540, "y": 430, "target_label": "Title"}, EDITOR),
            ("keyboard_text", {"text": new}, {**EDITOR, "visible_text": ["Title", new, "Save"]}),
            ("tap", {"x": 540, "y": 880, "target_label": "Save"},
             {**LIST, "visible_text": [*LIST["visible_text"], new]})]


def _episode(plane: MemoryPlane, goal: str, path: list[Any], *, done: bool = True) -> None:
    req = MemoryRetrieveRequest(input=goal, current_hints={"language": "en", "app": "Daybook", "page": "Entries"})
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_result("observe_screen", observed_state=LIST)
    for tool, args, obs in path:
        rec.tool_call(tool, args, target_label=args.get("target_label"))
        rec.tool_result(tool, observed_state=obs)
    plane.commit_episode(rec.finish(success=True, completion_reason="the list shows it" if done else None))
    assert plane.flush(30)


def _top(plane: MemoryPlane, goal: str) -> Any:
    req = MemoryRetrieveRequest(input=goal, current_hints={"language": "en", "app": "Daybook", "page": "Entries"})
    hits = [h for h in plane.retrieve(req).common.procedures if type_of_id(h.id) == "procedure"]
    assert hits, goal
    return plane.device.get(hits[0].id)


def test_the_procedure_of_the_goals_kind_leads_over_one_sharing_its_value(tmp_path: Path) -> None:
    # The new goal renames an entry to a title another task created: the rename procedure leads, not the
    # create procedure whose example holds the same title.
    with freeze_time(T0), MemoryPlane.open(tmp_path / "m") as plane:
        _episode(plane, "Rename the diary entry Gym workout to Call grandma", _rename("Gym workout", "Call grandma"))
        _episode(plane, "Create a diary entry called Piano practice in Daybook with the mood Tired",
                 _create("Piano practice", "Tired"))
        top = _top(plane, "Rename the diary entry Morning run to Piano practice")
        assert top.goal_examples == ["Rename the diary entry Gym workout to Call grandma"]


def test_a_verified_procedure_leads_over_an_unverified_one_of_the_same_goal(tmp_path: Path) -> None:
    with freeze_time(T0), MemoryPlane.open(tmp_path / "m") as plane:
        # Claimed done without a sign of it (it stopped before Save); then the same kind of goal done and seen.
        _episode(plane, "Create a diary entry called Yoga session in Daybook with the mood Calm",
                 _create("Yoga session", "Calm")[:-1], done=False)
        _episode(plane, "Add a new entry named Reading hour to the diary, mood Calm", _create("Reading hour", "Calm"))
        unverified = [p for p in (plane.device.get(e["id"]) for e in plane.device.entries("procedure"))
                      if (p.model_extra or {}).get("verified") is False]
        assert len(unverified) == 1
        top = _top(plane, "Create a diary entry called Morning run in Daybook with the mood Calm")
        assert (top.model_extra or {}).get("verified") is not False


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shared=st.sampled_from(["Piano practice", "Team dinner", "Gym", "晨跑"]),
       old=st.sampled_from(["Morning run", "Bike repair", "Evening walk"]))
def test_whatever_value_the_goals_share_the_kind_of_goal_decides(tmp_path_factory: Any, shared: str, old: str) -> None:
    with freeze_time(T0), MemoryPlane.open(tmp_path_factory.mktemp("r") / "m") as plane:
        _episode(plane, "Rename the diary entry Gym workout to Call grandma", _rename("Gym workout", "Call grandma"))
        _episode(plane, f"Create a diary entry called {shared} in Daybook with the mood Tired",
                 _create(shared, "Tired"))
        top = _top(plane, f"Rename the diary entry {old} to {shared}")
        assert top.goal_examples[0].startswith("Rename"), (shared, old)


SETTINGS = {"app": "Daybook", "page": "Settings", "visible_text": ["Reminders", "Backup"]}


def _switch_off(name: str) -> list[Any]:
    """The list's menu → Settings: turn a switch off."""
    return [("tap", {"x": 1000, "y": 120, "target_label": "More options"}, {**LIST, "dialogs": ["menu"]}),
            ("tap", {"x": 540, "y": 280, "target_label": "Settings"}, SETTINGS),
            ("tap", {"x": 540, "y": 430, "target_label": name},
             {**SETTINGS, "visible_text": ["Reminders", "Backup", f"{name} off"]})]


def test_an_intent_the_goal_shares_with_another_task_does_not_outrank_the_goals_own_kind(tmp_path: Path) -> None:
    # "Change the title" and "change a setting" parse as one intent; the goal's words say which task it is.
    with freeze_time(T0), MemoryPlane.open(tmp_path / "m") as plane:
        _episode(plane, "In Daybook, change the title of Gym workout to Call grandma", _rename("Gym workout",
                                                                                           "Call grandma"))
        _episode(plane, "Adjust the settings of the Daybook app: turn off Reminders", _switch_off("Reminders"))
        _episode(plane, "Adjust the settings of the Daybook app: turn off Backup", _switch_off("Backup"))
        top = _top(plane, "In Daybook, change the title of Language class to Bike repair")
        assert top.goal_examples == ["In Daybook, change the title of Gym workout to Call grandma"]


def test_a_task_started_on_the_home_screen_is_shown_its_apps_procedure(tmp_path: Path) -> None:
    home = {"app": "Launcher", "page": "Home screen", "package": "com.android.launcher",
            "visible_text": ["Daybook", "Search"]}
    opened = [("tap", {"x": 300, "y": 300, "target_label": "Daybook"}, LIST), *_create("Gym workout", "Calm")]
    with freeze_time(T0), MemoryPlane.open(tmp_path / "m") as plane:
        for title in ("Gym workout", "Piano practice"):
            req = MemoryRetrieveRequest(input=f"Add a new entry named {title} to the diary, mood Calm",
                                        current_hints={"language": "en", "app": "Launcher", "page": "Home screen"})
            rec = plane.new_episode_recorder(req, plane.retrieve(req))
            rec.tool_result("observe_screen", observed_state=home)
            for tool, args, obs in opened:
                rec.tool_call(tool, args, target_label=args.get("target_label"))
                rec.tool_result(tool, observed_state=obs)
            plane.commit_episode(rec.finish(success=True, completion_reason="the list shows it"))
            assert plane.flush(30)
        req = MemoryRetrieveRequest(input="Add a new entry named Team dinner to the diary, mood Happy",
                                    current_hints={"language": "en", "app": "Launcher", "page": "Home screen"})
        assert [h for h in plane.retrieve(req).common.procedures if type_of_id(h.id) == "procedure"]
