"""Goal groups and titles: a goal whose intent is weak (open, check, search) or unknown is grouped by its masked
text, so different tasks in one app are different lessons with different titles, while the same task with other
values (a name, a number, a quoted text) stays one group.

It reaches inside `_lesson_writer` for `goal_title`, to ask for the title of a second goal group directly (the
public path would need a second app state that masks alike)."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.device_memory import Procedure
from memory_plane.episodes import NormalizedGoal, TaskEpisode, goal_pattern

EN = CurrentEnvironmentHints(language="en-US", screen_width=1080, screen_height=2400)


def diary(page: str) -> dict[str, str]:
    return {"app": "Activity Diary", "page": page, "package": "de.rampro.activitydiary"}


def run(plane: MemoryPlane, goal: str, steps: list[tuple[Any, ...]]) -> Any:
    req = MemoryRetrieveRequest(input=goal, current_hints=EN)
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    for tool, ti, label, obs in steps:
        rec.tool_call(tool, ti, target_label=label)
        rec.tool_result(tool, observed_state=obs)
    ep = rec.finish(success=True)
    plane.commit_episode(ep)
    assert plane.flush(30)
    return ep


def path(*pages: str, text: str | None = None) -> list[tuple[Any, ...]]:
    """Launch the diary, then one labelled tap per page (typing ``text`` on the second page)."""
    steps: list[tuple[Any, ...]] = [("launch_app", {"app": "Activity Diary"}, None, diary("Main"))]
    for i, page in enumerate(pages):
        steps.append(("tap", {"x": 100 + 40 * i, "y": 300 + 80 * i}, f"to {page}", diary(page)))
        if i == 0 and text:
            steps.append(("keyboard_text", {"text": text}, None, {**diary(page), "visible_text": [text]}))
    return steps


TASKS = [
    ("Open Activity Diary and add a new activity named 'Gym Workout'",
     path("Edit", "Activity list", text="Gym Workout")),
    ("Open Activity Diary and delete the activity 'Sleeping'", path("Activity list", "Delete dialog", "Deleted")),
    ("Open Activity Diary and rename the activity 'Work' to 'Office'", path("Edit", "Renamed", text="Office")),
    ("Open Activity Diary and search for the activity 'Reading'", path("Search", "Results", text="Reading")),
    ("Open Activity Diary and set the picture of 'Cooking' from the gallery", path("Picture", "Gallery", "Picked")),
]


def test_five_different_tasks_in_one_app_are_five_groups_with_five_titles(plane: MemoryPlane) -> None:
    for goal, steps in TASKS:
        run(plane, goal, steps)
    procs = [p for p in (plane.device.get(e["id"]) for e in plane.device.entries("procedure"))
             if isinstance(p, Procedure)]
    assert len(procs) == 5
    assert len({p.goal_pattern for p in procs}) == 5, [p.goal_pattern for p in procs]
    assert len({p.title for p in procs}) == 5, [p.title for p in procs]
    # The same task with another value is the same group, and the same path renews its procedure.
    run(plane, "Open Activity Diary and add a new activity named 'Yoga'", path("Edit", "Activity list", text="Yoga"))
    again = [p for p in (plane.device.get(e["id"]) for e in plane.device.entries("procedure"))
             if isinstance(p, Procedure)]
    assert len(again) == 5 and max(p.success_count for p in again) == 2


def test_a_quoted_question_does_not_title_the_task(plane: MemoryPlane) -> None:
    anki = {"app": "AnkiDroid", "package": "com.ichi2.anki"}
    goal = "Create a new flashcard in the Default deck with the question 'What is the capital city of France?'"
    run(plane, goal, [("launch_app", {"app": "AnkiDroid"}, None, {**anki, "page": "Decks"}),
                      ("tap", {"x": 980, "y": 2200}, "Add", {**anki, "page": "NoteEditor"}),
                      ("keyboard_text", {"text": "What is the capital city of France?"}, None,
                       {**anki, "page": "NoteEditor", "visible_text": ["What is the capital city of France?"]}),
                      ("tap", {"x": 1000, "y": 150}, "Save", {**anki, "page": "Saved"})])
    proc = next(plane.device.get(e["id"]) for e in plane.device.entries("procedure"))
    assert isinstance(proc, Procedure) and proc.intent != "check_info"
    assert "check_info" not in proc.title and "check_info" not in (proc.goal_pattern or "")


VALUES = st.text(st.characters(whitelist_categories=("Lu", "Ll", "Nd", "Lo")), min_size=1, max_size=12)
TEMPLATES = ["Open Notes and rename the note '{0}' to '{1}'", "打开备忘录，把“{0}”改成“{1}”",
             "Check the price of \"{0}\" for {n} nights", "Search for '{0}' and open result {n} of 「{1}」"]


@given(st.sampled_from(TEMPLATES), VALUES, VALUES, VALUES, VALUES, st.integers(0, 10**6), st.integers(0, 10**6),
       st.sampled_from(["open_app", "check_info", "search", "unknown", None]))
def test_a_weak_goal_is_grouped_by_its_text_with_its_values_masked(template: str, a: str, b: str, c: str, d: str,
                                                                    n: int, m: int, intent: str | None) -> None:
    assume(a.lower() not in template.lower() and c.lower() not in template.lower())

    def ep(text: str, target: str | None) -> TaskEpisode:
        return TaskEpisode(id="ep_x", user_goal=text, normalized_goal=NormalizedGoal(intent=intent, target=target))

    one = goal_pattern(ep(template.format(a, b, n=n), a))
    assert one == goal_pattern(ep(template.format(c, d, n=m), c))  # the same task with other values
    assert one != goal_pattern(ep(f"Open Notes and delete the note '{a}'", a))  # another task, the same value
    assert a not in one and str(n) not in one.split()


def _titles(plane: MemoryPlane) -> list[str]:
    return sorted(p.title for p in (plane.device.get(e["id"]) for e in plane.device.entries("procedure"))
                  if isinstance(p, Procedure))


def test_a_title_masks_only_values_so_two_tasks_that_differ_in_a_word_keep_it(plane: MemoryPlane) -> None:
    # The city is a word of each goal, not a value its steps took (nothing typed or tapped it): two paths, two
    # procedures, and their titles keep what tells them apart.
    for city, last in (("Paris", "Chart"), ("London", "Map")):
        run(plane, f"Open Activity Diary and show the statistics for {city}", path("Statistics", last))
    titles = _titles(plane)
    assert len(titles) == 2 and any("paris" in t for t in titles) and any("london" in t for t in titles)


def test_a_title_another_group_holds_gets_the_goals_own_words(plane: MemoryPlane) -> None:
    run(plane, "Open Activity Diary and add a new activity named Gym", path("Edit", "Activity list", text="Gym"))
    [first] = _titles(plane)
    # Another goal group whose title masks alike (its value is a word the first goal's group keeps).
    ep = TaskEpisode(id="ep_y", user_goal="Open Activity Diary and add a new activity named Yoga",
                     normalized_goal=NormalizedGoal(intent="create_note", target=None))
    from memory_plane.episodes._lesson_writer import goal_title

    app_id = plane.device.entries("procedure")[0]["app"]
    other = goal_title(ep, "Activity Diary", ["Yoga"], device=plane.device, app_id=app_id, pattern="another group")
    assert other == f"{first} (Yoga)"
    same = goal_title(ep, "Activity Diary", ["Yoga"], device=plane.device, app_id=app_id,
                      pattern=plane.device.entries("procedure")[0]["goal"])
    assert same == first  # the same group with another value shares the title


def test_two_long_goals_that_differ_only_at_their_end_are_two_groups_and_two_titles(plane: MemoryPlane) -> None:
    """A long goal's last words often say what tells it apart (the app it is done in): shortening a goal for its
    group or its title keeps its end, so goals that share a long head are not one task."""
    from task_runs import procedures, run_task, screen

    head = ("I want to learn about the moon phases of January 9th and 10th, so view details of the moon phases "
            "of January 9th and 10th in the ")
    for app, label in (("MoonX", "Phases"), ("Daff Moon", "Calendar")):
        run_task(plane, f"{head}{app} app", [("launch_app", {"app": app}, None, screen(app, "Home", label)),
                                              ("tap", {"x": 100, "y": 200}, label, screen(app, label))])
    procs = procedures(plane)
    assert len(procs) == 2
    assert len({p.goal_pattern for p in procs}) == 2 and len({p.title for p in procs}) == 2
    assert all(len(p.title or "") <= 120 and (p.goal_pattern or "").endswith("app") for p in procs)
