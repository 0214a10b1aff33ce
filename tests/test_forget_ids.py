"""Any id given to forget gets an answer: a memory forgotten, "no memory", or an error naming the id (never a
bare OSError from a file name too long or a path), through the API, the model's tool and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane
from memory_plane.lifecycle import UsageError, is_safe_id

REPO = Path(__file__).resolve().parent.parent
LONG_IDS = ["mem_" + "a" * 300, "app_" + "b" * 252, "proc_" + "c" * 400, "x" * 256]
ODD_IDS = ["mem_../../x", "../x", "mem_a/b", "mem_\0", "MEM_UPPER", "mem_é", ".", "mem_ a"]

ids = st.one_of(
    st.text(min_size=1, max_size=400).filter(lambda s: s.strip() != ""),
    st.builds(lambda p, n: p + "a" * n, st.sampled_from(["mem_", "app_", "proc_", "nav_", ""]),
              st.integers(0, 400)),
    st.sampled_from(LONG_IDS + ODD_IDS),
)

_settings = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    p = MemoryPlane.open(tmp_path_factory.mktemp("forget_ids") / "m")
    p.long_term.save_memory(type="fact", content="The Zorbix locker code is kept by the user")
    yield p
    p.close()


@_settings
@given(item_id=ids)
def test_any_id_to_the_api_is_forgotten_absent_or_a_usage_error_naming_it(plane: MemoryPlane, item_id: str) -> None:
    try:
        assert plane.forget(item_id, reason="fuzz") is False
    except UsageError as exc:
        assert not is_safe_id(item_id)
        assert repr(item_id[:20])[1:-1] in str(exc)
    else:
        assert is_safe_id(item_id)


@_settings
@given(item_id=ids)
def test_any_id_to_the_tool_is_an_answer(plane: MemoryPlane, item_id: str) -> None:
    res = plane.tools.call("forget_memory", {"memory_id": item_id, "reason": "fuzz"})
    assert res.is_error
    if item_id.strip() and not is_safe_id(item_id.strip()):
        assert res.text.startswith("forget_memory: no memory can have the id"), res.text
        assert "could not run" not in res.text


@pytest.mark.parametrize("item_id", LONG_IDS + [i for i in ODD_IDS if "\0" not in i])
def test_the_cli_exits_2_naming_an_id_no_memory_can_have(tmp_path: Path, item_id: str) -> None:
    root = tmp_path / "m"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "memory_plane", "--root", str(root)]
    subprocess.run([*run, "init"], env=env, check=True, capture_output=True)
    done = subprocess.run([*run, "memory", "forget", item_id], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "no memory can have the id" in done.stderr and item_id[:20] in done.stderr
    assert "Traceback" not in done.stderr


def test_a_long_term_forget_of_an_id_over_255_bytes_is_a_usage_error(plane: MemoryPlane) -> None:
    with pytest.raises(UsageError, match="no memory can have the id 'mem_aaaa"):
        plane.long_term.forget_memory("mem_" + "a" * 300)
    with pytest.raises(UsageError, match="no memory can have the id"):
        plane.device.forget("app_" + "a" * 300, reason="fuzz")
