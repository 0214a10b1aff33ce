"""recall_history over large tool outputs: the prompt shows a stand-in, recall finds and returns the saved output."""

from __future__ import annotations

import json
import os
from pathlib import Path

from memory_plane.episodes.transcript import OfflineVisualLens, TranscriptLedger

from helpers import episode_ledger

NEEDLE = "session cookie sid=7f3a9c41"


def big_output(n: int, needle_at: int | None = 2500, lines: int = 5000) -> str:
    rows = [f"row {n}.{i} nothing to see" for i in range(lines)]
    if needle_at is not None:
        rows[needle_at] = NEEDLE
    return "\n".join(rows)


def ledger(tmp_path: Path) -> tuple[TranscriptLedger, Path]:
    return episode_ledger(tmp_path, lens=OfflineVisualLens())


def commit_output(led: TranscriptLedger, result: str, action: str = "adb_shell") -> None:
    led.stage(package="com.a")
    rec = led.commit(action=action, args={"cmd": "dumpsys"}, result=result)
    assert rec.envelope_ref and NEEDLE not in (rec.result or "")  # the prompt only has the stand-in


def test_a_line_inside_a_saved_output_is_found(tmp_path: Path) -> None:
    led, _ep = ledger(tmp_path)
    led.stage(package="com.a")
    led.commit(action="tap", args={"x": 1, "y": 1}, result="ok")
    commit_output(led, big_output(2))
    res = led.recall_history(query="sid=7f3a9c41").to_dict()
    hits = [r for r in res["results"] if r["kind"] == "output"]
    assert hits and hits[0]["step"] == 2 and NEEDLE in hits[0]["text"]
    assert "transcript/envelopes/step_0002_" in hits[0]["text"] and ":2501:" in hits[0]["text"]
    assert len(json.dumps(res, ensure_ascii=False)) // 4 <= led.config.recall.max_text_tokens


def test_a_step_range_with_a_query_keeps_the_step_whose_output_matches(tmp_path: Path) -> None:
    led, _ep = ledger(tmp_path)
    commit_output(led, big_output(1, needle_at=None).replace("row 1.10 ", "row 1.10 other "))
    led.stage(package="com.a")
    led.commit(action="adb_shell", args={"cmd": "dumpsys"}, result=big_output(2))
    res = led.recall_history(query="sid=7f3a9c41", step_range=[1, 2]).to_dict()
    assert [r["step"] for r in res["results"]] == [2]


def test_details_of_a_step_give_its_full_output_not_the_stand_in(tmp_path: Path) -> None:
    led, _ep = ledger(tmp_path)
    commit_output(led, big_output(1, needle_at=30))
    res = led.recall_history(step_range=[1, 1], include_details=True).to_dict()
    result = res["results"][0]["details"]["result"]
    assert result.startswith("row 1.0 nothing to see\nrow 1.1") and NEEDLE in result
    assert '"truncated"' not in result  # not the stand-in
    assert len(json.dumps(res, ensure_ascii=False)) // 4 <= led.config.recall.max_text_tokens


def test_a_link_in_place_of_a_saved_output_is_never_followed(tmp_path: Path) -> None:
    led, ep = ledger(tmp_path)
    commit_output(led, big_output(1))
    ref = led.turns[0].record.envelope_ref or ""
    secret = tmp_path / "elsewhere.txt"
    secret.write_text(NEEDLE + " outside the episode")
    os.unlink(ep / ref)
    os.symlink(secret, ep / ref)
    assert not [r for r in led.recall_history(query="outside the episode").results if r["kind"] == "output"]


def test_reads_of_saved_outputs_stay_bounded(tmp_path: Path) -> None:
    # Six outputs of about a megabyte each: the newest are read, the oldest lies past the bound of one recall.
    led, _ep = ledger(tmp_path)
    commit_output(led, big_output(1, lines=32_000))
    for n in range(2, 8):
        led.stage(package="com.a")
        led.commit(action="adb_shell", args={"cmd": "dumpsys"}, result=big_output(n, needle_at=None, lines=32_000))
    assert all(os.path.getsize(led.episode_dir / (t.record.envelope_ref or "")) > 800_000 for t in led.turns)
    assert not [r for r in led.recall_history(query="sid=7f3a9c41").results if r["kind"] == "output"]
    newest = [r for r in led.recall_history(query="row 7.31999").results if r["kind"] == "output"]
    assert newest[0]["step"] == 7 and newest[0]["score"] == 100


def test_a_value_deep_in_one_long_line_is_found_and_shown(tmp_path: Path) -> None:
    # A tool output of one long line (compact JSON): the hit shows the part of the line around the match.
    led, _ep = ledger(tmp_path)
    rows = [{"id": i, "name": f"联系人{i}", "phone": f"1380000{i:04d}"} for i in range(3000)]
    rows[2500]["name"] = "王小明 验证码 884213"
    commit_output(led, json.dumps({"items": rows}, ensure_ascii=False).replace("王小明", NEEDLE + " 王小明"))
    for query in ("884213", "验证码 884213", NEEDLE):
        hits = [r for r in led.recall_history(query=query).results if r["kind"] == "output"]
        assert hits and query in hits[0]["text"] and ":1:" in hits[0]["text"]
        assert len(hits[0]["text"]) < 800


def test_lines_are_counted_as_the_file_breaks_them(tmp_path: Path) -> None:
    # adb output ends lines with CR CR LF and progress bars use a lone CR: the line number is the file's line.
    led, _ep = ledger(tmp_path)
    text = "\r\r\n".join(f"row {i}\rrow {i} done" for i in range(3000)).replace("row 2000 done", NEEDLE)
    commit_output(led, text)
    [hit] = [r for r in led.recall_history(query=NEEDLE).results if r["kind"] == "output"]
    assert ":2001:" in hit["text"] and NEEDLE in hit["text"]


def test_an_output_the_same_turn_budget_kept_on_disk_is_found(tmp_path: Path) -> None:
    # Outputs read before the action, past the same-turn limits, are shown as an excerpt or not at all; the tail
    # says the full text is on disk, and recall finds a line in it once the step is committed.
    led, _ep = ledger(tmp_path)
    led.stage(package="com.a")
    shown = [led.tool_output("adb_shell", big_output(n, needle_at=2500 if n == 2 else None, lines=40_000))
             for n in range(1, 4)]
    assert all(NEEDLE not in s for s in shown)
    led.commit(action="tap", args={"x": 1, "y": 1}, result="ok")
    hits = [r for r in led.recall_history(query=NEEDLE).results if r["kind"] == "output"]
    assert hits and hits[0]["step"] == 1 and NEEDLE in hits[0]["text"] and ":2501:" in hits[0]["text"]


def test_an_output_past_a_million_characters_keeps_its_start_on_disk(tmp_path: Path) -> None:
    # A result longer than what a step keeps is cut to its start and its end, not to a short head and tail:
    # a line 700,000 characters in is saved and found.
    led, ep = ledger(tmp_path)
    text = big_output(1, needle_at=28_000, lines=48_000)
    assert len(text) > 1_200_000 and text.index(NEEDLE) > 700_000
    commit_output(led, text)
    saved = (ep / (led.turns[0].record.envelope_ref or "")).read_text("utf-8")
    assert NEEDLE in saved and saved.startswith("row 1.0 ") and saved.endswith("row 1.47999 nothing to see")
    hits = [r for r in led.recall_history(query=NEEDLE).results if r["kind"] == "output"]
    assert hits and ":28001:" in hits[0]["text"]
