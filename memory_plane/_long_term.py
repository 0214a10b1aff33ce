"""Long-term memory: what the user or the model chose to remember, as markdown with frontmatter."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from lifecycle import (
    DEFAULT_LOCK_TIMEOUT,
    INDEX_NAME,
    Clock,
    ConflictLog,
    FileProblemError,
    IndexFile,
    ItemRead,
    LockTimeout,
    Record,
    Retention,
    StorageError,
    StrList,
    TombstoneLog,
    UsageError,
    atomic_write,
    collection_lock,
    content_hash,
    entries_by_file,
    field_num,
    field_str,
    field_text,
    field_words,
    format_ts,
    fresh_items,
    has_symlink,
    index_writes,
    indexed_entries,
    load_retention,
    parse_duration,
    parse_frontmatter,
    read_bytes_nofollow,
    read_item,
    read_item_text,
    render_frontmatter,
    safe_join,
    system_clock,
    validate_record,
)

from ._contradiction import contradicts, meaning_length
from ._freshness import FileState, file_state, mtime_ns
from ._inverted_index import InvertedIndex
from ._retrieve_types import MemoryHit
from ._tokens import token_set

LongTermType = Literal["profile", "rule", "preference", "procedure", "fact"]
LONG_TERM_TYPES: tuple[str, ...] = ("profile", "rule", "preference", "procedure", "fact")
PROFILE_TYPES: tuple[str, ...] = ("profile", "rule", "preference")
PRIORITY = {"rule": 90, "preference": 80, "profile": 70, "procedure": 60, "fact": 50}
GENERIC_ENTITIES = frozenset({"user", "me", "my", "you", "i", "我", "用户"})
MAX_CONTENT = 4000
SOURCES: tuple[str, ...] = ("user", "model")
"""Who saved a memory: ``user`` (the CLI, the API by default) or ``model`` (the model's save_memory tool)."""
USER_WORD_TYPES: tuple[str, ...] = ("rule", "preference")
"""Types where the user's word stands: the model's save_memory never supersedes the user's."""


def is_users(mem: LongTermMemory) -> bool:
    """Whether a memory counts as the user's own word (a file without ``source``, written before the field
    existed, counts as the user's: letting the model retire a user's rule is the worse mistake)."""
    return mem.source != "model"


class LongTermMemory(Record):
    """One long-term memory (the body of its markdown file is the content)."""

    type: LongTermType = "fact"  # type: ignore[assignment]
    priority: int = 50
    time_scope: str | None = None
    traceability: str = "full"
    tags: StrList = Field(default_factory=list)
    entities: StrList = Field(default_factory=list)
    source_refs: StrList = Field(default_factory=list)
    lesson_key: str | None = None
    source: str | None = None  # user | model (None: written before sources were recorded; counts as the user's)
    content: str = Field(default="", exclude=True)

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, v: Any) -> Any:
        # A hand-typed "Model " is the model; anything else a person wrote counts as the user's (see is_users).
        return v.strip().lower() or None if isinstance(v, str) else v

    def to_frontmatter(self) -> dict[str, Any]:
        """The frontmatter mapping (content lives in the body)."""
        return self.to_yaml_dict()


@dataclass
class SaveResult:
    """Answer of save_memory: the id and saved | ignored | superseded | conflicted."""

    id: str
    status: str
    reason: str | None = None
    superseded: list[str] | None = None
    # conflicted: the user's own memories this model save contradicts (they stay active, it does not).
    conflicts_with: list[str] | None = None
    note: str | None = None  # e.g. the text was cut to MAX_CONTENT characters


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _body(mem: LongTermMemory) -> str:
    title = mem.title or mem.content.split("\n", 1)[0][:80]
    return f"\n# {title}\n\n{mem.content.strip()}\n"


def _content_of(body: str) -> tuple[str | None, str]:
    text = body.strip("\n")
    m = re.match(r"#\s+(.*)\n", text + "\n")
    if m:
        title = m.group(1).strip()
        rest = text[m.end():].strip("\n") if m.end() <= len(text) else ""
        return title, rest.strip()
    return None, text.strip()


