"""Navigation rules are keyed by (from page, to page, action) and name the action whole, from one step."""

from __future__ import annotations

from task_runs import navigation_rules, run_task, screen

from memory_plane import MemoryPlane
from memory_plane.device_memory import Navigation

APP = "Cards"
EDITOR = screen(APP, "NoteEditor", "Front", "Back")
FIELD = screen(APP, "MultimediaEditField", "Done", "Navigate up")


def test_three_ways_back_are_three_rules_each_naming_its_action(plane: MemoryPlane) -> None:
    open_field = ("tap", {"x": 300, "y": 500}, "Front", FIELD)
    start = ("launch_app", {"app": APP}, None, EDITOR)
    run_task(plane, "Edit the front of the card", [
        start,
        open_field,
        ("tap", {"x": 1000, "y": 120}, "Done", EDITOR),
        open_field,
        ("tap", {"x": 60, "y": 120}, "Navigate up", EDITOR),
        open_field,
        ("system_button", {"button": "back"}, None, EDITOR),
    ])
    # Another episode taps Done a little elsewhere: the rule's place and label are that step's, together.
    run_task(plane, "Edit the back of the card", [start, open_field, ("tap", {"x": 1010, "y": 125}, "Done", EDITOR)])
    back = [n for n in navigation_rules(plane) if n.from_page == "MultimediaEditField" and n.to_page == "NoteEditor"]
    assert len(back) == 3
    bodies = sorted(n.body() for n in back)
    assert any("via tap('Done' @x=1010,y=125)" in b for b in bodies)
    assert any("via tap('Navigate up' @x=60,y=120)" in b for b in bodies)
    assert any("via system_button(back)" in b for b in bodies)
    done = next(n for n in back if n.label == "Done")
    assert (done.tool, done.coords, done.action, done.success_count) == ("tap", "x=1010,y=125", None, 2)


def test_a_rule_stored_before_actions_were_kept_reads_as_it_was(plane: MemoryPlane) -> None:
    coll = plane.device.collection("navigation")
    old = plane.device.new_item(Navigation, "nav_0123456789abcdef", app_id="cards", from_app=APP,
                                from_page="A", to_app=APP, to_page="B", tool="tap", coords="x=1,y=2",
                                description="Done")
    coll.save(old)
    again = plane.device.get("nav_0123456789abcdef")
    assert isinstance(again, Navigation)
    assert again.body() == "Cards/A → Cards/B via tap(@x=1,y=2) — Done"


def test_typing_the_goals_query_is_one_rule_that_holds_no_query(plane: MemoryPlane) -> None:
    """Two goals type their own query on the search page: one rule (any query leads to the results), and it never
    holds one goal's query as its action, so its evidence shows one action."""
    search = screen("Mailer", "Search", "Search box")
    for query in ("Invoice", "Meeting"):
        run_task(plane, f"Find the mails about {query} and flag them", [
            ("launch_app", {"app": "Mailer"}, None, screen("Mailer", "Inbox", "Search")),
            ("tap", {"x": 900, "y": 120}, "Search", search),
            ("keyboard_text", {"text": query}, None, screen("Mailer", "Search results", f"{query} notes")),
            ("tap", {"x": 500, "y": 400}, f"{query} notes", screen("Mailer", "Message", "Flag"))])
    typed = [n for n in navigation_rules(plane) if n.tool == "keyboard_text"]
    assert len(typed) == 1
    [rule] = typed
    assert (rule.from_page, rule.to_page, rule.text, rule.success_count) == ("Search", "Search results", None, 2)
    assert "Invoice" not in rule.title and "Meeting" not in rule.body()


def test_a_fixed_text_typed_is_part_of_the_action(plane: MemoryPlane) -> None:
    """A text the goal did not give (a command the app needs) is the action: two texts are two rules."""
    for text in ("#join", "#leave"):
        run_task(plane, "Change the channel membership", [
            ("launch_app", {"app": "Chat"}, None, screen("Chat", "Channel", "Box")),
            ("keyboard_text", {"text": text}, None, screen("Chat", "Done", "ok"))])
    typed = sorted(n.text or "" for n in navigation_rules(plane) if n.tool == "keyboard_text")
    assert typed == ["#join", "#leave"]
