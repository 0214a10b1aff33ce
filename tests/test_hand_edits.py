"""Hand edits, faults and odd input never lose or hide memory (what people and the phone do to the tree).

It reaches inside `retrieval._query` for the longest goal it matches on.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from freezegun import freeze_time

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.cli import main as cli
from memory_plane.episodes import EpisodeJob
from memory_plane.lifecycle import QUARANTINE_DIR

from helpers import manual_procedure


def record(plane: MemoryPlane, goal: str, obs: dict, *, success: bool = True) -> str:
    """One task through the runtime's path: retrieve, record one tool call, commit."""
    req = MemoryRetrieveRequest(input=goal)
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "x"})
    rec.tool_result("launch_app", output="ok", observed_state=obs)
    ep = rec.finish(success=success)
    assert plane.commit_episode(ep)
    plane.flush()
    return ep.id


# -- what the recorder accepts always validates; verify and GC keep the evidence ------------------


def test_odd_observed_state_is_normalised_and_the_episode_stays_visible(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        ep_id = record(plane, "open wechat", {"app": 5, "page": ["Home", "x"], "package": {"name": "com.x"}})
        ep = plane.episodes.get(ep_id)
        assert ep is not None and ep.initial_state.app == "5" and ep.initial_state.page == "Home"
        events = plane.episodes.events(ep_id).records
        obs = next(e["observed_state"] for e in events if e["type"] == "tool_result")
        assert obs["package_raw"] == {"name": "com.x"}  # kept aside, not lost
        report = plane.verify(fix=True)
        assert report.ok, report.problems
        assert [e["id"] for e in plane.episodes.entries()] == [ep_id]


def test_a_hand_edit_of_the_wrong_shape_never_hides_an_episode(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        ep_id = record(plane, "open wechat", {"app": "WeChat"})
        path = plane.episodes.episode_dir(ep_id) / "episode.yaml"
        text = path.read_text().replace("tool_steps: 1", "tool_steps: many", 1)
        path.write_text(text.replace("outcome:\n", "outcome:\n  final_state: [done]\n", 1))
        (root / "episodes" / "index.yaml").unlink()
        report = plane.verify(fix=True)
        fields = [p for p in report.problems if p.category == "field"]
        assert fields and all(p.path.endswith("episode.yaml") and p.line for p in fields)
        assert not any("quarantined" in f for f in report.fixed)
        assert [e["id"] for e in plane.episodes.entries()] == [ep_id]
        ep = plane.episodes.get(ep_id)
        assert ep is not None and ep.outcome.final_state == "done" and ep.metrics.tool_steps == 0
        assert path.exists()


def test_gc_keeps_the_evidence_of_a_quarantined_episode(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        ep_id = record(plane, "open wechat", {"app": "WeChat"})
        d = plane.episodes.episode_dir(ep_id)
        (d / "episode.yaml").write_text("id: [not, an, id]\n")  # beyond repair: quarantined by --fix
        report = plane.verify(fix=True)
        assert any("quarantined" in f for f in report.fixed)
        old = datetime.now(timezone.utc) - timedelta(days=2)
        os.utime(d, (old.timestamp(), old.timestamp()))
        gc = plane.gc()
        assert (d / "events.jsonl").exists(), gc.removed
        assert gc.kept.get("quarantined_episode_evidence") == 1
        assert list((root / QUARANTINE_DIR).iterdir())


# -- hand-editing rules people can rely on ----------------------------------------------------


def test_documented_statuses_set_by_hand_work(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        path = manual_procedure(plane)
        assert "proc_manual" in plane.retrieve("用支付宝付款 pay with alipay").refs()
        path.write_text(path.read_text().replace("status: active", "status: inactive"))
        assert plane.verify().ok
        assert "proc_manual" not in plane.retrieve("用支付宝付款 pay with alipay").refs()
        path.write_text(path.read_text().replace("status: inactive", "status: Switched Off"))
        report = plane.verify(fix=True)
        assert [p.category for p in report.problems] == ["field"] and "inactive" in report.problems[0].message
        assert "proc_manual" not in plane.retrieve("用支付宝付款 pay with alipay").refs()
        assert path.exists() and plane.gc().removed == []  # a person's switch-off is never collected


def test_a_field_of_the_wrong_shape_is_named_and_treated_as_absent(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        path = manual_procedure(plane)
        path.write_text(path.read_text().replace("confidence: 0.5", "confidence: high"))
        item = plane.device.get("proc_manual")
        assert item is not None and item.confidence == 0.5
        report = plane.verify(fix=True)
        (prob,) = report.problems
        line = path.read_text().split("\n").index("confidence: high") + 1
        assert prob.category == "field" and prob.path.endswith("proc_manual.yaml") and prob.line == line
        assert path.exists() and not list((root / QUARANTINE_DIR).iterdir())
        assert "proc_manual" in plane.retrieve("用支付宝付款 pay with alipay").refs()
    assert cli(["--root", str(root), "lifecycle", "verify", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["problem_counts"] == {"field": 1}


@freeze_time("2026-06-01T00:00:00Z")
def test_unknown_status_in_an_index_line_is_not_served(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        manual_procedure(plane)
        idx = plane.device.collection("procedure").index.path
        idx.write_text(idx.read_text().replace('"status": "active"', '"status": "Disabled"'))
        ctx = plane.retrieve("用支付宝付款 pay with alipay")
        assert "proc_manual" not in ctx.refs() and ctx.dropped.get("inactive")


# -- a missing index is rebuilt from the item files, never replaced by an empty one --------------


def _navigation(plane: MemoryPlane) -> None:
    nav = plane.device.new_item(plane.device.collection("navigation").model, "nav_alipay_pay", title="Alipay pay",
                                app_id="alipay", from_app="alipay", from_page="Home", to_app="alipay",
                                to_page="Pay", tool="tap", description="tap Pay on the Alipay home page")
    nav.evidence_refs = []
    plane.device.collection("navigation").save(nav)


def test_a_deleted_index_is_rebuilt_not_replaced_by_the_template(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        _navigation(plane)
        manual_procedure(plane)
        ep_id = record(plane, "pay with alipay", {"app": "Alipay"})
    nav_index = root / "device" / "navigation" / "index.yaml"
    before = nav_index.read_text()
    nav_index.unlink()
    (root / "episodes" / "index.yaml").unlink()
    with MemoryPlane.open(root) as plane:  # open must not put an empty index back
        assert not nav_index.exists()
        ctx = plane.retrieve("用支付宝付款 pay with alipay")
        assert "nav_alipay_pay" in ctx.refs() and ep_id in ctx.refs()
    assert nav_index.read_text() == before
    assert cli(["--root", str(root), "device", "list", "--type", "navigation", "--json"]) == 0
    assert [i["id"] for i in json.loads(capsys.readouterr().out)] == ["nav_alipay_pay"]


# -- a file deleted, emptied or switched off by hand is not served from an older index -------------


def test_files_deleted_or_emptied_by_hand_are_not_served(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        path = manual_procedure(plane)
        mem = plane.long_term.save_memory(type="preference", content="Pay with the Alipay balance first")
        goal = "用支付宝付款 pay with alipay"
        assert {"proc_manual", mem.id} <= set(plane.retrieve(goal).refs())
        assert [h.id for h in plane.long_term.recall_memory("alipay balance")] == [mem.id]
        path.unlink()
        md = plane.long_term.path_for(mem.id)
        text = md.read_text()
        md.write_text("")
        ctx = plane.retrieve(goal)
        assert "proc_manual" not in ctx.refs() and mem.id not in ctx.refs()
        # The deleted file's index line names a file that is gone: the index is rebuilt, so
        # the memory is not even a candidate; the emptied one still is, and is dropped for it.
        assert ctx.dropped.get("file_empty") == 1
        assert "proc_manual" not in {e["id"] for e in plane.device.collection("procedure").entries()}
        assert plane.long_term.recall_memory("alipay balance") == []
        # Edited by hand later than its index line: what the file says now is what is offered.
        md.write_text(text.replace("Pay with the Alipay balance first", "Pay with the Alipay card ending 42"))
        later = datetime.now().timestamp() + 5
        os.utime(md, (later, later))
        (hit,) = plane.long_term.recall_memory("alipay balance")
        assert "card ending 42" in hit.text
        assert any("card ending 42" in h.text for h in plane.retrieve(goal).common.long_term)
        md.write_text(md.read_text().replace("status: active", "status: inactive"))
        os.utime(md, (later + 1, later + 1))
        assert plane.long_term.recall_memory("alipay balance") == []
        assert mem.id not in plane.retrieve(goal).refs()


# -- file name and id ---------------------------------------------------------------------------------


def test_a_copied_or_renamed_item_file_is_offered_once_and_named_by_verify(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        path = manual_procedure(plane)
        (path.parent / "my notes (copy).yaml").write_bytes(path.read_bytes())
        odd = path.parent / "new\nline.yaml"
        odd.write_text(path.read_text().replace("proc_manual", "proc_zzz"))
        report = plane.verify()
        cats = sorted((p.category, p.path) for p in report.problems)
        assert cats == [("duplicate_id", "device/procedures/my notes (copy).yaml"),
                        ("name_mismatch", "device/procedures/new\nline.yaml")]
        entries = plane.device.entries("procedure")
        assert sorted((e["id"], e["path"]) for e in entries) == [("proc_manual", "proc_manual.yaml"),
                                                                 ("proc_zzz", "new\nline.yaml")]
        item = plane.device.get("proc_zzz")
        assert item is not None and item.title == "Pay with Alipay"
        refs = plane.retrieve("用支付宝付款 pay with alipay").refs()
        assert refs.count("proc_manual") == 1
        assert cli(["--root", str(root), "device", "list", "--json"]) == 0
        listed = [i["id"] for i in json.loads(capsys.readouterr().out)]
        assert listed.count("proc_manual") == 1
        # --fix renames the misnamed file after its id; the copy is left for a person to merge.
        report = plane.verify(fix=True)
        assert any("renamed" in f for f in report.fixed) and not odd.exists()
        assert (path.parent / "proc_zzz.yaml").exists() and (path.parent / "my notes (copy).yaml").exists()
        assert [p.category for p in report.problems] == ["duplicate_id"]
        assert {e["path"] for e in plane.device.entries("procedure")} == {"proc_manual.yaml", "proc_zzz.yaml"}


# -- a read-only tree, a missing root -----------------------------------------------------------


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*") if p.is_file()}


def test_open_writes_nothing_that_exists(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        record(plane, "pay with alipay", {"app": "Alipay"})
    before = _snapshot(root)
    with MemoryPlane.open(root) as plane:
        plane.retrieve("pay with alipay")
    assert _snapshot(root) == before


def test_a_read_only_tree_is_read_and_a_write_fails_with_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    from helpers import read_only

    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        ep_id = record(plane, "pay with alipay", {"app": "Alipay"})
        mem = plane.long_term.save_memory(type="rule", content="Always confirm before paying")
    before = _snapshot(root)
    read_only(monkeypatch, root)
    r = ["--root", str(root)]
    for argv in (["retrieve", "pay with alipay"], ["episodes", "list"], ["episodes", "show", ep_id],
                 ["device", "list"], ["memory", "recall", "confirm paying"], ["lifecycle", "verify"]):
        assert cli([*r, *argv]) == 0, argv
    out = capsys.readouterr()
    assert mem.id in out.out and "Traceback" not in out.err
    assert cli([*r, "memory", "save", "something new"]) == 3
    assert cli([*r, "lifecycle", "gc"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(e.startswith("memplane: cannot write") for e in err)
    with MemoryPlane.open(root) as plane:  # the runtime: never raises, counts the failure
        req = MemoryRetrieveRequest(input="pay with alipay")
        ctx = plane.retrieve(req)
        assert ep_id in ctx.refs()
        rec = plane.new_episode_recorder(req, ctx)
        rec.tool_call("tap", {"x": 1})
        assert plane.commit_episode(rec.finish(success=True)) is False
        assert plane.stats()["commit_errors"] == 1
    assert _snapshot(root) == before


def test_a_missing_root_is_refused_not_created(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "typo"
    for argv in (["lifecycle", "gc", "--json"], ["lifecycle", "verify"], ["retrieve", "x"], ["episodes", "list"]):
        assert cli(["--root", str(missing), *argv]) == 4
        assert not missing.exists()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert cli(["--root", str(a_file), "lifecycle", "gc"]) == 4
    err = capsys.readouterr().err
    assert "does not exist" in err and "not a folder" in err
    assert cli(["--root", str(missing), "init"]) == 0 and missing.is_dir()
    assert cli(["--root", str(missing), "lifecycle", "gc"]) == 0


def test_help_lists_the_exit_codes(capsys) -> None:
    assert cli(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {n}  " in out for n in range(5)) and "no memory root" in out


# -- verify beside a recording that is starting; no lock files left behind -------------------


def test_verify_beside_a_recording_that_is_starting(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        young = plane.episodes.episode_dir("ep_20261201_00000000aa")
        (young / "artifacts").mkdir(parents=True)  # what a recorder does just before it takes its lock
        assert plane.verify().ok
        old = plane.episodes.episode_dir("ep_20261201_00000000bb")
        (old / "artifacts").mkdir(parents=True)
        past = datetime.now().timestamp() - 3600
        os.utime(old, (past, past))
        (prob,) = plane.verify().problems
        assert prob.category == "orphanfolder" and "00000000bb" in prob.path


def test_a_committed_episode_folder_keeps_no_lock_file(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        ep_id = record(plane, "pay with alipay", {"app": "Alipay"})
        assert not (plane.episodes.episode_dir(ep_id) / ".recording.lock").exists()


# -- one broken item never stops the other lessons -------------------------------------------------


MEITUAN = [
    ("launch_app", {"app": "Meituan"}, "open Meituan", {"app": "Meituan", "page": "Home"}),
    ("tap", {"x": 500, "y": 850}, "tap the cart tab", {"app": "Meituan", "page": "Cart"}),
    ("tap", {"x": 300, "y": 1900}, "tap checkout", {"app": "Meituan", "page": "Checkout"}),
]


def _meituan(plane: MemoryPlane, goal: str) -> str:
    req = MemoryRetrieveRequest(input=goal, current_hints={"language": "zh-CN", "screen_width": 1080,
                                                           "screen_height": 2400})
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    for tool, args, content, obs in MEITUAN:
        rec.tool_call(tool, args, content=content, target_label=content)
        rec.tool_result(tool, observed_state=obs)
    ep = rec.finish(success=True)
    assert plane.commit_episode(ep)
    plane.flush()
    return ep.id


def test_one_broken_item_file_never_stops_the_other_lessons(tmp_path: Path, caplog) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        _meituan(plane, "在美团点一杯奶茶")
        navs = sorted((root / "device" / "navigation").glob("nav_*.yaml"))
        anchors = {e["id"]: e for e in plane.device.entries("ui_anchor")}
        assert len(navs) >= 2 and anchors
        navs[0].write_text("id: [broken\n")  # a hand edit gone wrong: not YAML any more
        for f in (root / "device" / "ui_anchors").glob("*.yaml"):
            if f.name != "index.yaml":
                f.unlink()  # so that the next episode has anchors to learn again
        plane.device.collection("ui_anchor").rebuild_index()
        ep_id = _meituan(plane, "在美团点一份炸鸡")
        assert plane.stats()["jobs_failed"] == 0
        d = plane.episodes.episode_dir(ep_id)
        assert (d / ".done-extract_lessons").exists() and not list(d.glob(".failed-*"))
        assert {e["id"] for e in plane.device.entries("ui_anchor")} == set(anchors)  # learned despite it
        nav = plane.device.get(sorted(p.stem for p in navs)[1])
        assert nav is not None and any(r.id == ep_id for r in nav.evidence_refs)  # the other rule too
        logged = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
        assert len(logged) == 1 and navs[0].name in logged[0]


def test_verify_lists_background_jobs_that_failed(tmp_path: Path) -> None:
    root = tmp_path / "m"

    calls = {"n": 0}

    def flaky(ep) -> None:  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("model quota exhausted")

    job = EpisodeJob("flaky_job", flaky)
    with MemoryPlane.open(root, extra_jobs=[job]) as plane:
        ep_id = record(plane, "pay with alipay", {"app": "Alipay"})
        assert plane.stats()["jobs_failed"] == 1
        report = plane.verify().to_dict()
        (failed,) = report["jobs_failed"]
        assert failed["episode"] == ep_id and failed["job"] == "flaky_job"
        assert "quota" in failed["error"] and failed["failed_at"] and failed["retry"].startswith("after ")
    # Ten minutes later the agent is gone; cron's verify runs the job again and it succeeds.
    with freeze_time(datetime.now(timezone.utc) + timedelta(minutes=11)):
        plane = MemoryPlane.open(root, extra_jobs=[job])
        d = plane.episodes.episode_dir(ep_id)
        old = datetime.now(timezone.utc).timestamp() - 3600
        os.utime(d / "episode.yaml", (old, old))
        report = plane.verify().to_dict()
        assert report["jobs_failed"] == [] and ep_id in report["jobs_caught_up"]
        assert (d / ".done-flaky_job").exists() and not (d / ".failed-flaky_job").exists()
        plane.close()


# -- no base64 anywhere in the tree, the session included -------------------------------------------


def test_session_events_keep_no_base64(tmp_path: Path) -> None:
    import base64
    import re

    from helpers import screenshot

    root = tmp_path / "m"
    blob = base64.b64encode(screenshot("home")).decode()
    with MemoryPlane.open(root) as plane:
        plane.session.append("tool_result", json.dumps({"ok": True, "data": blob}),
                             shot=f"data:image/jpeg;base64,{blob}")
        plane.session.append("user_input", "打开微信")
        ev = plane.session.window()[0]
        assert json.loads(ev["content"])["data"].startswith("[base64:") and ev["shot"].startswith("[base64:")
    runs = [p for p in root.rglob("*") if p.is_file() and re.search(rb"[A-Za-z0-9+/]{200,}", p.read_bytes())]
    assert runs == []


# -- the transcript ledger never raises because of what it was given ---------------------------------


def test_the_ledger_sanitises_odd_input_and_keeps_rendering(tmp_path: Path, caplog) -> None:
    from memory_plane.episodes.transcript import TranscriptConfig, TranscriptLedger

    ep = tmp_path / "ep"
    (ep / "artifacts").mkdir(parents=True)
    cfg = TranscriptConfig.from_mapping({"chunking": {"max_steps": 3}})
    led = TranscriptLedger(ep / "transcript", config=cfg, system_prompt="You drive a phone.")
    odd_stage = [{"dhash": "zz"}, {"dhash": 123}, {"elements": "not a list"}, {"elements": [1, None, {"label": 5}]},
                 {"width": "wide", "height": -3}, {"ui_text": "one line"}, {"package": {"name": "x"}}]
    odd_commit = [{"args": {"x": float("nan"), "y": float("inf")}}, {"args": "tap there"},
                  {"thought": 42, "result": b"bytes"}, {"validator": "ok", "failure_recovery": "retry"},
                  {"post_ui_text": 7, "notes_written": "note"}]
    for i in range(30):
        led.stage(**odd_stage[i % len(odd_stage)])
        led.commit(action="tap" if i % 5 else 7, **odd_commit[i % len(odd_commit)])  # type: ignore[arg-type]
        led.render()
        led.similarity_hint()
    led.flush(10)
    assert len(led.all_records()) == 30 and led.render()
    again = TranscriptLedger.open(ep / "transcript", config=cfg)
    assert len(again.all_records()) == 30 and again.render()
    assert len({r.getMessage() for r in caplog.records if "logged once" in r.getMessage()}) == len(
        [r for r in caplog.records if "logged once" in r.getMessage()])


# -- stable rewrites ----------------------------------------------------------------------------------


def test_rewrites_change_only_what_changed(tmp_path: Path) -> None:
    from memory_plane.lifecycle import dump_yaml

    # A file a person shaped (a comment): the rewrite keeps quoting, order and number form.
    old = '# checked by hand\nid: nav_x\ntitle: "聊天:王五"\npages:\n  - "聊天:王五"\n  - 首页\nconfidence: 0.8\n'
    new = {"id": "nav_x", "title": "聊天:王五", "pages": ["聊天:王五", "首页", "聊天:李四"], "confidence": 0.8 + 0.05}
    out = dump_yaml(new, old)
    assert out == ('# checked by hand\nid: nav_x\ntitle: "聊天:王五"\npages:\n  - "聊天:王五"\n  - 首页\n'
                   '  - "聊天:李四"\nconfidence: 0.85\n')


def test_lists_keep_their_order_when_a_lesson_is_seen_again(tmp_path: Path) -> None:
    from memory_plane.device_memory import merge_unique

    assert merge_unique(["a", "b", "c"], ["b", "d"], "pages_seen") == ["a", "b", "c", "d"]
    capped = merge_unique([f"p{i}" for i in range(50)], ["p0", "new"], "pages_seen")
    assert capped[0] == "p0" and capped[-1] == "new" and "p1" not in capped and len(capped) == 50


def test_verify_gc_and_a_repeated_task_leave_a_tree_under_git_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        _meituan(plane, "在美团点一杯奶茶")
        _meituan(plane, "在美团点一杯奶茶")
    items = [p for p in root.rglob("*.yaml") if "episodes" not in p.parts]
    before = {p: p.read_text() for p in items}
    with MemoryPlane.open(root) as plane:
        assert plane.verify().ok
        plane.gc()
    assert {p: p.read_text() for p in items} == before
    with MemoryPlane.open(root) as plane:
        _meituan(plane, "在美团点一杯奶茶")
    for p, text in before.items():
        new = p.read_text()
        if p.name == "index.yaml" or new == text:
            continue
        removed = set(text.splitlines()) - set(new.splitlines())
        # Only counts, scores and times move; no quoting flips, no reordered lists, no float noise.
        keys = {line.split(":")[0].strip().lstrip("- ") for line in removed}
        assert keys <= {"success_count", "confidence", "expires_at", "updated_at", "last_validated_at",
                        "summary", "count", "nx", "ny", "failure_count", "evidence_count"}, (p.name, removed)
        assert "0000000" not in new


# -- huge goals ------------------------------------------------------------------------------------


def test_a_huge_goal_is_matched_by_its_head_and_recorded_with_a_count(tmp_path: Path) -> None:
    from memory_plane.retrieval._query import MAX_GOAL_CHARS

    goal = "pay with alipay " + "lorem ipsum " * 400_000  # ~5 MB pasted into the goal
    with MemoryPlane.open(tmp_path / "m") as plane:
        manual_procedure(plane)
        ctx = plane.retrieve(goal)
        assert ctx.query is not None and len(ctx.query.text) <= MAX_GOAL_CHARS
        assert "proc_manual" in ctx.refs()
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input=goal), ctx)
        ep = rec.finish(success=True)
        assert plane.commit_episode(ep)
        assert len(ep.user_goal) <= 2000 and ep.user_goal.startswith("pay with alipay")
        assert f"[{len(goal) - 1500 - 300} chars omitted]" in ep.user_goal


# -- the way back from quarantine ------------------------------------------------------------------------------


def test_quarantine_list_show_and_restore(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    r = ["--root", str(root)]
    with MemoryPlane.open(root) as plane:
        path = manual_procedure(plane)
        good = path.read_text()
        path.write_text(good.replace("id: proc_manual", "id: [proc_manual"))
        report = plane.verify(fix=True)
        assert any("quarantined" in f for f in report.fixed) and not path.exists()
    capsys.readouterr()
    assert cli([*r, "lifecycle", "quarantine", "list", "--json"]) == 0
    (q,) = json.loads(capsys.readouterr().out)
    assert q["original"] == "device/procedures/proc_manual.yaml" and "YAML" in q["reason"] and q["quarantined_at"]
    assert cli([*r, "lifecycle", "quarantine", "show", q["name"]]) == 0
    assert "id: [proc_manual" in capsys.readouterr().out
    # Still broken: not restored (exit 2 with what is wrong), nothing moved.
    assert cli([*r, "lifecycle", "quarantine", "restore", q["name"]]) == 2
    assert "still does not load" in capsys.readouterr().err and not path.exists()
    (root / QUARANTINE_DIR / q["name"]).write_text(good)  # fixed in place by a person
    assert cli([*r, "lifecycle", "quarantine", "restore", "device/procedures/proc_manual.yaml"]) == 0
    assert "restored device/procedures/proc_manual.yaml (re-indexed)" in capsys.readouterr().out
    assert path.read_text() == good
    with MemoryPlane.open(root) as plane:
        assert "proc_manual" in plane.retrieve("用支付宝付款 pay with alipay").refs()
        assert plane.quarantined() == []
    assert cli([*r, "lifecycle", "quarantine", "restore", "nothing-here"]) == 2
    assert cli([*r, "lifecycle", "verify", "extra"]) == 2
