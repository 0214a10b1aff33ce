"""The index lines of one app (goal, page) found through a lookup are the lines a pass over the index finds, in
its order, whatever was appended, rewritten or hand-edited in between.

It reaches inside device_memory/ for the lookup alone (``EntryLookup``), to ask it of lists no index holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.device_memory import DeviceMemory, Navigation
from memory_plane.device_memory._lookup import EntryLookup

APPS = st.sampled_from([None, "gmail", "maps", "微信"])
GOALS = st.sampled_from([None, "send_message", "navigate", ["a", "list"], {"a": 1}])
LINE = st.fixed_dictionaries({"app": APPS, "goal": GOALS}).map(lambda d: {k: v for k, v in d.items() if v is not None})
# What happens to a parse between two questions: a line appended to it, or a new parse (a rewrite) of other lines.
STEP = st.one_of(st.tuples(st.just("append"), LINE), st.tuples(st.just("reparse"), st.lists(LINE, max_size=8)))


@settings(max_examples=300, deadline=None)
@given(first=st.lists(LINE, max_size=8), steps=st.lists(st.tuples(STEP, APPS, GOALS), max_size=12))
def test_the_lines_of_a_group_are_the_lines_a_pass_finds(first: list[dict[str, Any]],
                                                          steps: list[tuple[Any, Any, Any]]) -> None:
    look = EntryLookup(["app", "goal"])
    lines = [dict(e, id=f"i{n}") for n, e in enumerate(first)]
    for (what, arg), app, goal in steps:
        if what == "append":
            lines.append(dict(arg, id=f"i{len(lines)}"))
        else:
            lines = [dict(e, id=f"r{n}") for n, e in enumerate(arg)]
        want = [e for e in lines if e.get("app") == app and e.get("goal") == goal]
        assert look.of(lines, [app, goal]) == want


def test_the_rules_of_a_page_follow_the_index_as_it_is_written(tmp_path: Path) -> None:
    device = DeviceMemory(tmp_path)
    coll = device.collection("navigation")
    for n, (app, page) in enumerate([("gmail", "Inbox"), ("maps", "Inbox"), ("gmail", "Compose"), ("gmail", "Inbox")]):
        coll.save(device.new_item(Navigation, f"nav_{n}", app_id=app, from_app=app, from_page=page, page_name=page,
                                  to_page="Next", title=f"{app} {page}"))
        assert [e["id"] for e in device.entries_where("navigation", app="gmail", page="Inbox")] == [
            e["id"] for e in device.entries("navigation", "gmail") if e.get("page") == "Inbox"]
    coll.update("nav_0", lambda cur: cur.model_copy(update={"page_name": "Compose"}))  # a rewrite of its line
    assert [e["id"] for e in device.entries_where("navigation", app="gmail", page="Inbox")] == ["nav_3"]
    assert [e["id"] for e in device.entries_where("navigation", app="gmail", page="Compose")] == ["nav_0", "nav_2"]
