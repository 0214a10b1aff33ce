"""Memory semantics the design and the Go implementation promise (what is credited, what supersedes what)."""

from __future__ import annotations

from pathlib import Path

from freezegun import freeze_time

from memory_plane import MemoryPlane, MemoryRetrieveRequest


def task(plane: MemoryPlane, goal: str, app: str, *, success: bool = True, session_id: str | None = None) -> str:
    req = MemoryRetrieveRequest(input=goal, session_id=session_id, current_hints={"language": "zh-CN"})
    ctx = plane.retrieve(req)
    rec = plane.new_episode_recorder(req, ctx)
    rec.tool_call("launch_app", {"app": app})
    rec.tool_result("launch_app", observed_state={"app": app, "page": "首页"})
    ep = rec.finish(success=success)
    plane.commit_episode(ep)
    plane.flush()
    return ep.id


def test_a_frozen_session_credits_the_memories_the_agent_saw(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        task(plane, "打开微信，找到王五", "微信")
        task(plane, "打开支付宝，查看余额", "支付宝")
        c1 = plane.retrieve(MemoryRetrieveRequest(input="打开微信，找到王五，准备发消息", session_id="s"))
        c2 = plane.retrieve(MemoryRetrieveRequest(input="打开支付宝，查看余额", session_id="s"))
        assert c2.render() == c1.render()
        assert c2.refs() == c1.refs()
        assert all(r in c1.render() for r in c2.refs())


def test_an_episode_counts_once_for_the_app_profile_it_was_shown(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        task(plane, "在美团点一杯奶茶", "美团")
        first = plane.device.get("app_meituan")
        assert first is not None
        before = first.success_count
        ep_id = task(plane, "在美团点一份炸鸡", "美团")
        ep = plane.episodes.get(ep_id)
        assert ep is not None and "app_meituan" in ep.retrieved_memory_refs
        after = plane.device.get("app_meituan")
        assert after is not None and after.success_count == before + 1


def test_short_chinese_memories_supersede_like_english_ones(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        lt = plane.long_term
        a = lt.save_memory(type="rule", content="用验证码。", tags=["登录"], entities=["某政务App"])
        b = lt.save_memory(type="rule", content="用验证码。验证码过期时先重新获取。", tags=["登录"],
                           entities=["某政务App"])
        assert b.status == "superseded" and b.superseded == [a.id]
        e1 = lt.save_memory(type="rule", content="Use the code.", tags=["login"])
        e2 = lt.save_memory(type="rule", content="Use the code. Get a new one when it expires.", tags=["login"])
        assert e2.status == "superseded" and e2.superseded == [e1.id]


def test_contradictory_rules_are_never_both_active(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        lt = plane.long_term
        must = lt.save_memory(type="rule", content="支付前必须确认。", tags=["支付"], entities=["支付宝"])
        need_not = lt.save_memory(type="rule", content="支付不需要确认。", tags=["支付"], entities=["支付宝"])
        assert need_not.status == "superseded" and need_not.superseded == [must.id]
        assert "contradicts" in (need_not.reason or "")
        old = lt.get(must.id)
        assert old is not None and old.status == "replaced"
        en1 = lt.save_memory(type="rule", content="Always confirm before paying.")
        en2 = lt.save_memory(type="rule", content="Never confirm before paying.")
        assert en2.status == "superseded" and en2.superseded == [en1.id]
        # Different actions are not a contradiction.
        other = lt.save_memory(type="rule", content="不要在夜里打开微信。")
        assert other.status == "saved"
        block = plane.retrieve("用支付宝付款").render()
        assert "支付前必须确认" not in block


def test_the_session_window_keeps_pairs_and_the_root_goal(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        s = plane.session
        s.append("user_input", "帮我把周报发给张三")
        for i in range(16):
            s.append("assistant_output", f"step {i}: I will call a tool")
            s.append("assistant_output", f"calling tool {i}")
            s.append("tool_result", f"result {i}")
        s.append("assistant_output", "done")
        s.append("assistant_output", "calling the last tool")
        window = s.window()
        assert window[0]["type"] == "user_input" and window[0]["content"] == "帮我把周报发给张三"
        assert window[1]["type"] != "tool_result"
        assert s.chunk_index.read().entries  # something was compressed


def test_the_first_append_opens_a_session_and_close_archives_it(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        plane.session.append("user_input", "你好")
        sid = plane.session.metadata().get("session_id")
        assert sid
        assert plane.session.close() == sid
        (archived,) = [d for d in (root / "session_archive").iterdir() if d.is_dir()]
        assert "你好" in (archived / "events.jsonl").read_text()
        assert plane.session.close() is None  # nothing said since: nothing to archive


def test_an_expired_device_profile_is_not_shown_and_verify_marks_it(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        task(plane, "打开微信", "微信")
        assert plane.retrieve("打开微信").common.device_profile
    prof = root / "device" / "profile.yaml"
    text = prof.read_text()
    old = 'expires_at: "2020-01-01T00:00:00Z"'
    lines = [old if ln.startswith("expires_at:") else ln for ln in text.split("\n")]
    prof.write_text("\n".join(lines))
    with MemoryPlane.open(root) as plane:
        assert not plane.retrieve("打开微信").common.device_profile
        report = plane.verify()
        assert "device_default" in report.stats["expired_marked"]
    assert "status: expired" in prof.read_text()


@freeze_time("2026-06-01T00:00:00Z")
def test_a_conflict_line_names_both_memories(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        task(plane, "在美团点一杯奶茶", "美团")
        proc = next(e["id"] for e in plane.device.entries("procedure"))
        rule = plane.save_rule("在美团下单前先问我", overrides=[proc])
        block = plane.retrieve("在美团点一杯奶茶").render()
        assert f"conflicts with [{rule.id}]" in block


def _run(plane: MemoryPlane, goal: str, steps: list[tuple], *, success: bool, hints: dict | None = None,
         shots: bool = False) -> str:
    from helpers import screenshot

    req = MemoryRetrieveRequest(input=goal, current_hints=hints or {"language": "zh-CN"})
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    for i, (tool, args, obs) in enumerate(steps):
        rec.tool_call(tool, args)
        rec.tool_result(tool, observed_state=obs, screenshot=screenshot(f"s{i}", (320, 600)) if shots else None)
    ep = rec.finish(success=success, failure_phase=None if success else "verification_timeout")
    plane.commit_episode(ep)
    plane.flush()
    return ep.id


def test_failure_causes_are_read_off_the_events(tmp_path: Path) -> None:
    home = {"app": "微信", "page": "首页", "visible_text": ["通讯录", "发现"]}
    chat = {"app": "微信", "page": "聊天", "visible_text": ["张三", "发送"]}
    steps = [("launch_app", {"app": "微信"}, home),
             ("tap", {"x": 500, "y": 900}, home), ("tap", {"x": 505, "y": 902}, home),
             ("tap", {"x": 498, "y": 899}, home),
             ("back", {}, home),
             ("tap", {"x": 100, "y": 100}, {**chat, "dialogs": ["允许访问通讯录?"]}),
             ("keyboard_text", {"text": "你好张三"}, chat)]
    with MemoryPlane.open(tmp_path / "m") as plane:
        ep_id = _run(plane, "给张三发消息", steps, success=False)
        ep = plane.episodes.get(ep_id)
        assert ep is not None
        kinds = {c.split(":")[0] for c in ep.failure_causes}
        assert kinds >= {"repeated_tap_no_effect", "page_unchanged", "dialog_blocking"}
        assert ep.outcome.failure_phase in kinds  # the runtime's phase is listed as a cause too
        # One failure, one cause: the symptom at its failing step. The text did not arrive under a dialog that
        # was open before it: the dialog explains it. The other symptoms are on the episode's list only.
        failures = [plane.device.get(e["id"]) for e in plane.device.entries("failure")]
        (mode,) = [f for f in failures if f is not None and f.cause]  # (beside the device-wide keyboard mode)
        assert mode.cause["symptom"] == "dialog_blocking" and mode.cause["subject"] == "允许访问通讯录?"
        assert mode.trigger.get("kind") == "dialog_blocking" and "dismiss" in (mode.lesson or "")
        # A success with a stray tap teaches no failure.
        ok_id = _run(plane, "打开微信", steps[:2], success=True)
        ok = plane.episodes.get(ok_id)
        assert ok is not None and ok.failure_causes == []


def test_input_method_is_recorded_applies_and_its_change_demotes(tmp_path: Path) -> None:
    steps = [("launch_app", {"app": "微信"}, {"app": "微信", "page": "首页"}),
             ("keyboard_text", {"text": "zhangsan"}, {"app": "微信", "page": "搜索", "input_method": "sogou_pinyin"})]
    with MemoryPlane.open(tmp_path / "m") as plane:
        ep_id = _run(plane, "打开微信搜索张三", steps, success=True, hints={"language": "zh-CN",
                                                                          "input_method": "gboard"})
        ep = plane.episodes.get(ep_id)
        assert ep is not None and ep.device_scope.input_method == "sogou_pinyin"  # observed wins over the hint
        prof = plane.device.profiles.get("default")
        assert prof is not None and prof.input_method == "sogou_pinyin"
        proc = next(plane.device.get(e["id"]) for e in plane.device.entries("procedure"))
        assert proc is not None and proc.applicability.get("input_method") == "sogou_pinyin"
        other = [("launch_app", {"app": "微信"}, {"app": "微信", "page": "首页", "input_method": "gboard"})]
        _run(plane, "打开微信", other, success=True)
        proc2 = plane.device.get(proc.id)
        assert proc2 is not None and proc2.status == "conflicted"
        assert (proc2.model_extra or {}).get("stale_key") == "input_method"


def test_an_episode_names_its_lessons_and_its_first_screen(tmp_path: Path) -> None:
    steps = [("launch_app", {"app": "微信"}, {"app": "微信", "page": "首页", "visible_text": ["通讯录", "发现"]}),
             ("tap", {"x": 300, "y": 400}, {"app": "微信", "page": "聊天:张三"})]
    with MemoryPlane.open(tmp_path / "m") as plane:
        ep_id = _run(plane, "打开微信找张三", steps, success=True, shots=True)
        ep = plane.episodes.get(ep_id)
        assert ep is not None
        summary = ep.initial_state.summary or ""
        assert "微信 / 首页" in summary and "通讯录" in summary
        assert ep.initial_state.screenshot_ref and ep.initial_state.screenshot_ref.startswith("artifacts/")
        assert any(x.startswith("proc_") for x in ep.reusable_lessons)
        assert all(plane.device.get(x) is not None for x in ep.reusable_lessons if not x.startswith("device_"))


def test_verify_follows_source_refs_and_lists_refresh_candidates(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        mem = plane.long_term.save_memory(type="fact", content="The user's gym is Fitness One on Garden Road",
                                          source_refs=["ep_20260101_00000000aa"])
        report = plane.verify()
        assert mem.id in report.stats["excerpt_only"]  # the episode it came from is gone
        hit = next(h for h in plane.retrieve("where is the gym on Garden Road").common.long_term if h.id == mem.id)
        assert hit.factors["conflict_or_stale_penalty"] == 0.5
        task(plane, "在美团点一杯奶茶", "美团")
        proc_id = next(e["id"] for e in plane.device.entries("procedure"))

        def expire(cur):  # type: ignore[no-untyped-def]
            cur.expires_at = "2020-01-01T00:00:00Z"
            return cur

        plane.device.upsert("procedure", proc_id, expire)
        report = plane.verify()
        (cand,) = [c for c in report.stats["refresh_candidates"] if c["id"] == proc_id]
        assert cand["success_count"] >= 1 and cand["type"] == "procedure"


def test_retrieve_in_a_session_carries_what_was_said_so_far(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        for i in range(60):
            plane.session.append("user_input" if i % 2 == 0 else "assistant_output",
                                 f"第{i}条：帮我订周五去上海的高铁票" if i % 2 == 0 else f"好的 {i}")
        block = plane.retrieve(MemoryRetrieveRequest(input="改签到周六", session_id="s1")).render()
        assert "## Session so far" in block and "上海" in block
        section = block.split("## Session so far", 1)[1].split("\n\n", 1)[0]
        assert len(section) <= 1200
        assert "## Session so far" not in plane.retrieve("改签到周六").render()  # no session, no section


def test_app_profiles_learn_entries_dialogs_login_and_aliases(tmp_path: Path) -> None:
    steps = [("launch_app", {"app": "微信"}, {"app": "微信", "page": "首页", "package": "com.tencent.mm",
                                             "login_state": "logged_in", "dialogs": ["发现新版本"]}),
             ("tap", {"x": 10, "y": 20, "target_label": "以后再说"}, {"app": "微信", "page": "首页"}),
             ("tap", {"x": 300, "y": 400}, {"app": "微信", "page": "聊天:张三"})]
    with MemoryPlane.open(tmp_path / "m") as plane:
        _run(plane, "打开微信找张三", steps, success=True)
        prof = plane.device.get("app_wechat")
        assert prof is not None
        assert prof.login_state == "logged_in"
        assert any(d.startswith("发现新版本 → dismissed by tap") and "以后再说" in d for d in prof.common_dialogs)
        assert "com.tencent.mm" in prof.aliases
        assert prof.known_entries.get("首页", "").startswith("launch_app from")