class LongTermStore:
    """long_term/memories/<id>.md plus index.yaml and profile.md."""

    name = "long_term"

    def __init__(self, root: Path, *, clock: Clock = system_clock, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 retention: Retention | None = None) -> None:
        self.root = Path(root)
        self.retention = retention or load_retention(None)
        self.dir = safe_join(self.root, "long_term", follow_symlinks=True)
        self.mem_dir = self.dir / "memories"
        self.index = IndexFile(self.dir / INDEX_NAME)
        self.clock = clock
        self.lock_timeout = lock_timeout
        self.tombstones = TombstoneLog(self.root, clock=clock, lock_timeout=lock_timeout)
        self.conflicts = ConflictLog(self.root, clock=clock, lock_timeout=lock_timeout)
        self._search_cache: tuple[Any, list[dict[str, Any]], InvertedIndex] | None = None

    def lock(self):  # type: ignore[no-untyped-def]
        """The long-term collection lock."""
        return collection_lock(self.dir, self.lock_timeout)

    def path_for(self, mem_id: str) -> Path:
        """The file of a memory."""
        return safe_join(self.root, "long_term", "memories", f"{mem_id}.md")

    # -- reading ----------------------------------------------------------------

    def load_path(self, path: Path) -> LongTermMemory:
        """Load one memory file (LF or CRLF)."""
        text = read_item_text(path)
        meta, body = parse_frontmatter(text, path)
        title, content = _content_of(body)
        mem = validate_record(LongTermMemory, meta, path, text)
        mem.content = content
        if not mem.title and title:
            mem.title = title
        return mem

    def get(self, mem_id: str) -> LongTermMemory | None:
        """A memory by id, or None."""
        try:
            return self.load_path(self.path_for(mem_id))
        except FileNotFoundError:
            return None

    def renamed_path(self, mem_id: str) -> Path | None:
        """The memory file whose frontmatter ``id:`` is this id, whatever its name (a scan: a miss only)."""
        if has_symlink(self.root, self.mem_dir) or not re.fullmatch(r"[a-z0-9_-]{1,80}", mem_id):
            return None
        pat = re.compile(rb"^id:\s*[\"']?" + re.escape(mem_id.encode()) + rb"[\"']?\s*$", re.MULTILINE)
        for name in sorted(self.item_names()):
            try:
                head = read_bytes_nofollow(self.dir / name, 4096)
            except OSError:
                continue
            if pat.search(head):
                return self.dir / name
        return None

    def iter_items(self) -> Iterator[ItemRead[LongTermMemory]]:
        """Every memory file (symlinks skipped)."""
        if has_symlink(self.root, self.mem_dir):
            return
        try:
            with os.scandir(self.mem_dir) as it:
                files = sorted(Path(e.path) for e in it if e.name.endswith(".md") and not e.name.startswith(".")
                               and e.is_file(follow_symlinks=False))
        except FileNotFoundError:
            return
        for p in files:
            yield read_item(p, self.load_path)

    def symlinks(self) -> list[Path]:
        """Symlinks among memory files (never followed)."""
        if has_symlink(self.root, self.mem_dir):
            return [self.mem_dir]
        try:
            with os.scandir(self.mem_dir) as it:
                return [Path(e.path) for e in it if e.is_symlink()]
        except FileNotFoundError:
            return []

    def entries(self) -> list[dict[str, Any]]:
        """Index entries (rebuilt when the index is missing)."""
        if has_symlink(self.root, self.mem_dir):
            return []
        return indexed_entries(self)

    def stamp_dirs(self) -> list[Path]:
        """The folder whose mtime changes when a memory file appears or goes (index checks)."""
        return [self.mem_dir]

    def entry_for(self, mem: LongTermMemory) -> dict[str, Any]:
        """The index line of a memory."""
        e = {
            "id": mem.id, "type": mem.type, "status": mem.status, "title": mem.title, "source": mem.source,
            "priority": mem.priority,
            "confidence": round(mem.confidence, 3), "tags": mem.tags[:8] or None, "entities": mem.entities[:8] or None,
            "expires_at": mem.expires_at if isinstance(mem.expires_at, str) or mem.expires_at is None
            else format_ts(mem.expires_at),
            "superseded_by": mem.superseded_by, "conflicts_with": mem.conflicts_with or None,
            "applicability": mem.applicability or None,
            "traceability": mem.traceability if mem.traceability != "full" else None,
            "summary": " ".join(mem.content.split())[:240], "path": f"memories/{mem.id}.md",
        }
        return {k: v for k, v in e.items() if v is not None}

    def item_names(self) -> list[str]:
        """``memories/<name>.md`` of every memory file present now (the index check)."""
        try:
            with os.scandir(self.mem_dir) as it:
                return [f"memories/{e.name}" for e in it if e.name.endswith(".md") and not e.name.startswith(".")
                        and e.is_file(follow_symlinks=False)]
        except FileNotFoundError:
            return []

    def item_paths(self) -> list[Path]:
        """Memory files present now (symlinks excluded)."""
        try:
            with os.scandir(self.mem_dir) as it:
                return sorted(Path(e.path) for e in it if e.name.endswith(".md") and not e.name.startswith(".")
                              and e.is_file(follow_symlinks=False))
        except FileNotFoundError:
            return []

    def expected_path(self, mem: LongTermMemory) -> Path:
        """Where the file of a memory named after its id lives (its id is already known to be safe)."""
        return self.mem_dir / f"{mem.id}.md"

    def rebuild_index(self, items: list[ItemRead[LongTermMemory]] | None = None) -> bool:
        """Rewrite index.yaml (by priority, then id) and profile.md from the memory files, under the lock."""

        def order(e: dict[str, Any]) -> tuple[int, str]:
            return (-int(field_num(e.get("priority"), 0)), str(e["id"]))

        known = items

        def derive() -> tuple[list[LongTermMemory], list[dict[str, Any]]]:
            nonlocal known
            known = fresh_items(known, self.item_paths(), self.load_path)
            pairs = [(i.path, i.record) for i in known if i.record is not None]
            entries = entries_by_file(pairs, self.entry_for, self.expected_path, lambda p: f"memories/{p.name}")
            return [m for _, m in pairs], sorted(entries, key=order)

        def same(entries: list[dict[str, Any]]) -> bool:
            current = self.index.read()
            return current.exists and not current.problems and sorted(current.entries, key=order) == entries

        mems, entries = derive()
        if same(entries) and self._profile_text(mems) == self._profile_on_disk():
            return False  # right as it is: not rewritten, not even locked (a read-only tree verifies)
        with self.lock():
            mems, entries = derive()
            self._write_profile(mems)
            if same(entries):
                return False
            self.index.write(entries)
            return True

    def update_many(self, changes: dict[str, Any]) -> int:
        """Apply changes to many memories under one lock, then rebuild index and profile once."""
        written = 0
        with self.lock():
            for mem_id, change in changes.items():
                cur = self.get(mem_id)
                if cur is None:
                    continue
                new = change(cur)
                if new is None:
                    continue
                path = self.path_for(mem_id)
                old = read_bytes_nofollow(path).decode("utf-8", "replace")
                atomic_write(path, render_frontmatter(new.to_frontmatter(), _body(new), old))
                written += 1
            if written:
                self.rebuild_index()
        return written

    def referenced_files(self) -> Iterator[Path]:
        """Long-term memories point at no files that must exist."""
        return iter(())

    # -- writing ----------------------------------------------------------------

    def _write(self, mem: LongTermMemory) -> None:
        path = self.path_for(mem.id)
        try:
            old = read_bytes_nofollow(path).decode("utf-8", "replace")
        except FileNotFoundError:
            old = None
        with index_writes(self):
            atomic_write(path, render_frontmatter(mem.to_frontmatter(), _body(mem), old))
            self.index.upsert(self.entry_for(mem))

    def _profile_text(self, mems: Iterable[LongTermMemory]) -> str | None:
        """profile.md as built from the active profile, rule and preference memories (None: no file)."""
        active = sorted((m for m in mems if m.status == "active" and m.type in PROFILE_TYPES),
                        key=lambda m: (-m.priority, m.id))
        if not active:
            return None
        parts = ["# User Profile\n", "Built from active profile, rule and preference memories; "
                 "`memplane lifecycle verify` rebuilds it.\n"]
        for m in active:
            parts.append(f"\n## [{m.type}] {m.title or m.id}\n\n{m.content.strip()}\n\n<!-- {m.id} -->\n")
        return "".join(parts)

    def _profile_on_disk(self) -> str | None:
        try:
            return read_bytes_nofollow(self.dir / "profile.md").decode("utf-8", "replace")
        except FileNotFoundError:
            return None

    def _write_profile(self, mems: Iterable[LongTermMemory] | None = None) -> None:
        if mems is None:
            mems = [i.record for i in self.iter_items() if i.record is not None]
        text = self._profile_text(mems)
        if text == self._profile_on_disk():
            return  # unchanged: not rewritten
        path = self.dir / "profile.md"
        if text is None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            return
        atomic_write(path, text)

    def save_memory(self, *, type: str = "fact", content: str, title: str | None = None, tags: Iterable[str] = (),
                    entities: Iterable[str] = (), source_refs: Iterable[str] = (), priority: int | None = None,
                    ttl: str | None = None, applicability: dict[str, Any] | None = None,
                    force: bool = False, source: str = "user") -> SaveResult:
        """Save a memory; status ``saved``, ``ignored`` (duplicate or forgotten), ``superseded``, or ``conflicted``
        (a model save contradicting the user's own rule or preference: kept, not followed; the user's stands).

        ``source`` is who asked: ``user`` (the default: the CLI and a runtime acting for the user) or
        ``model`` (the model's save_memory tool passes it)."""
        if type not in LONG_TERM_TYPES:
            raise UsageError(f"type must be one of {', '.join(LONG_TERM_TYPES)}, not {type!r}")
        if source not in SOURCES:
            raise UsageError(f"source must be one of {', '.join(SOURCES)}, not {source!r}")
        text = (content or "").strip()
        if not text:
            raise UsageError("content must not be empty")
        note = f"cut to {MAX_CONTENT} of its {len(text)} characters" if len(text) > MAX_CONTENT else None
        text = text[:MAX_CONTENT]
        key = content_hash("long_term", type, _norm(text))
        mem_id = f"mem_{key}"
        tags_l = list(dict.fromkeys(t.strip() for t in tags if t and t.strip()))
        ents_l = list(dict.fromkeys(e.strip() for e in entities if e and e.strip()))
        if ttl is not None:
            parse_duration(ttl)  # a bad TTL is a usage error now, not a surprise later
        try:
            res = self._save_locked(type, text, key, mem_id, title, tags_l, ents_l, force, priority, ttl,
                                    applicability, source_refs, source)
        except (StorageError, LockTimeout):
            raise
        except OSError as exc:
            # A read-only or full disk: the project's storage error naming the file, never a bare OSError
            # (issue 27); the tools answer it as an error, the CLI exits 3.
            where = exc.filename or self.mem_dir
            raise StorageError(where, f"{exc.strerror or exc} (the memory was not saved)") from exc
        if note is not None:
            res.note = note
        return res

    def _save_locked(self, type: str, text: str, key: str, mem_id: str, title: str | None, tags_l: list[str],
                     ents_l: list[str], force: bool, priority: int | None, ttl: str | None,
                     applicability: dict[str, Any] | None, source_refs: Iterable[str], source: str) -> SaveResult:
        by_model = source == "model"
        # The user's word stands: a model save never replaces the user's rule or preference.
        guarded = by_model and type in USER_WORD_TYPES
        with self.lock():
            if not force and (key in self.tombstones.blocked_hashes() or mem_id in self.tombstones.blocked_ids()):
                return SaveResult(mem_id, "ignored", "forgotten on purpose (force=True saves it again)")
            actives = [m for m in (i.record for i in self.iter_items()) if m is not None and m.status == "active"
                       and m.type == type]
            norm = _norm(text)
            if guarded:
                held = self._held_conflict(mem_id, actives)
                if held:  # the same contradicting save again: one conflict, logged once
                    return SaveResult(mem_id, "conflicted", _stands(type, held), conflicts_with=held)
            # "Long enough to mean something" is measured the same way for CJK and Latin text.
            for m in actives:
                old = _norm(m.content)
                if old == norm and not by_model and not is_users(m):
                    # The user says what the model had saved: from now on it is the user's own word.
                    m.source, m.updated_at = "user", self.clock()
                    self._write(m)
                    self._write_profile()
                    return SaveResult(m.id, "saved", "the model had saved the same; it is now the user's own")
                if old == norm or (meaning_length(norm) >= 8 and norm in old and (by_model or is_users(m))):
                    return SaveResult(m.id, "ignored", "the same or a broader memory exists")
            replaced: list[LongTermMemory] = []
            blocked: list[LongTermMemory] = []  # the user's memories a model save contradicts
            beside: list[str] = []  # the user's memories a model save would have replaced, left as they are
            reason = None
            contradicted: list[str] = []
            for m in actives:
                old = _norm(m.content)
                topic = bool(set(map(str.lower, m.entities)) & set(map(str.lower, ents_l)) - GENERIC_ENTITIES
                             or set(map(str.lower, m.tags)) & set(map(str.lower, tags_l)))
                opposite = type in USER_WORD_TYPES and contradicts(old, norm, same_topic=topic)
                if guarded and is_users(m):
                    if opposite:
                        blocked.append(m)
                    elif (meaning_length(old) >= 8 and old in norm) or _same_subject(m, ents_l, tags_l, old, norm):
                        beside.append(m.id)
                    continue
                if meaning_length(old) >= 8 and old in norm:
                    replaced.append(m)  # the new memory says the same, more specifically
                elif opposite:
                    # Two rules that cannot both be followed: the newer word wins (the user's over the model's).
                    replaced.append(m)
                    contradicted.append(m.id)
                    reason = f"contradicts {m.id}, which it replaces"
                elif _same_subject(m, ents_l, tags_l, old, norm):
                    replaced.append(m)  # same subject, same kind, mostly the same words
            if blocked:
                replaced, contradicted = [], []  # a memory that is not followed replaces nothing
            now = self.clock()
            ttl_kind = "long_term_procedure" if type == "procedure" else type
            mem = LongTermMemory(
                id=mem_id, type=type, title=(title or text.split("\n", 1)[0])[:120], content=text,  # type: ignore[arg-type]
                priority=priority if priority is not None else PRIORITY[type], confidence=0.9 if type == "rule"
                else 0.8, tags=tags_l, entities=ents_l, source_refs=list(source_refs), created_at=now,
                updated_at=now, ttl=ttl or self.retention.ttl_text(ttl_kind), applicability=applicability or {},
                lesson_key=key, source=source,
            )
            mem.renew(now)
            mem.supersedes = replaced[0].id if replaced else None
            if blocked:
                mem.status = "conflicted"
                mem.conflicts_with = [m.id for m in blocked]
            self._write(mem)
            for old_mem in replaced:
                # New file first, then the old one marked replaced: a crash between leaves two actives,
                # which the next save dedupes, never zero.
                old_mem.status = "replaced"
                old_mem.superseded_by = mem.id
                old_mem.updated_at = now
                self._write(old_mem)
            self._write_profile()
        # The conflict log names both sides (outside the collection's lock: the log has its own).
        if blocked:
            held = [m.id for m in blocked]
            self.conflicts.add([mem.id, *held], rule="user_memory_stands", decision="conflicted",
                               evidence={"memory": mem.id, "source": source, "conflicts_with": held,
                                         "kept_active": held})
            return SaveResult(mem.id, "conflicted", _stands(type, held), conflicts_with=held)
        for old_id in contradicted:
            self.conflicts.add([mem.id, old_id], rule="contradiction", decision="superseded",
                               evidence={"memory": mem.id, "source": source, "conflicts_with": [old_id],
                                         "superseded": old_id})
        if replaced:
            return SaveResult(mem.id, "superseded", reason, [m.id for m in replaced])
        if beside:
            return SaveResult(mem.id, "saved", f"kept beside the user's own {', '.join(beside)}, which a model save "
                                               "does not replace")
        return SaveResult(mem.id, "saved")

    def _held_conflict(self, mem_id: str, actives: list[LongTermMemory]) -> list[str]:
        """The user's active memories an already conflicted model memory of this id contradicts ([] if none)."""
        try:
            cur = self.get(mem_id)
        except (OSError, FileProblemError):
            return []
        if cur is None or cur.status != "conflicted":
            return []
        live = {m.id for m in actives if is_users(m)}
        return [x for x in cur.conflicts_with if x in live]

    def forget_memory(self, mem_id: str, *, reason: str = "forgotten") -> bool:
        """Delete a memory everywhere and write a tombstone without its content; True if it existed."""
        with self.lock():
            mem = self.get(mem_id)
            if mem is None:
                return False
            with index_writes(self):
                self.index.remove([mem_id])
                os.unlink(self.path_for(mem_id))
            self._write_profile()
            key = content_hash("long_term", mem.type, _norm(mem.content))
            self.tombstones.add("memory", mem_id, reason=reason, content_hashes=[key])
            return True

    def recall_memory(self, query: str, limit: int = 5, *, now: Any = None,
                      types: Iterable[str] | None = None) -> list[MemoryHit]:
        """Active, unexpired memories matching a query (of these types, if given), best first."""
        entries, inv = self._searchable()
        q = token_set(query)
        now = now or self.clock()
        hits: list[MemoryHit] = []
        stamp = mtime_ns(self.index.path)
        wanted = {t.lower() for t in types} if types else None
        for i, score in inv.search(q, limit=max(limit * (12 if wanted else 4), 20)):
            e = entries[i]
            # Entries are read field by field: a hand-edited line of the wrong shape is not a crash.
            if (field_str(e.get("status")) or "active").strip().lower() != "active" or _expired(e, now):
                continue
            if wanted is not None and (field_str(e.get("type")) or "fact") not in wanted:
                continue
            current = self._current_text(e, stamp)
            if current is None:
                continue  # deleted, emptied or switched off by hand since the index was written
            words = [*field_words(e.get("tags")), *field_words(e.get("entities"))]
            bonus = 0.1 if any(t.lower() in query.lower() for t in words
                               if len(t) >= 2 and t.lower() not in GENERIC_ENTITIES) else 0.0
            hits.append(MemoryHit(id=e["id"], type=field_str(e.get("type")) or "fact",
                                  score=round(min(1.0, score + bonus), 4),
                                  confidence=field_num(e.get("confidence", 0.5), 0.5),
                                  text=current or field_text(e.get("summary")), title=field_str(e.get("title")),
                                  path=f"long_term/{field_str(e.get('path')) or ''}"))
        hits.sort(key=lambda h: -h.score)
        return hits[:limit]

    def list_memories(self, types: Iterable[str], limit: int = 50, *, now: Any = None) -> list[MemoryHit]:
        """Every active, unexpired memory of these types, by priority (``memory recall --type rule``)."""
        wanted = {t.lower() for t in types}
        now = now or self.clock()
        stamp = mtime_ns(self.index.path)
        hits: list[MemoryHit] = []
        for e in self.entries():  # the index is kept by priority, then id
            kind = field_str(e.get("type")) or "fact"
            if kind not in wanted or (field_str(e.get("status")) or "active").strip().lower() != "active" \
                    or _expired(e, now):
                continue
            current = self._current_text(e, stamp)
            if current is None:
                continue
            hits.append(MemoryHit(id=e["id"], type=kind, score=1.0, confidence=field_num(e.get("confidence", 0.5), 0.5),
                                  text=current or field_text(e.get("summary")), title=field_str(e.get("title")),
                                  path=f"long_term/{field_str(e.get('path')) or ''}"))
            if len(hits) >= limit:
                break
        return hits

    def _current_text(self, entry: dict[str, Any], index_mtime_ns: int) -> str | None:
        """The memory's text as its file holds it now ('' when the index line is current), or None when
        the file is gone, empty, unreadable or no longer active."""
        state, path, _ = file_state(self.dir, field_str(entry.get("path")) or f"memories/{entry['id']}.md",
                                    index_mtime_ns)
        if state is FileState.INDEXED:
            return ""  # written before its index line: the line says what the file says
        if state is not FileState.CHANGED:
            return None
        try:
            mem = self.load_path(Path(path))
        except (OSError, FileProblemError):
            return None
        if mem.status != "active" or not mem.content.strip():
            return None
        return " ".join(mem.content.split())[:240]

    def _searchable(self) -> tuple[list[dict[str, Any]], InvertedIndex]:
        entries = self.entries()
        key = (id(entries), len(entries))
        if self._search_cache is None or self._search_cache[0] != key:
            texts = [" ".join([field_text(e.get("title")), field_text(e.get("summary")), *field_words(e.get("tags")),
                               *field_words(e.get("entities"))]) for e in entries]
            self._search_cache = (key, entries, InvertedIndex.build(texts))
        return self._search_cache[1], self._search_cache[2]


def _stands(kind: str, held: list[str]) -> str:
    return (f"it contradicts the user's own {kind} {', '.join(held)}, which stands: kept as a conflict naming both, "
            "not followed")


def _same_subject(m: LongTermMemory, ents: list[str], tags: list[str], old: str, new: str) -> bool:
    """Same subject (a shared entity and tag) and mostly the same words."""
    return bool(set(map(str.lower, m.entities)) & set(map(str.lower, ents)) - GENERIC_ENTITIES
                and set(map(str.lower, m.tags)) & set(map(str.lower, tags))
                and _similar(old, new) >= 0.5)


def _similar(a: str, b: str) -> float:
    ta, tb = token_set(a), token_set(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def _expired(entry: dict[str, Any], now: Any) -> bool:
    from lifecycle import parse_ts

    exp = entry.get("expires_at")
    if not exp:
        return False
    try:
        return bool(parse_ts(exp) <= now)
    except (ValueError, TypeError, OverflowError):
        return True  # an unreadable expiry counts as expired
