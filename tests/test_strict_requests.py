"""Requests are strict: a field the request does not have is an error naming it, never a silent no-op;
files on disk stay as forgiving as before (a hand-added key still loads)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest

_FIELD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=20)


def test_a_misspelt_tool_filter_is_refused_not_silently_off() -> None:
    with pytest.raises(pydantic.ValidationError) as exc:
        MemoryRetrieveRequest(input="open wechat", tool_name=["tap"])  # type: ignore[call-arg]
    assert "tool_name" in str(exc.value)
    assert MemoryRetrieveRequest(input="open wechat", tool_names=["tap"]).tool_names == ["tap"]


@given(key=_FIELD.filter(lambda k: k not in MemoryRetrieveRequest.model_fields))
def test_any_unknown_request_field_is_an_error_naming_it(key: str) -> None:
    with pytest.raises(pydantic.ValidationError) as exc:
        MemoryRetrieveRequest.model_validate({"input": "open wechat", key: "x"})
    assert [e["loc"] for e in exc.value.errors()] == [(key,)]
    assert key in str(exc.value)


@given(key=_FIELD.filter(lambda k: k not in CurrentEnvironmentHints.model_fields))
def test_any_unknown_hint_is_an_error_naming_it_also_inside_a_request(key: str) -> None:
    with pytest.raises(pydantic.ValidationError) as exc:
        CurrentEnvironmentHints.model_validate({"language": "en-US", key: 1})
    assert key in str(exc.value)
    with pytest.raises(pydantic.ValidationError) as nested:
        MemoryRetrieveRequest.model_validate({"input": "x", "current_hints": {key: 1}})
    assert [e["loc"] for e in nested.value.errors()] == [("current_hints", key)]


def test_every_documented_field_is_still_read() -> None:
    req = MemoryRetrieveRequest.model_validate({
        "input": "open wechat", "device_id": "pixel", "attachments": [1], "skills": ["s"], "tool_names": ["tap"],
        "session_id": "s1", "exclude_ids": ["m1"],
        "current_hints": {"app": "WeChat", "page": "home", "language": "zh-CN", "screen_width": 640,
                          "screen_height": 1200, "frame_socket": "/tmp/f", "input_method": "adb"}})
    assert req.current_hints.screen() == "640x1200" and req.tool_names == ["tap"]


def test_items_on_disk_with_a_hand_added_key_still_load(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        req = MemoryRetrieveRequest(input="open the camera", current_hints={"app": "Camera", "page": "home"})
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_call("tap", {"x": 1, "y": 2}, content="shutter")
        rec.tool_result("tap", observed_state={"app": "Camera", "page": "home"})
        ep = rec.finish(success=True)
        plane.commit_episode(ep)
        plane.flush()
        saved = plane.long_term.save_memory(type="fact", content="The camera opens with a double press")
    ep_file = next(root.glob("episodes/*/*/episode.yaml"))
    ep_file.write_text(ep_file.read_text() + "hand_note: added by the operator\n")
    mem_file = next(root.glob("long_term/memories/*.md"))
    mem_file.write_text(mem_file.read_text().replace("---\n", "---\nhand_note: kept\n", 1))
    with MemoryPlane.open(root) as plane:
        assert plane.episodes.get(ep.id) is not None
        assert plane.long_term.get(saved.id) is not None
        assert not plane.verify().problems
