"""The README and docs/ hold: every python example runs as written (in a temp root, with a made-up screenshot),
every `memplane` command line they show parses, every option a command's synopsis names exists, and every
relative link and repository path they name is in the clone.

It reaches inside `_fake_gemini` for the fake Gemini server the tools page's loop talks to, and inside
`cli/_main` for the command line's parser (to parse each command line shown without running it).
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.cli._main import build_parser

from helpers import screenshot as make_screenshot

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = [README, *sorted((REPO / "docs").glob("*.md")), REPO / "BENCHMARKS.md"]
"""Every page a reader of the clone is sent to."""


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def python_blocks() -> list[tuple[Path, str]]:
    """Every ```python block of the README and docs, with the page that holds it, in order."""
    return [(page, code) for page in DOCS for code in re.findall(r"```python\n(.*?)```", page.read_text("utf-8"), re.S)]


def _in_temp_root(code: str, root: Path) -> str:
    # The examples name the phone's own root; a test must never write there.
    return code.replace('"/userdata/agent/memory"', repr(str(root)))


# -- every python example runs --------------------------------------------------------------------------------------


def run_runtime_example(code: str, tmp_path: Path, monkeypatch: Any) -> None:
    """The runtime loop (README): it runs as written and leaves a committed, readable episode."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "screen.jpg").write_bytes(make_screenshot("home"))
    root = tmp_path / "memory"
    exec(compile(_in_temp_root(code, root), "README.md", "exec"), {})
    assert (root / "episodes" / "index.yaml").is_file()  # the example wrote where the test pointed it
    with MemoryPlane.open(root) as plane:
        (entry,) = plane.episodes.entries()
        ep = plane.episodes.get(entry["id"])
        assert ep is not None and ep.status == "active" and ep.outcome.success is True
        events = plane.episodes.events(ep.id).records
        assert any(e.get("screenshot_ref") for e in events)  # the screenshot went to artifacts/
        ctx = plane.retrieve("打开微信，找到张三，准备发消息")
        assert ep.id not in [h.id for h in ctx.common.failure_modes]  # nothing half-written shows as a failure
        assert plane.verify().ok


def run_genai_loop(code: str, tmp_path: Path, monkeypatch: Any) -> None:
    """The model's tool loop (tools page): through the real SDK against a fake Gemini."""
    pytest.importorskip("google.genai")
    from memory_plane._fake_gemini import FakeGemini

    with FakeGemini() as fake, MemoryPlane.open(tmp_path / "m") as plane:
        fake.script("gemini-3.8-flash",
                    (200, {"parts": [{"functionCall": {"id": "call_1", "name": "recall_memory",
                                                       "args": {"query": "zhang san"}}}]}, 0),
                    (200, "Opened the chat.", 0))
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
        req = MemoryRetrieveRequest(input="打开微信，找到张三")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        ns: dict[str, Any] = {"plane": plane, "req": req, "rec": rec, "phone_tools": []}
        exec(compile(code, "docs/tools.md", "exec"), ns)
        assert len(fake.requests) == 2
        ep = rec.finish(success=True)
        assert plane.commit_episode(ep)


def run_transcript_example(code: str, tmp_path: Path, monkeypatch: Any) -> None:
    """The transcript ledger (runtime page): runs with its names given."""
    with MemoryPlane.open(tmp_path / "m") as plane:
        req = MemoryRetrieveRequest(input="read the OTP and type it")
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        ns: dict[str, Any] = {
            "rec": rec, "SYSTEM": "You drive an Android phone.", "ui_tree": [{"text": "OTP", "bounds": [0, 0, 9, 9]}],
            "plan_text": "read the code", "shot_dhash": "0" * 16, "thought": "the code is visible",
            "controller_output": "tapped", "h": "subgoal-1",
            "resp": SimpleNamespace(usage_metadata=SimpleNamespace(prompt_token_count=1200))}
        exec(compile(code, "docs/runtime.md", "exec"), ns)
        assert ns["contents"] is not None
        rec.finish(success=True)


RUNNERS: dict[str, tuple[str, Callable[[str, Path, Any], None]]] = {
    "runtime": ("new_episode_recorder(req, ctx)", run_runtime_example),
    "genai loop": ("genai.Client()", run_genai_loop),
    "transcript": ("rec.open_transcript(", run_transcript_example),
}
"""Each kind of example, the words that mark it, and how it is run."""


def _runner_of(code: str) -> list[str]:
    return [name for name, (mark, _) in RUNNERS.items() if mark in code]


def test_every_python_example_has_its_runner() -> None:
    blocks = python_blocks()
    assert blocks, "no python example found"
    for page, code in blocks:
        assert len(_runner_of(code)) == 1, f"{_rel(page)}: an example with no runner (or two):\n{code[:200]}"
    assert sorted(n for _, code in blocks for n in _runner_of(code)) == sorted(RUNNERS)  # each runner used


@pytest.mark.parametrize("index", range(len(python_blocks())),
                         ids=[f"{_rel(p)}:{_runner_of(c)[0] if _runner_of(c) else '?'}" for p, c in python_blocks()])
def test_every_python_example_runs_as_written(index: int, tmp_path: Path, monkeypatch) -> None:
    _, code = python_blocks()[index]
    (name,) = _runner_of(code)
    RUNNERS[name][1](code, tmp_path, monkeypatch)


def test_the_readme_has_the_runtime_example_and_the_two_commands() -> None:
    text = README.read_text("utf-8")
    assert [n for code in re.findall(r"```python\n(.*?)```", text, re.S) for n in _runner_of(code)] == ["runtime"]
    (sh,) = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert [ln.split("#")[0].strip() for ln in sh.strip().splitlines()] == ["make demo", "make test"]
    assert len(text.splitlines()) <= 120  # a few screens


# -- every command line shown parses --------------------------------------------------------------------------------

PLACEHOLDERS = {"GOAL": "open wechat", "ID": "ep_20261201_3f9a1c2b7d", "NAME": "x", "TEXT": "x", "DIR": "/tmp/x",
                "PATH": "/tmp/x", "FILE": "x.jsonl", "QUERY": "x", "TS": "2026-12-01T00:00:00Z",
                "TIMESTAMP": "2026-12-01T00:00:00Z", "N": "3", "S": "1", "T": "rule", "A": "WeChat", "L": "en-US",
                "D": "default", "WxH": "640x1200", "DATE": "2026-11-30"}
"""A value for each placeholder a shown command line uses (GOAL, ID, ...)."""
SYNOPSIS = re.compile(r"\[|\]|\\?\||…|\.\.\.")
_COMMAND = re.compile(r"(?:^|\s)(?:\S*/)?(?:memplane|\$MP)\s+(.*)")
_SHELL_END = re.compile(r"\s(?:>>?|2>&1|\||&&|;|#)(?:\s|$).*")


def shown_commands() -> list[tuple[str, str]]:
    """(page, the words after `memplane`) of every command line the pages show: in code blocks (a line holding
    `memplane` or cron's `$MP`, up to a shell operator), in inline code, and each command of the command table
    (written without `memplane`)."""
    found: list[tuple[str, str]] = []
    names = set(_subcommands(build_parser()))
    for page in DOCS:
        text = page.read_text("utf-8")
        for block in re.findall(r"```(?:sh|bash|cron|console)?\n(.*?)```", text, re.S):
            for line in block.splitlines():
                m = _COMMAND.search(line)
                if m and not line.lstrip().startswith("#"):
                    found.append((_rel(page), _SHELL_END.sub("", m.group(1)).strip()))
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for span in re.findall(r"`([^`\n]+)`", prose):
            m = re.match(r"(?:\S*/)?memplane\s+(.*)", span)
            if m:
                found.append((_rel(page), m.group(1)))
        for row in re.findall(r"^\|.*", prose, re.M):
            first = re.split(r"(?<!\\)\|", row)[1]  # a table's first cell (`\|` is a bar inside it)
            for span in re.findall(r"`([^`]+)`", first.replace("\\|", "|")):
                if span.split()[0] in names:
                    found.append((_rel(page), span))
    return found


def _subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subs[0].choices) if subs else {}


def _fill(words: str) -> list[str]:
    return [PLACEHOLDERS.get(w, w) for w in shlex.split(words)]


def _options_exist(words: str) -> list[str]:
    """The options a synopsis names that its command does not take (the command found by its leading words)."""
    top = p = build_parser()
    for w in words.split():
        nxt = _subcommands(p).get(w)
        if nxt is None and w in ("list", "show", "restore") and p.prog.endswith("quarantine"):
            continue  # quarantine's actions are a positional choice
        if nxt is None:
            if not w.startswith("-") and _subcommands(p):
                break
            continue
        p = nxt
    known = {o for parser in (top, p) for a in parser._actions for o in a.option_strings}
    return [o for o in re.findall(r"(?<![\w-])--?[a-z][\w-]*", words) if o.split("=")[0] not in known]


def test_the_pages_show_commands() -> None:
    pages = {page for page, _ in shown_commands()}
    assert {"docs/operating.md", "docs/files.md", "BENCHMARKS.md"} <= pages


def _command_path(words: list[str]) -> bool:
    """Whether the words only name a command (`memory forget`, `import`): a reference to it, not a command line."""
    p = build_parser()
    for i, w in enumerate(words):
        nxt = _subcommands(p).get(w)
        if nxt is None:  # the last word may be a choice of the command's own (`import androidcontrol`)
            return i == len(words) - 1 and any(w in (a.choices or ()) for a in p._actions
                                                 if not isinstance(a, argparse._SubParsersAction))
        p = nxt
    return True


@pytest.mark.parametrize("page,words", sorted(set(shown_commands())))
def test_every_command_line_shown_parses(page: str, words: str, capsys) -> None:
    shown = words.split()
    if SYNOPSIS.search(words) or "--help" in shown or "-h" in shown:
        # A synopsis (`[--json]`, `a | b`) or a call for help: its command exists and takes each option named.
        assert not _options_exist(words), f"{page}: `memplane {words}` names options its command lacks"
        first = re.sub(r"[\[\]]", "", shown[0])
        assert first.startswith("-") or _command_path([first]), f"{page}: `memplane {words}`: no command {first}"
        return
    if _command_path(shown):
        return
    try:
        build_parser().parse_args(_fill(words))
    except SystemExit as exc:
        pytest.fail(f"{page}: `memplane {words}` does not parse ({exc.code}): {capsys.readouterr().err.strip()}")


# -- every link and path named is in the clone ----------------------------------------------------------------------

REPO_DIRS = ("tests", "docs", "memory_plane", "lifecycle", "episodes", "device_memory", "prompts",
             "userdata_template")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    prose = re.sub(r"```.*?```", "", page.read_text("utf-8"), flags=re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", prose, re.M)}


def links() -> list[tuple[Path, str]]:
    """Every relative markdown link of the pages, with its page."""
    out = []
    for page in DOCS:
        prose = re.sub(r"```.*?```", "", page.read_text("utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if not re.match(r"[a-z]+:", target):
                out.append((page, target))
    return out


def repo_paths() -> list[tuple[Path, str]]:
    """Every repository path a page names in inline code (`tests/test_x.py`, `memory_plane/retrieval/`, ...):
    a path under one of the repository's folders that is code or docs, not a path of the memory tree (whose
    folders share some names: `lifecycle/retention.yaml` is the tree's)."""
    out = []
    for page in DOCS:
        prose = re.sub(r"```.*?```", "", page.read_text("utf-8"), flags=re.S)
        for span in re.findall(r"`([^`\s]+)`", prose):
            path = span.split("::")[0]
            if any(c in path for c in "<>*{}") or not path.startswith(tuple(f"{d}/" for d in REPO_DIRS)):
                continue
            if path.endswith((".py", ".md")) or path.startswith(("tests/", "docs/", "memory_plane/", "prompts/")):
                out.append((page, path))
    return out


def test_the_pages_link_and_name_paths() -> None:
    assert len(links()) >= 10 and len(repo_paths()) >= 10


@pytest.mark.parametrize("page,target", [(p, t) for p, t in links()], ids=lambda x: str(x)[-50:])
def test_every_relative_link_leads_to_a_file_and_heading_of_the_clone(page: Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    inside = dest == REPO or REPO in dest.parents
    assert inside and dest.exists(), f"{_rel(page)}: {target} is not in the clone"
    if anchor:
        assert anchor in _anchors(dest), f"{_rel(page)}: {target}: no heading with that anchor"


@pytest.mark.parametrize("page,path", repo_paths(), ids=lambda x: str(x)[-50:])
def test_every_repository_path_named_is_in_the_clone(page: Path, path: str) -> None:
    assert (REPO / path).exists(), f"{_rel(page)} names {path}, which the clone does not hold"


def test_no_page_points_outside_the_clone() -> None:
    for page in DOCS:
        assert "../shared" not in page.read_text("utf-8"), f"{_rel(page)} names a path a clone lacks"


# -- the command line itself ------------------------------------------------------------------------------------


def test_bench_refuses_a_root_it_would_not_use(tmp_path: Path, capsys) -> None:
    from memory_plane.cli import main as cli

    assert cli(["--root", str(tmp_path), "bench", "index", "--short"]) == 2
    assert "--root" in capsys.readouterr().err
