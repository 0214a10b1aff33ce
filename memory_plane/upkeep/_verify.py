"""`memplane lifecycle verify` over the whole tree: parse every file, rebuild indexes, mark expired, check
evidence and config.yaml, close crashed episodes; each finding carries its repair, made by ``repair_tree``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_plane.device_memory import DeviceMemory
from memory_plane.episodes import FAILED_PREFIX, LESSONS_JOB, OnClosed, TaskEpisodeStore, TaskEpisodeWriter
from memory_plane.lifecycle import (
    ConfigError,
    FileProblemError,
    Repair,
    UnsafePathError,
    VerifyReport,
    atomic_write,
    counted,
    dumps_compact,
    key_line,
    load_retention,
    load_yaml_file,
    odd_entries,
    read_bytes_nofollow,
    read_jsonl,
    repair_findings,
)

from .._long_term import LongTermStore
from .._session import SessionStore
from ._clock import doubt

log = logging.getLogger("memory_plane")


STAT_KEYS = ("interrupted", "transcripts_pending", "expired_marked", "excerpt_only", "refresh_candidates")
"""The stats every verify report lists, in this order (the stores fill them in)."""
REPAIRED = {"parse", "validation", "yamlbomb", "oversize", "index", "jsonl", "torn_jsonl", "missing_artifact",
            "orphanfolder", "chunk_checksum", "missing_chunk"}
"""Categories a --fix repairs: a second verify after it comes back without them."""


def verify_tree(root: Path, device: DeviceMemory, episodes: TaskEpisodeStore, long_term: LongTermStore,
                writer: TaskEpisodeWriter, *, now: datetime | None = None, session: SessionStore | None = None,
                trust_clock: bool = False) -> VerifyReport:
    """Rebuild indexes, report bad files (each with the repair it needs), mark expired, check evidence, close
    crashed episodes. Nothing else changes: ``repair_tree`` makes the repairs (``--fix``).

    On a clock it cannot believe (see ``gc_tree``) verify checks everything but marks nothing expired, and
    names the clock as a problem; ``trust_clock`` (the operator gave the time) skips that check."""
    now = now or device.clock()
    report = VerifyReport()
    if not trust_clock:
        report.clock_doubt = doubt(root, [*device.all_collections(), long_term, episodes], now)
        if report.clock_doubt is not None:
            report.add("clock", ".", None, f"{report.clock_doubt}: nothing marked expired (set the clock, or give "
                       "the time with --now TIMESTAMP)")
    _check_retention(root, report)
    _check_config(root, report)
    report.stats.update({key: [] for key in STAT_KEYS})
    # Episodes first: what they hold decides which memories lost their evidence.
    episodes.verify(report, now, on_closed=_commit_jobs(writer, report))
    for coll in [*device.all_collections(), long_term]:
        coll.verify(report, now)
    report.stats["refresh_candidates"].sort(key=lambda r: -r["success_count"])
    _check_jsonl(root, report)
    if session is not None:
        _check_chunks(session, report)
    _report_shapes(root, report, episodes.layout.folders)
    return report


def repair_tree(report: VerifyReport) -> None:
    """``--fix``: make the repairs the findings need, in the order found (torn lines before chunk checksums),
    then drop what the repairs and the index rebuilds cleared, so the second verify after it comes back clean."""
    repair_findings(report)
    report.problems = [p for p in report.problems if p.category not in REPAIRED]


def _commit_jobs(writer: TaskEpisodeWriter, report: VerifyReport) -> OnClosed:
    """What runs for an episode verify closed: the jobs its commit would have run, by the writer's runner."""

    def run(closed: Any) -> None:
        if closed.status == "interrupted":
            # A crash loses the path and the end, not what the paired calls showed of the apps:
            # those facts are learned at low confidence (and nothing else).
            learned = writer.run_now(closed, names={LESSONS_JOB}).get(LESSONS_JOB)
            if learned is not None and learned.ids:
                report.fixed.append(f"learned {counted(len(learned.ids), 'app fact')} from interrupted {closed.id}")
            return
        # Its events end with finish: what it used and what it taught.
        writer.run_now(closed)

    return run


def check_jobs(writer: TaskEpisodeWriter, episodes: TaskEpisodeStore, report: VerifyReport, limit: int) -> None:
    """Run the background jobs that never ran (a crash, an overflow), then name each job whose last run failed
    and each transcript closed with work pending: work that did not happen is a problem for cron (exit 1), with
    its reason (a lesson never learned because the disk was full must not pass as "ok")."""
    report.stats["jobs_caught_up"] = writer.catch_up(limit=limit)
    report.stats["jobs_failed"] = writer.failed_jobs()

    def in_episode(ep_id: str, name: str) -> str:
        return episodes.rel(episodes.layout.expected_path(ep_id).parent / name)

    for j in report.stats["jobs_failed"]:
        report.add("job_failed", in_episode(j["episode"], f"{FAILED_PREFIX}{j['job']}"),
                   None, f"background job {j['job']} failed at {j['failed_at'] or '?'}: {j['error'] or '?'}; "
                   f"retried {j['retry']}")
    for ep_id in report.stats.get("transcripts_pending") or []:
        report.add("pending", in_episode(ep_id, "transcript/steps.jsonl"), None,
                   "the transcript was closed with visual summaries still pending")


def _check_retention(root: Path, report: VerifyReport) -> None:
    """lifecycle/retention.yaml: readable, with durations that parse."""
    try:
        load_retention(root / "lifecycle" / "retention.yaml")
    except ConfigError as exc:
        report.add("config", "lifecycle/retention.yaml", exc.line, exc.message)


