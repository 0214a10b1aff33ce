"""The transcript ledger as the history-module design writes it: configuration, hint, recall bounds.

It reaches inside `_fake_gemini` for the fake Gemini server.
"""

from __future__ import annotations

import json
from pathlib import Path

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.episodes.transcript import TranscriptConfig, TranscriptLedger

from helpers import episode_ledger

DESIGN = {"agent": {"memory": {
    "runtime": {"max_concurrency": 2, "retry_limit": 3, "flush_timeout_s": 30},
    "transcript": {"enabled": True, "context_budget_tokens": 80000, "soft_ratio": 0.7, "hard_ratio": 0.9,
                   "min_active_steps": 5, "image_scrub_depth": 3, "pending_grace_steps": 3, "xml_scrub_depth": 1,
                   "similarity_hint": True, "similarity_max_distance": 5},
    "chunking": {"max_steps": 12, "target_source_tokens": 2000, "model": "gemini-3.7-flash", "max_chunks": 8,
                 "max_eras": None},
    "step_lens": {"model": "gemini-3.5-flash-lite"},
    "recall": {"enabled": True, "max_results": 5, "max_text_tokens": 2000},
    "policies": {}}}}


def ledger(tmp_path: Path, cfg: TranscriptConfig | None = None) -> TranscriptLedger:
    return episode_ledger(tmp_path, config=cfg, system_prompt="You drive a phone.")[0]


def test_the_designs_configuration_file_works_as_written(caplog) -> None:
    cfg = TranscriptConfig.from_mapping(DESIGN)
    assert cfg.chunking.max_eras == 8 and cfg.chunking.model == "gemini-3.7-flash"
    assert cfg.step_lens.model == "gemini-3.5-flash-lite"
    assert cfg.transcript.summary_retries == 3 and cfg.transcript.flush_timeout_s == 30
    assert cfg.transcript.similarity_max_distance == 5 and cfg.chunking.soft_ratio == 0.7
    assert cfg.unknown_keys() == []
    typo = TranscriptConfig.from_mapping({"chunking": {"max_step": 3}, "recal": {}})
    assert sorted(typo.unknown_keys()) == ["chunking.max_step", "recal"]
    assert sum("unknown key chunking.max_step" in r.getMessage() for r in caplog.records) == 1
    # Keys this project placed elsewhere stay accepted.
    old = TranscriptConfig.from_mapping({"chunking": {"context_budget_tokens": 1000}, "transcript":
                                         {"similarity_hints": False}})
    assert old.chunking.context_budget_tokens == 1000 and not old.transcript.similarity_hints


def test_the_master_switch_gives_a_plain_transcript(tmp_path: Path) -> None:
    cfg = TranscriptConfig.from_mapping({"transcript": {"enabled": False}})
    assert not cfg.chunking.enabled and not cfg.transcript.scrub_edge and not cfg.recall.enabled
    led = ledger(tmp_path, cfg)
    for i in range(20):
        led.stage(package="com.x", activity="A", ui_text=[f"item {i}"])
        led.commit(action="tap", args={"x": i, "y": i}, result=f"ok {i}")
    assert led.compaction.events == [] and len(led.render()) >= 20
    res = led.recall_history(query="ok 3")
    assert res.results[0]["kind"] == "disabled"


def test_similarity_hint_follows_the_design(tmp_path: Path) -> None:
    led = ledger(tmp_path)
    hashes = ["0000000000000000", "000000000000000f", "ffffffffffffffff", "ffff0000ffff0000", "0f0f0f0f0f0f0f0f"]
    for h in hashes:
        led.stage(package="com.x", activity="A", dhash=h)
        led.commit(action="tap", args={"x": 1, "y": 1})
    led.stage(dhash="0000000000000001")  # distance 1 to step 1, 3 to step 2: the closest, not the latest
    assert led.similarity_hint() is not None and "Step 1" in (led.similarity_hint() or "")
    led.stage(dhash="0f0f0f0f0f0f0f0e")  # matches step 5, one of the last three: silent
    assert led.similarity_hint() is None
    led.stage(package="com.x", activity="A", dhash="0000000000000000")
    led.commit(action="tap", args={"x": 1, "y": 1})  # step 6 shows step 1's screen again
    led.stage(dhash="0000000000000001")  # close to step 1, but step 6 (recent) already shows it: silent
    assert led.similarity_hint() is None
    cfg = TranscriptConfig.from_mapping({"transcript": {"similarity_max_distance": 0}})
    strict = ledger(tmp_path / "b", cfg)
    for h in hashes:
        strict.stage(dhash=h)
        strict.commit(action="tap", args={"x": 1, "y": 1})
    strict.stage(dhash="0000000000000001")
    assert strict.similarity_hint() is None


