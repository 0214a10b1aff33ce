"""MemoryPlane: the one object the agent runtime talks to."""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from memory_plane.device_memory import DeviceMemory, type_of_id
from memory_plane.episodes import (
    EpisodeJob,
    TaskEpisode,
    TaskEpisodeStore,
    TaskEpisodeWriter,
    episode_jobs,
    read_config,
)
from memory_plane.lifecycle import (
    DEFAULT_LOCK_TIMEOUT,
    Clock,
    GcReport,
    NoRootError,
    Repair,
    VerifyReport,
    init_tree,
    not_a_tree,
    resolve_root,
    system_clock,
)

from ._long_term import LongTermStore
from ._retrieve_types import MemoryRetrieveRequest, RoleMemoryContext
from ._session import SessionStore
from .retrieval import MemoryContext, RetrieveConfig, Retriever, goal_facts, parse_query

if TYPE_CHECKING:
    from memory_plane.episodes import EpisodeRecorder

# The recorder, forget, verify, GC and restore load the code they need when first called: a process that starts
# to retrieve (the agent's first call) does not pay for them (tests/test_startup_imports.py checks).

log = logging.getLogger("memory_plane")

LESSON_WAIT_S = 5.0
POSTINGS_WAIT_S = 60.0
"""How long a forget waits for a retrieve's postings still being written (they may hold the memory's words)."""
"""How long a retrieve (or a recorder made without one) waits for the lessons of the episodes already committed:
what a task is shown, and so what it credits and blames, must not depend on how far behind the worker is."""


