"""Importers of public phone-task data into episodes (and the lessons extracted from them)."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_plane.episodes import LESSONS_JOB, EpisodeRecorder, TaskEpisodeWriter, episode_jobs
from memory_plane.lifecycle import UsageError

from .retrieval import goal_facts, parse_query

log = logging.getLogger("memory_plane")


@dataclass
class ImportReport:
    """What an import did."""

    episodes: int = 0
    steps: int = 0
    skipped_actions: int = 0
    skipped_lines: int = 0
    skipped_lines_by_reason: dict[str, int] = field(default_factory=dict)
    already_imported: int = 0
    items_created: dict[str, int] = field(default_factory=dict)
    items_updated: dict[str, int] = field(default_factory=dict)
    tombstoned: int = 0
    seconds: float = 0.0
    interrupted: bool = False  # Ctrl-C stopped it between two episodes; running it again imports the rest

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``imported``: episodes imported by this run; ``skipped``: lines it did not import, already
        imported or unreadable)."""
        return {**self.__dict__, "imported": self.episodes, "skipped": self.already_imported + self.skipped_lines,
                "duplicates_avoided": sum(self.items_updated.values()),
                "episodes_per_s": round(self.episodes / self.seconds, 1) if self.seconds else None}


def androidcontrol_action(action: Any) -> tuple[str, dict[str, Any]] | None:
    """Map one AndroidControl action to (tool, input); None for an empty or unparsable action."""
    if not isinstance(action, dict):
        return None
    kind = action.get("action")

    def point(key: str) -> list[float] | None:
        v = action.get(key)
        if isinstance(v, (list, tuple)) and len(v) >= 2 and all(isinstance(x, (int, float)) for x in v[:2]):
            return [float(v[0]), float(v[1])]
        return None

    if kind == "click" and (p := point("coordinate")):
        return "tap", {"x": p[0], "y": p[1]}
    if kind == "long_press" and (p := point("coordinate")):
        return "long_press", {"x": p[0], "y": p[1], "seconds": action.get("time", 1)}
    if kind == "swipe":
        start, end = point("coordinate"), point("coordinate2")
        if start and end:
            return "swipe", {"start": start, "end": end}
        if isinstance(action.get("direction"), str):
            return "swipe", {"direction": action["direction"]}
        return None
    if kind == "type" and isinstance(action.get("text"), str) and action["text"].strip():
        return "keyboard_text", {"text": action["text"]}
    if kind == "open":
        name = action.get("app_name") or action.get("text")
        return ("launch_app", {"app": name}) if isinstance(name, str) and name.strip() else None
    if kind == "wait":
        t = action.get("time", 1)
        return "wait", {"seconds": t if isinstance(t, (int, float)) else 1}
    if kind == "system_button" and isinstance(action.get("button"), str):
        return "system_button", {"button": action["button"]}
    return None


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except ValueError:
                yield n, None


def source_episode_id(data: dict[str, Any]) -> str:
    """A stable episode id for one source episode: the same line imported twice is the same episode.

    From the source's own id when it has one (``episode_id``), else from its goal and steps. The date part
    is fixed: these tasks did not happen on this device, and a re-import on another day must match.
    """
    import hashlib

    key = data.get("episode_id")
    basis = f"androidcontrol:id:{key}" if isinstance(key, (str, int)) and str(key) else "androidcontrol:" + json.dumps(
        {"goal": data.get("goal"), "steps": data.get("steps")}, sort_keys=True, ensure_ascii=False, default=str)
    return f"ep_{IMPORT_DATE}_{hashlib.sha256(basis.encode()).hexdigest()[:12]}"


IMPORT_DATE = "20000101"  # the date part of imported episode ids (their folder is episodes/2000/)


def _count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


