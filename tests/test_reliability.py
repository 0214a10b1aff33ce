"""Hostile input, privacy, symlinks and resource bounds (the crash and concurrency harnesses are benches).

It reaches inside `episodes._recorder` for its event cap (made small here) and the retrieve bench's store builder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.episodes import EVENTS_FILE, EpisodeRecorder, TaskEpisodeStore, TaskEpisodeWriter
from memory_plane.episodes._recorder import MAX_EVENTS
from memory_plane.lifecycle import init_tree, load_yaml, read_jsonl

from helpers import screenshot

HOSTILE_NAMES = ["../../etc/passwd", "/etc/shadow", "..", "a/../../b", "C:\\Windows\\x", "x\x00y", "微信/../../..",
                 "~/.ssh/id_rsa", "." * 300, "name\nwith\nnewlines", "\u202eevil", ""]
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=50),
              st.binary(max_size=50), st.sampled_from(HOSTILE_NAMES)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=30)


def files_outside(root: Path, before: set[str]) -> set[str]:
    parent = root.parent
    return {str(p) for p in parent.rglob("*") if not str(p).startswith(str(root))} - before


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool_input=json_values, output=json_values, obs=json_values, app=st.sampled_from(HOSTILE_NAMES),
       page=st.sampled_from(HOSTILE_NAMES))
def test_hostile_events_are_sanitised_and_stay_in_the_tree(tmp_path_factory, tool_input, output, obs, app,
                                                           page) -> None:
    root = tmp_path_factory.mktemp("h") / "memory"
    init_tree(root)
    before = {str(p) for p in root.parent.rglob("*") if not str(p).startswith(str(root))}
    with MemoryPlane.open(root) as plane:
        req = MemoryRetrieveRequest(input=f"open {app}", current_hints=CurrentEnvironmentHints(app=app, page=page))
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_call(str(app), tool_input, content=str(page))
        rec.tool_result(str(app), output=output, observed_state=obs)
        rec.tool_result("x", observed_state={"app": app, "page": page, "package": app})
        rec.tool_call("tap", {"x": 1, "y": 2, "text": app})
        rec.tool_result("tap", observed_state={"app": app, "page": page})
        ep = rec.finish(success=True, final_state=str(output)[:50])
        assert plane.commit_episode(ep)
        assert plane.flush(10)
        assert plane.stats()["jobs_failed"] == 0
        ctx = plane.retrieve(MemoryRetrieveRequest(input=f"open {app}"))
        assert ctx.render().startswith("# Retrieved Device Experience")
        assert plane.verify().ok
    assert files_outside(root, before) == set()
    for p in root.rglob("*.jsonl"):
        for line in p.read_bytes().splitlines():
            if line.strip():
                json.loads(line)  # every line is whole JSON
    for p in root.rglob("*.yaml"):
        load_yaml(p.read_text("utf-8"))  # every YAML file parses


def test_huge_and_deep_inputs_are_bounded(tmp_path: Path) -> None:
    root = tmp_path / "m"
    init_tree(root)
    store = TaskEpisodeStore(root)
    rec = EpisodeRecorder(store, "x" * 100_000)
    deep: dict = {}
    cur = deep
    for _ in range(200):
        cur["k"] = {}
        cur = cur["k"]
    rec.tool_call("t", {"big": "y" * 10_000_000, "deep": deep, "list": list(range(100_000))})
    rec.tool_result("t", output=b"\xff\xfe\x00 invalid utf-8", observed_state=["not", "a", "dict"])
    size = (store.episode_dir(rec.id) / EVENTS_FILE).stat().st_size
    assert size < 200_000
    ev = read_jsonl(store.episode_dir(rec.id) / EVENTS_FILE).records
    assert ev[1]["observed_state"] == {"value": "['not', 'a', 'dict']"}
    assert "[nested too deep]" in json.dumps(ev[0])


def test_symlinked_collection_folder_is_never_read_or_written(tmp_path: Path) -> None:
    root = tmp_path / "m"
    init_tree(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "app_evil.yaml").write_text("id: app_evil\ntype: app_profile\nstatus: active\n")
    import shutil

    shutil.rmtree(root / "device" / "apps")
    (root / "device" / "apps").symlink_to(outside)
    with MemoryPlane.open(root) as plane:
        req = MemoryRetrieveRequest(input="打开微信")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_call("launch_app", {"app": "com.tencent.mm"})
        rec.tool_result("launch_app", observed_state={"app": "微信", "page": "首页", "package": "com.tencent.mm"})
        plane.commit_episode(rec.finish(success=True))
        plane.flush(10)
        assert plane.stats()["jobs_failed"] == 0  # the app-profile write was refused and logged, not raised
        assert plane.device.entries("app_profile") == []
        assert "app_evil" not in plane.retrieve(req).refs()
        rep = plane.verify()
        assert any(p.category == "symlink" for p in rep.problems)
        plane.gc()
    assert sorted(p.name for p in outside.iterdir()) == ["app_evil.yaml"]


def test_forgotten_text_appears_nowhere_under_the_root(tmp_path: Path) -> None:
    root = tmp_path / "m"
    secret = "my locker code is 7734-alpha"
    with MemoryPlane.open(root) as plane:
        plane.session.append("user_input", f"remember: {secret}")
        for i in range(60):
            plane.session.append("assistant_output", f"noted {i}")
        r = plane.long_term.save_memory(type="preference", content=secret, title=secret)
        plane.retrieve(MemoryRetrieveRequest(input="locker code", session_id="s1"))
        assert any(secret in p.read_text("utf-8", "replace") for p in root.rglob("*") if p.is_file())
        assert plane.forget(r.id, reason="user asked")
    leftovers = [str(p) for p in root.rglob("*") if p.is_file() and secret in p.read_text("utf-8", "replace")]
    assert leftovers == []


def test_runaway_task_is_bounded(tmp_path: Path) -> None:
    import memory_plane.episodes._recorder as recorder_mod

    root = tmp_path / "m"
    init_tree(root)
    store = TaskEpisodeStore(root)
    recorder_mod.MAX_EVENTS, saved = 500, recorder_mod.MAX_EVENTS  # the same cap, made small for the test
    try:
        rec = EpisodeRecorder(store, "runaway")
        shot = screenshot("same")
        for i in range(1000):
            rec.tool_call("tap", {"x": i % 7, "y": 1})
            rec.tool_result("tap", screenshot=shot)
        ep = rec.finish(success=False, failure_phase="max_iterations")
    finally:
        recorder_mod.MAX_EVENTS = saved
    lines = (store.episode_dir(rec.id) / EVENTS_FILE).read_text().splitlines()
    assert len(lines) == 501 and ep.metrics.dropped_events == 1500  # type: ignore[attr-defined]
    assert json.loads(lines[-1])["type"] == "finish"
    assert len(list((store.episode_dir(rec.id) / "artifacts").iterdir())) == 1
    assert TaskEpisodeWriter(store).commit(ep)
    assert MAX_EVENTS == 20_000  # the cap documented in docs/operating.md


def test_verify_catches_up_jobs_a_crash_or_overflow_skipped(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        plane._writer.jobs = []  # the writer's insides: as if the process died before its background jobs ran
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="打开微信找张三"))
        rec.tool_call("launch_app", {"app": "com.tencent.mm"})
        rec.tool_result("launch_app", observed_state={"app": "微信", "page": "首页", "package": "com.tencent.mm"})
        plane.commit_episode(rec.finish(success=True))
        plane.flush()
        assert plane.device.get("app_wechat") is None
        assert plane.verify().stats["jobs_caught_up"] == []  # too recent: a live worker may still run it
        import os
        import time

        old = time.time() - 3600
        os.utime(plane.episodes.episode_dir(rec.id) / "episode.yaml", (old, old))
    with MemoryPlane.open(root) as plane:
        rep = plane.verify()
        assert len(rep.stats["jobs_caught_up"]) == 1
        app = plane.device.get("app_wechat")
        assert app is not None and app.success_count == 1
        assert plane.verify().stats["jobs_caught_up"] == []  # once only
        assert plane.device.get("app_wechat").success_count == 1  # type: ignore[union-attr]


INDEX_FIELDS = ["status", "title", "summary", "goal", "app", "app_name", "page", "tags", "entities", "intent", "type",
                "applicability", "confidence", "success_count", "failure_count", "evidence", "conflicts_with",
                "expires_at", "updated_at", "last_validated_at", "started_at", "success", "stale", "path",
                "device_id", "language", "screen"]
index_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=30),
              st.sampled_from(HOSTILE_NAMES)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=10)


# too_slow: each example builds a small store; on a busy machine generation time is not the point.
@pytest.mark.slow
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fields=st.dictionaries(st.sampled_from(INDEX_FIELDS), index_values, max_size=12),
       matching=st.sampled_from(["title", "summary", "goal", None]))
def test_hand_edited_index_lines_of_any_shape_never_empty_retrieval(tmp_path_factory, fields, matching) -> None:
    # One index line per source with fields of the wrong shape (a list for a title, text for a
    # confidence, a number for a date...), worded like the query so retrieval has to look at it.
    from memory_plane.bench._retrieve import build_store
    from memory_plane.lifecycle import IndexFile, collection_lock

    root = tmp_path_factory.mktemp("ix") / "memory"
    init_tree(root)
    query = build_store(root, 40, 60, 20, None)[0]
    hints = CurrentEnvironmentHints(language="zh-CN", screen_width=640, screen_height=1200)
    with MemoryPlane(root) as plane:
        before = plane.retrieve(MemoryRetrieveRequest(input=query, current_hints=hints)).refs()
    assert before
    bad = dict(fields)
    if matching:
        bad[matching] = query
    for rel, bad_id in [("device/procedures", "proc_hostile"), ("device/failures", "fail_hostile"),
                        ("episodes", "ep_20260101_00000000ff"), ("long_term", "mem_hostile")]:
        idx = IndexFile(root / rel / "index.yaml")
        with collection_lock(root / rel):
            idx.write([*idx.read().entries, {"id": bad_id, **bad}])
    with MemoryPlane(root) as plane:
        ctx = plane.retrieve(MemoryRetrieveRequest(input=query, current_hints=hints))
        assert plane.stats()["retrieve_errors"] == 0
        assert ctx.render().startswith("# Retrieved Device Experience")
        # The good memories are still there (a hostile line may outrank one, never wipe them out).
        assert len(set(before) & set(ctx.refs())) >= len(before) - 4
    from memory_plane.cli import main as cli

    for args in (["episodes", "list"], ["device", "list"], ["memory", "recall", query]):
        assert cli(["--root", str(root), *args]) == 0
