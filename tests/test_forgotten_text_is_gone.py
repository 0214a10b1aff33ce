"""After a forget, the tree holds the memory's text nowhere: not in the session's frozen block, its events or
closed sessions, not in episodes, their index or a lesson learned from them, not in a derived cache, and not
in the older memory it replaced."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane, MemoryRetrieveRequest

from helpers import tree_files

# Double spaces and a line break: the block folds them, JSON escapes the break.
TEXT = "Mom's  mobile number is\n555 0199, call her on Zorbix after work"
OLDER = "Mom's mobile number is 555 0199"
GOAL = "call Mom on Zorbix with her mobile number"


def _forms(text: str) -> set[str]:
    """The text as a file may hold it: as typed, folded, JSON-escaped, in each normal form."""
    folded = " ".join(text.split())
    out: set[str] = set()
    for t in (text, folded):
        for f in ("NFC", "NFD", "NFKC"):
            n = unicodedata.normalize(f, t)  # type: ignore[arg-type]
            out |= {n, json.dumps(n)[1:-1], json.dumps(n, ensure_ascii=False)[1:-1]}
    return out


def _holding(root: Path, text: str) -> list[str]:
    """Files under root (``.gz`` decompressed) holding any form of the text: `grep -r` over the tree."""
    forms = _forms(text)
    found = []
    for p, data in tree_files(root):
        body = data.decode("utf-8", "replace")
        if p.suffix == ".jsonl":
            # A JSON line holds text in its strings: a text that looks like a JSON string ('"quoted"') is not
            # held by a line whose string is the word inside it.
            body = "\n".join(_strings(line) for line in body.splitlines())
        if any(f in body for f in forms):
            found.append(str(p.relative_to(root)))
    return found


def _strings(line: str) -> str:
    """A JSON line's strings (keys and values) one per line; a line that does not parse, as it is."""
    try:
        value = json.loads(line)
    except ValueError:
        return line
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for k, x in v.items():
                out.append(str(k))
                walk(x)

    walk(value)
    return "\n".join(out)


def _tree_holding_text(root: Path) -> tuple[MemoryPlane, str, str]:
    """A tree that holds TEXT in every place the plane copies a memory to, built through the public API."""
    plane = MemoryPlane.open(root)
    older = plane.long_term.save_memory(type="fact", content=OLDER, tags=["mom"], entities=["Mom"])
    for i in range(70):  # enough memories for the long-term postings to be persisted under .cache/
        plane.long_term.save_memory(type="fact", content=f"filler fact number {i} about topic {i * 7}")
    mem = plane.long_term.save_memory(type="fact", content=TEXT, tags=["mom"], entities=["Mom"])
    assert mem.status == "superseded" and mem.superseded == [older.id]
    req = MemoryRetrieveRequest(input=GOAL, session_id="sess_a")
    ctx = plane.retrieve(req)  # the frozen block of session a holds the (folded) text
    assert "555 0199, call her on Zorbix" in (ctx.frozen_block or "")
    plane.session.append("user_input", f"please remember: {TEXT}")
    rec = plane.new_episode_recorder(req, ctx)
    rec.tool_call("keyboard_text", {"text": TEXT})
    rec.tool_result("keyboard_text", output=f"typed {TEXT}")
    rec.note(f"the user said {TEXT}")
    plane.commit_episode(rec.finish(success=True, output=f"done: {TEXT}", final_state=TEXT))
    plane.flush()
    plane.session.close()  # session a, with its block and events, goes under session_archive/
    plane.session.append("assistant_output", f"I noted {TEXT}")
    plane.retrieve(MemoryRetrieveRequest(input=GOAL, session_id="sess_b"))
    plane.flush()
    return plane, mem.id, older.id


def test_after_forget_no_file_of_the_tree_holds_the_text(tmp_path: Path) -> None:
    root = tmp_path / "m"
    plane, mem_id, older_id = _tree_holding_text(root)
    before = set(_holding(root, TEXT))
    # The places the text was copied to, as the plane writes them today.
    for where in ("session/metadata.json", "session/events.jsonl", "episodes/index.yaml"):
        assert where in before, before
    assert any(p.startswith("session_archive/") and p.endswith("metadata.json") for p in before)
    assert any(p.startswith("session_archive/") and p.endswith("events.jsonl") for p in before)
    assert any(p.endswith("episode.yaml") for p in before) and any(p.endswith("/events.jsonl")
                                                                 and p.startswith("episodes/") for p in before)
    assert any(p.startswith("long_term/memories/") for p in before)
    assert (root / ".cache" / "retrieve" / "long_term.json.gz").is_file()
    assert _holding(root, OLDER)

    assert plane.forget(mem_id, reason="the user asked")

    assert _holding(root, TEXT) == []
    assert _holding(root, OLDER) == []  # the memory it replaced is forgotten with it
    assert plane.long_term.get(older_id) is None
    # The session goes on with the scrubbed block; the memories are not served again.
    again = plane.retrieve(MemoryRetrieveRequest(input=GOAL, session_id="sess_b"))
    assert "Zorbix after work" not in (again.frozen_block or "") and "555 0199" not in again.render()
    assert plane.long_term.save_memory(type="fact", content=TEXT).status == "ignored"
    assert plane.long_term.save_memory(type="fact", content=OLDER).status == "ignored"
    assert plane.verify().ok
    plane.close()


