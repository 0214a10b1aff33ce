"""Hand edits and faults are never silent (GC resumes, indexes are checked, the file is the truth...).

It reaches inside the lifecycle bench for its aged tree, `lifecycle._gc` and `episodes._store` to fail or kill a
step at a chosen point, and `cli/_mcp` for the MCP server.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.cli import main as cli

from helpers import manual_procedure

GOAL = "用支付宝付款 pay with alipay"


def _touch_later(path: Path, text: str) -> None:
    """Write a hand edit whose mtime is surely after the index line's."""
    path.write_text(text)
    later = time.time() + 2
    os.utime(path, (later, later))


# -- the file is the truth, at once --------------------------------------------------------------


def test_a_changed_file_is_scored_and_rendered_as_it_is_now(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        path = manual_procedure(plane)
        (hit,) = plane.retrieve(GOAL).common.procedures
        assert hit.confidence == 0.5
        text = path.read_text()
        _touch_later(path, text.replace("confidence: 0.5", "confidence: 0.01"))
        (hit,) = plane.retrieve(GOAL).common.procedures
        assert hit.confidence == 0.01 and hit.factors["confidence"] == 0.01
        _touch_later(path, text.replace("expires_at: \"2", "expires_at: \"2020-01-01T00:00:00Z\"\nold_expiry: \"2"))
        ctx = plane.retrieve(GOAL)
        assert "proc_manual" not in ctx.refs() and ctx.dropped.get("expired") == 1
        _touch_later(path, text.replace("intent: pay", "intent: pay\napplicability:\n  language: fr-FR"))
        ctx = plane.retrieve(MemoryRetrieveRequest(input=GOAL, current_hints=CurrentEnvironmentHints(language="zh-CN")))
        assert "proc_manual" not in ctx.refs() and ctx.dropped.get("inapplicable") == 1


def test_a_changed_long_term_summary_is_what_the_prompt_shows(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        r = plane.long_term.save_memory(type="fact", content="The door code is 4711", title="door code")
        path = plane.long_term.dir / "memories" / f"{r.id}.md"
        _touch_later(path, path.read_text().replace("4711", "9999"))
        ctx = plane.retrieve("what is the door code")
        (hit,) = [h for h in ctx.common.long_term if h.id == r.id]
        assert "9999" in hit.text and "4711" not in ctx.render()


def test_a_renamed_item_is_found_by_the_id_inside_it(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        path = manual_procedure(plane)
        os.rename(path, path.with_name("my-alipay-notes.yaml"))
        ctx = plane.retrieve(GOAL)
        assert "proc_manual" in ctx.refs()
        (hit,) = ctx.common.procedures
        assert hit.path == "device/procedures/my-alipay-notes.yaml" and hit.steps
        assert plane.device.get("proc_manual") is not None
    assert cli(["--root", str(root), "device", "show", "proc_manual", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "proc_manual"



# -- a GC killed at any point resumes to the same files and tombstones -----------------------------


class _Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs (a BaseException, so no handler swallows it)."""


def _gc_fixture(root: Path) -> None:
    from memory_plane.bench._lifecycle import build
    from memory_plane.lifecycle import init_tree

    init_tree(root)
    build(root, n_items=48, n_episodes=30, seed=11)


def _gc_state(root: Path) -> tuple[list[str], list[tuple[str, str]]]:
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".cache" not in p.parts
                   and p.name != "tombstones.jsonl")
    tombs = [json.loads(line) for line in (root / "lifecycle" / "tombstones.jsonl").read_text().splitlines() if line]
    return files, sorted((t["ref"]["type"], t["ref"]["id"]) for t in tombs)


def _gc(root: Path, now) -> None:  # type: ignore[no-untyped-def]
    from memory_plane.upkeep import gc_tree

    with MemoryPlane.open(root) as plane:
        gc_tree(root, plane.device, plane.episodes, plane.long_term, plane.session, now=now)


def test_a_gc_killed_at_any_removal_resumes_to_the_same_files_and_tombstones(tmp_path: Path, monkeypatch) -> None:
    import shutil
    from datetime import timedelta

    import memory_plane.lifecycle._gc as maint  # every GC removal goes through its remove_path
    from memory_plane.bench._lifecycle import NOW

    now = NOW + timedelta(days=200)  # most episodes past their summary TTL, most items past grace
    base = tmp_path / "base"
    _gc_fixture(base)
    ref = tmp_path / "ref"
    shutil.copytree(base, ref)
    _gc(ref, now)
    want = _gc_state(ref)
    assert len(want[1]) > 20 and any(t == "episode" for t, _ in want[1])
    real = maint.remove_path
    for kill_at in (1, 3, 9, 20, 33):
        root = tmp_path / f"k{kill_at}"
        shutil.copytree(base, root)
        calls = [0]

        def dying(r, p, _real=real, _calls=calls, _at=kill_at, **kw):  # type: ignore[no-untyped-def]
            _calls[0] += 1
            if _calls[0] == _at:
                raise _Killed
            return _real(r, p, **kw)

        monkeypatch.setattr(maint, "remove_path", dying)
        try:
            _gc(root, now)
        except _Killed:
            pass
        monkeypatch.setattr(maint, "remove_path", real)
        _gc(root, now)
        assert _gc_state(root) == want, kill_at


# -- indexes are checked, not trusted --------------------------------------------------------------


def _episodes(plane: MemoryPlane, n: int) -> list[str]:
    from memory_plane import MemoryRetrieveRequest as Req

    ids = []
    for i in range(n):
        req = Req(input=f"open app number {i}")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_call("launch_app", {"app": "x"})
        rec.tool_result("launch_app", output="ok", observed_state={"app": "WeChat"})
        ep = rec.finish(success=True)
        assert plane.commit_episode(ep)
        ids.append(ep.id)
    plane.flush()
    return ids


def _age(folder: Path, seconds: float = 60) -> None:
    """Make every file under a folder look written a minute ago."""
    then = time.time() - seconds
    for p in folder.rglob("*"):
        if p.is_file():
            os.utime(p, (then, then))


def test_a_damaged_or_torn_episode_index_is_rebuilt_and_said(tmp_path: Path, capsys, caplog) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        ids = _episodes(plane, 4)
    index = root / "episodes" / "index.yaml"
    good = index.read_bytes()
    index.write_bytes(os.urandom(2000))
    assert cli(["--root", str(root), "episodes", "list", "--json"]) == 0
    assert sorted(e["id"] for e in json.loads(capsys.readouterr().out)) == sorted(ids)
    lines = good.decode().splitlines(keepends=True)
    index.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # one torn line
    with caplog.at_level("WARNING", logger="memory_plane"), MemoryPlane.open(root) as plane:
        assert sorted(e["id"] for e in plane.episodes.entries()) == sorted(ids)
    assert "episodes/index.yaml" in caplog.text and "rebuilt" in caplog.text
    _age(root / "episodes")  # written a while ago (a file seconds old is a writer's, about to be indexed)
    index.write_text("".join(ln for ln in lines if ids[1] not in ln))  # a line removed by hand
    with MemoryPlane.open(root) as plane:
        assert sorted(e["id"] for e in plane.episodes.entries()) == sorted(ids)


def test_a_read_only_tree_reads_around_a_bad_index_and_says_how_many_lines(tmp_path: Path, monkeypatch,
                                                                             caplog) -> None:
    from helpers import read_only

    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        path = manual_procedure(plane)
        manual_procedure(plane, "proc_second")
    index = path.parent / "index.yaml"
    _age(path.parent)
    index.write_text("".join(ln for ln in index.read_text().splitlines(keepends=True) if "proc_second" not in ln))
    read_only(monkeypatch, root)
    with caplog.at_level("WARNING", logger="memory_plane"):
        from memory_plane.device_memory import DeviceMemory

        ids = sorted(e["id"] for e in DeviceMemory(root).collection("procedure").entries())
    assert ids == ["proc_manual", "proc_second"]
    assert "procedures/index.yaml" in caplog.text and "2 entries read from the item files instead of 1" in caplog.text


# -- finished is finished ----------------------------------------------------------------------------


def test_a_finished_task_whose_commit_hit_enospc_is_completed_not_interrupted(tmp_path: Path, monkeypatch) -> None:
    import errno

    import memory_plane.episodes._store as store_mod
    from memory_plane import MemoryRetrieveRequest as Req

    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        req = Req(input="open wechat and find zhang san")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_call("launch_app", {"app": "wechat"})
        rec.tool_result("launch_app", output="ok", observed_state={"app": "WeChat", "page": "Chat"})
        ep = rec.finish(success=True, final_state="Zhang San chat page", completion_reason="title matches")
        real = store_mod.atomic_write

        def full(path, *a, **k):  # type: ignore[no-untyped-def]
            if str(path).endswith("episode.yaml"):
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            return real(path, *a, **k)

        monkeypatch.setattr(store_mod, "atomic_write", full)
        plane.commit_episode(ep)
        plane.flush()
        monkeypatch.setattr(store_mod, "atomic_write", real)
        ep.committed()  # the runtime moves on; the recording lock is released
        events = plane.episodes.events(ep.id).records
        assert events[-1]["type"] == "finish" and events[-1]["success"] is True
        report = plane.verify()
        got = plane.episodes.get(ep.id)
        assert got is not None and got.status == "active", report.fixed
        assert got.outcome.success is True and got.outcome.failure_phase is None
        assert got.outcome.final_state == "Zhang San chat page"
        assert ep.id not in report.stats.get("interrupted", [])
        ctx = plane.retrieve("open wechat and find zhang san")
        assert ep.id not in [h.id for h in ctx.common.failure_modes]


# -- cron-grade output ---------------------------------------------------------------------------------


def _cron_lines() -> list[str]:
    """The documented cron lines (docs/operating.md), as written."""
    readme = (Path(__file__).resolve().parent.parent / "docs" / "operating.md").read_text()
    block = readme.split("```cron\n", 1)[1].split("```", 1)[0]
    return [ln for ln in block.splitlines() if ln.strip() and not ln.startswith(("#", "MP="))]


def _run_cron(line: str, root: Path, log: Path, tmp: Path) -> None:
    import shlex
    import subprocess
    import sys

    command = line.split(None, 5)[5].replace("/tmp/memplane-", f"{tmp}/memplane-")  # the schedule fields off
    command = command.replace("/userdata/agent/memory", shlex.quote(str(root))).replace(
        "/var/log/memplane.log", shlex.quote(str(log)))
    mp = Path(sys.executable).parent / "memplane"
    subprocess.run(["bash", "-c", command], env={**os.environ, "MP": str(mp)}, check=False, timeout=300)


def test_the_readme_cron_recipe_logs_one_json_line_per_run_whatever_happens(tmp_path: Path) -> None:
    import shutil
    import subprocess

    verify_line, gc_line = _cron_lines()
    log = tmp_path / "memplane.log"
    good = tmp_path / "good"
    with MemoryPlane.open(good) as plane:
        manual_procedure(plane)
    _run_cron(verify_line, good, log, tmp_path)                     # ok
    _run_cron(gc_line, good, log, tmp_path)                         # ok
    _run_cron(verify_line, tmp_path / "unmounted", log, tmp_path)   # missing root: exit 4
    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    (bad / "lifecycle" / "retention.yaml").write_text("ttl: [not, a, mapping\n")
    _run_cron(gc_line, bad, log, tmp_path)                          # a bad retention.yaml stops gc: exit 1
    lines = log.read_text().splitlines()
    records = [json.loads(ln) for ln in lines]  # every line is JSON: nothing else reached the log
    assert [r["exit_code"] for r in records] == [0, 0, 4, 1], lines
    if shutil.which("jq"):
        out = subprocess.run(["jq", "-c", "select(.exit_code != 0)"], input=log.read_text(), text=True,
                             capture_output=True, check=True).stdout.splitlines()
        assert len(out) == 2 and str(tmp_path / "unmounted") in out[0] and "retention.yaml" in out[1]


def test_failed_background_jobs_make_verify_exit_1_with_their_reason(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        ids = _episodes(plane, 1)
        # What the background worker leaves when a job fails (here: the disk was full when it ran).
        failed = plane.episodes.episode_dir(ids[0]) / ".failed-extract_lessons"
        failed.write_text(json.dumps({"failed_at": "2026-12-01T03:00:00Z", "error": "OSError: [Errno 28] No space"}))
    assert cli(["--root", str(root), "lifecycle", "verify", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["problem_counts"].get("job_failed") == 1
    (prob,) = [p for p in out["problems"] if p["category"] == "job_failed"]
    assert "No space" in prob["message"] and prob["path"].endswith(".failed-extract_lessons")


def test_a_documented_off_word_set_by_hand_is_not_a_problem(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        path = manual_procedure(plane)
        path.write_text(path.read_text().replace("status: active", "status: disabled"))
        report = plane.verify()
        assert report.ok, report.problems
        assert "proc_manual" not in plane.retrieve(GOAL).refs()
        assert plane.device.get("proc_manual").status == "inactive"  # type: ignore[union-attr]


# -- odd files ---------------------------------------------------------------------------------------------


def test_an_item_over_the_size_limit_is_not_loaded_and_is_named(tmp_path: Path) -> None:
    from memory_plane.lifecycle import MAX_ITEM_BYTES

    with MemoryPlane.open(tmp_path / "m") as plane:
        path = manual_procedure(plane)
        manual_procedure(plane, "proc_second")
        big = path.read_text() + "notes: |\n" + ("  " + "x" * 1000 + "\n") * (MAX_ITEM_BYTES // 1000 + 10)
        _touch_later(path, big)
        ctx = plane.retrieve(GOAL)
        assert "proc_manual" not in ctx.refs() and "proc_second" in ctx.refs()
        report = plane.verify()
        (prob,) = [p for p in report.problems if p.path.endswith("proc_manual.yaml")]
        assert prob.category == "oversize" and "limit" in prob.message


def test_a_symlinked_folder_inside_the_tree_is_reported(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        ids = _episodes(plane, 1)
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        link = plane.episodes.episode_dir(ids[0]) / "artifacts" / "linked"
        link.symlink_to(outside, target_is_directory=True)
        report = plane.verify()
        assert any(p.category == "symlink" and p.path.endswith("artifacts/linked") for p in report.problems)


def test_gc_dry_run_works_on_a_read_only_tree(tmp_path: Path, monkeypatch, capsys) -> None:
    from helpers import read_only

    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        plane.long_term.save_memory(type="fact", content="the locker code is 1234")
    read_only(monkeypatch, root)
    assert cli(["--root", str(root), "lifecycle", "gc", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["exit_code"] == 0


def test_save_memory_on_a_read_only_disk_is_a_storage_error_naming_the_file(tmp_path: Path, monkeypatch,
                                                                           capsys) -> None:
    from memory_plane.lifecycle import StorageError

    from helpers import read_only

    root = tmp_path / "m"
    plane = MemoryPlane.open(root)
    read_only(monkeypatch, root)
    try:
        plane.long_term.save_memory(type="fact", content="the locker code is 1234")
    except StorageError as exc:
        assert str(root) in exc.path and "Read-only" in str(exc)
    else:
        raise AssertionError("saved on a read-only disk")
    res = plane.tools.call("save_memory", {"content": "the locker code is 1234"})
    assert res.is_error and "not saved" in res.text and str(root) in res.text and "Read-only" in res.text
    assert cli(["--root", str(root), "memory", "save", "the locker code is 1234", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["exit_code"] == 3


def test_a_memory_cut_to_the_limit_says_so_and_the_cli_names_its_own_flag(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        r = plane.long_term.save_memory(type="fact", content="word " * 4000)
        assert r.note is not None and "cut to 4000" in r.note
        res = plane.tools.call("save_memory", {"content": "other " * 4000})
        assert "cut to 4000" in res.text
        forgotten = plane.long_term.save_memory(type="fact", content="the old locker code is 99")
        plane.long_term.forget_memory(forgotten.id, reason="test")
    assert cli(["--root", str(root), "memory", "save", "the old locker code is 99"]) == 0
    out = capsys.readouterr().out
    assert "--force" in out and "force=True" not in out


# -- MCP and CLI corners ------------------------------------------------------------------------------------


def _pixel7(root: Path) -> None:
    """A tree that knows one phone, pixel7 (the default profile stays as init made it)."""
    with MemoryPlane.open(root) as plane:
        req = MemoryRetrieveRequest(input="打开微信", device_id="pixel7",
                                    current_hints=CurrentEnvironmentHints(language="zh-CN", screen_width=1080,
                                                                          screen_height=2400))
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_call("launch_app", {"app": "com.tencent.mm"})
        rec.tool_result("launch_app", observed_state={"app": "微信", "page": "首页", "package": "com.tencent.mm"})
        plane.commit_episode(rec.finish(success=True))
        plane.flush()


def test_the_device_profile_resource_is_this_phones_and_a_bad_uri_is_an_mcp_error(tmp_path: Path, caplog) -> None:
    import anyio
    import pytest

    pytest.importorskip("mcp")
    from mcp import Client
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    from memory_plane.cli._mcp import build_server

    root = tmp_path / "m"
    _pixel7(root)
    assert (root / "device" / "profiles").is_dir() and list((root / "device" / "profiles").glob("*.yaml"))

    async def run() -> None:
        with MemoryPlane.open(root) as plane:
            async with Client(build_server(plane)) as client:
                uris = {str(r.uri) for r in (await client.list_resources()).resources}
                assert "memory://device/profiles/pixel7" in uris
                text = (await client.read_resource("memory://device/profile")).contents[0].text  # type: ignore[union-attr]
                assert "pixel7" in text
                try:
                    await client.read_resource("memory://nope/../../etc/passwd")
                except MCPError as exc:
                    assert exc.code == INVALID_PARAMS and "no resource" in exc.message
                else:
                    raise AssertionError("a bad URI was served")

    with caplog.at_level("ERROR"):
        anyio.run(run)
    assert "Traceback" not in caplog.text and not [r for r in caplog.records if r.exc_info]


def test_retrieve_on_a_one_device_tree_uses_that_device_and_explain_shows_goal_and_budget(tmp_path: Path,
                                                                                          capsys) -> None:
    root = tmp_path / "m"
    _pixel7(root)
    with MemoryPlane.open(root) as plane:
        assert plane.device.profiles.sole_device_id() == "pixel7"
    assert cli(["--root", str(root), "retrieve", "打开微信", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["device"] == "pixel7" and any(r.startswith("app_") for r in out["refs"]), out["refs"]
    assert cli(["--root", str(root), "retrieve", "打开微信", "--explain"]) == 0
    text = capsys.readouterr().out
    assert "goal: '打开微信'" in text and "device=pixel7" in text


def test_explain_lists_every_candidate_the_size_budget_dropped(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        for i in range(6):
            plane.long_term.save_memory(type="rule", content=f"Rule {i}: when paying, " + "always check twice. " * 40)
        plane._retriever.config.budget_chars = 1500
        ctx = plane.explain("pay with alipay")
        cut = [d for d in ctx.dropped_items if d["reason"] == "budget"]
        assert cut and ctx.dropped.get("budget") == len(cut)
        assert not {d["id"] for d in cut} & set(ctx.refs())


def test_a_renamed_long_term_memory_is_still_retrieved(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        r = plane.long_term.save_memory(type="rule", content="Always confirm before paying with Alipay")
        path = plane.long_term.dir / "memories" / f"{r.id}.md"
        os.rename(path, path.with_name("my-payment-rule.md"))
        ctx = plane.retrieve(GOAL)
        assert r.id in ctx.refs(), ctx.dropped