@contextmanager
def _interrupt_between_episodes() -> Iterator[Callable[[], bool]]:
    """Hold a Ctrl-C (SIGINT) until the episode being imported is committed: the returned function says
    whether one came. A second Ctrl-C interrupts at once. Outside the main thread (no signal handlers there)
    nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    asked: list[bool] = []
    previous = signal.getsignal(signal.SIGINT)

    def hold(signum: int, frame: Any) -> None:
        if asked:
            raise KeyboardInterrupt
        asked.append(True)

    signal.signal(signal.SIGINT, hold)
    try:
        yield lambda: bool(asked)
    finally:
        signal.signal(signal.SIGINT, previous)


def import_androidcontrol(plane: Any, path: str | Path, *, limit: int | None = None,
                          progress: Callable[[int, int], None] | None = None) -> ImportReport:
    """Turn an AndroidControl jsonl export into committed episodes and run extraction on each.

    Importing the same file again adds nothing (stable episode ids); a file with no readable episode
    raises UsageError naming what was wrong with its lines. A Ctrl-C (in the main thread) stops the import
    after the episode being imported, and the report says ``interrupted`` with what was imported by then.
    """
    src = Path(path)
    if src.is_dir():
        raise UsageError(f"{src} is a folder; give the AndroidControl .jsonl file inside it")
    if not src.is_file():
        raise UsageError(f"no such file: {src}")
    rep = ImportReport()
    t0 = time.perf_counter()
    total = _count_lines(src) if progress is not None else 0
    known = {str(e["id"]) for e in plane.episodes.entries()}
    # The writer's own runner, run here and now: an import must not overflow the runtime's bounded queue.
    writer = TaskEpisodeWriter(plane.episodes, jobs=episode_jobs(plane.device, plane.episodes))
    done = 0

    def skip(reason: str, n: int, why: str) -> None:
        rep.skipped_lines += 1
        rep.skipped_lines_by_reason[reason] = rep.skipped_lines_by_reason.get(reason, 0) + 1
        log.warning("%s:%d: %s; skipped", src, n, why)

    with _interrupt_between_episodes() as interrupted:
        for n, data in _lines(src):
            if interrupted():
                rep.interrupted = True
                break
            done += 1
            if progress is not None:
                progress(done, total)
            if limit is not None and rep.episodes >= limit:
                break
            if data is None:
                skip("not_json", n, "not a JSON line")
                continue
            valid = (isinstance(data, dict) and isinstance(data.get("goal"), str)
                     and isinstance(data.get("steps"), list))
            if not valid:
                skip("not_an_episode", n, "not an AndroidControl episode (needs 'goal' and a list of 'steps')")
                continue
            ep_id = source_episode_id(data)
            if ep_id in known:
                rep.already_imported += 1
                continue
            _import_one(plane, writer, data, ep_id, rep)
            known.add(ep_id)
        rep.interrupted = rep.interrupted or interrupted()
    rep.seconds = round(time.perf_counter() - t0, 3)
    if rep.episodes == 0 and rep.already_imported == 0 and not rep.interrupted:
        reasons = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(rep.skipped_lines_by_reason.items()))
        hint = " (it looks like CSV; this importer reads JSON lines)" if _looks_like_csv(src) else ""
        raise UsageError(f"no AndroidControl episode in {src}: {reasons or 'the file is empty'}{hint}")
    return rep


def _looks_like_csv(path: Path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as fh:
        first = fh.readline()
    return "," in first and not first.lstrip().startswith(("{", "["))


def _import_one(plane: Any, writer: TaskEpisodeWriter, data: dict[str, Any], ep_id: str, rep: ImportReport) -> None:
    goal = data["goal"]
    q = parse_query(goal, plane.device.catalog)
    rec = EpisodeRecorder(plane.episodes, goal, normalized_goal=goal_facts(q, plane.device.catalog),
                          clock=plane.clock, tags=["import:androidcontrol"], episode_id=ep_id)
    app: str | None = None
    for step in data["steps"]:
        mapped = androidcontrol_action(step.get("action_content") if isinstance(step, dict) else None)
        if mapped is None:
            rep.skipped_actions += 1
            continue
        tool, tool_input = mapped
        content = step.get("step_instruction") if isinstance(step.get("step_instruction"), str) else None
        rec.tool_call(tool, tool_input, content=content)
        if tool == "launch_app":
            app = str(tool_input["app"])
        rec.tool_result(tool, output="ok", observed_state={"app": app} if app else None)
        rep.steps += 1
    ok = bool(data.get("is_successful", True))
    # A person's demonstration the data set marks successful is evidence of completion, as a verifier is: its
    # procedures are verified, not taught as claimed successes.
    ep = rec.finish(success=ok, failure_phase=None if ok else "unknown",
                    completion_reason="a person's demonstration the data set marks successful" if ok else None)
    ep.status = "active"
    plane.episodes.write(ep)
    ep.committed()
    # Lessons only, as the import always did: the outcome job is left to verify's catch-up.
    res = writer.run_now(ep, names={LESSONS_JOB}, strict=True)[LESSONS_JOB]
    for k, v in res.created.items():
        rep.items_created[k] = rep.items_created.get(k, 0) + v
    for k, v in res.updated.items():
        rep.items_updated[k] = rep.items_updated.get(k, 0) + v
    rep.tombstoned += res.skipped_tombstoned
    rep.episodes += 1
