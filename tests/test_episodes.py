"""Recorder, store and writer: events on disk as they happen, no base64, redaction, phases.

It reaches inside `episodes._store` to see the order of a commit's writes.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from memory_plane.episodes import (
    FAILURE_PHASES,
    EpisodeJob,
    EpisodeRecorder,
    TaskEpisodeStore,
    TaskEpisodeWriter,
    parse_tool_input,
    tool_coords,
)
from memory_plane.lifecycle import read_jsonl

from helpers import screenshot

REPO = Path(__file__).resolve().parent.parent


def make(root: Path, goal: str = "打开微信，找到张三", **kw) -> tuple[TaskEpisodeStore, EpisodeRecorder]:
    store = TaskEpisodeStore(root)
    return store, EpisodeRecorder(store, goal, language="zh-CN", screen="640x1200", **kw)


def all_text(root: Path) -> str:
    out = []
    for p in root.rglob("*"):
        if p.is_file() and p.suffix in (".yaml", ".jsonl", ".md"):
            out.append(p.read_text("utf-8", "replace"))
    return "\n".join(out)


def test_events_are_on_disk_before_finish(root: Path) -> None:
    store, rec = make(root)
    rec.tool_call("keyboard_text", {"text": "weixin"}, content="type the app name")
    rec.tool_result("keyboard_text", output="ok", screenshot=screenshot("a"),
                    observed_state={"app": "WeChat", "page": "Home", "package": "com.tencent.mm"})
    events = store.events(rec.id).records
    assert [e["type"] for e in events] == ["tool_call", "tool_result"]
    assert events[1]["screenshot_ref"] == "artifacts/step_001.jpg"
    assert events[1]["width"] == 640 and events[1]["height"] == 1200 and len(events[1]["dhash"]) == 16
    assert (store.episode_dir(rec.id) / "artifacts" / "step_001.jpg").exists()
    ep = store.get(rec.id)
    assert ep is not None and ep.status == "recording"
    assert rec.id.startswith("ep_") and len(rec.id.split("_")[1]) == 8


def test_identical_consecutive_screenshots_stored_once(root: Path) -> None:
    store, rec = make(root)
    shot = screenshot("same")
    for _ in range(3):
        rec.tool_call("tap", {"x": 1, "y": 2})
        rec.tool_result("tap", screenshot=shot)
    files = list((store.episode_dir(rec.id) / "artifacts").iterdir())
    assert len(files) == 1
    refs = {e["screenshot_ref"] for e in store.events(rec.id).records if e["type"] == "tool_result"}
    assert refs == {"artifacts/step_001.jpg"}


def test_pil_image_and_png_accepted(root: Path) -> None:
    from PIL import Image

    store, rec = make(root)
    rec.tool_result("screenshot", screenshot=Image.new("RGB", (100, 200), (1, 2, 3)))
    rec.tool_result("screenshot", screenshot=screenshot("png", fmt="PNG"))
    refs = [e["screenshot_ref"] for e in store.events(rec.id).records]
    assert refs[0].endswith(".jpg") and refs[1].endswith(".png")


def test_no_base64_anywhere(root: Path) -> None:
    store, rec = make(root)
    png = screenshot("b64", fmt="PNG")
    b64 = base64.b64encode(png).decode()
    blob = base64.b64encode(os.urandom(3000)).decode()
    rec.tool_call("upload", {"image": f"data:image/png;base64,{b64}", "blob": blob, "nested": [{"x": b64}]})
    rec.tool_result("upload", output=f"result {blob} end", observed_state={"img": b64})
    ep = rec.finish(success=True)
    TaskEpisodeWriter(store).commit(ep)
    text = all_text(root)
    assert b64[:100] not in text and blob[:100] not in text
    assert "[image: artifacts/" in text and "[base64:" in text


def test_outputs_are_bounded_excerpts(root: Path) -> None:
    store, rec = make(root)
    rec.tool_result("dump_ui", output="x" * 100_000 + "TAIL")
    ev = store.events(rec.id).records[0]
    assert len(ev["output"]) < 2100 and ev["output"].endswith("TAIL") and "omitted" in ev["output"]


def test_sensitive_input_is_redacted(root: Path) -> None:
    store, rec = make(root)
    rec.tool_result("tap", observed_state={"app": "Bank", "page": "Login", "field_type": "password"})
    rec.tool_call("keyboard_text", {"text": "hunter2-secret"}, content="type hunter2-secret")
    rec.tool_result("keyboard_text", output="typed hunter2-secret")
    rec.tool_call("keyboard_text", {"text": "another-pass", "sensitive": True})
    ep = rec.finish(success=False, failure_reason="login with hunter2-secret rejected")
    TaskEpisodeWriter(store).commit(ep)
    text = all_text(root)
    assert "hunter2-secret" not in text and "another-pass" not in text
    assert "[redacted]" in text


@pytest.mark.parametrize("phase", [p for p in FAILURE_PHASES if p != "interrupted"])
def test_failure_phases_are_stored(root: Path, phase: str) -> None:
    store, rec = make(root)
    ep = rec.finish(success=False, failure_phase=phase, failure_reason="why")
    assert TaskEpisodeWriter(store).commit(ep)
    got = store.get(ep.id)
    assert got is not None and got.outcome.failure_phase == phase and got.outcome.success is False


def test_error_means_failure_and_an_unknown_phase_is_kept(root: Path) -> None:
    _store, rec = make(root)
    ep = rec.finish(error="adb disconnected", success=True)
    assert ep.outcome.success is False and ep.outcome.failure_phase == "tool_error"
    _, rec2 = make(root)
    # A phase outside the documented ones is kept as given, never turned into "unknown".
    assert rec2.finish(success=False, failure_phase="cosmic_rays").outcome.failure_phase == "cosmic_rays"


def test_context_manager_finishes_on_exception_and_reraises(root: Path) -> None:
    store = TaskEpisodeStore(root)
    writer = TaskEpisodeWriter(store)
    with pytest.raises(KeyError), EpisodeRecorder(store, "goal", on_exit_commit=writer.commit) as rec:
        rec.tool_call("tap", {"x": 1, "y": 1})
        raise KeyError("boom")
    got = store.get(rec.id)
    assert got is not None and got.status == "active" and got.outcome.success is False
    assert got.outcome.failure_phase == "exception" and "KeyError" in (got.outcome.error or "")


def test_index_line_per_episode_and_readable_chinese(root: Path) -> None:
    store = TaskEpisodeStore(root)
    writer = TaskEpisodeWriter(store)
    ids = []
    for i in range(3):
        rec = EpisodeRecorder(store, f"打开微信，找到张三 {i}", normalized_goal={"intent": "open_contact_chat",
                                                                          "app": "WeChat"})
        rec.tool_call("launch_app", {"app": "微信"})
        ids.append(writer.commit(rec.finish(success=True, final_state="张三 chat")) and rec.id)
    lines = [x for x in (root / "episodes" / "index.yaml").read_text("utf-8").splitlines() if x.startswith("- ")]
    assert len(lines) == 3 and all("打开微信" in x for x in lines)
    assert "Path: launch_app(微信)" in lines[0] and "Outcome: success, 张三 chat" in lines[0]
    ep_text = (store.episode_dir(ids[0]) / "episode.yaml").read_text("utf-8")
    assert "打开微信" in ep_text and "\\u" not in ep_text
    assert [e["id"] for e in store.newest()] == list(reversed(ids)) or len(store.newest()) == 3


def test_commit_flushes_events_before_episode_yaml_and_stages_outside_the_year_folder(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import memory_plane.episodes._store as store_mod

    store, rec = make(root)
    rec.tool_call("launch_app", {"app": "微信"})
    ep = rec.finish(success=True)
    calls: list[tuple[str, str]] = []
    real_fsync_file, real_write = store_mod.fsync_file, store_mod.atomic_write

    def fsync_spy(path):  # type: ignore[no-untyped-def]
        calls.append(("fsync", Path(path).name))
        return real_fsync_file(path)

    def write_spy(path, data, **kw):  # type: ignore[no-untyped-def]
        calls.append(("write", Path(path).name))
        stage = kw.get("stage_in")
        assert stage is not None and Path(path).parent.parent.parent == Path(stage).parent
        return real_write(path, data, **kw)

    monkeypatch.setattr(store_mod, "fsync_file", fsync_spy)
    monkeypatch.setattr(store_mod, "atomic_write", write_spy)
    assert TaskEpisodeWriter(store).commit(ep)
    assert calls == [("fsync", "events.jsonl"), ("write", "episode.yaml")]
    # The staging folder is not an episode year and leaves nothing behind.
    assert [d.name for d in (root / "episodes" / ".staging").iterdir()] == []
    assert [e["id"] for e in store.entries()] == [ep.id]
    assert [p.parent.name for p in store.item_paths()] == [ep.id]
    assert [r.problem for r in store.iter_items()] == [None]



def test_commit_goes_ahead_when_events_jsonl_is_a_planted_link(root: Path, tmp_path: Path) -> None:
    store, rec = make(root)
    ep = rec.finish(success=True)
    events = store.episode_dir(ep.id) / "events.jsonl"
    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    events.unlink()
    events.symlink_to(outside)
    assert TaskEpisodeWriter(store).commit(ep)
    assert store.get(ep.id) is not None and store.get(ep.id).status == "active"
    assert outside.read_text() == ""  # nothing written through the link

def test_commit_with_broken_tree_does_not_raise(root: Path) -> None:
    store, rec = make(root)
    ep = rec.finish(success=True)
    writer = TaskEpisodeWriter(store)
    import shutil

    shutil.rmtree(root / "episodes")
    (root / "episodes").write_text("not a directory")
    assert writer.commit(ep) is False
    assert writer.stats.commit_errors == 1 and writer.stats.last_error


def test_recorder_survives_broken_tree(tmp_path: Path) -> None:
    root = tmp_path / "m"
    root.mkdir()
    (root / "episodes").write_text("a file where a folder should be")
    _store, rec = make(root)
    rec.tool_call("tap", {"x": 1, "y": 2})
    rec.tool_result("tap", screenshot=screenshot())
    ep = rec.finish(success=True)
    assert ep.outcome.success and rec.errors >= 1


def test_background_jobs_bounded_and_flushed(root: Path) -> None:
    store = TaskEpisodeStore(root)
    gate = threading.Event()
    seen: list[str] = []

    def slow_job(ep) -> None:
        gate.wait(5)
        seen.append(ep.id)

    writer = TaskEpisodeWriter(store, jobs=[EpisodeJob("slow", slow_job)], queue_size=2)
    for i in range(6):
        _, rec = make(root, goal=f"g{i}")
        writer.commit(rec.finish(success=True))  # returns while every job is blocked on the gate
    assert seen == [] and writer.stats.committed == 6
    assert writer.stats.jobs_deferred >= 1 and writer.stats.jobs_dropped == 0  # over the bound: deferred, not lost
    gate.set()
    assert writer.flush(10)
    assert writer.stats.jobs_done == len(seen) == 6 and sorted(seen) == sorted(set(seen))


def test_failing_job_is_retried_then_counted(root: Path) -> None:
    calls = []

    def flaky(ep) -> None:
        calls.append(1)
        raise OSError("disk busy")

    store = TaskEpisodeStore(root)
    writer = TaskEpisodeWriter(store, jobs=[EpisodeJob("flaky", flaky)], retries=2, retry_delay=0.001)
    _, rec = make(root)
    writer.commit(rec.finish(success=True))
    assert writer.flush(5)
    assert len(calls) == 3 and writer.stats.jobs_failed == 1


def test_killed_process_leaves_partial_episode(root: Path) -> None:
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO / 'tests')!r})
        from pathlib import Path
        from memory_plane.episodes import TaskEpisodeStore, EpisodeRecorder
        from helpers import screenshot
        store = TaskEpisodeStore(Path({str(root)!r}))
        rec = EpisodeRecorder(store, "open settings")
        for i in range(3):
            rec.tool_call("tap", {{"x": 10 * i, "y": 20}})
            rec.tool_result("tap", screenshot=screenshot(str(i)), observed_state={{"app": "Settings"}})
        print(rec.id, flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ep_id = proc.stdout.readline().strip()
    store = TaskEpisodeStore(root)
    assert store.is_recording_live(ep_id)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    assert not store.is_recording_live(ep_id)
    ep = store.get(ep_id)
    assert ep is not None and ep.status == "recording"
    assert len(store.events(ep_id).records) == 6
    from memory_plane import MemoryPlane

    with MemoryPlane.open(root) as plane:
        report = plane.verify()
    assert ep_id in " ".join(report.fixed) or report.stats.get("interrupted") == [ep_id]
    got = store.get(ep_id)
    assert got is not None and got.status == "interrupted"
    assert got.outcome.success is False and got.outcome.failure_phase == "interrupted"
    assert got.metrics.tool_steps == 3
    assert any(e["id"] == ep_id for e in store.entries())


def test_parse_tool_input_and_coords() -> None:
    assert parse_tool_input('{"__arg1": "{\\"x\\": 500, \\"y\\": \\"850\\"}"}') == {"x": 500, "y": "850"}
    assert tool_coords({"x": 500, "y": "850"}) == "x=500,y=850"
    assert tool_coords({"start": [1, 2], "end": [3, 4]}) == "x=1,y=2 -> x=3,y=4"
    assert tool_coords({"coordinate": [540, 2273]}) == "x=540,y=2273"
    assert tool_coords({"text": "hi"}) is None


def test_events_jsonl_torn_tail_still_readable(root: Path) -> None:
    store, rec = make(root)
    rec.tool_call("tap", {"x": 1, "y": 1})
    with open(store.episode_dir(rec.id) / "events.jsonl", "ab") as fh:
        fh.write(b'{"event_id": "evt_0002", "ty')
    r = read_jsonl(store.episode_dir(rec.id) / "events.jsonl")
    assert len(r.records) == 1 and r.torn_tail
    rec.tool_call("tap", {"x": 2, "y": 2})
    assert len(store.events(rec.id).records) == 2