def test_forgetting_through_the_long_term_store_scrubs_the_session_too(tmp_path: Path) -> None:
    plane = MemoryPlane.open(tmp_path / "m")
    mem = plane.long_term.save_memory(type="rule", content="Never  share the\nOTP code of Zorbix bank")
    plane.retrieve(MemoryRetrieveRequest(input="log in to Zorbix bank with the OTP code", session_id="s1"))
    plane.session.append("user_input", "Never  share the\nOTP code of Zorbix bank")
    assert "session/metadata.json" in _holding(plane.root, "Never share the OTP code of Zorbix bank")
    assert plane.long_term.forget_memory(mem.id, reason="the user asked")
    assert _holding(plane.root, "Never  share the\nOTP code of Zorbix bank") == []
    plane.close()


def test_a_forget_of_the_composed_text_scrubs_the_decomposed_one(tmp_path: Path) -> None:
    plane = MemoryPlane.open(tmp_path / "m")
    composed = unicodedata.normalize("NFC", "Café Crème at Zorbix is the usual order")
    mem = plane.long_term.save_memory(type="preference", content=composed)
    plane.session.append("user_input", unicodedata.normalize("NFD", composed))
    assert plane.forget(mem.id, reason="the user asked")
    assert _holding(plane.root, composed) == []
    plane.close()


_words = st.one_of(st.sampled_from(["status", "content", "type", "event_id", "active", "user_input", "true",
                                    "Zorbix", "Café", "Crème", "ＷｅＣｈａｔ", '"quoted"', "back\\slash", "微信",
                                    "- item", "key: value", "{x}", "#"]),
                   st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=12))
_texts = st.lists(st.tuples(_words, st.sampled_from([" ", "  ", "\n", "\t", " \n "])), min_size=1, max_size=8).map(
    lambda parts: "".join(w + sep for w, sep in parts).strip()).filter(lambda t: len(" ".join(t.split())) >= 4)


MARKER = "Qx7 marker text of the vocabulary tree"


def _remember_and_record(plane: MemoryPlane, text: str, copy: str) -> Any:
    """Save the text as a memory, then leave copies of it in the session, a retrieve and an episode."""
    mem = plane.long_term.save_memory(type="fact", content=text, force=True)
    if mem.status not in ("saved", "superseded"):
        return mem
    plane.session.append("user_input", copy)
    req = MemoryRetrieveRequest(input=copy[:200], session_id=f"s_{mem.id}")
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("keyboard_text", {"text": copy})
    rec.tool_result("keyboard_text", output=copy)
    plane.commit_episode(rec.finish(success=True, final_state=copy))
    plane.flush()
    return mem


@pytest.fixture(scope="module")
def vocabulary(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Every word a tree holds of its own (field names, statuses, file names), from a tree made the same way."""
    with MemoryPlane.open(tmp_path_factory.mktemp("vocabulary") / "m") as plane:
        _remember_and_record(plane, MARKER, MARKER)
        texts = [data.decode("utf-8", "replace").replace(MARKER, "\0") for _, data in tree_files(plane.root)]
    return "\n".join(texts)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_texts, form=st.sampled_from(["NFC", "NFD", "NFKC"]))
@example(text="000000\\¡", form="NFC")  # a backslash, escaped in the files, beside a character JSON may escape
def test_any_forgotten_text_is_nowhere_and_every_file_still_parses(shared_plane: MemoryPlane, vocabulary: str,
                                                                  text: str, form: str) -> None:
    # A text the tree holds of its own (a field name such as "event_id") is not the memory's to scrub: the
    # claim is about the copies the memory itself made.
    assume(not any(f in vocabulary for f in _forms(text)))
    mem = _remember_and_record(shared_plane, text, unicodedata.normalize(form, text))  # type: ignore[arg-type]
    if mem.status not in ("saved", "superseded"):
        return  # the same or a broader memory exists: nothing new to forget
    assert shared_plane.forget(mem.id, reason="the user asked")
    if len(" ".join(text.split())) >= 8:  # shorter texts may be a word the tree holds anyway ("status")
        assert _holding(shared_plane.root, text) == []
    report = shared_plane.verify()
    assert not [p for p in report.problems if p.category not in ("job_failed", "pending")], report.problems