def _jsonl_files(root: Path, store_files: Iterable[Path]) -> list[Path]:
    files = [root / "lifecycle" / "tombstones.jsonl", root / "lifecycle" / "conflicts.jsonl",
             root / "session" / "events.jsonl"]
    # The session's compressed chunks: a crash mid-write (the Go agent writes them in place) tears them too.
    chunks = root / "session" / "chunks"
    if chunks.is_dir() and not chunks.is_symlink():
        files += sorted(chunks.glob("*.jsonl"))
    files += list(store_files)
    return [f for f in files if f.is_file() and not f.is_symlink()]


def _repair_jsonl(root: Path, path: Path) -> int:
    """Rewrite a jsonl file without its unreadable lines; return how many went."""
    read = read_jsonl(path)
    if not read.problems:
        return 0
    atomic_write(path, "".join(dumps_compact(r) + "\n" for r in read.records), root=root)
    return len(read.problems)


def _check_jsonl(root: Path, report: VerifyReport) -> None:
    """Every jsonl file of the tree: unreadable and torn lines named; their repair drops them."""
    for f in _jsonl_files(root, report.jsonl_files):
        read = read_jsonl(f)
        if not read.problems:
            continue
        rel = str(f.relative_to(root))
        repair = Repair("drop_lines", _line_dropper(root, f, rel))  # one rewrite for all of a file's lines
        for p in read.problems:
            report.add("torn_jsonl" if read.torn_tail else "jsonl", rel, p.line, p.message, repair)


def _line_dropper(root: Path, path: Path, rel: str) -> Callable[[VerifyReport], bool]:
    """The repair of a jsonl file with unreadable lines: rewritten without them."""

    def drop(report: VerifyReport) -> bool:
        try:
            n = _repair_jsonl(root, path)
        except UnsafePathError as exc:
            report.add("symlink", rel, None, f"not repaired: {exc.name} is a symlink (never written through)")
            return False
        except OSError as exc:
            report.add("io", rel, None, f"cannot repair: {exc.strerror or exc}")
            return False
        report.fixed.append(f"{rel}: dropped {counted(n, 'unreadable line')}")
        return True

    return drop


def _check_chunks(session: SessionStore, report: VerifyReport) -> None:
    """The session's chunk checksums; their repair records what each file holds now (made after the torn-line
    repairs, which were found first)."""
    try:
        found = session.verify_chunks()
    except OSError as exc:
        report.add("io", "session/chunks", None, f"cannot check chunks: {exc.strerror or exc}")
        return
    repair = Repair("record_chunks", _chunk_recorder(session))
    for category, rel, message in found:
        report.add(category, rel, None, message, repair)


def _chunk_recorder(session: SessionStore) -> Callable[[VerifyReport], bool]:
    """The repair of chunk files that do not hold what the index says: the index records what they hold."""

    def record(report: VerifyReport) -> bool:
        try:
            session.verify_chunks(fix=True)
        except OSError as exc:
            report.add("io", "session/chunks", None, f"cannot check chunks: {exc.strerror or exc}")
        return False  # what the repair settles is named by category (REPAIRED), as it always was

    return record


def _report_shapes(root: Path, report: VerifyReport, folder_place: Callable[[str], bool]) -> None:
    """Every symlink in the tree not reported yet (a linked folder inside an episode, a year folder ...):
    nothing reads through one, so what it points at would be silently missing; and every entry
    of the wrong shape (a folder or a named pipe where a file belongs, a file where a folder belongs)."""
    seen = {p.path for p in report.problems if p.category == "symlink"}
    links, shapes = odd_entries(root, folder_place)
    for rel, is_folder in links:
        if rel not in seen:
            seen.add(rel)
            kind = "folder" if is_folder else "file"
            report.add("symlink", rel, None, f"symlinked {kind} inside the tree (never followed: what it points "
                       "at is not memory)")
    for rel, why in shapes:
        report.add("shape", rel, None, why)


def _check_config(root: Path, report: VerifyReport) -> None:
    """config.yaml: readable YAML, a mapping, no unknown transcript keys, a valid lenses section."""
    import pydantic

    from memory_plane.episodes import TranscriptConfig

    from .._lens_settings import GeminiSettings

    path = root / "config.yaml"
    try:
        data = load_yaml_file(path)
    except FileNotFoundError:
        return
    except FileProblemError as exc:
        report.add("config", "config.yaml", exc.line, exc.message)
        return
    except OSError as exc:
        report.add("config", "config.yaml", None, f"unreadable: {exc.strerror or exc}")
        return
    if data is None:
        return
    if not isinstance(data, dict):
        report.add("config", "config.yaml", 1, "config.yaml must be a mapping of sections")
        return
    text = read_bytes_nofollow(path).decode("utf-8", "replace")  # the file just parsed: a regular file
    try:
        cfg = TranscriptConfig.model_validate(TranscriptConfig.normalize(data))
        for key in cfg.unknown_keys():
            report.add("config", "config.yaml", key_line(text, key.split(".")[0]), f"unknown key {key} (ignored)")
    except pydantic.ValidationError as exc:
        for err in exc.errors():
            where = ".".join(map(str, err.get("loc") or ()))
            report.add("config", "config.yaml", key_line(text, where.split(".")[0]), f"{where}: {err.get('msg')}")
    lenses = data.get("lenses")
    if lenses is not None:
        try:
            GeminiSettings.model_validate(lenses)
        except pydantic.ValidationError as exc:
            for err in exc.errors():
                where = ".".join(map(str, err.get("loc") or ()))
                report.add("config", "config.yaml", key_line(text, "lenses"), f"lenses.{where}: {err.get('msg')}")


__all__ = ["check_jobs", "repair_tree", "verify_tree"]