class MemoryPlane:
    """Retrieve before a task, record during it, commit after it; never fails the task."""

    def __init__(self, root: Path, *, clock: Clock = system_clock, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 queue_size: int = 64, extra_jobs: Iterable[EpisodeJob] = (),
                 retrieve_config: RetrieveConfig | None = None, read_only: bool = False,
                 lesson_wait_s: float = LESSON_WAIT_S) -> None:
        self._root = Path(root)
        self._lesson_wait_s = lesson_wait_s
        self._clock = clock
        self._episodes = TaskEpisodeStore(self._root, clock=clock, lock_timeout=lock_timeout)
        self._device = DeviceMemory(self._root, clock=clock, lock_timeout=lock_timeout)
        self._long_term = LongTermStore(self._root, clock=clock, lock_timeout=lock_timeout,
                                        retention=self._device.retention)
        self._session = SessionStore(self._root, clock=clock, lock_timeout=lock_timeout)
        if read_only:
            # A reader that promised not to write (`memplane mcp` without --allow-write): stale indexes are read
            # around, never rebuilt, and no postings cache is persisted.
            for coll in [*self._device.all_collections(), self._long_term, self._episodes]:
                coll.read_only = True
            retrieve_config = dataclasses.replace(retrieve_config or RetrieveConfig(), persist_postings=False)
        self._retriever = Retriever(self._device, self._episodes, self._long_term, retrieve_config)
        self._retrieve_errors = 0
        self._tools: Any = None
        jobs = [*episode_jobs(self._device, self._episodes), *extra_jobs]
        self._writer = TaskEpisodeWriter(self._episodes, jobs=jobs, queue_size=queue_size)

    # -- what the plane holds (read-mostly; the verbs below are how it changes) ---------------------------

    @property
    def root(self) -> Path:
        """The memory root this plane was opened on."""
        return self._root

    @property
    def clock(self) -> Clock:
        """The plane's clock (what every store stamps writes and judges expiry with)."""
        return self._clock

    @property
    def device(self) -> DeviceMemory:
        """What this device learned: profiles, app facts, procedures, navigation, calibration, failures."""
        return self._device

    @property
    def episodes(self) -> TaskEpisodeStore:
        """The committed episodes (`episodes/<yyyy>/<id>/`)."""
        return self._episodes

    @property
    def long_term(self) -> LongTermStore:
        """The long-term store (`long_term/`): user rules, preferences, facts; ``save_memory`` and reads."""
        return self._long_term

    @property
    def session(self) -> SessionStore:
        """The active conversation window (`session/`): its events, chunks and summary."""
        return self._session

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None, *, create: bool = True, **kwargs: Any) -> MemoryPlane:
        """Open the memory tree at root (default: $MEMPLANE_ROOT or the device path), filling in what is missing.

        With ``create=False`` (every CLI command but ``init``) a root that does not exist, is not a
        folder, or is a folder that is not a memory tree (no marker and not the tree's layout: an empty
        mount point, someone's other files) raises NoRootError instead of being made one: cron must not
        report success on an unmounted path. Nothing that already exists is written, so a read-only tree
        opens. A tree the library makes here is marked as `memplane init` marks one; an existing tree is
        not (only `init` adds the marker to a tree made by an older version).
        """
        path = resolve_root(root)
        if not create and not path.is_dir():
            why = "is not a folder" if path.exists() else "does not exist (run `memplane init` to create it)"
            raise NoRootError(path, f"memory root {why}")
        new_tree = not path.is_dir() or not_a_tree(path) is not None
        if not create and new_tree:
            raise NoRootError(path, f"memory root {not_a_tree(path)}")
        if (path.is_dir() and not os.access(path, os.W_OK)) or kwargs.get("read_only"):
            return cls(path, **kwargs)  # read-only: nothing can be (or may be) filled in, everything can be read
        try:
            init_tree(path, mark=new_tree)
        except OSError as exc:
            if not path.is_dir():
                raise
            # A full or read-only disk: the tree is read as it is; writes fail where they happen.
            log.warning("memory: cannot fill in the tree at %s: %s", path, exc)
        return cls(path, **kwargs)

    # -- the runtime's three calls ----------------------------------------------

    def retrieve(self, req: MemoryRetrieveRequest | str) -> MemoryContext:
        """Find what this device learned for the request's goal; never raises (an empty context on failure).

        With ``req.session_id`` set, the first retrieval of that session freezes its rendered block and
        later ones reuse it (a stable prompt prefix); a new session id refreshes it.
        """
        return self._retrieve(req, explain=False)

    def _retrieve(self, req: MemoryRetrieveRequest | str, explain: bool) -> MemoryContext:
        """``retrieve``; with ``explain``, each candidate a filter dropped is named in the context."""
        if isinstance(req, str):
            req = MemoryRetrieveRequest(input=req)
        behind = self._await_lessons()
        try:
            memory = self._retriever.retrieve(req, self._clock(), explain=explain)
        except Exception:
            self._retrieve_errors += 1
            log.exception("memory: retrieve failed; continuing without memory")
            return MemoryContext(RoleMemoryContext(), None, dropped={"error": 1})
        if behind:
            memory.dropped["lessons_pending"] = behind  # named in the result: this answer may miss their lessons
        if req.session_id:
            try:
                memory.common.session_so_far = self._session.summary_lines()
            except Exception:
                log.exception("memory: session summary unreadable; retrieving without it")
            try:
                block, reused, hits = self._session.frozen_block(
                    req.session_id, memory.render, memory.common.model_dump(mode="json"))
                memory.frozen_block = block
                if reused and isinstance(hits, dict):
                    # What the agent saw is what gets credited: refs and hits of the frozen block.
                    memory.common = RoleMemoryContext.model_validate(hits)
                memory.session_id = req.session_id
            except Exception:
                log.exception("memory: session freeze failed; using a fresh block")
        return memory

    def _await_lessons(self) -> int:
        """Wait (at most ``lesson_wait_s``) until the background jobs of the episodes already committed have run,
        so a new task reads the memory those episodes taught; 0 when they have, else the pieces of work still
        pending (logged: the wait is bounded, never a hang)."""
        if self._writer.pending() == 0 or self._writer.flush(self._lesson_wait_s):
            return 0
        left = self._writer.pending()
        log.warning("memory: lessons of committed episodes still pending after %.1fs (%d jobs); reading memory "
                    "without them", self._lesson_wait_s, left)
        return max(1, left)

    @property
    def tools(self) -> Any:
        """The model's memory tools (``MemoryTools``): declarations, genai tools, and ``call(name, args)``."""
        if self._tools is None:
            from ._tools import MemoryTools

            self._tools = MemoryTools(self)
        return self._tools

    def explain(self, req: MemoryRetrieveRequest | str) -> MemoryContext:
        """Retrieve as ``retrieve`` does, also naming each candidate a filter dropped and why (``--explain``)."""
        return self._retrieve(req, explain=True)

    def new_episode_recorder(self, req: MemoryRetrieveRequest, memory: Any = None) -> EpisodeRecorder:
        """Start recording the task described by req; the ids the retrieved memory showed are kept as its refs."""
        hints = req.current_hints
        refs = memory.refs() if memory is not None and hasattr(memory, "refs") else []
        query = getattr(memory, "query", None)
        if query is None:
            # Recorded without a retrieve: the goal is still parsed, so its lessons know intent and target (with
            # the app names the episodes already committed taught, as a retrieve would have read them).
            self._await_lessons()
            try:
                query = parse_query(req.input, self._device.catalog, tool_names=req.tool_names)
            except Exception as exc:  # a recorder never fails a task
                log.error("memory: goal not parsed for the recorder: %s", exc)
        normalized = None
        if query is not None:
            normalized = goal_facts(query, self._device.catalog)
        from memory_plane.episodes import EpisodeRecorder

        return EpisodeRecorder(
            self._episodes, req.input, device_id=req.device_id or "default", language=hints.language,
            screen=hints.screen(), app=hints.app, page=hints.page, normalized_goal=normalized,
            input_method=hints.input_method,
            retrieved_refs=refs, clock=self._clock, on_exit_commit=self.commit_episode,
            transcript_opener=self.open_transcript,
        )

    def open_transcript(self, recorder: EpisodeRecorder, *, system_prompt: str = "", goal: str | None = None) -> Any:
        """The transcript ledger of a recording episode, with the configured lenses (offline without a key);
        lens usage is metered into its usage.jsonl without touching the agent's measured context size."""
        from memory_plane.episodes.transcript import TranscriptConfig

        from ._lenses import GeminiSettings, select_lenses

        cfg = read_config(self._root)
        holder: dict[str, Any] = {}

        def meter(usage: Any, purpose: str) -> None:
            led = holder.get("ledger")
            if led is not None:
                led.observe_usage(usage.prompt_tokens, usage.cached_tokens, usage.output_tokens,
                                  source=f"lens:{purpose}:{usage.model}", thoughts_tokens=usage.thoughts_tokens,
                                  requests=usage.requests, model_version=usage.model_version,
                                  status=getattr(usage, "status", None))

        tcfg = TranscriptConfig.from_mapping(cfg)
        lenses = dict(cfg.get("lenses") or {}) if isinstance(cfg.get("lenses"), dict) else {}
        # The design's chunking.model and step_lens.model name the models when the lenses section does not.
        if tcfg.chunking.model:
            lenses.setdefault("capsule_model", tcfg.chunking.model)
        if tcfg.step_lens.model:
            lenses.setdefault("step_model", tcfg.step_lens.model)
        try:
            settings = GeminiSettings.model_validate(lenses)
        except Exception as exc:  # a bad lenses section means offline lenses, never a failed task
            log.error("memory: config.yaml lenses section ignored: %s", exc)
            settings = GeminiSettings()
        try:
            visual, capsule = select_lenses(settings, on_usage=meter)
        except Exception as exc:  # e.g. a non-local base_url without a key: offline lenses, one log line
            log.error("memory: config.yaml lenses section not usable (%s); using the offline lenses", exc)
            visual, capsule = select_lenses(GeminiSettings(), on_usage=meter)
        ledger = recorder.open_transcript(config=tcfg, lens=visual, system_prompt=system_prompt,
                                          capsule_lens=capsule, goal=goal or recorder.episode.user_goal)
        holder["ledger"] = ledger
        self.tools.attach(ledger)  # the model's recall_history reads this task's transcript
        return ledger

    def commit_episode(self, episode: TaskEpisode) -> bool:
        """Write the episode now and queue lesson extraction; return False (logged) on failure."""
        return self._writer.commit(episode)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait for background work (tests, shutdown); False if the timeout passed."""
        deadline = time.monotonic() + timeout
        done = self._writer.flush(timeout)
        return self._retriever.wait(max(0.0, deadline - time.monotonic())) and done

    def stats(self) -> dict[str, Any]:
        """Counters of commits and background jobs, including failures."""
        return {**self._writer.stats.to_dict(), "retrieve_errors": self._retrieve_errors}

    def save_rule(self, content: str, *, overrides: Iterable[str] = (), **kwargs: Any) -> Any:
        """Save a user rule; automatic memories it names in ``overrides`` become conflicted (cautions only),
        because user rules win over automatic experience. Returns the SaveResult."""
        result = self._long_term.save_memory(type="rule", content=content, **kwargs)
        if result.status in ("ignored", "conflicted"):
            return result  # a rule that is not followed overrides nothing
        for mid in dict.fromkeys(overrides):
            item_type = type_of_id(mid)
            if item_type is None or item_type == "device_profile":
                continue

            def change(cur: Any, rule_id: str = result.id) -> Any:
                if cur is None or cur.status in ("replaced", "deleted"):
                    return None
                cur.status = "conflicted"
                cur.conflicts_with = list(dict.fromkeys([*cur.conflicts_with, rule_id]))
                cur.updated_at = self._clock()
                return cur

            if self._device.upsert(item_type, mid, change) is not None:
                self._device.conflicts.add([mid, result.id], rule="user_rule_overrides", decision="conflicted",
                                          evidence={"rule": result.id})
        return result

    def forget(self, memory_id: str, *, reason: str = "forgotten") -> bool:
        """Forget any memory (long-term or device) everywhere, leaving only a tombstone; False when there is
        no such memory, a UsageError naming an id no memory can have."""
        from ._long_term_forget import check_forget_id

        check_forget_id(memory_id)
        self._postings_written()
        if memory_id.startswith("mem_"):
            return self._long_term.forget_memory(memory_id, reason=reason)
        return self._device.forget(memory_id, reason)

    def _finish_forgets(self, *, dry_run: bool = False) -> list[str]:
        """Files of forgotten memories a killed forget left behind (by their tombstones), removed unless
        ``dry_run`` (their text scrubbed from the tree first); their paths. Verify --fix and GC run it."""
        if not dry_run:
            self._postings_written()
        return [*self._long_term.finish_forgets(dry_run=dry_run), *self._device.finish_forgets(dry_run=dry_run)]

    def _postings_written(self) -> None:
        """Wait for the postings a retrieve is still writing under ``.cache/retrieve/``: written after a forget
        dropped the cache, they would hold the forgotten words again (a retrieve's write raced a forget)."""
        if not self._retriever.wait(POSTINGS_WAIT_S):
            log.warning("a forget went on while retrieval postings were still being written after %.0f s",
                        POSTINGS_WAIT_S)

    # -- lifecycle ----------------------------------------------------------------

    def verify(self, *, fix: bool = False, catch_up_limit: int = 500, now: datetime | None = None) -> VerifyReport:
        """Check the tree, rebuild indexes, mark expired, close crashed episodes, run background jobs that
        never ran (a crash, an overflow). Each finding carries its repair; with ``fix`` they are made (broken
        files quarantined, torn lines dropped, ...). ``now`` (the operator's time) is believed as given; the
        plane's clock is checked against the tree first (a ``clock`` problem)."""
        from .upkeep import check_jobs, repair_tree, verify_tree

        self.flush(30)
        report = verify_tree(self._root, self._device, self._episodes, self._long_term, self._writer,
                             now=now or self._clock(), session=self._session, trust_clock=now is not None)
        self._find_forgets(report)
        if fix:
            repair_tree(report)
        check_jobs(self._writer, self._episodes, report, catch_up_limit)
        return report

    def _find_forgets(self, report: VerifyReport) -> None:
        """A forgotten memory's file (a forget killed before it removed it) is a finding; its repair removes it."""
        try:
            left = self._finish_forgets(dry_run=True)
        except OSError as exc:  # a read-only or full tree: reported, the rest of verify still runs
            report.add("io", "lifecycle/tombstones.jsonl", None, f"cannot finish forgets: {exc.strerror or exc}")
            return
        repair = Repair("finish_forgets", self._forgets_finisher)
        for path in left:
            report.add("forgotten", path, None, "a forgotten memory's file is still here (a forget was "
                                                "stopped before removing it); verify --fix removes it", repair)

    def _forgets_finisher(self, report: VerifyReport) -> bool:
        """The repair of forgotten memories' files: removed (their text scrubbed from the tree first)."""
        try:
            gone = self._finish_forgets()
        except OSError as exc:
            report.add("io", "lifecycle/tombstones.jsonl", None, f"cannot finish forgets: {exc.strerror or exc}")
            return True  # the finding above says what is left
        report.fixed += [f"{path}: a forgotten memory's file, removed" for path in gone]
        return True

    def quarantined(self) -> list[Any]:
        """Files `verify --fix` moved to lifecycle/quarantine/ (name, original path, when, why)."""
        from memory_plane.lifecycle import list_quarantined

        return list_quarantined(self._root)

    def restore(self, name: str, *, force: bool = False) -> dict[str, Any]:
        """Put a quarantined file back where it came from, if it now loads (or ``force``), and re-index it."""
        from .upkeep import restore_from_quarantine

        return restore_from_quarantine(self._root, self._device, self._episodes, self._long_term, name, force=force)

    def gc(self, *, dry_run: bool = False, now: datetime | None = None) -> GcReport:
        """Remove what retention says is done with (see lifecycle/retention.yaml); safe beside a running agent.

        Raises ClockError, removing nothing, when the plane's clock cannot be believed against the tree (before
        the build date, behind its newest write, or far past it); ``now`` (the operator's time) is believed."""
        from .upkeep import gc_tree

        self.flush(30)
        report = gc_tree(self._root, self._device, self._episodes, self._long_term, self._session, dry_run=dry_run,
                         now=now or self._clock(), trust_clock=now is not None)
        try:
            for path in self._finish_forgets(dry_run=dry_run):
                report.note(path, "forgotten")
        except OSError as exc:
            report.errors.append(f"cannot finish forgets: {exc.strerror or exc}")
        if not dry_run and report.removed and self._retriever.config.persist_postings:
            # The indexes were rewritten: the next agent start finds the persisted postings current.
            self.prepare()
        return report

    def prepare(self) -> None:
        """Bring every retrieval source and its persisted postings up to date without a query (an agent's start-up;
        GC runs it after it rewrote indexes, so the next start finds them current)."""
        self._retriever.prepare()

    def close(self, timeout: float = 10.0) -> None:
        """Finish background work and stop the worker."""
        deadline = time.monotonic() + timeout
        self._writer.close(timeout)
        self._retriever.wait(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> MemoryPlane:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
