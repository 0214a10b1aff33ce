"""The Gemini lenses through the real google-genai SDK against a fake server on 127.0.0.1.

It reaches inside `_lenses` and `_fake_gemini`: the Gemini client and the fake server are not part of the public
API.
"""

from __future__ import annotations

import base64
import io
import json
import logging
from pathlib import Path

import pytest
from PIL import Image

from memory_plane._fake_gemini import FakeGemini
from memory_plane._lenses import (
    BadRequest,
    GeminiClient,
    GeminiSettings,
    ModelUnavailable,
    StepCapsuleLens,
    Usage,
    VisualTransitionLens,
    select_lenses,
)
from memory_plane.episodes import read_config
from memory_plane.episodes.transcript import OfflineVisualLens, StepRecord, TranscriptLedger, VisualJob

from helpers import screenshot

NEUTRAL = "I tap the search icon at the top right of the WeChat home screen; the chat list shows three entries."


@pytest.fixture
def fake():
    with FakeGemini() as server:
        yield server


def settings(fake: FakeGemini, **kw) -> GeminiSettings:
    return GeminiSettings(base_url=fake.url, api_key="test-key", timeout_s=kw.pop("timeout_s", 3.0), **kw)


def job(tmp_path: Path, post: bool = False) -> VisualJob:
    pre = tmp_path / "pre.jpg"
    pre.write_bytes(screenshot("pre", (640, 1200)))
    post_p = None
    if post:
        post_p = tmp_path / "post.jpg"
        post_p.write_bytes(screenshot("post", (640, 1200)))
    rec = StepRecord(step_id="step_0003", step=3, ts="2026-11-29T00:00:00Z", t="T+00:42",
                     action={"name": "tap", "args": {"x": 600, "y": 80}}, target_label="搜索",
                     target_label_source="hit_test", pre_image="artifacts/pre.jpg", package="com.tencent.mm")
    return VisualJob(rec, pre, post_p, {"appeared": ["搜索框"], "disappeared": []} if post else None)


def inline_images(req: dict) -> list[dict]:
    return [p["inlineData"] for c in req["body"]["contents"] for p in c["parts"] if "inlineData" in p]


def test_request_shape_and_marker_at_the_tap(fake: FakeGemini, tmp_path: Path) -> None:
    fake.script("gemini-3.5-flash-lite", (200, NEUTRAL, 0))
    out = VisualTransitionLens(GeminiClient(settings(fake))).summarize(job(tmp_path))
    assert out.text == NEUTRAL and out.model == "gemini-3.5-flash-lite" and out.prompt_version == 1
    req = fake.requests[0]
    assert req["path"].endswith("/models/gemini-3.5-flash-lite:generateContent")
    imgs = inline_images(req)
    # One frame (the single template), downscaled to a 768 px long side and sent as JPEG.
    assert len(imgs) == 1 and (imgs[0].get("mimeType") or imgs[0].get("mime_type")) == "image/jpeg"
    text = " ".join(p.get("text", "") for c in req["body"]["contents"] for p in c["parts"])
    assert "There is no post-action screenshot" in text and "POST-ACTION FRAME" not in text
    raw = imgs[0]["data"]
    img = Image.open(io.BytesIO(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))).convert("RGB")
    assert max(img.size) == 768
    scale = 768 / 1200
    ring = img.getpixel((round(600 * scale), round((80 - 16 + 2) * scale)))  # on the red ring around the tap
    assert ring[0] > 180 and ring[1] < 90 and ring[2] < 90
    gen = req["body"].get("generationConfig", {})
    thinking = gen.get("thinkingConfig", {})
    assert (thinking.get("thinkingLevel") or thinking.get("thinking_level") or "").lower() == "low"


def test_double_template_when_the_post_image_exists(fake: FakeGemini, tmp_path: Path) -> None:
    VisualTransitionLens(GeminiClient(settings(fake))).summarize(job(tmp_path, post=True))
    req = fake.requests[0]
    assert len(inline_images(req)) == 2
    assert "POST-ACTION FRAME" in json.dumps(req["body"], ensure_ascii=False)


