"""The model's memory tools: declarations, tolerant and bounded calls, refs into the episode, a genai loop.

It reaches inside `_fake_gemini` for the fake model, and `_tools` for its token estimate.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest, MemoryTools, ToolResult
from memory_plane._fake_gemini import FakeGemini
from memory_plane._tools import estimate_tokens

GOAL = "打开微信，找到张三，准备发消息"


@pytest.fixture
def plane(tmp_path: Path):  # type: ignore[no-untyped-def]
    with MemoryPlane.open(tmp_path / "m") as p:
        req = MemoryRetrieveRequest(input=GOAL, current_hints={"language": "zh-CN"})
        rec = p.new_episode_recorder(req, p.retrieve(req))
        rec.tool_call("launch_app", {"app": "com.tencent.mm"}, content="open WeChat")
        rec.tool_result("launch_app", observed_state={"app": "微信", "page": "首页", "package": "com.tencent.mm"})
        rec.tool_call("tap", {"x": 300, "y": 400}, content="张三")
        rec.tool_result("tap", observed_state={"app": "微信", "page": "聊天:张三"})
        p.commit_episode(rec.finish(success=True))
        p.flush()
        p.long_term.save_memory(type="fact", content="The user's home address is 12 Garden Road", tags=["address"])
        yield p


def test_declarations_are_valid_genai_function_declarations_and_guide_use(plane: MemoryPlane) -> None:
    from google.genai import types

    decls = {d["name"]: d for d in plane.tools.declarations()}
    assert set(decls) == {"recall_memory", "save_memory", "forget_memory", "recall_device_memory",
                          "inspect_episode", "recall_session_chunks"}
    for d in decls.values():
        types.FunctionDeclaration(name=d["name"], description=d["description"],
                                  parameters_json_schema=d["parameters"])
    assert "before asking" in decls["recall_memory"]["description"]
    assert "Do not save guesses" in decls["save_memory"]["description"]
    assert "reason" in decls["forget_memory"]["parameters"]["required"]
    (tool,) = plane.tools.genai_tools()
    assert {f.name for f in tool.function_declarations or []} == set(decls)
    read_only = MemoryTools(plane, allow_write=False)
    assert "save_memory" not in read_only.names()
    assert read_only.call("save_memory", {"content": "x"}).is_error


def test_every_tool_answers_well_formed_calls_with_refs(plane: MemoryPlane) -> None:
    t = plane.tools
    r = t.call("recall_memory", {"query": "home address"})
    assert not r.is_error and "12 Garden Road" in r.text and r.refs and r.refs[0].startswith("mem_")
    assert "«" in r.text  # stored text is quoted as data
    saved = t.call("save_memory", {"content": "The user prefers WeChat for messages", "type": "preference"})
    assert not saved.is_error and saved.text.startswith("saved as mem_")
    again = t.call("save_memory", {"content": "The user prefers WeChat for messages", "type": "preference"})
    assert "not saved" in again.text
    dev = t.call("recall_device_memory", {"query": "微信 张三", "app": "WeChat"})
    assert not dev.is_error and any(x.startswith(("proc_", "app_")) for x in dev.refs)
    ep_id = plane.episodes.entries()[0]["id"]
    ins = t.call("inspect_episode", {"episode_id": ep_id})
    assert not ins.is_error and "succeeded" in ins.text and "launch_app" in ins.text and ins.refs == [ep_id]
    sess = t.call("recall_session_chunks", {"query": "anything"})
    assert not sess.is_error
    gone = t.call("forget_memory", {"memory_id": saved.refs[0], "reason": "the user asked"})
    assert not gone.is_error and plane.long_term.get(saved.refs[0]) is None
    assert t.call("forget_memory", {"memory_id": saved.refs[0], "reason": "again"}).is_error


def test_sloppy_arguments_are_read_the_way_models_write_them(plane: MemoryPlane) -> None:
    t = plane.tools
    r = t.call("recall_memory", {"query": "address", "limit": "2", "verbose": True, "lang": "en"})
    assert not r.is_error and "ignored unknown arguments: lang, verbose" in r.text
    r = t.call("recall_memory", json.dumps({"query": "address"}))  # arguments as a JSON string
    assert not r.is_error and r.refs
    r = t.call("save_memory", {"content": "Zhang San is the user's manager", "tags": "work", "entities": "Zhang San"})
    assert r.text.startswith("saved as")
    mem = plane.long_term.get(r.refs[0])
    assert mem is not None and mem.tags == ["work"] and mem.entities == ["Zhang San"]
    assert not t.call("recall_device_memory", {"limit": 500}).is_error  # clamped, not refused
    assert not t.call("inspect_episode", {"episode_id": plane.episodes.entries()[0]["id"], "max_events": "3"}).is_error


HOSTILE = [None, "", "not json", "[1, 2]", [1, 2], 5, {"query": None}, {"query": ["a", {"b": 1}]},
           {"episode_id": "../../../etc/passwd"}, {"memory_id": "../../x", "reason": "r"},
           {"query": "x" * 200_000}, {"content": "\x00" * 10, "type": "sudo"}, {"type": "nonsense"},
           {"step_range": "1-3"}, {"query": {"$gt": ""}}, {"limit": float("nan"), "query": "a"}]


@pytest.mark.parametrize("name", ["recall_memory", "save_memory", "forget_memory", "recall_device_memory",
                                  "inspect_episode", "recall_session_chunks", "recall_history", "rm_rf"])
def test_hostile_arguments_never_raise_nor_escape_the_root(plane: MemoryPlane, name: str) -> None:
    outside = {p for p in plane.root.parent.parent.iterdir()}
    for args in HOSTILE:
        res = plane.tools.call(name, args)
        assert isinstance(res, ToolResult) and isinstance(res.text, str)
        assert estimate_tokens(res.text) <= plane.tools.budget_tokens + 200
    assert {p for p in plane.root.parent.parent.iterdir()} == outside


def test_answers_stay_within_the_budget(plane: MemoryPlane) -> None:
    for i in range(80):
        plane.long_term.save_memory(type="fact", content=f"Garden fact number {i}: " + "a long detail " * 30)
    tools = MemoryTools(plane, budget_tokens=300)
    r = tools.call("recall_memory", {"query": "garden fact", "limit": 20})
    assert estimate_tokens(r.text) <= 300 and "more results not shown (answer budget)" in r.text
    assert "recall_memory offset=" in r.text and "narrow the query" in r.text
    assert all(ref in r.text for ref in r.refs)


def test_recalled_memories_become_the_episodes_refs(plane: MemoryPlane) -> None:
    req = MemoryRetrieveRequest(input="send my home address to Zhang San")
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("recall_memory", {"query": "home address"})
    res = plane.tools.call("recall_memory", {"query": "home address"})
    rec.tool_result("recall_memory", output=res)
    ep = rec.finish(success=True)
    assert res.refs[0] in ep.retrieved_memory_refs
    events = [e for e in plane.episodes.events(ep.id).records if e["type"] == "tool_result"]
    assert "12 Garden Road" in events[-1]["output"]


def test_recall_history_is_offered_with_a_ledger(plane: MemoryPlane) -> None:
    rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="long task"))
    ledger = plane.open_transcript(rec)
    ledger.stage(package="com.tencent.mm", activity="Chat")
    ledger.commit(action="tap", args={"x": 1, "y": 2}, result="opened the chat with Zhang San")
    tools = MemoryTools(plane, ledger=ledger)
    assert "recall_history" in tools.names()
    r = tools.call("recall_history", {"query": "Zhang San"})
    assert not r.is_error and "Zhang San" in r.text
    assert tools.call("recall_history", {}).is_error


def test_a_genai_loop_dispatches_function_calls_and_refs_reach_the_episode(plane: MemoryPlane) -> None:
    from google import genai
    from google.genai import types

    with FakeGemini() as fake:
        fake.script("gemini-test", (200, {"parts": [{"functionCall": {"id": "call_1", "name": "recall_memory",
                                                                        "args": {"query": "home address"}}}]}, 0),
                    (200, "The address is 12 Garden Road.", 0))
        client = genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=fake.url))
        config = types.GenerateContentConfig(
            tools=plane.tools.genai_tools(),
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
        req = MemoryRetrieveRequest(input="send my home address to Zhang San")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text=req.input)])]
        answer = ""
        for _ in range(3):
            resp = client.models.generate_content(model="gemini-test", contents=contents, config=config)
            calls = resp.function_calls or []
            if not calls:
                answer = resp.text or ""
                break
            contents.append(resp.candidates[0].content)  # type: ignore[index, arg-type]
            parts = []
            for fc in calls:
                rec.tool_call(fc.name or "", fc.args or {}, call_id=fc.id)
                res = plane.tools.call(fc.name or "", fc.args or {})
                rec.tool_result(fc.name or "", output=res, call_id=fc.id)
                parts.append(types.Part(function_response=types.FunctionResponse(
                    id=fc.id, name=fc.name, response=res.to_dict())))
            contents.append(types.Content(role="user", parts=parts))
        ep = rec.finish(success=True, final_answer=answer)
    assert answer == "The address is 12 Garden Road."
    sent = fake.requests[1]["body"]
    fr = sent["contents"][-1]["parts"][0]["functionResponse"]
    assert fr["id"] == "call_1" and fr["name"] == "recall_memory" and "12 Garden Road" in fr["response"]["result"]
    decl_names = {f["name"] for f in fake.requests[0]["body"]["tools"][0]["functionDeclarations"]}
    assert "save_memory" in decl_names
    assert any(r.startswith("mem_") for r in ep.retrieved_memory_refs)


def test_parity_with_the_go_tools_arguments_and_descriptions(plane: MemoryPlane) -> None:
    decls = {d["name"]: d["description"] for d in plane.tools.declarations()}
    for want in ("long-term", "recall_session_chunks", '"tags":["verification"', "topic/domain keywords",
                 "preference", "rule", "procedure"):
        assert want in decls["recall_memory"]
    for want in ("Mandatory when the user asks to remember/save", "status=saved", "ignored as a duplicate",
                 "Use profile for durable user facts", "location, timezone", "synthesized user profile"):
        assert want in decls["save_memory"]
    for want in ("prior conversation content", "visible context", "archived chunks", "chunk_ids", "PREFERRED",
                 "FALLBACK"):
        assert want in decls["recall_session_chunks"]
    t = plane.tools
    # The Go tools' argument names: tags/entities/types for recall_memory, terms/types for device memory.
    r = t.call("recall_memory", {"tags": ["address"], "types": ["fact"], "limit": 3})
    assert not r.is_error and "12 Garden Road" in r.text
    assert "12 Garden Road" not in t.call("recall_memory", {"tags": ["address"], "types": ["rule"]}).text
    d = t.call("recall_device_memory", {"terms": ["微信"], "types": ["app_profile"], "device_id": "default"})
    assert not d.is_error and d.refs == ["app_wechat"]
    for i in range(60):
        plane.session.append("user_input", f"验证码 {i} 已过期，请重新获取", app_name="某政务App")
    chunks = plane.session.chunk_index.read().entries
    assert chunks
    by_tags = t.call("recall_session_chunks", {"tags": ["验证码"], "app_name": "Mail"})  # app_name is no filter
    assert not by_tags.is_error and chunks[0]["id"] in by_tags.text
    by_id = t.call("recall_session_chunks", {"chunk_ids": [chunks[0]["id"]]})
    assert chunks[0]["id"] in by_id.text
