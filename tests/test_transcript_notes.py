"""Notes in the transcript: what a step wrote reaches the capsule lens as key and excerpt, and a note written in
a folded segment stays named at every level of the frozen history."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.episodes.transcript import (
    Capsule,
    Chunk,
    Era,
    OfflineCapsuleLens,
    OfflineVisualLens,
    StepRecord,
    TranscriptConfig,
    TranscriptLedger,
    capsule_input,
)

from helpers import episode_ledger

ROUTE = "Verification code entry: Settings > Account > Security > Two-step, then 'Send code' at the bottom"


def ledger(tmp_path: Path, **chunking) -> TranscriptLedger:
    config = TranscriptConfig.from_mapping({"chunking": chunking}) if chunking else None
    return episode_ledger(tmp_path, lens=OfflineVisualLens(), config=config, goal="test goal")[0]


def write(led: TranscriptLedger, notes, args=None, action: str = "save_note") -> StepRecord:  # type: ignore[no-untyped-def]
    led.stage(package="com.a", activity="Notes")
    return led.commit(action=action, args=args or {"x": 1, "y": 1}, result="saved", notes_written=notes,
                      validator={"executed": True})


def test_a_note_given_with_its_content_reaches_the_capsule_as_key_and_excerpt(tmp_path: Path) -> None:
    led = ledger(tmp_path)
    rec = write(led, [{"key": "notes/login_flow.md", "content": ROUTE}])
    assert rec.notes_written == ["notes/login_flow.md"] and rec.note_excerpts == {"notes/login_flow.md": ROUTE}
    assert f'note written: notes/login_flow.md: "{ROUTE}"' in capsule_input([rec], {})


def test_a_long_note_is_excerpted_from_its_start(tmp_path: Path) -> None:
    # What a note says first is what the capsule is given: a long note is cut at its end, never to its last lines.
    led = ledger(tmp_path)
    content = "取件码 5566，在前台。" + "之后的说明 " * 400
    rec = write(led, [{"key": "notes/pickup.md", "content": content}])
    excerpt = (rec.note_excerpts or {})["notes/pickup.md"]
    assert excerpt.startswith("取件码 5566，在前台。") and "omitted" not in excerpt and len(excerpt) <= 300
    assert 'note written: notes/pickup.md: "取件码 5566' in capsule_input([rec], {})


def test_a_note_written_by_the_action_takes_its_content_from_the_arguments(tmp_path: Path) -> None:
    led = ledger(tmp_path)
    rec = write(led, ["login_flow"], args={"key": "login_flow", "content": ROUTE, "mode": "append"})
    assert rec.note_excerpts == {"login_flow": ROUTE}
    assert ROUTE in capsule_input([rec], {})
    other = write(led, ["login_flow"], action="tap")  # a key the action does not name: no guess
    assert other.note_excerpts is None and "note written: login_flow (tool result: saved)" in capsule_input([other], {})


def test_the_excerpt_survives_the_tightest_input_budget(tmp_path: Path) -> None:
    led = ledger(tmp_path)
    rec = write(led, [{"key": "k", "content": ROUTE}], args={"x": 1, "y": 1, "text": "z" * 5000})
    led.commit(action="tap", args={"x": 2, "y": 2}, thought="long reasoning " * 2000, result="r" * 5000)
    tight = capsule_input([rec, led.turns[-1].record], {}, max_tokens=50)
    assert 'note written: k: "' + ROUTE[:100] in tight and "long reasoning" not in tight


def test_the_offline_synopsis_names_each_note_with_what_it_says(tmp_path: Path) -> None:
    led = ledger(tmp_path)
    rec = write(led, [{"key": "notes/login_flow.md", "content": ROUTE}, "notes/other.md"])
    effect = OfflineCapsuleLens().capsule([rec], {}).effect
    assert 'notes/login_flow.md ("Verification code entry: Settings' in effect and "notes/other.md" in effect


@settings(max_examples=40, deadline=None)
@given(key=st.from_regex(r"(notes/)?[a-z_]{1,20}(\.md)?", fullmatch=True),
       content=st.one_of(st.text(alphabet=st.sampled_from("abc xyz登录验证码 ,.:>"), min_size=1, max_size=400),
                         st.text(alphabet=st.sampled_from("abc xyz登录验证码 ,.:>"), min_size=300, max_size=3000)),
       shape=st.sampled_from(["key/content", "path/text", "name/content", "arguments"]))
def test_every_note_shape_gives_key_and_excerpt(tmp_path_factory, key: str, content: str,  # type: ignore[no-untyped-def]
                                                shape: str) -> None:
    led = ledger(tmp_path_factory.mktemp("n"))
    if shape == "arguments":
        rec = write(led, [key], args={"key": key, "content": content})
    else:
        k, c = shape.split("/")
        rec = write(led, [{k: key, c: content}])
    text = capsule_input([rec], {})
    assert f"note written: {key}" in text
    said = " ".join(content.split())
    if said:
        assert f'note written: {key}: "{said[:100]}' in text
    else:
        assert rec.note_excerpts is None


def _chunk(start: int, notes: list[str], effect: str = "") -> Chunk:
    cap = Capsule(doing="settings", did="opened security", effect=effect,
                  intervals=[f"- Steps {start}–{start + 1}: opened security"])
    return Chunk(start, start + 1, "T+00:01", "T+00:02", "size", cap, [f"- Step {start} (T+00:01): tap(1,1)"], [],
                 notes=notes)


def test_an_era_names_the_notes_its_chunks_wrote_and_referred_to() -> None:
    era = Era([_chunk(1, ["login_flow"]), _chunk(3, [], effect="kept the code route in notes/otp_route.md.")],
              number=1)
    assert not era.paragraph and "  Notes: login_flow, notes/otp_route.md" in era.render()
    assert "notes/otp_route.md" in Era(era.chunks, paragraph=True, number=1).render()


def test_a_chunk_still_waiting_for_its_synopsis_names_its_notes() -> None:
    pending = Chunk(1, 2, "T+00:01", "T+00:02", "hard_threshold", None, ["- Step 1 (T+00:01): tap(1,1)"], [],
                    status="pending", notes=["login_flow"])
    assert "Notes: login_flow" in pending.render()


def test_a_note_written_in_a_folded_era_stays_in_the_context(tmp_path: Path) -> None:
    led = ledger(tmp_path, max_steps=3, target_source_tokens=10**6, context_budget_tokens=2500, max_chunks=3,
                 max_eras=8)
    for n in range(1, 41):
        led.stage(package="com.a", activity="P", ui_text=[f"item {n}"])
        led.commit(action="tap", args={"x": n, "y": n}, thought=f"thinking about step {n} " * 8, result=f"ok {n}",
                   validator={"executed": True}, notes_written=[{"key": "notes/route.md", "content": ROUTE}]
                   if n == 2 else ())
        led.flush(5)
    era = next(e for e in led.compaction.eras if e.start <= 2 <= e.end)
    assert not era.paragraph
    frozen = "\n".join(m.text() for m in led.render() if m.zone == "F")
    assert "notes/route.md" in frozen
    assert [r["step"] for r in led.recall_history(query="Two-step").results if r["kind"] == "note"] == [2]
