"""What the commands print agrees with what they do: help, hints, counts, verify's lists, --explain, episodes.

It reaches inside `cli/_main` for the argument parser (each command's help, and whether a suggested command line
parses), `cli/_common` for how a command names itself, `cli/_read` for the --explain columns and the argument bound
of `episodes show`, and `cli/_mcp` for the server's initialization options (what a client is told).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_plane import MemoryPlane
from memory_plane.cli import main as cli
from memory_plane.cli._main import build_parser
from memory_plane.lifecycle import GcReport, counted

from helpers import memplane_env, run_memplane, tree_with_one_task


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    return tree_with_one_task(tmp_path / "m")


def run(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = cli(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def help_of(*words: str) -> str:
    """The --help text of a command or action, as `memplane WORDS --help` prints it."""
    p = build_parser()
    for w in words:
        (sub,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        p = sub.choices[w]
    return p.format_help()


def parses(line: str) -> None:
    """A `memplane ...` command line parses (argparse would exit on a bad one)."""
    build_parser().parse_args(shlex.split(line)[1:])


# -- counts in words -----------------------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=10**6),
       st.sampled_from([("file", "files"), ("entry", "entries"), ("match", "matches"), ("day", "days"),
                        ("box", "boxes"), ("memory", "memories"), ("more result", "more results")]))
def test_a_count_is_singular_for_exactly_one(n: int, forms: tuple[str, str]) -> None:
    one, many = forms
    assert counted(n, one) == f"{n} {one if n == 1 else many}"


def test_an_irregular_plural_is_given() -> None:
    assert counted(1, "person", "people") == "1 person" and counted(3, "person", "people") == "3 people"


def test_lists_of_one_say_one(root: Path, capsys) -> None:
    assert run(capsys, "--root", str(root), "episodes", "list")[1].rstrip().endswith("(1 episode)")
    code, out, _ = run(capsys, "--root", str(root), "device", "list", "--type", "app_profile")
    assert code == 0 and out.rstrip().endswith("(1 item)")
    report = GcReport(dry_run=True)
    report.removed.append({"path": "x", "reason": "expired", "bytes": 1})
    report.bytes_freed = 1
    assert "would remove 1 path, 1 byte;" in report.lines()[-1]


def test_an_import_of_one_episode_says_one(tmp_path: Path, capsys) -> None:
    src = tmp_path / "ac.jsonl"
    src.write_text(json.dumps({"goal": "turn on wifi", "steps": [
        {"action_content": {"action": "open", "app_name": "Settings"}}]}) + "\n")
    root = tmp_path / "m"
    assert cli(["--root", str(root), "init"]) == 0
    capsys.readouterr()
    code, out, _ = run(capsys, "--root", str(root), "import", "androidcontrol", str(src))
    assert code == 0 and out.startswith("imported 1 episode (1 step, 0 empty actions skipped)")


def test_a_tool_answer_of_one_memory_says_one(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        plane.save_rule("Always confirm before paying")
        text = plane.tools.call("recall_memory", {"query": "confirm paying"}).text
        assert text.startswith("1 memory (stored text")
        (entry,) = plane.episodes.entries()
        assert "; 1 step;" in plane.tools.call("inspect_episode", {"episode_id": entry["id"]}).text


# -- help ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["save", "recall", "forget"])
def test_every_memory_action_lists_the_exit_codes(action: str) -> None:
    text = help_of("memory", action)
    assert "exit codes:" in text and "4  no memory root" in text


def test_demo_help_says_where_the_demo_writes_and_the_demo_does_so(tmp_path: Path) -> None:
    import subprocess

    from memory_plane.sim import DEFAULT_DEMO_ROOT

    text = " ".join(help_of("demo").split())
    assert DEFAULT_DEMO_ROOT in text and "$MEMPLANE_ROOT is not used" in text
    real = tmp_path / "real-tree"
    assert cli(["--root", str(real), "init"]) == 0
    before = sorted(p.name for p in real.rglob("*"))
    out = subprocess.run([sys.executable, "-m", "memory_plane", "demo", "--tasks", "1"], cwd=tmp_path,
                         env={**memplane_env(), "MEMPLANE_ROOT": str(real)}, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in real.rglob("*")) == before  # the real tree was not touched
    assert (tmp_path / DEFAULT_DEMO_ROOT / "episodes" / "index.yaml").is_file()


def test_bench_offers_no_root_and_its_refusal_names_commands_that_exist(tmp_path: Path, capsys) -> None:
    assert "--root" not in help_of("bench").split("options:")[1].split("exit codes:")[0]
    code, _, err = run(capsys, "--root", str(tmp_path), "bench", "index", "--short")
    assert code == 2
    suggested = re.findall(r"`([^`]+)`", err)
    assert len(suggested) == 2
    for line in suggested:
        parses(line.replace("DIR", str(tmp_path)).replace("GOAL", "goal"))


def test_bench_data_help_and_its_skip_name_no_path_a_clone_lacks(tmp_path: Path, capsys) -> None:
    text = " ".join(help_of("bench").split())
    assert "../shared" not in text and "androidcontrol/" in text and "--data PATH" in text
    code, out, _ = run(capsys, "bench", "extract", "--data", str(tmp_path / "none"), "--json")
    assert code == 0
    skipped = json.loads(out)["skipped"]
    assert "--data PATH" in skipped and "../shared" not in skipped


# -- hints name the command as it was run ----------------------------------------------------------------------------


def test_hints_name_the_command_the_way_it_was_run(tmp_path: Path, monkeypatch) -> None:
    from memory_plane.cli._common import invoked_as

    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    exe = bin_dir / "memplane"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert invoked_as(str(exe)) == str(exe)  # not on PATH: the path it was run by
    assert invoked_as("venv/bin/memplane") == "venv/bin/memplane"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert invoked_as(str(exe)) == "memplane"  # on PATH: its name
    python = shutil.which("python3") or sys.executable
    assert invoked_as("/x/memory_plane/__main__.py", python) == "python3 -m memory_plane"
    odd = tmp_path / "my python"
    assert invoked_as("/x/memory_plane/__main__.py", str(odd)) == f"{shlex.quote(str(odd))} -m memory_plane"


def test_the_demo_hints_run_as_shown(tmp_path: Path) -> None:
    out = run_memplane("demo", "--tasks", "1", "--root", str(tmp_path / "demo"))
    assert out.returncode == 0, out.stderr
    hints = out.stdout.split("try:\n", 1)[1].splitlines()
    shown = [h.strip() for h in hints if "--root" in h]
    assert shown and all(h.startswith(f"{shlex.quote(sys.executable)} -m memory_plane ") for h in shown), hints
    assert ".venv/bin/memplane" not in out.stdout
    for h in shown:
        words = shlex.split(h)
        build_parser().parse_args(words[3:])  # after `python -m memory_plane`


# -- verify, --explain, episodes show --------------------------------------------------------------------------------


def test_human_verify_lists_the_memories_it_marked_expired(tmp_path: Path, capsys) -> None:
    a = tree_with_one_task(tmp_path / "a")
    b = tree_with_one_task(tmp_path / "b")
    with MemoryPlane.open(a) as plane:
        newest = max(e["started_at"] for e in plane.episodes.entries())
    later = f"{int(newest[:4]) + 1}{newest[4:]}"  # a year on: past every 30- and 90-day TTL, within the clock's trust
    code, out, _ = run(capsys, "--root", str(a), "lifecycle", "verify", "--now", later, "--json")
    expired = json.loads(out)["expired_marked"]
    assert code == 0 and expired
    code, out, _ = run(capsys, "--root", str(b), "lifecycle", "verify", "--now", later)
    line = next(ln for ln in out.splitlines() if ln.startswith("marked expired: "))
    assert sorted(line.removeprefix("marked expired: ").split(", ")) == sorted(expired)


def test_explain_has_a_legend_and_does_not_score_the_device_profile(root: Path, capsys) -> None:
    from memory_plane.cli._read import _FACTORS

    code, out, _ = run(capsys, "--root", str(root), "retrieve", "打开微信，找到张三", "--explain")
    assert code == 0
    header = next(ln for ln in out.splitlines() if ln.lstrip().startswith("id ") and "score" in ln)
    for _, short, _ in _FACTORS:
        assert short in header.split()
        assert any(re.match(rf"\s+{short}\s+\S", ln) for ln in out.splitlines()), short  # the legend line
    profile = next(ln for ln in out.splitlines() if ln.strip().startswith("device_default"))
    assert "always shown" in profile and "0.00" not in profile and "1.000" not in profile


def test_episodes_show_counts_as_the_episode_and_shows_arguments(root: Path, capsys) -> None:
    with MemoryPlane.open(root) as plane:
        (entry,) = plane.episodes.entries()
        ep = plane.episodes.get(entry["id"])
        assert ep is not None
    code, out, _ = run(capsys, "--root", str(root), "episodes", "show", ep.id)
    assert code == 0
    head = next(ln for ln in out.splitlines() if ln.startswith("# ") and "events.jsonl" in ln)
    assert head.startswith(f"# {counted(ep.metrics.events, 'event')} and the finish event")
    call = next(ln for ln in out.splitlines() if "tool_call" in ln)
    assert '{"app": "微信"}' in call


def test_episodes_show_bounds_long_arguments(tmp_path: Path, capsys) -> None:
    from memory_plane import MemoryRetrieveRequest
    from memory_plane.cli._read import ARGS_SHOWN

    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        req = MemoryRetrieveRequest(input="type a long note")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_call("keyboard_text", {"text": "x" * 5000})
        rec.tool_result("keyboard_text", observed_state={"app": "Notes", "page": "Edit"})
        plane.commit_episode(rec.finish(success=True))
        plane.flush()
    code, out, _ = run(capsys, "--root", str(root), "episodes", "show", rec.id)
    call = next(ln for ln in out.splitlines() if "tool_call" in ln)
    assert code == 0 and call.endswith("…") and len(call) < ARGS_SHOWN + 80


# -- tool answers and the MCP server ------------------------------------------------------------------------------


def test_inspect_episode_names_each_event_once(root: Path) -> None:
    from memory_plane.lifecycle import EvidenceRef

    with MemoryPlane.open(root) as plane:
        (entry,) = plane.episodes.entries()
        ep = plane.episodes.get(entry["id"])
        assert ep is not None
        lesson = ep.reusable_lessons[0]
        item = plane.device.get(lesson)
        assert item is not None
        ids = [i for r in item.evidence_refs for i in r.event_ids]

        def cite_again(it):  # type: ignore[no-untyped-def]
            # A second ref to the same episode naming the same events (the lesson renewed by that episode again).
            it.evidence_refs.append(EvidenceRef(type="episode", id=ep.id, event_ids=ids))
            return it

        plane.device.collection(item.type).update(lesson, cite_again)
        text = plane.tools.call("inspect_episode", {"episode_id": ep.id}).text
        taught = next(ln for ln in text.splitlines() if ln.startswith("taught"))
        shown = re.search(rf"{lesson} \(([^)]*)\)", taught)
        assert shown is not None
        named = shown.group(1).split(", ")
        assert len(named) == len(set(named)) and set(named) == set(ids)


def test_a_tool_argument_error_prints_chinese_as_text(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        res = plane.tools.call("recall_memory", {"limit": "many"})
    assert res.is_error and "支付" in res.text and "\\u" not in res.text


def test_the_mcp_server_reports_the_package_version(root: Path) -> None:
    pytest.importorskip("mcp")
    from importlib.metadata import version

    from memory_plane.cli._mcp import build_server

    with MemoryPlane.open(root) as plane:
        options = build_server(plane).create_initialization_options()
    assert options.server_version == version("memory-plane") and options.server_version


def test_a_conflicted_memory_keeps_its_type_in_the_block(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        proc = plane.device.entries("procedure")[0]["id"]

        def conflicted(it):  # type: ignore[no-untyped-def]
            it.status = "conflicted"
            return it

        plane.device.collection("procedure").update(proc, conflicted)
        block = plane.retrieve("打开微信，找到张三").render()
    caution = block.split("# Known Failure Modes And Conflicts", 1)[1]
    assert f"[{proc} type=procedure status=conflicted" in caution and "type=conflict " not in block



def test_a_step_whose_page_is_unknown_names_its_app_alone(tmp_path: Path) -> None:
    """Imported data knows the app a step reached and not the page: the step says `page=Gmail`, never
    `page=Gmail/?`."""
    from task_runs import procedures, run_task

    from memory_plane import MemoryPlane

    with MemoryPlane.open(tmp_path / "m") as plane:
        run_task(plane, "open Gmail", [("launch_app", {"app": "Gmail"}, None, {"app": "Gmail"})])
        notes = [s.outcome_note for p in procedures(plane) for s in p.steps]
    assert notes == ["page=Gmail"]
