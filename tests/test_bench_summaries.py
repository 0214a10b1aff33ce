"""`bench summaries`: both lenses over one fixed session, scored blind, and the paired A/B, in a small run.

It reaches inside bench/ for the blind scoring and the fake Gemini server (neither is public API).
"""

from __future__ import annotations

import argparse
import json

from memory_plane._fake_gemini import FakeGemini
from memory_plane._lenses import GeminiClient, GeminiSettings
from memory_plane.bench import names, run_bench
from memory_plane.bench._summaries import IMPLICIT_CACHE_MIN_TOKENS, _blind_scores


def test_a_small_run_gives_every_figure(monkeypatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    assert "summaries" in names()
    out = run_bench("summaries", argparse.Namespace(short=True, steps=12, seed=0))
    json.dumps(out, allow_nan=False)
    assert out["steps"] == 12 and out["segments"] == 2 and out["model_requests"] > 0
    assert out["judge"].startswith("recall of planted facts (blind")
    for lens in ("offline", "model"):
        assert 0 <= out[f"{lens}_fact_recall"] <= 1 and out[f"{lens}_capsules_rejected"] == 0
    assert out["ab_pairs"] == 12 and out["implicit_cache_min_tokens"] == IMPLICIT_CACHE_MIN_TOKENS == 4096
    for metric in ("prompt_tokens", "stable_prefix_tokens", "latency_ms"):
        assert out[f"{metric}_with_median"] > 0 and out[f"{metric}_without_median"] > 0
        assert f"{metric}_paired_diff_median" in out
    assert isinstance(out["system_prefix_meets_cache_min"], bool)
    assert out["stable_prefix_tokens_with_max"] <= out["prompt_tokens_with_max"]


def test_the_model_judge_never_learns_which_lens_wrote_a_summary() -> None:
    from memory_plane.episodes.transcript import Capsule, StepRecord

    recs = [StepRecord(step_id=f"step_{n:04d}", step=n, ts="2026-11-29T00:00:00Z", t=f"T+00:0{n}",
                       action={"name": "tap", "args": {"x": n, "y": n}}, result="ok") for n in range(1, 7)]
    marked = {"offline": "written by OFFLINE-LENS", "model": "written by MODEL-LENS"}
    capsules = {lens: [{"start": 1, "end": 6, "problem": None, "seconds": 0.0,
                        "capsule": Capsule(doing=f"doing ({lens}-secret)", did="did", effect="effect",
                                           intervals=["Steps 1–6: taps"])}] for lens in marked}
    seen_ids = []
    for seed in range(6):
        with FakeGemini(default=lambda model, body: (200, {}, 0.0)) as fake:
            client = GeminiClient(GeminiSettings(base_url=fake.url, api_key="k", timeout_s=3))
            out = _blind_scores(recs, capsules, seed, judge=client)
            sent = [json.dumps(r["body"], ensure_ascii=False) for r in fake.requests]
        assert out["judge"].startswith("model judge (blind")
        assert len(sent) == 2
        for body in sent:
            # Each request names its summary by an anonymous id only: no lens name, no order that gives it away.
            assert '"offline"' not in body and '"model"' not in body and "lens" not in body.lower()
        seen_ids.append(tuple("offline-secret" in body for body in sent))
    assert len(set(seen_ids)) == 2  # the order the judge sees depends on the seed, not on the lens
