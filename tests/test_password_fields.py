"""Text typed into a password field, whether the screen said so before the typing or only its result did
after, is on no file of the tree and in no block, and teaches nothing about the field."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest

GOAL = "log in to the Bank app"
SECRET = "hunter2-secret"
MARKERS: tuple[dict[str, Any], ...] = (
    {"field_type": "password"}, {"field_type": "textPassword"}, {"input_type": "TYPE_TEXT_VARIATION_PASSWORD"},
    {"is_password": True}, {"secure": True}, {"focused": {"field_type": "password"}},
)


def grep_tree(root: Path, needle: str) -> list[str]:
    """Files under root holding needle (gzip caches decompressed first), as ``grep -r`` after gunzip would."""
    found = []
    for p in root.rglob("*"):
        if not p.is_file() or p.is_symlink():
            continue
        data = p.read_bytes()
        if p.suffix == ".gz":
            data = gzip.decompress(data)
        if needle.encode() in data:
            found.append(str(p.relative_to(root)))
    return found


def login(plane: MemoryPlane, *, ok: bool, marker: dict[str, Any], where: str, between: bool = False,
          ledger: str | None = None) -> None:
    """One login episode: the password field is reported ``before`` the typing (the tap's result) or ``after``
    it (the typing call's own result: its observed state or its output); ``between``: a note in between;
    ``ledger``: the typing step is also committed to the task's transcript, ``first`` or ``last``."""
    req = MemoryRetrieveRequest(input=GOAL, current_hints=CurrentEnvironmentHints(app="Bank", page="Home"))
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    led = plane.open_transcript(rec) if ledger else None

    def transcript() -> None:
        if led is not None:
            led.commit(action="keyboard_text", args={"text": SECRET}, thought=f"I type {SECRET}",
                       result=f"typed {SECRET}")
    rec.tool_call("launch_app", {"app": "com.bank"}, content="open Bank")
    rec.tool_result("launch_app", observed_state={"app": "Bank", "page": "Login", "package": "com.bank"})
    rec.tool_call("tap", {"x": 300, "y": 400}, content="password box", target_label="Password")
    rec.tool_result("tap", observed_state={"app": "Bank", "page": "Login", **(marker if where == "before" else {})})
    rec.tool_call("keyboard_text", {"text": SECRET}, content=f"type {SECRET}", target_label=SECRET)
    if between:
        rec.note("typing")
    if ledger == "first":
        transcript()
    after = {"app": "Bank", "page": "Login", **(marker if where == "after" else {})}
    output: Any = dict(marker, typed=SECRET) if where.startswith("output") else f"typed {SECRET}"
    if where == "output_json":
        output = json.dumps(output)  # a runtime that answers with the JSON text of its result
    rec.tool_result("keyboard_text", output=output, is_error=not ok, observed_state=after)
    if ledger == "last":
        transcript()
    rec.tool_call("tap", {"x": 300, "y": 800}, content="Log in", target_label="Log in")
    rec.tool_result("tap", observed_state={"app": "Bank", "page": "Account" if ok else "Login"})
    plane.commit_episode(rec.finish(success=ok, failure_reason=None if ok else f"{SECRET} was not accepted"))
    plane.flush()


def test_a_password_reported_only_in_the_typing_result_is_nowhere(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        login(plane, ok=False, marker={"field_type": "password"}, where="after")
        login(plane, ok=True, marker={"field_type": "password"}, where="after")
        block = plane.retrieve(MemoryRetrieveRequest(input=GOAL)).render()
        device = plane.device.entries()
    assert grep_tree(root, SECRET) == []
    assert SECRET not in block and "[redacted]" in block  # the step is shown, its text is not
    assert "did not reach the field" not in block
    assert not any("input_not_accepted" in str(e) for e in device)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(marker=st.sampled_from(MARKERS), where=st.sampled_from(("before", "after", "output", "output_json")),
       between=st.booleans(), ok=st.booleans(), ledger=st.sampled_from((None, "first", "last")))
def test_wherever_and_however_the_field_is_reported_the_typed_text_is_on_no_file(
        marker: dict[str, Any], where: str, between: bool, ok: bool, ledger: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "m"
        with MemoryPlane.open(root) as plane:
            login(plane, ok=ok, marker=marker, where=where, between=between, ledger=ledger)
            block = plane.retrieve(MemoryRetrieveRequest(input=GOAL)).render()
            assert not plane.verify().problems
        assert grep_tree(root, SECRET) == [] and SECRET not in block


def test_text_typed_before_a_password_field_appeared_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        req = MemoryRetrieveRequest(input=GOAL)
        rec = plane.new_episode_recorder(req)
        rec.tool_call("keyboard_text", {"text": "alice-the-user"})
        rec.tool_result("keyboard_text", observed_state={"app": "Bank", "page": "Login"})
        rec.tool_call("tap", {"x": 300, "y": 400})
        rec.tool_result("tap", observed_state={"app": "Bank", "page": "Login", "field_type": "password"})
        rec.tool_call("keyboard_text", {"text": SECRET})
        rec.tool_result("keyboard_text", observed_state={"app": "Bank", "page": "Login"})
        plane.commit_episode(rec.finish(success=True))
        plane.flush()
    assert grep_tree(root, "alice-the-user") and grep_tree(root, SECRET) == []


def test_a_long_tasks_transcript_and_its_chunks_hold_no_password(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        (root / "config.yaml").write_text("chunking:\n  max_steps: 3\n")
        req = MemoryRetrieveRequest(input=GOAL)
        rec = plane.new_episode_recorder(req)
        led = plane.open_transcript(rec)
        rec.tool_call("keyboard_text", {"text": SECRET})
        # The runtime commits the step to its transcript before it hands the result to the recorder.
        led.commit(action="keyboard_text", args={"text": SECRET}, thought=f"I type {SECRET}", result="typed")
        rec.tool_result("keyboard_text", observed_state={"app": "Bank", "page": "Login", "field_type": "password"})
        for n in range(12):
            rec.tool_call("tap", {"x": n, "y": n})
            led.commit(action="tap", args={"x": n, "y": n}, thought=f"after typing {SECRET}, tap {n}", result="ok")
            rec.tool_result("tap", observed_state={"app": "Bank", "page": f"Page {n}"})
        assert led.flush(timeout=10)
        led.close(timeout=10)
        plane.commit_episode(rec.finish(success=True))
        plane.flush()
    assert list(root.rglob("chunks/*.md")), "the task was long enough to be compacted"
    assert grep_tree(root, SECRET) == []
