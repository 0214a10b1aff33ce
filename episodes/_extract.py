"""Lessons from a finished episode: device and app profiles, procedures, navigation rules,
calibration, failure modes and UI anchors, each merged into the item it repeats."""

from __future__ import annotations

import logging
from typing import Any

from memory_plane.device_memory import DeviceMemory
from memory_plane.lifecycle import FileProblemError, UnsafePathError

from ._blame import declared_memories
from ._causes import outcome_unfinished
from ._failure_lessons import learn_failures, phase_cause
from ._lesson_context import LessonContext
from ._lesson_writer import ExtractionResult, LessonWriter, goal_pattern
from ._model import TaskEpisode
from ._path_lessons import learn_calibration, learn_navigation, learn_procedure, learn_ui_anchors
from ._profile_lessons import learn_app_profile, learn_device_profile
from ._steps import device_steps, pair_steps
from ._store import TaskEpisodeStore

log = logging.getLogger("memory_plane")

EXTRACTOR_VERSION = 2

__all__ = ["EXTRACTOR_VERSION", "ExtractionResult", "LessonExtractor", "goal_pattern"]


class LessonExtractor:
    """The writer's background job that turns an episode into device memories: each kind of lesson (profiles,
    paths, failures) is a module of functions, all writing through one ``LessonWriter``."""

    def __init__(self, device: DeviceMemory, episodes: TaskEpisodeStore) -> None:
        self.device = device
        self.episodes = episodes
        self.writer = LessonWriter(device)

    def __call__(self, ep: TaskEpisode, events: list[dict[str, Any]] | None = None) -> ExtractionResult:
        """Extract from a committed episode (events read from disk unless given); the episode then names what
        it taught (``reusable_lessons``), why it failed (``failure_causes``) and the conflicts it decided."""
        if events is None:
            events = self.episodes.events(ep.id).records
        before = (list(ep.reusable_lessons), list(ep.failure_causes), list(ep.conflicts))
        res = self.extract(ep, events)
        ep.reusable_lessons = list(dict.fromkeys([*ep.reusable_lessons, *res.ids]))[:50]
        if (ep.reusable_lessons, ep.failure_causes, ep.conflicts) != before:
            self.episodes.write(ep)
        return res

    # -- main ---------------------------------------------------------------------

    def extract(self, ep: TaskEpisode, events: list[dict[str, Any]]) -> ExtractionResult:
        """Write every lesson this episode teaches; returns counts."""
        res = ExtractionResult()
        # Only the phone teaches device lessons: the model's memory tools are not steps on the device.
        steps = device_steps(pair_steps(events))
        res.steps = len(steps)
        lesson = LessonContext(ep, steps, self.device)
        lesson.declared = declared_memories(events)
        lesson.events = events  # read once: outcome doubt looks at the first screen and the verifier in them
        phase = ep.outcome.failure_phase
        if phase == "exception" and not ep.outcome.success:
            # The runtime raised: the episode records it, but nothing the phone did is known to have
            # caused it, so it teaches no failure; the app facts its paired calls showed still hold.
            ep.failure_causes = list(dict.fromkeys([*ep.failure_causes, phase_cause(lesson)]))
        writers: list[tuple[str, Any]] = []
        if any(s.has_result for s in steps):  # nothing done, nothing learned about the device or apps
            writers.append(("device_profile", lambda: learn_device_profile(self.writer, lesson, res)))
            writers += [(f"app_profile:{a}", lambda a=a: learn_app_profile(self.writer, lesson, a, res))
                        for a in lesson.apps]
        # A crashed episode (the recorder stopped before finish), or a run that stopped rather than failed
        # (ended without a word while it was going on), teaches only its app facts, at low confidence: its
        # path and its end are not known. A raised run keeps what its paired calls showed.
        lesson.stopped = phase == "interrupted" or (
            phase != "exception" and not ep.outcome.success and outcome_unfinished(ep.outcome, steps))
        if lesson.stopped and phase != "interrupted" and (phase or ep.outcome.failure_reason):
            ep.failure_causes = list(dict.fromkeys([*ep.failure_causes, phase_cause(lesson)]))  # its word, kept
        if steps and not lesson.stopped:
            if ep.outcome.success:
                writers.append(("procedure", lambda: learn_procedure(self.writer, lesson, res)))
            writers += [("navigation", lambda: learn_navigation(self.writer, lesson, res)),
                        ("calibration", lambda: learn_calibration(self.writer, lesson, res)),
                        ("failure", lambda: learn_failures(self.writer, lesson, res)),
                        ("ui_anchor", lambda: learn_ui_anchors(self.writer, lesson, res))]
        for name, write in writers:
            try:
                write()
            except (UnsafePathError, FileProblemError) as exc:
                # A refused write (a symlink planted in the tree) or a file a person broke loses that
                # lesson only, never the others; verify names the file.
                res.errors.append(f"{name}: {exc}")
                log.error("memory: lesson %s of %s not written: %s", name, ep.id, exc)
        for ids, rule, decision, detail, against in lesson.decisions:
            evidence: dict[str, Any] = {"episode": lesson.ep.id}
            if against:
                evidence["against"] = against
            self.device.conflicts.add(ids, rule=rule, decision=decision, evidence=evidence, detail=detail)
            ep.conflicts = list(dict.fromkeys([*ep.conflicts, *(i for i in ids if i)]))[:50]
        return res
