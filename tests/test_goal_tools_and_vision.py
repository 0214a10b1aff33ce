"""The design's query parsing reads the tools a goal asks for, and its failure reasons include a screen the OCR or
vision model read uncertainly."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane, MemoryRetrieveRequest

TOOLS = ["keyboard_text", "launch_app", "tap", "swipe", "screenshot", "open"]


def _tools(plane: MemoryPlane, goal: str) -> list[str]:
    q = plane.retrieve(MemoryRetrieveRequest(input=goal, tool_names=TOOLS)).query
    assert q is not None
    return list(q.to_dict()["tools"])


@pytest.mark.parametrize(("goal", "tools"), [
    ("use keyboard_text to type hello in WeChat", ["keyboard_text"]),
    ("用 launch_app 打开微信", ["launch_app"]),
    ("用截图工具截一张图", ["截图"]),
    ("find pizza places with the search tool", ["search"]),
    ("call swipe() twice on the home screen", ["swipe"]),
    ("busca pizza con la herramienta buscador", ["buscador"]),
    ("type it using keyboard text", ["keyboard_text"]),
    ("send Zhang San a message", []),
    ("open WeChat and tap Discover", []),  # plain verbs are no tool requirement, even where a tool is so named
    ("email bob_smith@example.com the notes", []),
    ("open https://example.com/a_b", []),
])
def test_the_tools_a_goal_asks_for_are_read(shared_plane: MemoryPlane, goal: str, tools: list[str]) -> None:
    assert _tools(shared_plane, goal) == tools


words = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=2, max_size=8)


@settings(max_examples=80, deadline=None)
@given(parts=st.lists(words, min_size=2, max_size=3), before=st.lists(words, max_size=4),
       after=st.lists(words, max_size=4))
def test_an_identifier_written_as_code_is_a_tool_and_plain_words_are_none(shared_plane: MemoryPlane,
                                                                        parts: list[str], before: list[str],
                                                                        after: list[str]) -> None:
    from memory_plane.retrieval import parse_query

    catalog = shared_plane.device.catalog
    name = "_".join(parts)
    plain = " ".join([*before, *after]).replace("tool", "x")
    assert parse_query(plain, catalog).tools == ()
    assert parse_query(" ".join([*before, name, *after]), catalog).tools == (name,)


def test_the_episode_records_the_tools_its_goal_asked_for(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        req = MemoryRetrieveRequest(input="use keyboard_text to write hello in Notes", tool_names=TOOLS)
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        assert rec.episode.normalized_goal.model_dump().get("tools") == ["keyboard_text"]


def _failed_run(plane: MemoryPlane, confidence: float | None, *, error: str | None = None) -> list[str]:
    req = MemoryRetrieveRequest(input="open the Downloads folder in Telegram")
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    home = {"app": "Telegram", "page": "Chats", "visible_text": ["Chats", "Downloads"]}
    if confidence is not None:
        home["confidence"] = confidence
    rec.tool_call("launch_app", {"app": "Telegram"})
    rec.tool_result("launch_app", observed_state=home)
    rec.tool_call("tap", {"x": 300, "y": 700}, target_label="Downloads")
    rec.tool_result("tap", observed_state=home, is_error=error is not None, error=error)
    ep = rec.finish(success=False, failure_phase="state_mismatch")
    assert plane.commit_episode(ep) and plane.flush(10)
    got = plane.episodes.get(ep.id)
    assert got is not None
    return [c.split(":")[0] for c in got.failure_causes]


@settings(max_examples=12, deadline=None)
@given(confidence=st.floats(0.0, 1.0))
def test_a_screen_read_uncertainly_is_the_cause_of_a_tap_that_got_nowhere(tmp_path_factory,
                                                                          confidence: float) -> None:
    with MemoryPlane.open(tmp_path_factory.mktemp("v") / "m") as plane:
        kinds = _failed_run(plane, confidence)
        modes = [str(e.get("title")) for e in plane.device.entries("failure")]
    if confidence < 0.5:
        assert kinds[0] == "vision_uncertain" and any("vision_uncertain" in m for m in modes)
    else:
        assert "vision_uncertain" not in kinds and kinds[0] == "page_unchanged"


def test_a_tool_error_that_says_the_screen_was_not_recognised_is_vision_uncertain(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        kinds = _failed_run(plane, None, error="OCR failed: text could not be recognized")
        assert kinds[0] == "vision_uncertain"
    with MemoryPlane.open(tmp_path / "m2") as plane:
        kinds = _failed_run(plane, None, error="屏幕内容无法识别")
        assert kinds[0] == "vision_uncertain"


@pytest.mark.parametrize(("error", "vision"), [
    ("OCR failed", True),
    ("ocr_error: no text in the frame", True),
    ("the element was unrecognized", True),
    ("the mediocre network dropped the request", False),
    ("democracy app: request rejected", False),
])
def test_a_short_word_of_the_screen_reader_counts_only_as_a_word(tmp_path: Path, error: str, vision: bool) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        kinds = _failed_run(plane, None, error=error)
    assert (kinds[0] == "vision_uncertain") is vision, kinds
