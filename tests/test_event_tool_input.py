"""A tool call's arguments stand in ``events.jsonl`` as the design and the Go recorder write them: ``tool_input``
is the JSON text of the arguments (a string). Events that hold them as an object (older trees) are read alike."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.episodes import EVENTS_FILE, parse_tool_input, shown_tool_input
from memory_plane.lifecycle import read_jsonl

_scalars = st.one_of(st.integers(-10_000, 10_000), st.booleans(), st.none(),
                     st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12))
_inputs = st.dictionaries(st.sampled_from(["x", "y", "text", "query", "app", "direction", "note"]), _scalars,
                          min_size=1, max_size=5)


def _events(plane: MemoryPlane, ep_id: str) -> list[dict]:
    return read_jsonl(plane.episodes.episode_dir(ep_id) / EVENTS_FILE).records


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=_inputs, as_text=st.booleans())
def test_tool_input_is_written_as_json_text_of_the_arguments(tmp_path_factory, args: dict, as_text: bool) -> None:
    root = tmp_path_factory.mktemp("ti") / "m"
    with MemoryPlane.open(root) as plane:
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="open Notes"))
        rec.tool_call("tap", json.dumps(args) if as_text else args)
        rec.tool_result("tap", observed_state={"app": "Notes", "page": "Home"})
        ep = rec.finish(success=True)
        calls = [e for e in _events(plane, ep.id) if e.get("type") == "tool_call"]
        assert len(calls) == 1
        stored = calls[0]["tool_input"]
        assert isinstance(stored, str)  # as the design's events.jsonl example and Go's TaskEpisodeEvent.ToolInput
        assert json.loads(stored) == parse_tool_input(stored) == shown_tool_input(stored)
        assert json.loads(stored).keys() == args.keys()
        assert plane.commit_episode(ep) and plane.flush(10)
        assert plane.stats()["jobs_failed"] == 0


def test_both_shapes_are_read_the_same(tmp_path: Path) -> None:
    args = {"x": 500, "y": 850, "text": "hello"}
    assert parse_tool_input(json.dumps(args)) == parse_tool_input(args) == args
    assert shown_tool_input(json.dumps(args)) == shown_tool_input(args) == args
    assert shown_tool_input("plain words") == "plain words"


def test_episode_tools_show_the_arguments_not_their_escaped_text(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="open Notes"))
        rec.tool_call("keyboard_text", {"text": "buy milk"})
        rec.tool_result("keyboard_text", observed_state={"app": "Notes", "page": "Editor"})
        ep = rec.finish(success=True)
        assert plane.commit_episode(ep) and plane.flush(10)
        out = plane.tools.call("inspect_episode", {"episode_id": ep.id}).text
        assert '{"text": "buy milk"}' in out and '\\"text\\"' not in out


def test_a_secret_with_a_quote_is_scrubbed_from_the_json_text(tmp_path: Path) -> None:
    secret = 'pa"ss\\word9'
    with MemoryPlane.open(tmp_path / "m") as plane:
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="log in to the Bank app"))
        rec.tool_call("keyboard_text", {"text": secret})
        rec.tool_result("keyboard_text", observed_state={"app": "Bank", "page": "Login", "field_type": "password"})
        rec.tool_call("tap", {"x": 1, "y": 2})
        rec.tool_result("tap", observed_state={"app": "Bank", "page": "Home"})
        ep = rec.finish(success=True)
        text = (plane.episodes.episode_dir(ep.id) / EVENTS_FILE).read_text("utf-8")
    for form in (secret, json.dumps(secret)[1:-1], json.dumps(json.dumps(secret)[1:-1])[1:-1]):
        assert form not in text