def test_a_step_with_only_a_post_action_frame_gets_a_one_frame_prompt(fake: FakeGemini, tmp_path: Path) -> None:
    j = job(tmp_path, post=True)
    j.decision_image = None  # the decision frame was not kept: only the post-action screenshot exists
    VisualTransitionLens(GeminiClient(settings(fake))).summarize(j)
    req = fake.requests[0]
    text = " ".join(p.get("text", "") for c in req["body"]["contents"] for p in c["parts"])
    assert len(inline_images(req)) == 1
    assert "POST-ACTION FRAME" in text
    # No promise of a frame that is not sent: neither the label nor the two-frame template's wording.
    assert "DECISION FRAME" not in text and "decision frame" not in text.lower()


def test_fallback_on_503_and_timeout_not_on_400(fake: FakeGemini, tmp_path: Path) -> None:
    fake.script("gemini-3.5-flash-lite", (503, None, 0))
    lens = VisualTransitionLens(GeminiClient(settings(fake)))
    assert lens.summarize(job(tmp_path)).model == "gemini-3.8-flash"
    fake.script("gemini-3.5-flash-lite", (200, NEUTRAL, 2.0))  # slower than the timeout
    lens = VisualTransitionLens(GeminiClient(settings(fake, timeout_s=1.5)))
    assert lens.summarize(job(tmp_path)).model == "gemini-3.8-flash"
    fake.script("gemini-3.5-flash-lite", (400, None, 0))
    n = len(fake.requests)
    with pytest.raises(BadRequest):
        lens.summarize(job(tmp_path))
    assert len(fake.requests) == n + 1  # no fallback model was asked
    fake.script("gemini-3.5-flash-lite", (503, None, 0))
    fake.script("gemini-3.8-flash", (503, None, 0))
    with pytest.raises(ModelUnavailable):
        lens.summarize(job(tmp_path))


@pytest.mark.slow
def test_banned_words_and_degenerate_outputs_are_rejected_then_retried(fake: FakeGemini, tmp_path: Path) -> None:
    fake.script("gemini-3.5-flash-lite", (200, "I successfully opened the chat.", 0), (200, "ok", 0),
                (200, "DECISION FRAME: the screen shows a chat list with a search icon.", 0))
    ep = tmp_path / "ep"
    (ep / "artifacts").mkdir(parents=True)
    (ep / "artifacts" / "s1.jpg").write_bytes(screenshot("a", (640, 1200)))
    lens = VisualTransitionLens(GeminiClient(settings(fake)))
    led = TranscriptLedger(ep / "transcript", lens=lens)
    led.config.transcript.summary_retries = 3
    led.service.retries = 3
    led.stage(screenshot="artifacts/s1.jpg", width=640, height=1200)
    led.commit(action="tap", args={"x": 10, "y": 10})
    assert led.flush(20)
    s = led.summaries.get(1)
    assert s is not None and s.status == "ready" and led.service.stats.retried == 3
    # One request budget per step: the first model had its 3 requests, so the fourth try went to the fallback.
    assert [r["model"] for r in fake.requests] == ["gemini-3.5-flash-lite"] * 3 + ["gemini-3.8-flash"]
    assert s.evidence.model == "gemini-3.8-flash" and s.evidence.prompt_version == 1
    fake.script("gemini-3.5-flash-lite", *[(200, "It failed.", 0)] * 3)
    led.service.retries = 2
    (ep / "artifacts" / "s2.jpg").write_bytes(screenshot("b", (640, 1200)))
    led.stage(screenshot="artifacts/s2.jpg", width=640, height=1200)
    led.commit(action="tap", args={"x": 10, "y": 10})
    assert led.flush(20)
    assert led.summaries.get(2).status == "failed"  # bounded: 3 tries, then failed
    led.close()


