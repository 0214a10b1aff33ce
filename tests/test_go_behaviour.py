"""Drop-in beside the Go agent: its tool arguments, its files, and its memory tests' behaviours.

The first part pins what went wrong with Go-shaped input (each test failed before it was fixed). The second
restates, in this project's words and API, the behaviours of the Go implementation's memory tests
(AidenAI-IO/aiden-firmware, src/agent/internal/agent/*_test.go) that this project shares; each names the
Go test it restates. What the project does differently on purpose is listed in docs/tools.md
("Beside the Go agent").
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path

from memory_plane import MemoryPlane, MemoryRetrieveRequest, MemoryTools
from memory_plane.lifecycle import load_yaml

GO_EVENTS = [
    {"event_id": "evt_1", "ts": "2026-06-01T08:00:00Z", "type": "user_input", "role": "user",
     "content": "登录失败", "app_name": "某政务App"},
    {"event_id": "evt_2", "ts": "2026-06-01T08:00:05Z", "type": "tool_result", "role": "system",
     "content": "验证码已过期", "app_name": "某政务App"},
]


def go_chunk(root: Path, chunk_id: str = "chunk_1780300800000000000_a1b2c3d4",
             events: list[dict] | None = None) -> str:
    """A session chunk and its index as the Go agent writes them (json.Encoder lines; yaml.v3, 4-space indent)."""
    body = "".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in events or GO_EVENTS)
    chunks = root / "session" / "chunks"
    chunks.mkdir(parents=True, exist_ok=True)
    (chunks / f"{chunk_id}.jsonl").write_text(body, "utf-8")
    (chunks / "index.yaml").write_text(
        "version: 1\n"
        "updated_at: \"2026-06-01T08:01:00.123456789Z\"\n"
        "chunks:\n"
        f"    - id: {chunk_id}\n"
        f"      file: {chunk_id}.jsonl\n"
        "      status: active\n"
        "      summary: 验证码过期登录场景\n"
        "      app_name: 某政务App\n"
        "      tags:\n"
        "        - 登录\n"
        "        - 验证码\n"
        "      entities:\n"
        "        - 某政务App\n"
        f"      event_count: {len(events or GO_EVENTS)}\n"
        f"      checksum: sha256:{hashlib.sha256(body.encode()).hexdigest()}\n", "utf-8")
    return chunk_id


def episode(p: MemoryPlane, goal: str = "打开设置", steps: int = 1, success: bool = True) -> str:
    req = MemoryRetrieveRequest(input=goal)
    rec = p.new_episode_recorder(req, p.retrieve(req))
    for i in range(steps):
        rec.tool_call("tap", {"x": 10 + i, "y": 20}, content=f"tap {i}")
        rec.tool_result("tap", observed_state={"app": "Settings", "page": f"P{i}"})
    ep = rec.finish(success=success)
    p.commit_episode(ep)
    p.flush()
    return ep.id


# -- 1. Go's argument names ---------------------------------------------------------------------------


def test_go_argument_names_are_read_and_a_missing_reason_is_still_named(plane: MemoryPlane) -> None:
    mem = plane.long_term.save_memory(type="fact", content="The user's dentist is Dr. Li", tags=["health"])
    t = plane.tools
    no_reason = t.call("forget_memory", {"id": mem.id})
    assert no_reason.is_error and "reason" in no_reason.text  # the tombstone records why: still required
    gone = t.call("forget_memory", {"id": mem.id, "reason": "the user asked"})
    assert not gone.is_error and plane.long_term.get(mem.id) is None
    ep_id = episode(plane)
    for args in ({"id": ep_id}, json.dumps(ep_id), ep_id):  # Go's {"id"}, and the id alone
        r = t.call("inspect_episode", args)
        assert not r.is_error and r.refs == [ep_id], args
    both = t.call("inspect_episode", {"id": ep_id, "episode_id": "ep_other"})
    assert both.is_error and "episode_id and id" in both.text
    decl = {d["name"]: d for d in t.declarations()}
    assert "id" not in decl["forget_memory"]["parameters"]["required"]  # an alias, not an extra field
    assert "`id` is accepted" in decl["forget_memory"]["description"]


# -- 2. Mangled arrays and counts ---------------------------------------------------------------------


def test_arrays_sent_as_json_strings_or_single_words_are_read_as_lists(plane: MemoryPlane) -> None:
    t = plane.tools
    saved = t.call("save_memory", {"content": "To pay, open the wallet first", "type": "procedure",
                                   "tags": "[\"test\", \"pay\"]", "entities": "['Wallet']"})
    mem = plane.long_term.get(saved.refs[0])
    assert mem is not None and mem.tags == ["test", "pay"] and mem.entities == ["Wallet"]
    for types in ("[\"procedure\"]", "procedure", ["procedure"]):
        r = t.call("recall_memory", {"query": "pay wallet", "types": types})
        assert not r.is_error and mem.id in r.refs, types
    assert mem.id not in t.call("recall_memory", {"query": "pay wallet", "types": "[\"rule\"]"}).refs
    episode(plane, "打开设置")
    for types in ("[\"procedure\"]", "procedure"):
        d = t.call("recall_device_memory", {"types": types})
        assert not d.is_error and any(x.startswith("proc_") for x in d.refs), types
    bad = t.call("recall_memory", {"tags": [{"a": 1}]})
    assert bad.is_error and "tags: expects a list of words" in bad.text
    broken = t.call("recall_memory", {"tags": "[\"a\", "})
    assert broken.is_error and "tags:" in broken.text


def test_a_bad_limit_is_named_and_a_clamped_one_is_said(plane: MemoryPlane) -> None:
    plane.long_term.save_memory(type="fact", content="The user's home address is 12 Garden Road")
    t = plane.tools
    many = t.call("recall_memory", {"query": "address", "limit": "many"})
    assert many.is_error and "limit: expects a whole number 1-20" in many.text
    assert t.call("recall_memory", {"query": "address", "limit": 2.5}).is_error
    assert not t.call("recall_memory", {"query": "address", "limit": "3"}).is_error
    big = t.call("recall_device_memory", {"limit": 500})
    assert not big.is_error and "limit 500 is outside 1-30: 30 used" in big.text


def test_empty_session_recall_gives_the_most_recent_chunks(plane: MemoryPlane) -> None:
    for i in range(120):
        plane.session.append("user_input", f"第{i}条消息 about topic{i // 20}")
    chunks = plane.session.chunk_index.read().entries
    assert len(chunks) >= 2
    for args in ({"tags": "[]"}, {}, {"tags": []}, {"query": "", "limit": 1}):
        r = plane.tools.call("recall_session_chunks", args)
        assert not r.is_error and "[]" not in r.text, args
        assert chunks[-1]["id"] in r.text.splitlines()[1], args  # newest first
    one = plane.tools.call("recall_session_chunks", {"limit": 1})
    assert chunks[0]["id"] not in one.text and "offset=1" in one.text


def test_recall_memory_with_no_query_lists_memories_by_type(plane: MemoryPlane) -> None:
    rule = plane.save_rule("Always confirm before paying")
    plane.long_term.save_memory(type="fact", content="The user's home address is 12 Garden Road")
    r = plane.tools.call("recall_memory", {"types": ["rule"]})
    assert not r.is_error and r.refs == [rule.id]


def test_phone_tool_inputs_with_mangled_points_are_read(plane: MemoryPlane) -> None:
    # The Go extractor reads coordinates from numbers or numeric strings; a point may also arrive as the
    # text of a JSON array, and a "nan" must not break the episode's summary line.
    req = MemoryRetrieveRequest(input="向上滑动设置页")
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("swipe", {"start": "[100, 200]", "end": "[300, 400]"})
    rec.tool_result("swipe", observed_state={"app": "Settings", "page": "Main"})
    rec.tool_call("tap", {"x": "nan", "y": "5"})
    rec.tool_result("tap", observed_state={"app": "Settings", "page": "Main"})
    ep = rec.finish(success=True)
    plane.commit_episode(ep)
    plane.flush()
    summary = next(e["summary"] for e in plane.episodes.entries() if e["id"] == ep.id)
    assert "swipe(x=100,y=200 -> x=300,y=400)" in summary and "tap()" in summary


# -- 3. Files the Go agent wrote ----------------------------------------------------------------------


def test_a_go_layout_chunk_index_is_appended_to_and_stays_valid_yaml(plane: MemoryPlane) -> None:
    old = go_chunk(plane.root)
    go_text = (plane.root / "session" / "chunks" / "index.yaml").read_text("utf-8")
    assert [c["id"] for c in plane.session.chunk_index.read().entries] == [old]
    for i in range(60):
        plane.session.append("user_input", f"message {i}")
    text = (plane.root / "session" / "chunks" / "index.yaml").read_text("utf-8")
    doc = load_yaml(text)  # still one valid YAML document, in the Go layout
    assert isinstance(doc, dict) and doc["version"] == 1 and doc["updated_at"] != "2026-06-01T08:01:00.123456789Z"
    ids = [c["id"] for c in doc["chunks"]]
    assert ids[0] == old and len(ids) == 2
    assert doc["chunks"][0]["tags"] == ["登录", "验证码"]  # the Go entry kept whole
    read = plane.session.chunk_index.read()
    assert not read.problems and [c["id"] for c in read.entries] == ids
    r = plane.tools.call("recall_session_chunks", {"tags": ["验证码"]})
    assert old in r.text
    assert plane.verify().ok
    go_lines = go_text.splitlines()
    assert [ln for ln in text.splitlines() if not ln.startswith("updated_at:")][: len(go_lines) - 1] == [
        ln for ln in go_lines if not ln.startswith("updated_at:")]  # the Go entry kept byte for byte


def test_a_go_index_in_another_key_order_is_rewritten_whole_and_valid(plane: MemoryPlane) -> None:
    old = go_chunk(plane.root)
    path = plane.root / "session" / "chunks" / "index.yaml"
    lines = path.read_text("utf-8").splitlines()
    path.write_text("\n".join([*lines[2:], *lines[:2]]) + "\n", "utf-8")  # chunks first, then version, updated_at
    for i in range(60):
        plane.session.append("user_input", f"message {i}")
    doc = load_yaml(path.read_text("utf-8"))
    assert isinstance(doc, dict) and doc["version"] == 1 and doc["chunks"][0]["id"] == old
    assert len(doc["chunks"]) == 2


def test_verify_reports_a_torn_chunk_file_and_fix_leaves_it_clean(plane: MemoryPlane) -> None:
    chunk = go_chunk(plane.root)
    path = plane.root / "session" / "chunks" / f"{chunk}.jsonl"
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"event_id":"evt_3","type":"user_in')  # a crash mid-write
    report = plane.verify()
    found = {(p.category, p.path) for p in report.problems}
    assert ("torn_jsonl", f"session/chunks/{chunk}.jsonl") in found
    assert ("chunk_checksum", f"session/chunks/{chunk}.jsonl") in found
    plane.verify(fix=True)
    assert plane.verify().ok
    entry = plane.session.chunk_index.read().entries[0]
    assert entry["event_count"] == 2 and entry["checksum"].startswith("sha256:")


def test_a_forget_that_scrubs_a_chunk_keeps_its_checksum_true(plane: MemoryPlane) -> None:
    for i in range(60):
        plane.session.append("user_input", f"my locker code is 4471-{i}")
    mem = plane.long_term.save_memory(type="fact", content="my locker code is 4471")
    assert plane.forget(mem.id, reason="the user asked")
    assert plane.verify().ok


# -- 4. Names -----------------------------------------------------------------------------------------


def test_the_archive_folder_is_named_by_the_session_id(plane: MemoryPlane) -> None:
    plane.session.append("user_input", "hello")
    sid = plane.session.close()
    assert sid and (plane.root / "session_archive" / sid / "events.jsonl").is_file()


# -- 6. Cut answers say what was cut ------------------------------------------------------------------


def test_inspect_episode_says_which_events_it_shows_and_how_to_read_on(plane: MemoryPlane) -> None:
    ep_id = episode(plane, steps=150)
    total = len(plane.episodes.events(ep_id).records)
    assert total >= 300
    first = plane.tools.call("inspect_episode", {"episode_id": ep_id})
    assert f"events 1-20 of {total}" in first.text and f"{total - 20} more: inspect_episode offset=20" in first.text
    second = plane.tools.call("inspect_episode", {"episode_id": ep_id, "offset": 20, "max_events": 4})
    assert f"events 21-24 of {total}" in second.text and "tap {\"x\": 20" in second.text
    small = MemoryTools(plane, budget_tokens=250).call("inspect_episode", {"episode_id": ep_id, "max_events": 200})
    assert "more events not shown (answer budget): inspect_episode offset=" in small.text


def test_a_cut_answer_says_how_much_was_left_out(plane: MemoryPlane) -> None:
    long = "The user's travel checklist: " + "; ".join(f"item {i} packed in bag {i % 3}" for i in range(60))
    mem = plane.long_term.save_memory(type="fact", content=long)
    r = plane.tools.call("recall_memory", {"query": "travel checklist"})
    assert mem.id in r.refs and "chars: recall_memory ids=" in r.text
    whole = plane.tools.call("recall_memory", {"ids": [mem.id]})
    assert "item 59 packed" in whole.text
    for i in range(30):
        plane.long_term.save_memory(type="fact", content=f"Garden fact number {i}: " + "a long detail " * 20)
    cut = MemoryTools(plane, budget_tokens=200).call("recall_memory", {"query": "garden fact", "limit": 20})
    assert "more results not shown (answer budget): recall_memory offset=" in cut.text
    tiny = MemoryTools(plane, budget_tokens=40).call("inspect_episode", {"episode_id": episode(plane)})
    assert "more characters not shown" in tiny.text


def test_save_answers_use_the_status_words_and_the_tool_spells_force_its_way(plane: MemoryPlane) -> None:
    t = plane.tools
    saved = t.call("save_memory", {"content": "The user's home city is Berlin", "type": "profile"})
    assert "status=saved" in saved.text
    assert "status=ignored" in t.call("save_memory", {"content": "The user's home city is Berlin",
                                                      "type": "profile"}).text
    wider = t.call("save_memory", {"content": "The user's home city is Berlin, in Germany", "type": "profile"})
    assert "status=superseded" in wider.text
    assert t.call("forget_memory", {"memory_id": wider.refs[0], "reason": "the user asked"}).text
    again = t.call("save_memory", {"content": "The user's home city is Berlin, in Germany", "type": "profile"})
    assert "status=ignored" in again.text and "force=true" in again.text and "force=True" not in again.text
    forced = t.call("save_memory", {"content": "The user's home city is Berlin, in Germany", "type": "profile",
                                    "force": True})
    assert "status=saved" in forced.text and "ignored unknown" not in forced.text
    desc = {d["name"]: d["description"] for d in t.declarations()}["save_memory"]
    assert all(w in desc for w in ("status=saved", "status=superseded", "status=ignored"))


def test_declarations_still_validate_as_genai_function_declarations(plane: MemoryPlane) -> None:
    from google.genai import types

    for d in plane.tools.declarations():
        types.FunctionDeclaration(name=d["name"], description=d["description"], parameters_json_schema=d["parameters"])
    assert plane.tools.genai_tools()


# -- The Go memory tests' behaviours, restated --------------------------------------------------------


def test_recall_session_chunks_returns_the_matching_evidence(plane: MemoryPlane) -> None:
    # Go: memory_tools_test.go TestRecallSessionChunksToolReturnsMatchingEvidence
    chunk = go_chunk(plane.root)
    r = plane.tools.call("recall_session_chunks", {"tags": ["验证码"], "app_name": "某政务App", "limit": 1})
    assert chunk in r.text
    ev = plane.tools.call("recall_session_chunks", {"chunk_ids": [chunk]})
    assert "登录失败" in ev.text and "验证码已过期" in ev.text  # the chunk's own events


def test_recall_session_chunks_ignores_app_name(plane: MemoryPlane) -> None:
    # Go: memory_tools_test.go TestRecallSessionChunksToolIgnoresAppNameInput
    for app in ("Mail", "Calendar"):
        for i in range(60):
            plane.session.append("user_input", f"open {app} navigation {i}", app_name=app)
    n = len(plane.session.chunk_index.read().entries)
    r = plane.tools.call("recall_session_chunks", {"app_name": "Mail", "limit": 10})
    assert not r.is_error and r.text.count("\n[chunk_") == n


def test_recall_memory_returns_the_matching_long_term_memory(plane: MemoryPlane) -> None:
    # Go: memory_tools_test.go TestRecallMemoryToolReturnsMatchingLongTermMemory
    mem = plane.long_term.save_memory(type="preference", content="用户下次登录某政务 App 时，应先重新获取验证码。",
                                      tags=["登录", "验证码"], entities=["某政务App"])
    r = plane.tools.call("recall_memory", {"tags": ["验证码"], "entities": ["某政务App"], "limit": 3})
    assert r.refs == [mem.id] and "重新获取验证码" in r.text


def test_the_memory_recall_tools_are_offered(plane: MemoryPlane) -> None:
    # Go: memory_tools_test.go TestToolSetRegistersMemoryRecallTools
    assert {"recall_session_chunks", "recall_memory", "recall_device_memory", "inspect_episode"} <= set(
        plane.tools.names())


def test_tool_descriptions_guide_the_agent(plane: MemoryPlane) -> None:
    # Go: memory_tools_test.go TestRecallToolDescriptionsGuideAgentUsage (the parts this project shares)
    d = {x["name"]: x["description"] for x in plane.tools.declarations()}
    assert all(w in d["recall_session_chunks"] for w in ("chunk_ids", "PREFERRED", "FALLBACK"))
    assert all(w in d["recall_memory"] for w in ("long-term", '"tags":["verification"', "preference", "rule"))
    assert all(w in d["save_memory"] for w in ("Mandatory when the user asks to remember", "synthesized user profile",
                                                "location, timezone"))


def test_whitespace_only_tags_are_an_empty_query(plane: MemoryPlane) -> None:
    # Go: long_term_memory_test.go TestLongTermMemorySearchTreatsWhitespaceOnlyTagsAsEmptyQuery
    mem = plane.long_term.save_memory(type="preference", content="The user prefers concise replies.",
                                      tags=["general"])
    r = plane.tools.call("recall_memory", {"tags": [" \t"], "limit": 1})
    assert not r.is_error and r.refs == [mem.id]


def test_forget_excludes_the_memory_from_search_and_leaves_a_tombstone(plane: MemoryPlane) -> None:
    # Go: long_term_memory_test.go TestLongTermMemoryForgetExcludesMemoryFromSearch (Go keeps the file's
    # evidence; here the text goes everywhere: see the list of differences in docs/tools.md)
    mem = plane.save_rule("支付前必须确认。", tags=["支付"])
    assert plane.tools.call("forget_memory", {"id": mem.id, "reason": "user_request"}).refs == [mem.id]
    assert not plane.long_term.recall_memory("支付 确认")
    tomb = (plane.root / "lifecycle" / "tombstones.jsonl").read_text("utf-8")
    assert mem.id in tomb and "user_request" in tomb and "支付前必须确认" not in tomb


def test_search_skips_expired_memory(plane: MemoryPlane) -> None:
    # Go: memory_plane_test.go TestLongTermMemorySearchSkipsExpiredMemory
    old = plane.long_term.save_memory(type="procedure", content="旧流程：先登录再支付。", tags=["登录"], ttl="1h")
    new = plane.long_term.save_memory(type="procedure", content="新流程：先扫码再登录。", tags=["登录"], ttl="30d")
    later = plane.clock() + timedelta(hours=2)
    ids = [h.id for h in plane.long_term.recall_memory("登录 流程", limit=10, now=later)]
    assert new.id in ids and old.id not in ids


def test_search_reads_a_plain_markdown_body(plane: MemoryPlane) -> None:
    # Go: long_term_memory_test.go TestLongTermMemorySearchReadsPlainMarkdownBody
    path = plane.root / "long_term" / "memories" / "mem_campfire.md"
    path.write_text("---\nid: mem_campfire\ntype: fact\nstatus: active\npriority: 80\nconfidence: 0.9\n"
                    "tags:\n  - family\n  - campfire\ntime_scope: long_term\ncreated_at: \"2026-05-29T00:00:00Z\"\n"
                    "updated_at: \"2026-05-29T00:00:00Z\"\ntraceability: full\n---\n\n"
                    "# Campfire storytelling discomfort\n\n"
                    "The user previously said storytelling around the campfire can feel awkward.\n", "utf-8")
    plane.long_term.rebuild_index()
    r = plane.tools.call("recall_memory", {"tags": ["campfire"], "limit": 1})
    assert r.refs == ["mem_campfire"] and "feel awkward" in r.text


def test_the_block_is_frozen_within_a_session_and_refreshed_after_rotation(plane: MemoryPlane) -> None:
    # Go: memory_plane_test.go TestMemoryPlaneRetrieveFreezesPlannerExperienceWithinActiveSession and
    # TestMemoryPlaneRetrieveRefreshesPlannerExperienceAfterSessionRotate (here the session is named by
    # the request's session_id, and the whole block is frozen)
    lt = plane.long_term
    wechat = lt.save_memory(type="procedure", content="打开微信App时先使用搜索。", entities=["微信App"])
    alipay = lt.save_memory(type="procedure", content="打开支付宝App时先使用搜索。", entities=["支付宝App"])
    first = plane.retrieve(MemoryRetrieveRequest(input="打开微信App", session_id="s1")).render()
    second = plane.retrieve(MemoryRetrieveRequest(input="打开支付宝App", session_id="s1")).render()
    assert second == first and wechat.id in first
    fresh = plane.retrieve(MemoryRetrieveRequest(input="打开支付宝App", session_id="s2")).render()
    assert fresh != first and alipay.id in fresh


def test_no_screenshot_base64_reaches_the_episode_files(plane: MemoryPlane) -> None:
    # Go: memory_plane_test.go TestTaskEpisodeIndexSummaryOmitsScreenshotBase64
    import base64

    image = base64.b64encode(b"jpeg bytes" * 40).decode()
    blob = json.dumps({"width": 447, "height": 972, "format": "jpeg", "size": 29392, "data": image})
    req = MemoryRetrieveRequest(input="截图任务")
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("screenshot", {})
    rec.tool_result("screenshot", output=blob)
    ep = rec.finish(success=True, final_state=blob)
    plane.commit_episode(ep)
    plane.flush()
    for f in plane.root.joinpath("episodes").rglob("*"):
        if f.is_file() and f.suffix in (".yaml", ".jsonl"):
            assert image not in f.read_text("utf-8", "replace"), f
