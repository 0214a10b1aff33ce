"""Outcome updates: the memories an episode used gain or lose trust from how it ended."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from device_memory import DeviceItem, DeviceMemory, Failure, type_of_id
from lifecycle import EvidenceRef

from ._model import TaskEpisode
from ._steps import Step, pair_steps
from ._store import TaskEpisodeStore

log = logging.getLogger("memory_plane")

SUCCESS_BOOST = 0.05
FAILURE_DROP = 0.15
CONTRADICTION_DROP = 0.25


def trigger_passed(trigger: dict[str, Any], steps: list[Step]) -> bool:
    """Tell whether an episode did what a failure memory's trigger warns about."""
    if not trigger:
        return False
    tool = trigger.get("tool")
    for s in steps:
        if tool and s.tool != tool:
            continue
        if trigger.get("input_contains_non_ascii") and not (s.text and not s.text.isascii()):
            continue
        if trigger.get("page") and trigger["page"] not in (s.page_before, s.page_after):
            continue
        if trigger.get("app") and trigger["app"] not in (s.app_before, s.app_after):
            continue
        return True
    return False


@dataclass
class OutcomeResult:
    """What the outcome update changed."""

    updated: list[str] = field(default_factory=list)
    conflicted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class OutcomeUpdater:
    """The writer's background job that applies an episode's outcome to the memories it used."""

    def __init__(self, device: DeviceMemory, episodes: TaskEpisodeStore) -> None:
        self.device = device
        self.episodes = episodes
        self.__name__ = "update_outcomes"

    def __call__(self, ep: TaskEpisode) -> OutcomeResult:
        """Apply the outcome of a committed episode (events read from disk)."""
        return self.apply(ep, self.episodes.events(ep.id).records)

    def apply(self, ep: TaskEpisode, events: list[dict[str, Any]]) -> OutcomeResult:
        """Update each referenced device memory once, by its type-qualified id."""
        res = OutcomeResult()
        steps = pair_steps(events)
        for ref in dict.fromkeys(ep.retrieved_memory_refs):
            item_type = type_of_id(ref)
            if item_type is None or item_type == "device_profile":
                res.skipped.append(ref)
                continue
            try:
                self._one(ep, steps, item_type, ref, res)
            except KeyError:
                res.skipped.append(ref)
        return res

    def _one(self, ep: TaskEpisode, steps: list[Step], item_type: str, ref: str, res: OutcomeResult) -> None:
        success = ep.outcome.success
        decision: dict[str, Any] = {}

        def change(cur: DeviceItem | None) -> DeviceItem | None:
            if cur is None:
                return None
            if any(r.type == "outcome" and r.id == ep.id for r in cur.evidence_refs):
                return None  # applied already (a retried job)
            now = self.device.clock()
            if isinstance(cur, Failure):
                passed = trigger_passed(cur.trigger, steps)
                if success and passed:
                    # The episode did exactly what the caution warns against, and it worked.
                    cur.failure_count += 1
                    cur.confidence = max(0.0, cur.confidence - CONTRADICTION_DROP)
                    if cur.status == "active":
                        cur.status = "conflicted"
                        decision.update(rule="success_contradicts_failure", decision="conflicted")
                elif success:
                    cur.success_count += 1  # heeded and the task worked; renewal needs the failure itself
                elif passed:
                    cur.occurrences += 1  # confirmed again
                    cur.confidence = min(0.98, cur.confidence + SUCCESS_BOOST)
                    cur.renew(now)
            elif success:
                cur.success_count += 1
                cur.confidence = min(0.95, cur.confidence + SUCCESS_BOOST)
                if cur.status == "expired":
                    cur.status = "active"
                cur.renew(now)
            else:
                cur.failure_count += 1
                cur.confidence = max(0.0, cur.confidence - FAILURE_DROP)
                cur.updated_at = now
                if cur.status == "active" and cur.failure_count >= 2 and cur.failure_count > cur.success_count:
                    cur.status = "conflicted"
                    decision.update(rule="repeated_failures", decision="conflicted")
            cur.add_evidence(EvidenceRef(type="outcome", id=ep.id))
            cur.summary = cur.body()
            return cur

        out = self.device.upsert(item_type, ref, change)
        if out is None:
            res.skipped.append(ref)
            return
        res.updated.append(ref)
        if decision:
            res.conflicted.append(ref)
            self.device.conflicts.add([ref], rule=decision["rule"], decision=decision["decision"],
                                      evidence={"episode": ep.id, "success": success})