def test_capsule_json_is_validated(fake: FakeGemini) -> None:
    recs = [StepRecord(step_id=f"step_{i}", step=i, ts="x", t=f"T+00:0{i}", action={"name": "tap", "args": {}},
                       notes_written=["notes/login.md"] if i == 2 else []) for i in (1, 2, 3)]
    good = {"doing": "log in", "did": "typed the code 482913", "effect": "logged in; notes/login.md updated",
            "verified_facts": ["code 482913"], "intervals": ["Steps 1–2: open and type", "Step 3: confirm"]}
    fake.script("gemini-3.8-flash", (200, "not json", 0), (200, good, 0))
    lens = StepCapsuleLens(GeminiClient(settings(fake)))
    with pytest.raises(ValueError, match="not JSON"):
        lens.capsule(recs, {})
    cap = lens.capsule(recs, {})
    from memory_plane.episodes.transcript import check_capsule

    assert check_capsule(cap, recs) is None
    bad = dict(good, intervals=["Step 1: open", "Step 3: confirm"])
    fake.script("gemini-3.8-flash", (200, bad, 0))
    assert "not covered" in (check_capsule(lens.capsule(recs, {}), recs) or "")
    gen = fake.requests[-1]["body"]["generationConfig"]
    assert (gen.get("responseMimeType") or gen.get("response_mime_type")) == "application/json"


def test_usage_is_metered_per_call(fake: FakeGemini, tmp_path: Path) -> None:
    seen: list[tuple[Usage, str]] = []
    client = GeminiClient(settings(fake), on_usage=lambda u, purpose: seen.append((u, purpose)))
    VisualTransitionLens(client).summarize(job(tmp_path))
    u, purpose = seen[0]
    assert (u.prompt_tokens, u.cached_tokens, u.output_tokens, purpose) == (1200, 300, 60, "visual_summary")


def test_lens_usage_never_overwrites_the_agents_context_size(tmp_path: Path) -> None:
    from memory_plane.lifecycle import read_jsonl

    led = TranscriptLedger(tmp_path / "ep" / "transcript", lens=OfflineVisualLens())
    led.observe_usage(9000, source="agent")
    led.observe_usage(1200, 300, 60, source="lens:visual_summary")
    assert led.meter.measured == 9000
    rows = read_jsonl(led.dir / "usage.jsonl").records
    assert [r["source"] for r in rows] == ["agent", "lens:visual_summary"] and rows[1]["cached_tokens"] == 300


def test_without_a_key_the_offline_lenses_run_and_say_so(monkeypatch, caplog) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    import memory_plane._lenses as lenses

    lenses._warned_offline.clear()
    with caplog.at_level(logging.INFO, logger="memory_plane"):
        v, c = select_lenses()
        select_lenses()
    assert v.name == "offline" and c.name == "offline"
    assert sum("offline" in r.message for r in caplog.records) == 1


def test_plane_opens_a_transcript_with_the_configured_lenses(fake: FakeGemini, tmp_path: Path) -> None:
    from memory_plane import MemoryPlane, MemoryRetrieveRequest
    from memory_plane.lifecycle import read_jsonl

    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        assert read_config(plane.root)["transcript"]["image_scrub_depth"] == 3  # the template's commented defaults
        (root / "config.yaml").write_text(
            f"transcript:\n  image_scrub_depth: 2\nlenses:\n  base_url: {fake.url}\n  api_key: k\n  timeout_s: 3\n")
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="a long task"))
        led = plane.open_transcript(rec, system_prompt="sys")
        assert led.config.transcript.image_scrub_depth == 2 and led.lens.name == "gemini-visual"
        shot = rec.dir / "artifacts" / "s1.jpg"
        shot.write_bytes(screenshot("x", (320, 600)))
        led.stage(screenshot="artifacts/s1.jpg", width=320, height=600)
        led.commit(action="tap", args={"x": 3, "y": 4})
        assert led.flush(10) and led.summaries.get(1).status == "ready"
        rows = read_jsonl(led.dir / "usage.jsonl").records
        assert rows and rows[0]["source"].startswith("lens:visual_summary") and led.meter.measured is None
        (root / "config.yaml").write_text("transcript: [broken\n")
        assert read_config(plane.root) == {}
        led.close()
        plane.commit_episode(rec.finish(success=True))


