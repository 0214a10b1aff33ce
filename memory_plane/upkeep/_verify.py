"""`memplane lifecycle verify` over the whole tree: parse every file, rebuild indexes, mark expired, check
evidence and config.yaml, close crashed episodes; repair only with fix."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from device_memory import DeviceMemory
from episodes import EVENTS_FILE, LessonExtractor, OutcomeUpdater, TaskEpisodeStore
from lifecycle import (
    Collection,
    ConfigError,
    FileProblemError,
    VerifyReport,
    atomic_write,
    dumps_compact,
    format_ts,
    key_line,
    load_retention,
    load_yaml_file,
    read_jsonl,
    safe_join,
    verify_collections,
)

from .._long_term import LongTermStore
from .._session import SessionStore

log = logging.getLogger("memory_plane")


def _jsonl_files(root: Path, episode_dirs: Iterable[Path]) -> list[Path]:
    files = [root / "lifecycle" / "tombstones.jsonl", root / "lifecycle" / "conflicts.jsonl",
             root / "session" / "events.jsonl"]
    # The session's compressed chunks: a crash mid-write (the Go agent writes them in place) tears them too.
    chunks = root / "session" / "chunks"
    if chunks.is_dir() and not chunks.is_symlink():
        files += sorted(chunks.glob("*.jsonl"))
    files += [d / EVENTS_FILE for d in episode_dirs]
    return [f for f in files if f.is_file() and not f.is_symlink()]


def _repair_jsonl(path: Path) -> int:
    """Rewrite a jsonl file without its unreadable lines; return how many went."""
    read = read_jsonl(path)
    if not read.problems:
        return 0
    atomic_write(path, "".join(dumps_compact(r) + "\n" for r in read.records))
    return len(read.problems)


def verify_tree(root: Path, device: DeviceMemory, episodes: TaskEpisodeStore, long_term: LongTermStore,
                *, fix: bool = False, now: datetime | None = None,
                extra: Iterable[Collection] = (), session: SessionStore | None = None) -> VerifyReport:
    """Rebuild indexes, report bad files, mark expired, check evidence, close crashed episodes."""
    now = now or device.clock()
    report = VerifyReport()
    try:
        load_retention(root / "lifecycle" / "retention.yaml")
    except ConfigError as exc:
        report.add("config", "lifecycle/retention.yaml", exc.line, exc.message)
    _check_config(root, report)
    interrupted: list[str] = []
    traced: set[str] = set()

    episode_dirs: list[Path] = []

    def check_episode(item: Any) -> None:
        ep = item.record
        d = item.path.parent
        episode_dirs.append(d)
        if (d / EVENTS_FILE).exists():
            traced.add(ep.id)
        # Closing a dead recording is safe without --fix: it only adds what the crash lost; the
        # index rebuild that follows sees the rewritten file (its stat changed) and indexes it.
        dead = ep.status == "recording" and not episodes.is_recording_live(ep.id)
        try:
            closed = episodes.mark_interrupted(ep, now) if dead else None
            if closed is not None and closed.status == "interrupted":
                interrupted.append(ep.id)
                report.fixed.append(f"marked {ep.id} interrupted")
                # A crash loses the path and the end, not what the paired calls showed of the apps:
                # those facts are learned at low confidence (and nothing else).
                try:
                    learned = LessonExtractor(device, episodes)(closed)
                except Exception as exc:  # a lesson is never worth a failed verify
                    log.error("verify: lessons of interrupted %s not extracted: %s", ep.id, exc)
                else:
                    if learned.ids:
                        report.fixed.append(f"learned {len(learned.ids)} app facts from interrupted {ep.id}")
            elif closed is not None:  # its events end with finish: the task ended, only the commit did not
                report.fixed.append(f"completed {ep.id} from its finish event (its commit never happened)")
                # The jobs its commit would have run: what it used and what it taught.
                for job in (OutcomeUpdater(device, episodes), LessonExtractor(device, episodes)):
                    try:
                        job(closed)
                    except Exception as exc:  # a lesson is never worth a failed verify
                        log.error("verify: %s of completed %s failed: %s", job.__name__, ep.id, exc)
        except OSError as exc:
            report.add("io", episodes.rel(item.path), None, f"cannot mark interrupted: {exc.strerror or exc}")
        if ep.traceability in ("summary_only", "excerpt_only"):
            return
        for ev in read_jsonl(d / EVENTS_FILE).records:
            ref = ev.get("screenshot_ref")
            if not isinstance(ref, str) or not ref:
                continue
            try:
                target = safe_join(d, ref)
            except ValueError:
                report.add("unsafe_ref", episodes.rel(d / EVENTS_FILE), None,
                           f"screenshot_ref {ref!r} leaves the episode")
                continue
            if not target.exists():
                report.add("missing_artifact", episodes.rel(d), None, f"{ref} referenced by {ev.get('event_id')}")
                if fix:
                    ep.traceability = "excerpt_only"
                    try:
                        episodes.write(ep)
                    except OSError as exc:
                        report.add("io", episodes.rel(item.path), None, f"cannot write: {exc.strerror or exc}")
                        break
                    report.fixed.append(f"{ep.id}: traceability excerpt_only (artifacts missing)")
                break

    # Lifecycle transitions, decided from the records verify parses anyway (one pass over the files).
    expired: list[str] = []
    excerpt: list[str] = []
    refresh: list[dict[str, Any]] = []
    pending: dict[int, tuple[Any, dict[str, Any]]] = {}
    transition_colls = {id(c) for c in [*device.collections.values(), long_term, device.profiles]}

    def decide(coll: Any, item: Any) -> None:
        rec = item.record
        if coll is episodes:
            check_episode(item)
            return
        if id(coll) not in transition_colls or rec is None:
            return
        changes: dict[str, Any] = {}
        if rec.status == "active" and rec.is_expired(now):
            changes["status"] = "expired"
            expired.append(rec.id)
        if rec.is_expired(now) and rec.status in ("active", "expired") and getattr(rec, "success_count", 0) > 0:
            # Expired, yet it helped tasks succeed: worth re-validating in a background refresh.
            refresh.append({"id": rec.id, "type": rec.type, "success_count": rec.success_count,
                            "expires_at": rec.expires_at if isinstance(rec.expires_at, str) or rec.expires_at is None
                            else format_ts(rec.expires_at)})
        sources = [r.id for r in getattr(rec, "evidence_refs", []) if r.type == "episode"]
        # A long-term memory names where it came from in source_refs; an episode among them is evidence too.
        sources += [str(x) for x in getattr(rec, "source_refs", []) or [] if str(x).startswith("ep_")]
        trace = getattr(rec, "traceability", None) or (rec.model_extra or {}).get("traceability")
        if sources and trace != "excerpt_only" and all(x not in traced for x in sources):
            changes["traceability"] = "excerpt_only"  # every episode it came from is gone or trimmed
            excerpt.append(rec.id)
        if changes:
            pending.setdefault(id(coll), (coll, {}))[1][rec.id] = changes

    # Episodes first: what they hold decides which memories lost their evidence.
    collections: list[Any] = [episodes, *device.all_collections(), long_term, *extra]
    verify_collections(root, collections, fix=fix, report=report, on_item=decide)
    report.stats["interrupted"] = interrupted
    # Transcripts closed with visual summaries still pending (a bounded close on a degraded API).
    unfinished: list[str] = []
    for d in episode_dirs:
        steps_file = d / "transcript" / "steps.jsonl"
        if steps_file.is_file() and any(r.get("kind") == "close" and r.get("pending")
                                         for r in read_jsonl(steps_file).records):
            unfinished.append(d.name)
    report.stats["transcripts_pending"] = unfinished
    for coll, changes in pending.values():
        try:
            if coll is device.profiles:
                # Device profiles expire like every other memory (one file per device, no index).
                for prof_id, ch in changes.items():
                    dev_id = next((p.device_id or "default" for p in device.profiles.all() if p.id == prof_id), None)
                    if dev_id:
                        device.profiles.update(dev_id, lambda cur, ch=ch: _setter(ch)(cur) if cur else None)
                continue
            coll.update_many({item_id: _setter(ch) for item_id, ch in changes.items()})
        except OSError as exc:  # a read-only or full tree: reported, the rest of verify still runs
            report.add("io", str(Path(coll.dir).relative_to(root)), None,
                       f"cannot mark {len(changes)} items expired/excerpt_only: {exc.strerror or exc}")
    report.stats["expired_marked"] = expired
    report.stats["excerpt_only"] = excerpt
    report.stats["refresh_candidates"] = sorted(refresh, key=lambda r: -r["success_count"])

    for f in _jsonl_files(root, episode_dirs):
        read = read_jsonl(f)
        if read.problems:
            rel = str(f.relative_to(root))
            for p in read.problems:
                report.add("torn_jsonl" if read.torn_tail else "jsonl", rel, p.line, p.message)
            if fix:
                try:
                    n = _repair_jsonl(f)
                except OSError as exc:
                    report.add("io", rel, None, f"cannot repair: {exc.strerror or exc}")
                    continue
                report.fixed.append(f"{rel}: dropped {n} unreadable lines")
    if session is not None:
        # After the torn-line repair above, so a fix records the checksum of what the chunk file now holds.
        try:
            for category, rel, message in session.verify_chunks(fix=fix):
                report.add(category, rel, None, message)
        except OSError as exc:
            report.add("io", "session/chunks", None, f"cannot check chunks: {exc.strerror or exc}")
    _report_symlinks(root, report)
    if fix:
        # The second verify after --fix must be clean: drop the findings that were repaired.
        repaired = {"parse", "validation", "yamlbomb", "oversize", "index", "jsonl", "torn_jsonl",
                    "missing_artifact", "orphanfolder", "chunk_checksum", "missing_chunk"}
        report.problems = [p for p in report.problems if p.category not in repaired]
    return report


def _report_symlinks(root: Path, report: VerifyReport) -> None:
    """Every symlink in the tree not reported yet (a linked folder inside an episode, a year folder ...):
    nothing reads through one, so what it points at would be silently missing (issue 27)."""
    seen = {p.path for p in report.problems if p.category == "symlink"}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if os.path.basename(dirpath) == ".cache":
            dirnames[:] = []
            continue
        for name in (*dirnames, *filenames):
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                continue
            rel = os.path.relpath(full, root)
            if rel not in seen:
                seen.add(rel)
                kind = "folder" if name in dirnames else "file"
                report.add("symlink", rel, None, f"symlinked {kind} inside the tree (never followed: what it points "
                           "at is not memory)")


def _check_config(root: Path, report: VerifyReport) -> None:
    """config.yaml: readable YAML, a mapping, no unknown transcript keys, a valid lenses section."""
    import pydantic

    from episodes.transcript import TranscriptConfig

    from .._lenses import GeminiSettings

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
    text = path.read_text("utf-8", "replace")
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


def _setter(changes: dict[str, Any]) -> Any:
    def change(cur: Any) -> Any:
        for k, v in changes.items():
            setattr(cur, k, v)
        return cur

    return change


# -- GC -----------------------------------------------------------------------------


__all__ = ["verify_tree"]
