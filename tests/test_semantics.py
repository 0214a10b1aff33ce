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
