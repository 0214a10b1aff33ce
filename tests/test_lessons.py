"""Lessons true to their evidence: one path per procedure, traced evidence, blame that follows
cause, failures that retire, only the phone teaching device lessons, and episodes that say what they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.device_memory import AppProfile, Calibration, Failure, Navigation, Procedure
from memory_plane.episodes import RESTORE_AFTER, RETIRE_AFTER
from memory_plane.lifecycle import read_jsonl

from helpers import screenshot

ZH = CurrentEnvironmentHints(language="zh-CN", screen_width=640, screen_height=1200)
HOME = {"app": "微信", "page": "首页"}
CONTACTS = {"app": "微信", "page": "通讯录"}


def chat(name: str) -> dict[str, str]:
    return {"app": "微信", "page": f"聊天:{name}"}


def profile(name: str) -> dict[str, str]:
    return {"app": "微信", "page": f"详细资料:{name}"}


def run(plane: MemoryPlane, goal: str, steps: list[tuple[Any, ...]], *, success: bool = True, hints: Any = ZH,
        refs: list[str] | None = None, shot_size: tuple[int, int] | None = (640, 1200), **finish: Any) -> Any:
    """One task as the runtime records it: (tool, input, label, observed_state[, error]) per step."""
    req = MemoryRetrieveRequest(input=goal, current_hints=hints)
    rec = plane.new_episode_recorder(req)
    if refs is not None:
        rec.episode.retrieved_memory_refs = list(refs)
    for tool, ti, label, obs, *err in steps:
        rec.tool_call(tool, ti, content=f"I will use {tool}", target_label=label)
        shot = screenshot(str((obs or {}).get("page", "none")), shot_size) if obs and shot_size else None
        rec.tool_result(tool, is_error=bool(err), error=err[0] if err else None, observed_state=obs, screenshot=shot)
    ep = rec.finish(success=success, **finish)
    plane.commit_episode(ep)
    assert plane.flush(20)
    return ep


def wechat_path(name: str, y: int, *, via_search: bool = False) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = [("launch_app", {"app": "微信"}, None, HOME),
                                    ("tap", {"x": 236, "y": 1116}, "通讯录", CONTACTS)]
    if via_search:
        steps += [("keyboard_text", {"text": name}, None, {**CONTACTS, "visible_text": [name]})]
    steps += [("tap", {"x": 320, "y": y}, name, profile(name)),
              ("tap", {"x": 320, "y": 636}, "发消息", chat(name))]
    return steps


def procedures(plane: MemoryPlane) -> list[Procedure]:
    out = [plane.device.get(e["id"]) for e in plane.device.entries("procedure")]
    return [p for p in out if isinstance(p, Procedure)]


def item(plane: MemoryPlane, kind: str, pred: Any = lambda i: True) -> Any:
    found = [plane.device.get(e["id"]) for e in plane.device.entries(kind)]
    return next(i for i in found if i is not None and pred(i))


# -- 1. one procedure, one path -------------------------------------------------------------------


def test_a_different_path_for_the_same_kind_of_goal_is_its_own_procedure(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "打开微信，给张三发消息", wechat_path("张三", 300))
        run(plane, "打开微信，给王五发消息", wechat_path("王五", 800, via_search=True))
        procs = procedures(plane)
        assert len(procs) == 2
        for p in procs:
            # Steps, title and examples come from the same episodes: 张三's procedure never holds 王五's pages.
            target = p.steps_target
            assert target is not None and all(target in g for g in p.goal_examples)
            pages = [s.page_name for s in p.steps if s.page_name]
            other = "王五" if target == "张三" else "张三"
            assert not any(other in pg for pg in pages) and not any(other in g for g in p.goal_examples)


def test_the_same_path_for_another_target_renews_one_procedure(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "打开微信，给张三发消息", wechat_path("张三", 300))
        run(plane, "打开微信，给李四发消息", wechat_path("李四", 310))  # taps within the closeness rule
        (p,) = procedures(plane)
        assert p.success_count == 2 and len(p.goal_examples) == 2 and len(p.steps) == 4


# -- 2. every lesson traced ----------------------------------------------------------------------


def test_every_lesson_names_the_calls_and_results_that_show_it(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        ep = run(plane, "打开微信，给张三发消息", wechat_path("张三", 300))
        ids = {e["event_id"] for e in plane.episodes.events(ep.id).records}
        kinds = ("app_profile", "procedure", "navigation", "calibration", "ui_anchor")
        for kind in kinds:
            for e in plane.device.entries(kind):
                it = plane.device.get(e["id"])
                assert it is not None and it.evidence_refs, (kind, e["id"])
                ref = it.evidence_refs[0]
                assert ref.id == ep.id and ref.event_ids and set(ref.event_ids) <= ids, (kind, e["id"])
        prof = plane.device.profiles.get("default")
        assert prof is not None and prof.evidence_refs[-1].event_ids


def test_the_first_evidence_survives_the_cap() -> None:
    from memory_plane.lifecycle import EvidenceRef

    p = Procedure(id="proc_x")
    for i in range(30):
        p.add_evidence(EvidenceRef(type="outcome", id=f"ep_{i}", event_ids=[f"e{i}"]))
    assert len(p.evidence_refs) == 20 and p.evidence_refs[0].id == "ep_0" and p.evidence_refs[-1].id == "ep_29"
    assert p.evidence_count == 30


# -- 3. blame follows cause ------------------------------------------------------------------------


def test_a_memory_merely_shown_to_a_failure_is_not_blamed(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "打开微信，给张三发消息", wechat_path("张三", 300))
        shown = [e["id"] for e in plane.device.entries() if e["type"] != "device_profile"]
        before = {i: (plane.device.get(i).status, plane.device.get(i).confidence) for i in shown}  # type: ignore[union-attr]
        settings = [("launch_app", {"app": "设置"}, None, {"app": "设置", "page": "首页"}),
                    ("tap", {"x": 100, "y": 900}, "显示", {"app": "设置", "page": "首页"})]
        for _ in range(2):
            run(plane, "打开设置，开启深色模式", settings, success=False, refs=shown,
                failure_phase="verification", failure_reason="dark mode not on")
        after = {i: (plane.device.get(i).status, plane.device.get(i).confidence) for i in shown}  # type: ignore[union-attr]
        assert after == before
        assert not [c for c in read_jsonl(plane.root / "lifecycle" / "conflicts.jsonl").records
                    if c.get("rule") == "repeated_failures"]


def test_a_procedure_followed_into_failure_is_demoted_and_comes_back(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "打开微信，给张三发消息", wechat_path("张三", 300))
        (p,) = procedures(plane)
        broken = wechat_path("张三", 300)
        broken[-1] = (*broken[-1][:4], "button gone")
        failed = [run(plane, "打开微信，给张三发消息", broken, success=False, refs=[p.id],
                      failure_phase="execution", failure_reason="button gone") for _ in range(3)]
        cur = plane.device.get(p.id)
        assert isinstance(cur, Procedure) and cur.status == "conflicted"
        dem = (cur.model_extra or {})["demotion"]
        assert dem["rule"] and dem["episode"] and dem["event_ids"]
        # The episode that caused the demotion lists it.
        assert any(p.id in plane.episodes.get(ep.id).conflicts for ep in failed)  # type: ignore[union-attr]
        # Successes that follow it bring it back once they outweigh the failures (twice as many, as the
        # path's own failure memory says it fails: conflict source 2).
        for _ in range(2 * 3):
            run(plane, "打开微信，给张三发消息", wechat_path("张三", 300), refs=[p.id])
        cur = plane.device.get(p.id)
        assert isinstance(cur, Procedure) and cur.status == "active"
        rules = [c.get("rule") for c in read_jsonl(plane.root / "lifecycle" / "conflicts.jsonl").records]
        assert {"restored_by_success", "resolved_by_new_evidence"} & set(rules)


def test_calibration_blamed_only_for_a_tap_without_effect_and_restored(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "打开微信，给张三发消息", wechat_path("张三", 300))
        cal = item(plane, "calibration", lambda c: isinstance(c, Calibration) and c.screenshot_width == 640)
        dead = [("launch_app", {"app": "微信"}, None, HOME), ("tap", {"x": 236, "y": 1116}, "通讯录", HOME),
                ("tap", {"x": 240, "y": 1110}, "通讯录", HOME)]
        for _ in range(3):
            run(plane, "打开微信，给张三发消息", dead, success=False, refs=[cal.id])
        cur = plane.device.get(cal.id)
        assert isinstance(cur, Calibration) and cur.status == "conflicted"
        for _ in range(RESTORE_AFTER + 2):
            run(plane, "打开微信，给张三发消息", wechat_path("张三", 300), refs=[cal.id])
        cur = plane.device.get(cal.id)
        assert isinstance(cur, Calibration) and cur.status == "active"


# -- 4. failures retire -----------------------------------------------------------------------------


def test_a_failure_about_an_action_retires_after_successes_of_it(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        typing = [("launch_app", {"app": "微信"}, None, HOME), ("tap", {"x": 236, "y": 1116}, "通讯录", CONTACTS),
                  ("keyboard_text", {"text": "张三"}, None, CONTACTS, "input method rejected text")]
        run(plane, "打开微信，找张三", typing, success=False)
        fail = item(plane, "failure", lambda f: isinstance(f, Failure) and f.trigger.get("input_contains_non_ascii"))
        # Unrelated successes do not count for or against it.
        run(plane, "打开设置", [("launch_app", {"app": "设置"}, None, {"app": "设置", "page": "首页"})])
        cur = plane.device.get(fail.id)
        assert isinstance(cur, Failure) and cur.status == "active" and cur.success_count == 0
        ok = [*typing[:2], ("keyboard_text", {"text": "张三"}, None, {**CONTACTS, "visible_text": ["张三"]})]
        for i in range(RETIRE_AFTER):
            run(plane, "打开微信，找张三", ok, refs=[fail.id] if i % 2 else None)
        cur = plane.device.get(fail.id)
        assert isinstance(cur, Failure) and cur.status == "replaced" and cur.success_count == RETIRE_AFTER
        assert cur.evidence_refs[0].type == "episode"  # the failure that taught it is still its first evidence
        assert sum(r.type == "contradiction" for r in cur.evidence_refs) == RETIRE_AFTER
        block = plane.retrieve(MemoryRetrieveRequest(input="打开微信，找张三", current_hints=ZH)).render()
        assert fail.id not in block


# -- 5. only the device teaches device lessons ---------------------------------------------------


def test_a_runtime_exception_teaches_no_failure(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        req = MemoryRetrieveRequest(input="打开微信登录", current_hints=ZH)
        rec = plane.new_episode_recorder(req)
        with pytest.raises(RuntimeError), rec:
            rec.tool_call("launch_app", {"app": "微信"})
            rec.tool_result("launch_app", observed_state={"app": "微信", "page": "Login"})
            rec.tool_call("keyboard_text", {"text": "密码"})
            raise RuntimeError("device disconnected")
        assert plane.flush(20)
        assert plane.device.entries("failure") == []
        prof = item(plane, "app_profile", lambda a: isinstance(a, AppProfile) and a.app_id == "wechat")
        assert not prof.known_issues
        ep = plane.episodes.get(rec.episode.id)
        assert ep is not None and ep.outcome.failure_phase == "exception"
        assert any("device disconnected" in c for c in ep.failure_causes)


def test_memory_tool_calls_teach_no_procedure(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        req = MemoryRetrieveRequest(input="记住我喜欢深色模式", current_hints=ZH)
        rec = plane.new_episode_recorder(req)
        rec.tool_call("save_memory", {"type": "preference", "content": "likes dark mode"})
        rec.tool_result("save_memory", output="saved")
        plane.commit_episode(rec.finish(success=True))
        assert plane.flush(20)
        assert plane.device.entries("procedure") == [] and plane.device.entries("navigation") == []


def test_calibration_needs_taps_and_screenshots_in_one_space(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        steps = [("launch_app", {"app": "微信"}, None, HOME), ("tap", {"x": 360, "y": 1100}, "通讯录", CONTACTS)]
        run(plane, "打开微信通讯录", steps, hints=CurrentEnvironmentHints(language="zh-CN"), shot_size=(72, 128))
        cals = [plane.device.get(e["id"]) for e in plane.device.entries("calibration")]
        assert not [c for c in cals if isinstance(c, Calibration) and c.coord_space == "pixels"]
        # With the screen's size known, the scale between the two spaces is what is learned.
        run(plane, "打开微信通讯录", steps, hints=ZH, shot_size=(72, 128))
        cals = [plane.device.get(e["id"]) for e in plane.device.entries("calibration")]
        assert [c for c in cals if isinstance(c, Calibration) and c.coord_space == "device pixels 640x1200"]


def test_a_crashed_episode_teaches_its_app_facts_at_low_confidence(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="打开美团", current_hints=ZH))
        rec.tool_call("launch_app", {"app": "美团"})
        rec.tool_result("launch_app", observed_state={"app": "美团", "page": "首页", "package": "com.sankuai.meituan"})
        ep_id = rec.episode.id
        rec._release_recording_lock()  # the recorder's process died here
        del rec
    with MemoryPlane.open(root) as plane:
        plane.verify()
        ep = plane.episodes.get(ep_id)
        assert ep is not None and ep.status == "interrupted"
        prof = item(plane, "app_profile", lambda a: isinstance(a, AppProfile) and a.app_id == "meituan")
        assert prof.confidence <= 0.3 and "com.sankuai.meituan" in prof.packages
        assert plane.device.entries("procedure") == [] and plane.device.entries("failure") == []


# -- 7. evidence counts ----------------------------------------------------------------------------


def test_a_memory_without_evidence_is_down_weighted_and_says_so(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "打开微信，给张三发消息", wechat_path("张三", 300))
        (p,) = procedures(plane)

        def strip(cur: Any) -> Any:
            return cur.model_copy(update={"evidence_refs": [], "evidence_count": 0})

        twin = p.model_copy(update={"id": "proc_handmade"})
        plane.device.collection("procedure").update("proc_handmade", lambda cur: strip(twin))
        ctx = plane.retrieve(MemoryRetrieveRequest(input="打开微信，给张三发消息", current_hints=ZH))
        hits = {h.id: h for h in ctx.common.procedures}
        assert p.id in hits and "proc_handmade" in hits
        assert hits["proc_handmade"].score < hits[p.id].score
        assert hits["proc_handmade"].factors.get("no_evidence") == 1.0 and "no_evidence" not in hits[p.id].factors


# -- 8. the episode says what it was ---------------------------------------------------------------


def test_an_episode_through_the_launcher_is_about_its_app(tmp_path: Path) -> None:
    launcher = {"app": "Launcher", "page": "桌面", "package": "com.android.launcher3"}
    steps = [("home", {}, None, launcher), ("swipe", {"direction": "left"}, None, {**launcher, "page": "桌面2"}),
             ("tap", {"x": 96, "y": 300}, "微信", HOME), ("tap", {"x": 236, "y": 1116}, "通讯录", launcher)]
    with MemoryPlane.open(tmp_path / "m") as plane:
        ep = run(plane, "打开微信", steps)
        assert ep.observed_app == "微信"


def test_a_tool_error_lists_its_cause(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        ep = run(plane, "打开微信", [("launch_app", {"app": "微信"}, None, HOME, "timeout")], success=False,
                 error="launch timed out")
        got = plane.episodes.get(ep.id)
        assert got is not None and any(c.startswith("tool_error") for c in got.failure_causes)


def test_the_goals_own_name_for_an_app_is_learned_when_the_episode_opened_it(tmp_path: Path) -> None:
    launcher = {"app": "Launcher", "page": "桌面"}
    steps = [("keyboard_text", {"text": "团团"}, None, {**launcher, "visible_text": ["团团"]}),
             ("tap", {"x": 100, "y": 200}, "美团", {"app": "美团", "page": "首页", "package": "com.sankuai.meituan"})]
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "用团团买一杯奶茶", steps)
        prof = item(plane, "app_profile", lambda a: isinstance(a, AppProfile) and a.app_id == "meituan")
        assert "团团" in prof.aliases
        assert plane.device.catalog.app_id_for("团团") == "meituan"


def test_ui_anchor_labels_come_from_the_screen_not_the_narration(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        req = MemoryRetrieveRequest(input="打开微信通讯录", current_hints=ZH)
        rec = plane.new_episode_recorder(req)
        rec.tool_call("launch_app", {"app": "微信"})
        rec.tool_result("launch_app", observed_state={
            **HOME, "elements": [{"label": "通讯录", "bounds": [200, 1080, 280, 1150]}]},
            screenshot=screenshot("home"))
        rec.tool_call("mouse_click", {"x": 236, "y": 1116}, content="mouse_click {'x': 236, 'y': 1116}")
        rec.tool_result("mouse_click", observed_state=CONTACTS, screenshot=screenshot("contacts"))
        plane.commit_episode(rec.finish(success=True))
        assert plane.flush(20)
        labels = [plane.device.get(e["id"]).label for e in plane.device.entries("ui_anchor")]  # type: ignore[union-attr]
        assert labels == ["通讯录"]
        nav = item(plane, "navigation", lambda n: isinstance(n, Navigation) and n.to_page == "通讯录")
        assert nav.description == "通讯录"
        (p,) = procedures(plane)
        assert all("mouse_click {" not in (s.description or "") for s in p.steps)


def test_a_failure_phase_is_kept_as_given(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        for phase, stored in (("login", "login"), ("Payment Declined", "payment_declined")):
            ep = run(plane, "打开微信", [("launch_app", {"app": "微信"}, None, HOME)], success=False,
                     failure_phase=phase, failure_reason="no")
            got = plane.episodes.get(ep.id)
            assert got is not None and got.outcome.failure_phase == stored


def test_inspect_episode_shows_what_each_lesson_was_taught_by(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        ep = run(plane, "打开微信，给张三发消息", wechat_path("张三", 300))
        got = plane.episodes.get(ep.id)
        assert got is not None and got.reusable_lessons
        res = plane.tools.call("inspect_episode", {"episode_id": ep.id})
        assert not res.is_error and "taught (memory: the events that show it)" in res.text
        (p,) = procedures(plane)
        ids = p.evidence_refs[0].event_ids
        assert f"{p.id} ({ids[0]}" in res.text and f"[{ids[0]}]" in res.text


def test_odd_phone_input_and_hand_edited_blame_fields_cost_nothing(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        req = MemoryRetrieveRequest(input="打开微信通讯录", current_hints=ZH)
        rec = plane.new_episode_recorder(req)
        rec.tool_call("launch_app", {"app": "微信"})
        rec.tool_result("launch_app", observed_state={**HOME, "elements": [
            "not a mapping", {"label": 5, "bounds": [0, 0, 9, 9]}, {"label": "x", "bounds": "0,0,9,9"},
            {"label": "y", "bounds": [0, "a", 9, 9]}, {"label": "通讯录", "bounds": [200, 1080, 280, 1150]}]},
            screenshot=screenshot("home"))
        rec.memory_used(["not", "an", "id"])  # type: ignore[arg-type]
        rec.tool_call("mouse_click", {"x": 236, "y": 1116}, target_label=None)
        rec.tool_result("mouse_click", observed_state=CONTACTS, screenshot=screenshot("contacts"))
        plane.commit_episode(rec.finish(success=True))
        assert plane.flush(20)
        (p,) = procedures(plane)
        assert p.steps[-1].target_label == "通讯录"
        # A person mangles the blame fields: they are read as absent, and lessons go on.
        path = plane.root / "device" / "procedures" / f"{p.id}.yaml"
        path.write_text(path.read_text("utf-8") + "demotion: broken\nled_by: 5\n", "utf-8")
        fails = plane.root / "device" / "failures"
        run(plane, "打开微信，给张三发消息", wechat_path("张三", 300), success=False, refs=[p.id])
        for f in fails.glob("fail_*.yaml"):
            f.write_text(f.read_text("utf-8") + "led_by: {a: 1}\n", "utf-8")
        run(plane, "打开微信，给张三发消息", wechat_path("张三", 300))
        assert plane.device.get(p.id) is not None
        assert plane.retrieve(MemoryRetrieveRequest(input="打开微信通讯录", current_hints=ZH)).render()


def test_a_tap_in_normalized_coordinates_is_said_in_that_space(tmp_path: Path) -> None:
    """Taps given as fractions of the screen, without a screenshot: the calibration learned says the taps are
    normalized and that such a tap changed the page, never that a tap at screenshot pixels did."""
    from task_runs import run_task, screen

    with MemoryPlane.open(tmp_path / "m") as plane:
        run_task(plane, "Open the contacts in Chat", [
            ("launch_app", {"app": "Chat"}, None, screen("Chat", "Home", "Contacts")),
            ("tap", {"x": 0.5, "y": 0.9, "coord_space": "normalized"}, "Contacts", screen("Chat", "Contacts", "Ann")),
        ])
        [cal] = [c for c in (plane.device.get(e["id"]) for e in plane.device.entries("calibration"))
                 if isinstance(c, Calibration)]
        assert cal.coord_space == "normalized" and cal.screenshot_width is None
        assert cal.notes and all("normalized coordinates" in n and "screenshot pixels" not in n for n in cal.notes)


@pytest.mark.parametrize(("tap", "shot"), [
    ({"x": 0.5, "y": 0.9}, (108, 240)),  # fractions of the screen, the runtime saying nothing of the space
    ({"x": 0.25, "y": 0.75, "coord_space": "normalised"}, None),  # the space named in British spelling
])
def test_taps_given_as_fractions_are_never_taught_as_pixels(tmp_path: Path, tap: dict[str, Any],
                                                           shot: tuple[int, int] | None) -> None:
    """A tap at (0.5, 0.9) on a screenshot of 108x240 pixels is a fraction of the screen, not the top-left
    pixel: the calibration learned says the taps are normalized, never that a tap at screenshot pixels worked."""
    from task_runs import screen

    with MemoryPlane.open(tmp_path / "m") as plane:
        req = MemoryRetrieveRequest(input="Open the contacts in Chat", current_hints={"language": "en-US"})
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        for tool, args, label, after in [("launch_app", {"app": "Chat"}, None, screen("Chat", "Home", "Contacts")),
                                         ("tap", tap, "Contacts", screen("Chat", "Contacts", "Ann"))]:
            rec.tool_call(tool, args, target_label=label)
            rec.tool_result(tool, output="ok", observed_state=after,
                            screenshot=screenshot(str(after["page"]), shot) if shot else None)
        plane.commit_episode(rec.finish(success=True, completion_reason="the contacts list is shown"))
        plane.flush()
        cals = [c for c in (plane.device.get(e["id"]) for e in plane.device.entries("calibration"))
                if isinstance(c, Calibration)]
        assert cals and all(c.coord_space == "normalized" for c in cals)
        assert all("screenshot pixels" not in n for c in cals for n in c.notes)
