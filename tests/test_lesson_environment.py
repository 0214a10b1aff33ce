"""Lessons record the environment they were learned under, as the design's examples do: a failure memory its UI
language (so a language change demotes it like the other lessons), an app profile its language and screen; a
procedure says its scope."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.device_memory import Procedure

from helpers import screenshot

HOME = {"app": "Telegram", "page": "Chats", "visible_text": ["Documents", "Downloads"]}


def _run(plane: MemoryPlane, goal: str, language: str, *, success: bool) -> str:
    req = MemoryRetrieveRequest(input=goal, current_hints={"language": language})
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "Telegram"})
    rec.tool_result("launch_app", observed_state=HOME, screenshot=screenshot("home", (400, 800)))
    if success:
        rec.tool_call("tap", {"x": 200, "y": 300}, target_label="Documents")
        rec.tool_result("tap", observed_state={**HOME, "page": "Documents"}, screenshot=screenshot("d", (400, 800)))
    else:
        rec.tool_call("tap", {"x": 200, "y": 300}, target_label="Delete")
        rec.tool_result("tap", observed_state={**HOME, "dialogs": ["Allow Telegram to access storage?"]},
                        screenshot=screenshot("dlg", (400, 800)))
        rec.tool_call("tap", {"x": 210, "y": 305}, target_label="Delete")
        rec.tool_result("tap", observed_state={**HOME, "dialogs": ["Allow Telegram to access storage?"]},
                        screenshot=screenshot("dlg", (400, 800)))
    ep = rec.finish(success=success, failure_phase=None if success else "state_mismatch")
    assert plane.commit_episode(ep) and plane.flush(10)
    return ep.id


def _failure(plane: MemoryPlane) -> dict:
    (e,) = [e for e in plane.device.entries("failure")]
    return e


def test_a_failure_memory_records_its_ui_language_and_a_language_change_demotes_it(tmp_path: Path) -> None:
    goal = "delete the old report chat in Telegram"
    with MemoryPlane.open(tmp_path / "m") as plane:
        _run(plane, goal, "zh-CN", success=False)
        fail = _failure(plane)
        assert fail["applicability"]["language"] == "zh-CN"
        shown = plane.retrieve(MemoryRetrieveRequest(input=goal, current_hints={"language": "zh-CN"}))
        assert fail["id"] in [h.id for h in shown.common.failure_modes]
        _run(plane, "open Documents in Telegram", "en-US", success=True)  # the device now speaks English
        fail = _failure(plane)
        assert fail["status"] == "conflicted" and fail.get("stale") == "language"
        now = plane.retrieve(MemoryRetrieveRequest(input=goal, current_hints={"language": "en-US"}))
        assert fail["id"] not in now.refs()  # its labels and dialog were another language's
        back = plane.retrieve(MemoryRetrieveRequest(input=goal, current_hints={"language": "zh-CN"}))
        assert fail["id"] in [h.id for h in back.common.failure_modes]  # still right where it was learned
        _run(plane, goal, "en-US", success=False)  # met again under the new language: it holds here too
        fail = _failure(plane)
        assert fail["status"] == "active" and fail["applicability"]["language"] == "en-US"


def test_an_app_profile_records_the_language_and_screen_it_was_seen_under(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        _run(plane, "open Documents in Telegram", "de-DE", success=True)
        (prof,) = plane.device.entries("app_profile")
        assert prof["applicability"]["language"] == "de-DE"
        assert prof["applicability"]["screen"] == "400x800"
        # Where it was seen, not where it holds: another language or screen still gets what it knows of the app.
        for hints in ({"language": "en-US"}, {"language": "de-DE", "screen_width": 1080, "screen_height": 2400}):
            shown = plane.retrieve(MemoryRetrieveRequest(input="open Documents in Telegram", current_hints=hints))
            assert prof["id"] in [h.id for h in shown.common.app_profiles], hints


def test_a_learned_procedure_says_its_scope(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        _run(plane, "open Documents in Telegram", "en-US", success=True)
        (e,) = plane.device.entries("procedure")
        proc = plane.device.collection("procedure").get(str(e["id"]))
        assert isinstance(proc, Procedure) and proc.scope == "app"
        assert "scope: app" in plane.device.collection("procedure").item_path(proc.id).read_text("utf-8")


@given(scope=st.one_of(st.none(), st.sampled_from(["device", "app", "global", "", "APP"])),
       app=st.one_of(st.none(), st.sampled_from(["files", "wechat"])))
def test_every_procedure_has_a_scope_of_the_design(scope: str | None, app: str | None) -> None:
    p = Procedure.model_validate({"id": "proc_x", "scope": scope, "app_id": app})
    assert p.scope in ("device", "app")
    if scope in ("device", "app"):
        assert p.scope == scope
    else:
        assert p.scope == ("app" if app else "device")