def test_capsules_get_what_they_summarise_within_a_budget_and_their_own_output_cap(fake: FakeGemini) -> None:
    from memory_plane._lenses import StepCapsuleLens
    from memory_plane.episodes.transcript import StepRecord, estimate_text_tokens

    cap = {"doing": "paying", "did": "typed the code", "effect": "notes/pay.md written",
           "intervals": ["Steps 1–2: typed the code"]}
    fake.script("gemini-3.8-flash", (200, json.dumps(cap), 0))
    recs = [StepRecord(step_id="step_0001", step=1, ts="2026-11-29T00:00:00Z", t="T+00:01",
                       action={"name": "type", "args": {"text": "482913"}}, thought="the SMS said the OTP is 482913",
                       validator={"executed": True, "facts": ["OTP 482913"]}, user_instructions=["pay by card"],
                       failure_recovery=[{"action": "dismissed the rating dialog"}], plan="[Loop:continuous] pay",
                       package="com.pay", activity="Checkout"),
            StepRecord(step_id="step_0002", step=2, ts="2026-11-29T00:00:05Z", t="T+00:05",
                       action={"name": "save_note", "args": {"key": "notes/pay.md"}}, notes_written=["notes/pay.md"],
                       result="saved: card ending 4431 used", thought="x" * 200_000)]
    lens = StepCapsuleLens(GeminiClient(GeminiSettings(base_url=fake.url, api_key="k")))
    out = lens.capsule(recs, {1: "The checkout screen shows a code field."})
    body = fake.requests[0]["body"]
    sent = " ".join(p.get("text", "") for c in body["contents"] for p in c["parts"])
    for expected in ("the SMS said the OTP is 482913", "validator facts: OTP 482913", 'User @ Step 1: "pay by card"',
                     "recovery: dismissed the rating dialog", "note written: notes/pay.md", "card ending 4431",
                     "screen: com.pay/Checkout", "The checkout screen shows a code field.", "[Loop]"):
        assert expected in sent, expected
    assert estimate_text_tokens(sent) < 6000 + 1000  # the 200,000-character reasoning was cut to the budget
    assert body["generationConfig"]["maxOutputTokens"] == lens.client.settings.capsule_max_output_tokens > 600
    assert out.doing == "paying" and out.model == "gemini-3.8-flash"


def test_a_capsule_that_keeps_failing_gets_the_offline_capsule_so_later_segments_swap(tmp_path: Path) -> None:
    from memory_plane.episodes.transcript import OfflineCapsuleLens, OfflineVisualLens, TranscriptConfig

    class FailsOnFirst:
        name = "flaky"

        def capsule(self, records, summaries):  # type: ignore[no-untyped-def]
            if records[0].step == 1:
                raise RuntimeError("model unavailable")
            return OfflineCapsuleLens().capsule(records, summaries)

    cfg = TranscriptConfig.from_mapping({"chunking": {"max_steps": 4, "target_source_tokens": 10**6,
                                                      "context_budget_tokens": 3000},
                                         "transcript": {"visual_summaries": False}})
    ep = tmp_path / "ep"
    (ep / "artifacts").mkdir(parents=True)
    led = TranscriptLedger(ep / "transcript", lens=OfflineVisualLens(), config=cfg, system_prompt="sys",
                           capsule_lens=FailsOnFirst(), goal="g")
    for n in range(1, 41):
        led.stage(package="com.a", activity="P", ui_text=[f"item {n}"])
        led.commit(action="tap", args={"x": n, "y": n}, result=f"ok {n} " * 30, thought="t " * 60,
                   validator={"executed": True, "facts": ["OTP 482913"] if n == 2 else []})
        led.flush(10)
    assert led.compaction.folded_until >= 20  # the first segment did not hold back every later one
    f = led.compaction
    first = next(c for c in [*f.chunks, *(c for e in f.eras for c in e.chunks)] if c.start == 1)
    assert first.lens == "offline-fallback" and "OTP 482913" in first.capsule.verified_facts  # type: ignore[union-attr]