def test_recall_history_keeps_every_answer_within_its_budget(tmp_path: Path) -> None:
    from memory_plane.episodes.transcript import estimate_text_tokens

    led = ledger(tmp_path)
    for i in range(30):
        led.stage(package="com.x", activity="A", ui_text=[f"line {j} of screen {i}" for j in range(50)])
        led.commit(action="tap", args={"x": i, "y": i}, result="R" * 4000 + f" step {i}", thought="T" * 3000)
    res = led.recall_history(step_range=[1, 30], include_details=True)
    total = sum(estimate_text_tokens(str(r.get("text", ""))) + sum(
        estimate_text_tokens(str(v)) for v in (r.get("details") or {}).values()) for r in res.results)
    assert total <= led.config.recall.max_text_tokens and len(res.results) <= 5 and res.truncated
    res = led.recall_history(query="step 7", include_details=True)
    assert len(json.dumps(res.to_dict())) < 4 * led.config.recall.max_text_tokens * 2


def test_rec_open_transcript_applies_config_yaml_and_the_plane(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        (root / "config.yaml").write_text("chunking:\n  max_steps: 3\nrecall:\n  enabled: false\n")
        rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="a long task"))
        led = rec.open_transcript()
        assert led.config.chunking.max_steps == 3 and not led.config.recall.enabled
        assert "recall_history" not in plane.tools.names()
    from memory_plane.episodes import EpisodeRecorder, TaskEpisodeStore

    bare = EpisodeRecorder(TaskEpisodeStore(root), "another task")
    assert bare.open_transcript().config.chunking.max_steps == 3


def test_verify_checks_config_yaml(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        (root / "config.yaml").write_text("{{{\n")
        probs = [p for p in plane.verify().problems if p.category == "config"]
        assert probs and probs[0].path == "config.yaml"
        (root / "config.yaml").write_text("chunking:\n  max_step: 3\nlenses:\n  timeout_s: soon\n")
        msgs = [p.message for p in plane.verify().problems if p.category == "config"]
        assert any("chunking.max_step" in m for m in msgs) and any("lenses.timeout_s" in m for m in msgs)


def test_a_failed_capsule_is_retried_within_the_session(tmp_path: Path) -> None:
    from memory_plane.episodes.transcript import OfflineCapsuleLens, OfflineVisualLens

    class DownThenUp:
        name = "flaky"

        def __init__(self) -> None:
            self.calls = 0

        def capsule(self, records, summaries):  # type: ignore[no-untyped-def]
            self.calls += 1
            if self.calls <= 4:  # the first round and its 3 retries all fail
                raise RuntimeError("model unavailable")
            return OfflineCapsuleLens().capsule(records, summaries)

    lens = DownThenUp()
    cfg = TranscriptConfig.from_mapping({"chunking": {"max_steps": 4, "target_source_tokens": 10**6,
                                                      "context_budget_tokens": 40000}})
    ep = tmp_path / "ep"
    (ep / "artifacts").mkdir(parents=True)
    led = TranscriptLedger(ep / "transcript", lens=OfflineVisualLens(), config=cfg, system_prompt="sys",
                           capsule_lens=lens, goal="g")
    for n in range(1, 5):
        led.stage(package="com.a", activity="P", ui_text=[f"item {n}"])
        led.commit(action="tap", args={"x": n, "y": n}, result=f"ok {n}")
    led.flush(10)
    first = next(s for s in led.compaction.closed if s.start == 1)
    assert first.failed and first.chunk is None
    for n in range(5, 12):
        led.stage(package="com.a", activity="P", ui_text=[f"item {n}"])
        led.commit(action="tap", args={"x": n, "y": n}, result=f"ok {n}")
        led.flush(10)
    closed = led.compaction.closed
    seg = next(s for s in [*closed] if s.start == 1) if any(s.start == 1 for s in closed) else None
    made = seg is None or seg.chunk is not None  # folded already, or its chunk is ready
    assert made and lens.calls > 4


def test_checkpoint_annotations_bump_the_chunk_and_show_at_the_next_compaction(tmp_path: Path) -> None:
    from memory_plane.episodes.transcript import OfflineVisualLens

    cfg = TranscriptConfig.from_mapping({"chunking": {"max_steps": 3, "target_source_tokens": 10**6,
                                                      "context_budget_tokens": 2600, "min_active_steps": 2}})
    ep = tmp_path / "ep"
    (ep / "artifacts").mkdir(parents=True)
    led = TranscriptLedger(ep / "transcript", lens=OfflineVisualLens(), config=cfg, system_prompt="sys", goal="g")

    def step(n: int) -> None:
        led.stage(package="com.a", activity="P", ui_text=[f"item {n}"])
        led.commit(action="tap", args={"x": n, "y": n}, result=f"ok {n} " * 20, thought="t " * 40,
                   subgoal_hash="login" if n <= 3 else "search")
        led.flush(10)

    n = 0
    while not led.compaction.chunks and n < 40:
        n += 1
        step(n)
    assert led.compaction.chunks, "no chunk folded"
    first = led.compaction.chunks[0]
    assert first.milestone == "login" and "milestone login" in first.render()
    before = "\n".join(m.text() for m in led.render() if m.zone == "F")
    hit = led.annotate_from_checkpoint("cp_1", [{"subgoal": "login", "verdict": "achieved",
                                                 "note": "logged in as Zhang San"}])
    assert first.chunk_id in hit and first.version == 2
    assert (led.dir / "chunks" / f"{first.chunk_id}.v2.md").is_file()
    assert "\n".join(m.text() for m in led.render() if m.zone == "F") == before  # prefix unchanged until then
    folded = len(led.compaction.chunks) + len(led.compaction.eras)
    while len(led.compaction.chunks) + len(led.compaction.eras) == folded and n < 80:
        n += 1
        step(n)
    after = "\n".join(m.text() for m in led.render() if m.zone == "F")
    assert "Checkpoint: cp_1: achieved logged in as Zhang San" in after or any(
        "cp_1" in a for e in led.compaction.eras for c in e.chunks for a in c.annotations)
    again = TranscriptLedger.open(led.dir, config=cfg)
    assert any("cp_1" in a for c in [*again.compaction.chunks, *(c for e in again.compaction.eras for c in e.chunks)]
               for a in c.annotations)


def test_step_records_carry_the_designs_fields_and_signatures_go_back(tmp_path: Path) -> None:
    import base64

    from google import genai
    from google.genai import types

    from memory_plane._fake_gemini import FakeGemini
    from memory_plane.episodes.transcript import load_image_bytes, to_genai
    from memory_plane.lifecycle import read_jsonl

    led = TranscriptLedger(tmp_path / "ep" / "transcript", system_prompt="sys", session_id="sess_1")
    sig = base64.b64encode(b"opaque-thinking-signature").decode()
    led.stage(package="com.a", activity="Home")
    led.commit(action="swipe", args={"start": [500, 1500], "end": [500, 300]}, thought="scroll the list",
               thought_signature=sig, plan_revision=2, thinking_ref="transcript/thinking/step_0001.txt")
    led.stage(package="com.a", activity="Home")
    led.commit(action="gesture", args={"points": [[1, 2], [3, 4], [5, 6]]})
    rec = led.all_records()[0]
    assert rec.session_id == "sess_1" and rec.plan_revision == 2 and rec.thought_signature == sig
    assert rec.action_line().startswith("swipe(500,1500→500,300)")
    assert led.all_records()[1].action_line().startswith("gesture(3 points 1,2→5,6)")
    stored = [r for r in read_jsonl(led.dir / "steps.jsonl").records if r.get("kind") == "step"]
    assert stored[0]["thought_signature"] == sig
    system, contents = to_genai(led.render(), load_image_bytes(led.episode_dir))
    with FakeGemini() as fake:
        client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=fake.url))
        client.models.generate_content(model="gemini-test", contents=contents,
                                       config=types.GenerateContentConfig(system_instruction=system))
    body = fake.requests[0]["body"]
    calls = [p for c in body["contents"] for p in c["parts"] if "functionCall" in p]
    assert calls[0]["thoughtSignature"] == sig and calls[0]["functionCall"]["id"] == "step_0001"
    responses = [p for c in body["contents"] for p in c["parts"] if "functionResponse" in p]
    assert responses[0]["functionResponse"]["id"] == "step_0001"


