"""Checkpoint verdicts in the transcript: a verdict for a segment whose chunk is still being written is kept and
lands in the chunk when it is made, in the same process or after a cold start."""

from __future__ import annotations

import threading
from pathlib import Path

from memory_plane.episodes.transcript import (
    Capsule,
    OfflineCapsuleLens,
    OfflineVisualLens,
    StepRecord,
    TranscriptConfig,
    TranscriptLedger,
)

from helpers import episode_ledger


class GatedCapsuleLens:
    """The offline capsule, written only once the test opens the gate."""

    name = "gated-capsule"

    def __init__(self) -> None:
        self.gate = threading.Event()

    def capsule(self, records: list[StepRecord], summaries: dict[int, str]) -> Capsule:
        self.gate.wait(10)
        return OfflineCapsuleLens().capsule(records, summaries)


def config() -> TranscriptConfig:
    return TranscriptConfig.from_mapping({"chunking": {"max_steps": 3, "target_source_tokens": 10**6}})


def run(led: TranscriptLedger, steps: range) -> None:
    for n in steps:
        led.stage(package="com.a", activity="Login")
        led.commit(action="tap", args={"x": n, "y": n}, result=f"ok {n}", validator={"executed": True},
                   subgoal_hash="login" if n <= 3 else "inbox")


def chunk_file_text(led: TranscriptLedger, chunk_id: str) -> str:
    files = sorted((led.dir / "chunks").glob(f"{chunk_id}.v*.md"))
    assert files, chunk_id
    return files[-1].read_text("utf-8")


def test_a_verdict_for_a_segment_waiting_for_its_capsule_is_kept(tmp_path: Path) -> None:
    lens = GatedCapsuleLens()
    led, _ep = episode_ledger(tmp_path, lens=OfflineVisualLens(), config=config(), capsule_lens=lens)
    run(led, range(1, 4))
    assert led.compaction.closed and led.compaction.closed[0].chunk is None  # closed, its capsule not written
    hit = led.annotate_from_checkpoint("cp-1", [{"steps": [1, 3], "verdict": "passed", "note": "logged in"},
                                                {"subgoal": "login", "verdict": "code accepted"}])
    assert hit == ["chunk_0001_0003"]
    lens.gate.set()
    led.flush(10)
    chunk = led.compaction.closed[0].chunk
    assert chunk is not None and chunk.annotations == ["cp-1: passed logged in", "cp-1: code accepted"]
    assert "Checkpoint: cp-1: passed logged in" in chunk.render()
    assert "cp-1: code accepted" in chunk_file_text(led, "chunk_0001_0003")
    led.close()


def test_a_verdict_judging_no_segment_changes_nothing(tmp_path: Path) -> None:
    lens = GatedCapsuleLens()
    led, _ep = episode_ledger(tmp_path, lens=OfflineVisualLens(), config=config(), capsule_lens=lens)
    run(led, range(1, 4))
    assert led.annotate_from_checkpoint("cp-1", [{"steps": [7, 9], "verdict": "passed"},
                                                 {"subgoal": "elsewhere", "verdict": "failed"}]) == []
    lens.gate.set()
    led.flush(10)
    assert led.compaction.closed[0].chunk is not None and led.compaction.closed[0].chunk.annotations == []
    led.close()


def test_a_kept_verdict_survives_a_cold_start(tmp_path: Path) -> None:
    lens = GatedCapsuleLens()
    led, _ep = episode_ledger(tmp_path, lens=OfflineVisualLens(), config=config(), capsule_lens=lens)
    run(led, range(1, 4))
    led.annotate_from_checkpoint("cp-2", [{"steps": [2, 2], "verdict": "failed", "note": "wrong account"}])
    # The process dies before the capsule is written: the reopened ledger asks for it again.
    again = TranscriptLedger.open(led.dir, lens=OfflineVisualLens(), config=config())
    again.flush(10)
    chunk = again.compaction.closed[0].chunk
    assert chunk is not None and chunk.annotations == ["cp-2: failed wrong account"]
    lens.gate.set()
    led.close()
    again.close()


def test_a_verdict_for_a_written_chunk_still_lands_once(tmp_path: Path) -> None:
    led, _ep = episode_ledger(tmp_path, lens=OfflineVisualLens(), config=config())
    run(led, range(1, 4))
    led.flush(10)
    assert led.annotate_from_checkpoint("cp-3", [{"steps": [1, 3], "verdict": "passed"}]) == ["chunk_0001_0003"]
    assert led.compaction.closed[0].chunk is not None
    assert led.compaction.closed[0].chunk.annotations == ["cp-3: passed"]
    again = TranscriptLedger.open(led.dir, lens=OfflineVisualLens(), config=config())
    again.flush(10)
    assert again.compaction.closed[0].chunk is not None
    assert again.compaction.closed[0].chunk.annotations == ["cp-3: passed"]
