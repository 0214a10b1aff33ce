"""Session memory: the active conversation window, its compressed chunks and summary, session freeze."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_plane.episodes import sanitize
from memory_plane.lifecycle import (
    DEFAULT_LOCK_TIMEOUT,
    INDEX_NAME,
    Clock,
    IndexFile,
    JsonlRead,
    NotAFileError,
    ParseError,
    UnsafePathError,
    UsageError,
    append_line,
    atomic_write,
    collection_lock,
    decode_utf8,
    dump_yaml,
    dumps_compact,
    field_str,
    format_entry,
    format_ts,
    guarded_makedirs,
    guarded_move,
    has_symlink,
    init_tree,
    is_safe_id,
    load_yaml,
    parse_jsonl,
    read_bytes_nofollow,
    read_jsonl,
    safe_join,
    slug_id,
    system_clock,
)

from ._inverted_index import InvertedIndex
from ._retrieve_types import MemoryHit
from ._session_text import append_to_go_chunks, summarize_events
from ._tokens import token_set

if TYPE_CHECKING:
    from ._scrub import ForgottenText

EVENT_TYPES = ("user_input", "assistant_output", "tool_result", "system_event")


@dataclass
class SessionConfig:
    """Window and compression thresholds (Go parity: 30 hot events, compress past the window)."""

    hot_events: int = 30
    compress_after: int = 50
    summaries_kept: int = 10
    archive_lines_max: int = 500
    event_chars_max: int = 4000


class SessionStore:
    """session/: events.jsonl, chunks/, summary.md and metadata.json (session id and freeze)."""

    name = "session"

    def __init__(self, root: Path, *, clock: Clock = system_clock, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 config: SessionConfig | None = None) -> None:
        self.root = Path(root)
        # A symlink in place of the folder must not make the whole plane fail: nothing is read or written
        # through it (verify names it).
        self.dir = safe_join(self.root, "session", follow_symlinks=True)
        self.chunks_dir = self.dir / "chunks"
        self.chunk_index = IndexFile(self.chunks_dir / INDEX_NAME, self.root)
        self.clock = clock
        self.lock_timeout = lock_timeout
        self.config = config or SessionConfig()

    def lock(self):  # type: ignore[no-untyped-def]
        """The session lock."""
        if self._linked():
            raise UnsafePathError("session", "the session folder is a symlink; nothing is written there")
        return collection_lock(self.dir, self.lock_timeout)

    def _linked(self) -> bool:
        """Whether the session folder is (under) a symlink: never read or written then."""
        return has_symlink(self.root, self.dir)

    def _read(self, path: Path) -> bytes:
        """A session file's bytes; NotAFileError (a FileNotFoundError) through a symlinked session folder."""
        if self._linked():
            raise NotAFileError(path, "the session folder is a symlink (never followed)")
        return read_bytes_nofollow(path)

    def _jsonl(self, path: Path) -> JsonlRead:
        """A session jsonl file as read (no records through a symlinked session folder)."""
        return JsonlRead() if self._linked() else read_jsonl(path)

    # -- metadata and freeze -------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """session/metadata.json ({} when missing or unreadable)."""
        try:
            data = json.loads(self._read(self.dir / "metadata.json"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write_metadata(self, data: dict[str, Any]) -> None:
        atomic_write(self.dir / "metadata.json", json.dumps(data, ensure_ascii=False, indent=2) + "\n",
                     root=self.root)

    def session_id(self) -> str:
        """The active session's id (created on first use)."""
        with self.lock():
            meta = self.metadata()
            if not meta.get("session_id"):
                self._open_session(meta)
                self._write_metadata(meta)
            return str(meta["session_id"])

    def _open_session(self, meta: dict[str, Any]) -> str:
        """Give the metadata a new session id and start time (the caller writes it, under the lock)."""
        now = self.clock()
        meta["session_id"] = f"sess_{now.strftime('%Y%m%d')}_{os.urandom(4).hex()}"
        meta["started_at"] = format_ts(now)
        return str(meta["session_id"])

    def frozen_block(self, session_id: str, render: Any, common: Any = None) -> tuple[str, bool, Any]:
        """The block frozen for this session, and the hits behind it; rendered and stored on the first call.

        Returns (block, reused, hits): ``hits`` is the stored ``common`` (a JSON mapping) of the first call,
        so the memories credited or blamed later are the ones the agent saw, not a fresh retrieval's.
        """
        with self.lock():  # concurrent first retrievals: one writes, the others read its block
            meta = self.metadata()
            frozen = meta.get("frozen") or {}
            if frozen.get("session_id") == session_id and isinstance(frozen.get("block"), str):
                return frozen["block"], True, frozen.get("common")
            block = render()
            meta["frozen"] = {"session_id": session_id, "block": block, "at": format_ts(self.clock()),
                              "common": common}
            self._write_metadata(meta)
            return block, False, common

    # -- events -------------------------------------------------------------------

    def append(self, type: str, content: str, *, role: str | None = None, app_name: str | None = None,
               **extra: Any) -> dict[str, Any]:
        """Append one session event; compress older events past the window."""
        if type not in EVENT_TYPES:
            raise UsageError(f"session event type must be one of {', '.join(EVENT_TYPES)}")
        # The episode sanitiser applies here too: no base64 blob (a screenshot in a tool result) and no
        # unbounded value is ever stored in the tree.
        ev = {"event_id": f"evt_{os.urandom(6).hex()}", "ts": format_ts(self.clock()), "type": type,
              "role": role or {"user_input": "user", "assistant_output": "assistant"}.get(type, "system"),
              "content": sanitize(str(content or ""), limit=self.config.event_chars_max),
              "app_name": sanitize(app_name, limit=200) if app_name is not None else None,
              **{k: sanitize(v) for k, v in extra.items()}}
        ev = {k: v for k, v in ev.items() if v is not None}
        with self.lock():
            meta = self.metadata()
            if not meta.get("session_id") or (type == "user_input" and not meta.get("root_goal")):
                # The first event opens the session; its first user input is the goal the window keeps.
                if not meta.get("session_id"):
                    self._open_session(meta)
                if type == "user_input" and not meta.get("root_goal"):
                    meta["root_goal"] = ev
                self._write_metadata(meta)
            append_line(self.dir / "events.jsonl", dumps_compact(ev), root=self.root)
            events = self._jsonl(self.dir / "events.jsonl").records
            if len(events) > self.config.compress_after:
                self._compress(events)
        return ev

    def window(self) -> list[dict[str, Any]]:
        """The hot window: the newest events, never starting inside a call and its result, with the session's
        first user goal pinned at its head when it was compressed away."""
        events = self._jsonl(self.dir / "events.jsonl").records
        window = events[self._cut(events):]
        root = self.metadata().get("root_goal")
        if isinstance(root, dict) and root.get("event_id") not in {e.get("event_id") for e in window}:
            # The goal takes the oldest event's place (the window keeps its size); a result whose call
            # that removes goes with it.
            rest = window[1:] if len(window) >= self.config.hot_events else window
            while rest and rest[0].get("type") == "tool_result":
                rest = rest[1:]
            window = [root, *rest]
        return window

    def _cut(self, events: list[dict[str, Any]]) -> int:
        """Where the hot window starts: ``hot_events`` from the end, moved back past tool results so that a
        result is never separated from the turn that asked for it (chat APIs reject an orphan result)."""
        cut = max(0, len(events) - self.config.hot_events)
        while cut > 0 and events[cut].get("type") == "tool_result":
            cut -= 1
        return cut

    def _compress(self, events: list[dict[str, Any]]) -> None:
        cut = self._cut(events)
        if cut == 0:
            return
        old, keep = events[:cut], events[cut:]
        now = self.clock()
        chunk_id = f"chunk_{now.strftime('%Y%m%d%H%M%S')}_{os.urandom(3).hex()}"
        body = "".join(dumps_compact(e) + "\n" for e in old)
        summary = summarize_events(old)
        # Chunk file and its index line first, then the shortened event log: a crash between
        # leaves the events twice (harmless), never zero times.
        atomic_write(self.chunks_dir / f"{chunk_id}.jsonl", body, root=self.root)
        apps = sorted({str(e["app_name"]) for e in old if e.get("app_name")})
        self._add_chunk({"id": chunk_id, "file": f"{chunk_id}.jsonl", "status": "active", "summary": summary,
                         "app_name": apps[0] if apps else None, "event_count": len(old),
                         "first_ts": old[0].get("ts"), "last_ts": old[-1].get("ts"),
                         "checksum": "sha256:" + hashlib.sha256(body.encode()).hexdigest()})
        atomic_write(self.dir / "events.jsonl", "".join(dumps_compact(e) + "\n" for e in keep), root=self.root)
        self._write_summary()

    def _index_text(self) -> str | None:
        """The chunk index when it is in the Go layout ({version, updated_at, chunks: [...]}); None when it is
        missing or in our one-line-per-entry layout (told by its first line, without a parse)."""
        try:
            text = decode_utf8(self._read(self.chunk_index.path), self.chunk_index.path)
        except FileNotFoundError:
            return None
        first = next((ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
        return None if not first or first.startswith("- ") else text

    def _go_layout(self) -> tuple[str, dict[str, Any]] | None:
        """The Go-layout chunk index and its parse, or None (see ``_index_text``); ParseError when unreadable."""
        text = self._index_text()
        if text is None:
            return None
        data = load_yaml(text, self.chunk_index.path)
        if not isinstance(data, dict) or not isinstance(data.get("chunks", []), (list, type(None))):
            raise ParseError(self.chunk_index.path, 1, "chunk index must hold a 'chunks' list")
        return text, data

    def _add_chunk(self, entry: dict[str, Any]) -> None:
        """Add one chunk to the index (caller holds the lock), in the layout the file already has."""
        entry = {k: v for k, v in entry.items() if v is not None}
        text = self._index_text()
        if text is None:
            self.chunk_index.append(entry)
            return
        # A Go-written index is one YAML document: a line appended after it would make it invalid YAML and
        # drop every older entry on the next read. The entry goes inside the document instead.
        now = format_ts(self.clock())
        fast = append_to_go_chunks(text, format_entry(entry), now)
        if fast is not None:
            atomic_write(self.chunk_index.path, fast, root=self.root)
            return
        try:
            go = self._go_layout()
        except ParseError:
            go = None
        if go is None:
            # An index nobody can parse: add the line (losing nothing) and let verify report the file.
            self.chunk_index.append(entry)
            return
        text, data = go
        data["chunks"] = [*(data.get("chunks") or []), entry]
        data["updated_at"] = now
        data.setdefault("version", 1)
        atomic_write(self.chunk_index.path, dump_yaml(data, text), root=self.root)

    def chunk_events(self, entry: dict[str, Any]) -> list[dict[str, Any]]:
        """The events a chunk holds ([] when its file is missing or its name leaves the chunks folder)."""
        name = field_str(entry.get("file")) or f"{entry.get('id')}.jsonl"
        try:
            path = safe_join(self.chunks_dir, name)
        except ValueError:
            return []
        return self._jsonl(path).records

    def verify_chunks(self, *, fix: bool = False) -> list[tuple[str, str, str]]:
        """Chunk files that do not hold what their index line says (checksum, event count), as
        (category, relative path, message); with fix the index records what the file holds now."""
        if self._linked():
            return []  # nothing is read through a symlinked session folder (verify names the link)
        if not fix:
            # Reporting reads only (a read-only tree is checked too): chunk files and index lines are written
            # whole, the chunk before its line, so a read beside a compression sees no half state.
            return self._check_chunks(False)
        with self.lock():
            return self._check_chunks(True)

    def _check_chunks(self, fix: bool) -> list[tuple[str, str, str]]:
        out: list[tuple[str, str, str]] = []
        # The caller holds the session lock.
        try:
            go = self._go_layout()
        except ParseError as exc:
            return [("chunk_index", "session/chunks/index.yaml", exc.message)]
        entries = [dict(e) for e in (go[1].get("chunks") or [] if go else self.chunk_index.read().entries)
                   if isinstance(e, dict)]
        changed = False
        for e in entries:
            if field_str(e.get("status")) == "missing":
                continue  # a file already found gone (and recorded so by a fix)
            name = field_str(e.get("file")) or f"{e.get('id')}.jsonl"
            rel = f"session/chunks/{name}"
            try:
                data = self._read(safe_join(self.chunks_dir, name))
            except ValueError:
                out.append(("unsafe_ref", "session/chunks/index.yaml", f"chunk {e.get('id')}: file {name!r} "
                            "leaves the chunks folder"))
                continue
            except OSError:
                out.append(("missing_chunk", rel, f"chunk {e.get('id')} is in the index, its file is not"))
                if fix:
                    e["status"] = "missing"  # recall skips it; the line stays, so nothing is silently lost
                    changed = True
                continue
            want = field_str(e.get("checksum"))
            got = "sha256:" + hashlib.sha256(data).hexdigest()
            if want and want != got:
                lines = data.count(b"\n")
                out.append(("chunk_checksum", rel, f"holds {lines} lines, not what its index line says "
                            f"(checksum {want[:19]}…, {e.get('event_count')} events)"))
                if fix:
                    e["checksum"] = got
                    e["event_count"] = len(parse_jsonl(data, rel).records)
                    changed = True
        if changed and go is not None:
            text, doc = go
            doc["chunks"] = entries
            doc["updated_at"] = format_ts(self.clock())
            atomic_write(self.chunk_index.path, dump_yaml(doc, text), root=self.root)
        elif changed:
            self.chunk_index.write(entries)
        return out

    def _write_summary(self) -> None:
        chunks = self.chunk_index.read().entries
        newest = chunks[-self.config.summaries_kept:]
        lines = ["# Session Summary", "", "Compressed older parts of the active session, oldest first.", ""]
        lines += [f"- [{c['id']}] {c.get('summary', '')}" for c in newest]
        atomic_write(self.dir / "summary.md", "\n".join(lines) + "\n", root=self.root)
        older = chunks[: -self.config.summaries_kept]
        if older:
            arch = [f"- [{c['id']}] {c.get('summary', '')}" for c in older][-self.config.archive_lines_max:]
            atomic_write(self.dir / "summary_archive.md", "# Older session summaries\n\n" + "\n".join(arch) + "\n",
                         root=self.root)

    def summary(self) -> str:
        """summary.md of the active session ('' when none)."""
        try:
            return self._read(self.dir / "summary.md").decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def summary_lines(self, limit: int = 5, max_chars: int = 600) -> list[str]:
        """The newest lines of the session summary (what was compressed away), bounded for the prompt."""
        lines = [ln[2:].strip() for ln in self.summary().splitlines() if ln.startswith("- ")]
        out: list[str] = []
        used = 0
        for line in reversed(lines[-limit:]):
            if used + len(line) > max_chars:
                break
            out.insert(0, line)
            used += len(line)
        return out

    def recall_session_chunks(self, query: str, limit: int = 3) -> list[MemoryHit]:
        """Chunks of the active session matching a query (closed sessions are never searched)."""
        chunks = self.chunk_index.read().entries
        if not chunks:
            return []
        inv = InvertedIndex.build(str(c.get("summary", "")) for c in chunks)
        out: list[MemoryHit] = []
        for i, score in inv.search(token_set(query), len(chunks)):  # all, best first: inactive ones drop out
            c = chunks[i]
            if field_str(c.get("status")) not in (None, "active"):
                continue  # e.g. "missing": its file is gone (verify --fix says so)
            if len(out) >= limit:
                break
            out.append(MemoryHit(id=c["id"], type="session_chunk", score=round(score, 4), confidence=1.0,
                                 text=str(c.get("summary", "")), path=f"session/chunks/{c.get('file', '')}"))
        return out

    def close(self) -> str | None:
        """Move the active session into session_archive/<id>/ and start a fresh one; return the id."""
        with self.lock():
            meta = self.metadata()
            sid = meta.get("session_id")
            if not sid:
                if not (self.dir / "events.jsonl").is_file() or not self._jsonl(self.dir / "events.jsonl").records:
                    return None  # nothing was said: there is no session to archive
                # Events from before sessions were opened on the first append: archive them under a new id.
                sid = self._open_session(meta)
                self._write_metadata(meta)
            # Named by the id close() returns, as the Go agent names it; an id a hand edit made unsafe is slugged.
            target = safe_join(self.root, "session_archive", str(sid) if is_safe_id(sid) else slug_id(str(sid)))
            guarded_makedirs(self.root, target)
            for name in ("events.jsonl", "summary.md", "summary_archive.md", "metadata.json", "chunks"):
                src = self.dir / name
                if src.exists() or src.is_symlink():
                    # By folder descriptors: a session_archive/ swapped for a link never takes the session out.
                    guarded_move(self.root, src, target / name, replace=True)
        init_tree(self.root)
        return str(sid)

    def scrub(self, texts: Iterable[str]) -> int:
        """Replace forgotten text in the session files with ``[forgotten]``; return files changed."""
        from ._scrub import ForgottenText

        return len(self.scrub_with(ForgottenText(texts)))

    def scrub_with(self, matcher: ForgottenText) -> list[str]:
        """Replace what the matcher names in the session files (under the session lock); the files changed,
        relative to the root."""
        if matcher.empty or self._linked() or not self.dir.is_dir():
            return []  # no session folder (a symlink or a file in its place): no session text to scrub
        changed: list[str] = []
        scrubbed_chunks = False
        with self.lock():
            files = [self.dir / "events.jsonl", self.dir / "summary.md", self.dir / "summary_archive.md",
                     self.dir / "metadata.json", self.chunks_dir / INDEX_NAME]
            files += sorted(self.chunks_dir.glob("*.jsonl"))
            for f in files:
                if matcher.scrub_file(f, self.root):
                    changed.append(f"session/{f.relative_to(self.dir).as_posix()}")
                    scrubbed_chunks = scrubbed_chunks or (f.suffix == ".jsonl" and f.parent == self.chunks_dir)
            if scrubbed_chunks:
                self._check_chunks(fix=True)  # the index records the scrubbed files' new checksums
        return changed