def test_an_activity_change_closes_a_segment(tmp_path: Path) -> None:
    from memory_plane.lifecycle import read_jsonl

    cfg = TranscriptConfig.from_mapping({"chunking": {"max_steps": 50, "target_source_tokens": 10**6,
                                                      "activity_boundaries": True}})
    led = ledger(tmp_path, cfg)
    for n, act in enumerate(["Home", "Home", "Home", "Home", "Search", "Search", "Result"], start=1):
        led.stage(package="com.a", activity=act)
        led.commit(action="tap", args={"x": n, "y": n})
    segs = [(r["start"], r["end"], r["reason"]) for r in read_jsonl(led.dir / "steps.jsonl").records
            if r.get("kind") == "segment"]
    assert segs == [(1, 4, "activity_change")]  # Search -> Result came after only 2 steps: not yet


def test_the_same_turn_guard(tmp_path: Path) -> None:
    import json as _json

    cfg = TranscriptConfig.from_mapping({"chunking": {"context_budget_tokens": 20000, "max_steps": 100,
                                                      "target_source_tokens": 10**6}})
    led = ledger(tmp_path, cfg)
    assert led.config.transcript.envelope_tokens == 16000  # the design's single-output threshold
    mid = "\n".join(f"record {i}: " + "x" * 60 for i in range(150))  # ~2.5K tokens, under 16K
    led.stage(package="com.a", activity="A")
    assert led.commit(action="shell", args={"cmd": "ls"}, result=mid).result == mid  # room enough: kept
    for _ in range(6):  # repeated large outputs in a loop
        led.stage(package="com.a", activity="A")
        rec = led.commit(action="shell", args={"cmd": "dump"}, result=mid)
    env = _json.loads(rec.result or "{}")
    assert env.get("truncated") and "hard limit" in env.get("reason", "")
    assert led.prompt_tokens() < led.config.chunking.hard_ratio * 20000 + 3000
