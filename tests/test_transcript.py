"""The transcript ledger: zones, scrub edge paths, no back-fill, pairs, versions, envelopes, cold start."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memory_plane.episodes.transcript import (
    FAILED_PLACEHOLDER,
    PENDING_PLACEHOLDER,
    LensOutput,
    OfflineVisualLens,
    SummaryBook,
    SummaryRecord,
    TranscriptConfig,
    TranscriptLedger,
    VisualJob,
    banned_words_in,
    check_summary,
    hit_test,
    label_action,
    to_genai,
)

from helpers import episode_ledger, screenshot


class GatedLens:
    """A lens that waits for a gate (or fails) so tests control when summaries arrive."""

    name = "gated"

    def __init__(self, fail: bool = False) -> None:
        self.gate = threading.Event()
        self.fail = fail
        self.calls = 0

    def summarize(self, job: VisualJob) -> LensOutput:
        self.calls += 1
        self.gate.wait(10)
        if self.fail:
            raise RuntimeError("model unavailable")
        return LensOutput(f"Step {job.record.step}: the screen listed a search box and two buttons.", "gated", 1)


def make(tmp_path: Path, lens=None, config: TranscriptConfig | None = None, system: str = "You drive a phone."):
    return episode_ledger(tmp_path, lens=lens, config=config, system_prompt=system)


def step(led: TranscriptLedger, ep: Path, n: int, **kw) -> None:
    ref = f"artifacts/step_{n:03d}.jpg"
    (ep / ref).write_bytes(screenshot(f"s{n}", (320, 600)))
    led.stage(screenshot=ref, width=320, height=600, package="com.demo", activity=f"Page{n % 4}",
              elements=[{"label": "搜索", "bounds": [0, 0, 320, 60]}, {"label": "确认", "bounds": [200, 500, 300, 560]},
                        {"label": "screen", "bounds": [0, 0, 320, 600]}],
              plan="1. open the app\n2. find the contact", **kw)
    led.commit(action="tap", args={"x": 250, "y": 530}, thought=f"I tap confirm ({n})", result="ok",
               validator={"executed": True})


def images_by_step(led: TranscriptLedger) -> dict[int, bool]:
    return {m.step: bool(m.images()) for m in led.render() if m.zone == "A" and m.role == "user"}


def test_system_prefix_is_byte_identical(tmp_path: Path) -> None:
    led, ep = make(tmp_path, OfflineVisualLens())
    first = led.render()[0].key()
    for n in range(1, 8):
        step(led, ep, n)
        assert led.render()[0].key() == first


def test_prefix_up_to_the_edge_is_stable_turn_to_turn(tmp_path: Path) -> None:
    led, ep = make(tmp_path, OfflineVisualLens())
    previous: list[str] = []
    breaks = 0
    for n in range(1, 40):
        step(led, ep, n)
        led.flush(5)
        msgs = led.render()
        keys = [m.key() for m in msgs]
        event_now = any(e["at"] == n for e in led.compaction.events)
        if keys[: len(previous)] != previous and not event_now:
            breaks += 1
        previous = keys[: led.stable_prefix_len(msgs)]
    assert breaks == 0


def test_ready_summary_replaces_image_at_depth_k(tmp_path: Path) -> None:
    led, ep = make(tmp_path, OfflineVisualLens())
    for n in range(1, 6):
        step(led, ep, n)
        led.flush(5)
    shown = images_by_step(led)
    assert shown == {1: False, 2: False, 3: False, 4: True, 5: True}  # K=3: steps at depth >= 3 summarised
    text = next(m for m in led.render() if m.step == 1 and m.role == "user").text()
    assert "[Visual summary of step 1]" in text and "--- UI Element List ---" not in text


def test_pending_keeps_image_for_grace_then_placeholder_and_no_backfill(tmp_path: Path) -> None:
    lens = GatedLens()
    led, ep = make(tmp_path, lens)
    for n in range(1, 6):
        step(led, ep, n)
    assert images_by_step(led)[1] is True  # depth 5 < K + grace (6): kept while pending
    step(led, ep, 6)
    user1 = next(m for m in led.render() if m.step == 1 and m.role == "user")
    assert PENDING_PLACEHOLDER.format(step=1) in user1.text() and not user1.images()
    lens.gate.set()
    led.flush(10)
    step(led, ep, 7)
    user1_after = next(m for m in led.render() if m.step == 1 and m.role == "user")
    assert user1_after.key() == user1.key()  # the late summary never back-fills
    assert led.summaries.get(1).status == "ready"  # it arrived, and is kept on disk for recall


@pytest.mark.slow
def test_failed_summary_gets_placeholder_at_depth_k(tmp_path: Path) -> None:
    lens = GatedLens(fail=True)
    lens.gate.set()
    led, ep = make(tmp_path, lens)
    step(led, ep, 1)
    led.flush(10)
    step(led, ep, 2)
    step(led, ep, 3)
    user1 = next(m for m in led.render() if m.step == 1 and m.role == "user")
    assert FAILED_PLACEHOLDER.format(step=1) in user1.text()
    led.flush(10)
    assert led.summaries.get(1).status == "failed" and lens.calls == 12  # 3 steps x (1 try + 3 retries)


def test_call_and_response_are_never_split(tmp_path: Path) -> None:
    led, ep = make(tmp_path, OfflineVisualLens())
    for n in range(1, 12):
        step(led, ep, n)
    msgs = led.render()
    for i, m in enumerate(msgs):
        calls = [p for p in m.parts if p.kind == "call"]
        if calls:
            nxt = msgs[i + 1]
            assert nxt.role == "tool" and nxt.parts[0].call_id == calls[0].call_id


def test_summary_versions_never_downgrade() -> None:
    book = SummaryBook()
    assert book.offer(SummaryRecord(step=1, version=1, status="pending"))
    assert book.offer(SummaryRecord(step=1, version=1, status="ready", text="a"))
    assert not book.offer(SummaryRecord(step=1, version=1, status="pending"))  # no downgrade
    assert not book.offer(SummaryRecord(step=1, version=1, status="failed"))
    assert book.offer(SummaryRecord(step=1, version=2, status="pending"))  # a higher version may
    assert not book.offer(SummaryRecord(step=1, version=1, status="ready", text="old"))  # lower never wins
    assert book.get(1).version == 2 and book.next_version(1) == 3


def test_every_summary_version_is_kept_on_disk(tmp_path: Path) -> None:
    from memory_plane.lifecycle import read_jsonl

    led, ep = make(tmp_path, OfflineVisualLens())
    step(led, ep, 1)
    led.flush(5)
    led._publish(SummaryRecord(step=1, version=2, status="ready", text="a second, richer description of step 1"))
    recs = [r for r in read_jsonl(led.dir / "steps.jsonl").records if r["kind"] == "summary"]
    assert [(r["version"], r["status"]) for r in recs] == [(1, "pending"), (1, "ready"), (2, "ready")]
    assert recs[1]["evidence"]["decision_image"] == "artifacts/step_001.jpg"
    assert recs[1]["evidence"]["post_image"] is None if "post_image" in recs[1]["evidence"] else True


def test_envelope_bounds_and_full_copy(tmp_path: Path) -> None:
    led, ep = make(tmp_path, OfflineVisualLens())
    led.stage(screenshot=None)
    big = "\n".join([f"line {i}" for i in range(5000)] + ["ERROR: adb device offline", "matched: token=42"])
    rec = led.commit(action="adb_shell", args={"cmd": "logcat"}, result=big, envelope_patterns=["token="])
    import json

    env = json.loads(rec.result or "{}")
    assert env["truncated"] and env["original_chars"] == len(big) and env["errors"] == ["ERROR: adb device offline"]
    assert env["important_lines"] == ["matched: token=42"] and len(rec.result or "") < 3000
    assert (ep / env["full_result_ref"]).read_text() == big
    small = led.commit(action="tap", args={"x": 1, "y": 1}, result="ok")
    assert small.result == "ok"


def test_rebuild_after_crash_equals_live_ledger(tmp_path: Path) -> None:
    led, ep = make(tmp_path, OfflineVisualLens())
    for n in range(1, 15):
        step(led, ep, n, user_instructions=["use the work account"] if n == 4 else ())
        if n % 3 == 0:
            led.flush(5)
    led.flush(5)
    live = [m.key() for m in led.render() if m.zone != "T"]
    again = TranscriptLedger.open(led.dir, lens=OfflineVisualLens())
    assert [m.key() for m in again.render() if m.zone != "T"] == live
    # Verbatim at every level: raw ("User @ Step 4: …") or folded into a chunk ('User @ Step 4: "…"').
    assert any("User @ Step 4:" in m.text() and "use the work account" in m.text() for m in again.render())


def test_the_caller_never_waits(tmp_path: Path) -> None:
    lens = GatedLens()  # no summary can finish until the gate opens
    led, ep = make(tmp_path, lens)
    for n in range(1, 21):
        step(led, ep, n)  # all 20 commits return while every summary is still blocked
    assert led.service.stats.submitted == 20 and led.service.stats.ready == 0
    assert led.service.stats.caller_waits == 0
    lens.gate.set()
    assert led.flush(20) and led.service.stats.ready == 20


def test_plain_config_is_a_plain_transcript(tmp_path: Path) -> None:
    led, ep = make(tmp_path, OfflineVisualLens(), TranscriptConfig.plain())
    for n in range(1, 8):
        step(led, ep, n)
    assert all(images_by_step(led).values()) and led.service.stats.submitted == 0
    assert all("--- UI Element List ---" in m.text() for m in led.render() if m.zone == "A" and m.role == "user")


def test_partial_config_takes_defaults() -> None:
    cfg = TranscriptConfig.from_mapping({"transcript": {"image_scrub_depth": 5}})
    assert cfg.transcript.image_scrub_depth == 5 and cfg.transcript.pending_grace_steps == 3
    assert TranscriptConfig.from_mapping(None).chunking.min_active_steps == 5


def test_record_time_labels() -> None:
    els = [{"label": "screen", "bounds": [0, 0, 640, 1200]}, {"label": "确认", "bounds": [600, 1150, 660, 1210]}]
    assert hit_test(632, 1180, els) == "确认"
    assert label_action({"x": 632, "y": 1180}, els) == ("确认", "hit_test")
    assert label_action({"x": 5, "y": 5, "target_label": "Back"}, els) == ("Back", "index")
    assert label_action({"x": 5000, "y": 5}, els) == (None, "none")
    assert label_action({"x": 10, "y": 10}, [], ocr=[{"text": "OK", "bounds": [0, 0, 20, 20]}]) == ("OK", "ocr")


def test_action_lines_keep_coordinates_and_label(tmp_path: Path) -> None:
    led, ep = make(tmp_path, OfflineVisualLens())
    step(led, ep, 1)
    assert led.turns[0].record.action_line() == "tap(250,530)['确认']"


@pytest.mark.parametrize("n", [1, 7, 33])
def test_offline_summaries_are_neutral(tmp_path: Path, n: int) -> None:
    led, ep = make(tmp_path, OfflineVisualLens())
    for i in range(1, n + 1):
        step(led, ep, i)
    led.flush(10)
    for i in range(1, n + 1):
        s = led.summaries.get(i)
        assert s is not None and s.status == "ready" and not banned_words_in(s.text or "")


def test_neutral_checks() -> None:
    assert check_summary("I successfully opened the chat page and it worked.") is not None
    assert check_summary("短") is not None
    assert check_summary("The screen shows a chat list with three entries and a search box.") is None
    assert "navigated to" in banned_words_in("Then I navigated to settings")


def test_genai_adapter_builds_real_contents(tmp_path: Path) -> None:
    led, ep = make(tmp_path, OfflineVisualLens())
    for n in range(1, 3):
        step(led, ep, n)
    from memory_plane.episodes.transcript import load_image_bytes

    system, contents = to_genai(led.render(), load_image_bytes(ep))
    assert system == "You drive a phone."
    roles = [c.role for c in contents]
    assert set(roles) <= {"user", "model"}
    inline = [p for c in contents for p in c.parts if getattr(p, "inline_data", None)]
    assert inline and inline[0].inline_data.mime_type == "image/jpeg"
    calls = [p for c in contents for p in c.parts if getattr(p, "function_call", None)]
    assert calls[0].function_call.name == "tap"


def test_recorder_opens_a_transcript_beside_the_episode(tmp_path: Path) -> None:
    from memory_plane.episodes import EpisodeRecorder, TaskEpisodeStore
    from memory_plane.lifecycle import init_tree

    root = tmp_path / "m"
    init_tree(root)
    store = TaskEpisodeStore(root)
    rec = EpisodeRecorder(store, "a long task")
    led = rec.open_transcript(system_prompt="sys")
    assert led.dir == store.episode_dir(rec.id) / "transcript" and (led.dir / "steps.jsonl").exists()
    led.close()
