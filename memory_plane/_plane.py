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
from typing import Any

from device_memory import DeviceMemory, type_of_id
from episodes import (
    EpisodeJob,
    EpisodeRecorder,
    LessonExtractor,
    OutcomeUpdater,
    TaskEpisode,
    TaskEpisodeStore,
    TaskEpisodeWriter,
    read_config,
)
from lifecycle import (
    DEFAULT_LOCK_TIMEOUT,
    Clock,
    Collection,
    GcReport,
    NoRootError,
    VerifyReport,
    init_tree,
    resolve_root,
    system_clock,
)

from ._long_term import LongTermStore
from ._long_term_forget import check_forget_id
from ._retrieve_types import MemoryRetrieveRequest, RoleMemoryContext
from ._session import SessionStore
from .retrieval import MemoryContext, RetrieveConfig, Retriever, parse_query
from .upkeep import gc_tree, restore_from_quarantine, verify_tree

log = logging.getLogger("memory_plane")


class MemoryPlane:
    """Retrieve before a task, record during it, commit after it; never fails the task."""

    def __init__(self, root: Path, *, clock: Clock = system_clock, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 queue_size: int = 64, extra_jobs: Iterable[EpisodeJob] = (),
                 retrieve_config: RetrieveConfig | None = None, read_only: bool = False) -> None:
        self.root = Path(root)
        self.clock = clock
        self.lock_timeout = lock_timeout
        self.episodes = TaskEpisodeStore(self.root, clock=clock, lock_timeout=lock_timeout)
        self.device = DeviceMemory(self.root, clock=clock, lock_timeout=lock_timeout)
        self.extractor = LessonExtractor(self.device, self.episodes)
        self.outcomes = OutcomeUpdater(self.device, self.episodes)
        self.long_term = LongTermStore(self.root, clock=clock, lock_timeout=lock_timeout,
                                       retention=self.device.retention)
        self.session = SessionStore(self.root, clock=clock, lock_timeout=lock_timeout)
        if read_only:
            # A reader that promised not to write (`memplane mcp` without --allow-write): stale indexes are read
            # around, never rebuilt, and no postings cache is persisted.
            for coll in [*self.device.all_collections(), self.long_term, self.episodes]:
                coll.read_only = True
            retrieve_config = dataclasses.replace(retrieve_config or RetrieveConfig(), persist_postings=False)
        self.read_only = read_only
        self.retriever = Retriever(self.device, self.episodes, self.long_term, retrieve_config)
        self.retrieve_errors = 0
        self._tools: Any = None
        jobs: list[EpisodeJob] = [self.outcomes, self.extractor, *extra_jobs]
        self.writer = TaskEpisodeWriter(self.episodes, jobs=jobs, queue_size=queue_size)

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None, *, create: bool = True, **kwargs: Any) -> MemoryPlane:
        """Open the memory tree at root (default: $MEMPLANE_ROOT or the device path), filling in what is missing.

        With ``create=False`` (every CLI command but ``init``) a root that does not exist, or is not a
        folder, raises NoRootError instead of being created: cron must not report success on an
        unmounted path. Nothing that already exists is written, so a read-only tree opens.
        """
        path = resolve_root(root)
        if not create and not path.is_dir():
            why = "is not a folder" if path.exists() else "does not exist (run `memplane init` to create it)"
            raise NoRootError(path, f"memory root {why}")
        if (path.is_dir() and not os.access(path, os.W_OK)) or kwargs.get("read_only"):
            return cls(path, **kwargs)  # read-only: nothing can be (or may be) filled in, everything can be read
        try:
            init_tree(path)
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
        try:
            memory = self.retriever.retrieve(req, self.clock(), explain=explain)
        except Exception:
            self.retrieve_errors += 1
            log.exception("memory: retrieve failed; continuing without memory")
            return MemoryContext(RoleMemoryContext(), None, dropped={"error": 1})
        if req.session_id:
            try:
                memory.common.session_so_far = self.session.summary_lines()
            except Exception:
                log.exception("memory: session summary unreadable; retrieving without it")
            try:
                block, reused, hits = self.session.frozen_block(
                    req.session_id, memory.render, memory.common.model_dump(mode="json"))
                memory.frozen_block = block
                if reused and isinstance(hits, dict):
                    # What the agent saw is what gets credited: refs and hits of the frozen block.
                    memory.common = RoleMemoryContext.model_validate(hits)
                memory.session_id = req.session_id
            except Exception:
                log.exception("memory: session freeze failed; using a fresh block")
        return memory

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
            # Recorded without a retrieve: the goal is still parsed, so its lessons know intent and target.
            try:
                query = parse_query(req.input, self.device.catalog)
            except Exception as exc:  # a recorder never fails a task
                log.error("memory: goal not parsed for the recorder: %s", exc)
        normalized = None
        if query is not None:
            normalized = {"intent": query.intent, "app": query.app, "target": query.target}
        return EpisodeRecorder(
            self.episodes, req.input, device_id=req.device_id or "default", language=hints.language,
            screen=hints.screen(), app=hints.app, page=hints.page, normalized_goal=normalized,
            input_method=hints.input_method,
            retrieved_refs=refs, clock=self.clock, on_exit_commit=self.commit_episode,
            transcript_opener=self.open_transcript,
        )

    def config(self) -> dict[str, Any]:
        """config.yaml under the root ({} when missing; a broken file is logged and ignored)."""
        return read_config(self.root)

    def open_transcript(self, recorder: EpisodeRecorder, *, system_prompt: str = "", goal: str | None = None) -> Any:
        """The transcript ledger of a recording episode, with the configured lenses (offline without a key);
        lens usage is metered into its usage.jsonl without touching the agent's measured context size."""
        from episodes.transcript import TranscriptConfig

        from ._lenses import GeminiSettings, select_lenses

        cfg = self.config()
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
        return self.writer.commit(episode)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait for background work (tests, shutdown); False if the timeout passed."""
        deadline = time.monotonic() + timeout
        done = self.writer.flush(timeout)
        return self.retriever.wait(max(0.0, deadline - time.monotonic())) and done

    def stats(self) -> dict[str, Any]:
        """Counters of commits and background jobs, including failures."""
        return {**self.writer.stats.to_dict(), "retrieve_errors": self.retrieve_errors}

    def save_rule(self, content: str, *, overrides: Iterable[str] = (), **kwargs: Any) -> Any:
        """Save a user rule; automatic memories it names in ``overrides`` become conflicted (cautions only),
        because user rules win over automatic experience. Returns the SaveResult."""
        result = self.long_term.save_memory(type="rule", content=content, **kwargs)
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
                cur.updated_at = self.clock()
                return cur

            if self.device.upsert(item_type, mid, change) is not None:
                self.device.conflicts.add([mid, result.id], rule="user_rule_overrides", decision="conflicted",
                                          evidence={"rule": result.id})
        return result

    def forget(self, memory_id: str, *, reason: str = "forgotten") -> bool:
        """Forget any memory (long-term or device) everywhere, leaving only a tombstone; False when there is
        no such memory, a UsageError naming an id no memory can have."""
        check_forget_id(memory_id)
        if memory_id.startswith("mem_"):
            return self.long_term.forget_memory(memory_id, reason=reason)
        return self.device.forget(memory_id, reason)

    def finish_forgets(self, *, dry_run: bool = False) -> list[str]:
        """Files of forgotten memories a killed forget left behind (by their tombstones), removed unless
        ``dry_run`` (their text scrubbed from the tree first); their paths. Verify --fix and GC run it."""
        return [*self.long_term.finish_forgets(dry_run=dry_run), *self.device.finish_forgets(dry_run=dry_run)]

    # -- lifecycle ----------------------------------------------------------------

    def collections(self) -> list[Collection]:
        """Every collection of memory files in this tree (for verify and GC)."""
        return [*self.device.all_collections(), self.long_term]

    def verify(self, *, fix: bool = False, catch_up_limit: int = 500, now: datetime | None = None) -> VerifyReport:
        """Check the tree, rebuild indexes, mark expired, close crashed episodes, run background jobs that
        never ran (a crash, an overflow); quarantine broken files with fix. ``now`` (the operator's time) is
        believed as given; the plane's clock is checked against the tree first (a ``clock`` problem)."""
        self.flush(30)
        report = verify_tree(self.root, self.device, self.episodes, self.long_term, fix=fix,
                             now=now or self.clock(), session=self.session, trust_clock=now is not None)
        self._verify_forgets(report, fix)
        report.stats["jobs_caught_up"] = self.catch_up(limit=catch_up_limit)
        report.stats["jobs_failed"] = self.failed_jobs()
        # Work that did not happen is a problem for cron (exit 1), with its reason: a lesson
        # never learned because the disk was full must not pass as "ok".
        from episodes import FAILED_PREFIX

        def in_episode(ep_id: str, name: str) -> str:
            return self.episodes.rel(self.episodes.layout.expected_path(ep_id).parent / name)

        for j in report.stats["jobs_failed"]:
            report.add("job_failed", in_episode(j["episode"], f"{FAILED_PREFIX}{j['job']}"),
                       None, f"background job {j['job']} failed at {j['failed_at'] or '?'}: {j['error'] or '?'}; "
                       f"retried {j['retry']}")
        for ep_id in report.stats.get("transcripts_pending") or []:
            report.add("pending", in_episode(ep_id, "transcript/steps.jsonl"), None,
                       "the transcript was closed with visual summaries still pending")
        return report

    def _verify_forgets(self, report: VerifyReport, fix: bool) -> None:
        """A forgotten memory's file (a forget killed before it removed it) is a finding; ``fix`` removes it."""
        try:
            left = self.finish_forgets(dry_run=not fix)
        except OSError as exc:  # a read-only or full tree: reported, the rest of verify still runs
            report.add("io", "lifecycle/tombstones.jsonl", None, f"cannot finish forgets: {exc.strerror or exc}")
            return
        for path in left:
            if fix:
                report.fixed.append(f"{path}: a forgotten memory's file, removed")
            else:
                report.add("forgotten", path, None, "a forgotten memory's file is still here (a forget was "
                                                    "stopped before removing it); verify --fix removes it")

    def failed_jobs(self, min_age_s: float = 600.0) -> list[dict[str, Any]]:
        """Background jobs whose last run failed (job, episode, failed_at, error) and when verify retries them."""
        return self.writer.failed_jobs(min_age_s)

    def catch_up(self, limit: int = 500, min_age_s: float = 600.0) -> list[str]:
        """Run the background jobs of committed episodes that lack their done-markers; return their ids."""
        return self.writer.catch_up(limit, min_age_s)

    def quarantined(self) -> list[Any]:
        """Files `verify --fix` moved to lifecycle/quarantine/ (name, original path, when, why)."""
        from lifecycle import list_quarantined

        return list_quarantined(self.root)

    def restore(self, name: str, *, force: bool = False) -> dict[str, Any]:
        """Put a quarantined file back where it came from, if it now loads (or ``force``), and re-index it."""
        return restore_from_quarantine(self.root, self.device, self.episodes, self.long_term, name, force=force)

    def gc(self, *, dry_run: bool = False, now: datetime | None = None) -> GcReport:
        """Remove what retention says is done with (see lifecycle/retention.yaml); safe beside a running agent.

        Raises ClockError, removing nothing, when the plane's clock cannot be believed against the tree (before
        the build date, behind its newest write, or far past it); ``now`` (the operator's time) is believed."""
        self.flush(30)
        report = gc_tree(self.root, self.device, self.episodes, self.long_term, self.session, dry_run=dry_run,
                         now=now or self.clock(), trust_clock=now is not None)
        try:
            for path in self.finish_forgets(dry_run=dry_run):
                report.note(path, "forgotten")
        except OSError as exc:
            report.errors.append(f"cannot finish forgets: {exc.strerror or exc}")
        if not dry_run and report.removed and self.retriever.config.persist_postings:
            # The indexes were rewritten: the next agent start finds the persisted postings current.
            self.retriever.prepare()
        return report

    def close(self, timeout: float = 10.0) -> None:
        """Finish background work and stop the worker."""
        deadline = time.monotonic() + timeout
        self.writer.close(timeout)
        self.retriever.wait(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> MemoryPlane:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
