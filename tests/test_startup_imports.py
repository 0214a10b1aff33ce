"""What a process that starts and retrieves loads: only what the retrieve needs (the agent pays the rest, if ever,
when it records, commits, forgets or runs verify and GC)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memory_plane import MemoryPlane

from helpers import record_wechat_task

REPO = Path(__file__).resolve().parent.parent

START_AND_RETRIEVE = """
import sys
from memory_plane import MemoryPlane
plane = MemoryPlane.open(sys.argv[1])
for goal in ("打开微信，找到张三", "what is the office code", "Send Bob the office code on WeChat"):
    memory = plane.retrieve(goal)
    assert not memory.dropped.get("error"), memory.dropped
    print("hits", len(memory.common.all_hits()))
print("\\n".join(sorted(sys.modules)))
"""

# The code of recording, learning from an episode (lessons, outcomes, blame), saving (what a save decides, the
# candidates index and SQLite under it), forgetting (the scrub of the whole tree), verify and GC, the model's
# tools and the model lenses: none of it is loaded by a start and a retrieve.
DEFERRED = (
    "memory_plane.episodes._recorder",
    "memory_plane.episodes._extract",
    "memory_plane.episodes._outcomes",
    "memory_plane.episodes._blame",
    "memory_plane.episodes._transcript_config",
    "memory_plane.episodes.transcript",
    "memory_plane._long_term_save",
    "memory_plane._long_term_candidates",
    "sqlite3",
    "memory_plane._long_term_forget",
    "memory_plane._scrub",
    "memory_plane.upkeep",
    "memory_plane._tools",
    "memory_plane._lenses",
)


def _started_and_retrieved(root: Path) -> tuple[list[str], list[str]]:
    """(the hit counts, the modules loaded) of a fresh interpreter that opens the tree and retrieves."""
    out = subprocess.run([sys.executable, "-c", START_AND_RETRIEVE, str(root)], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120).stdout.split("\n")
    return [line for line in out if line.startswith("hits ")], [line for line in out if line and " " not in line]


def test_a_start_and_a_retrieve_load_none_of_the_writing_and_learning_code(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        record_wechat_task(plane)  # a tree that holds an episode, what it taught, and a rule
        plane.long_term.save_memory(type="fact", content="The office code is 4711")
    hits, loaded = _started_and_retrieved(root)
    assert hits[0] != "hits 0" and hits[1] != "hits 0", hits  # the retrieves found what the tree holds
    assert "memory_plane.retrieval" in loaded and "memory_plane.episodes" in loaded  # the list is the child's
    heavy = [m for m in loaded if m.startswith(DEFERRED)]
    assert not heavy, heavy


def test_what_is_loaded_on_first_use_still_works_in_a_fresh_process(tmp_path: Path) -> None:
    # The lesson and outcome jobs are made when they first run: a plane opened in a fresh process still learns.
    root = tmp_path / "m"
    MemoryPlane.open(root).close()
    script = ("import sys\nfrom helpers import record_wechat_task\nfrom memory_plane import MemoryPlane\n"
              "with MemoryPlane.open(sys.argv[1]) as plane:\n    record_wechat_task(plane)\n"
              "    print(plane.stats()['jobs_done'], len(plane.device.entries('app_profile')))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    out = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, check=True,
                         env=env, timeout=120).stdout.split()
    assert int(out[0]) >= 2 and int(out[1]) >= 1, out  # both jobs ran, and the episode taught an app profile


IMPORT_ONLY = """
import memory_plane
from pydantic import BaseModel

def models(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from models(sub)

print("\\n".join(f"{m.__module__}.{m.__qualname__}" for m in models(BaseModel) if m.__pydantic_complete__))
"""


def test_importing_the_package_builds_no_model() -> None:
    # Every model is built when it is first used: the import itself builds no validator (nor loads what pydantic
    # needs to make one).
    built = subprocess.run([sys.executable, "-c", IMPORT_ONLY], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120).stdout.split()
    assert not built, built
