"""What every kind of lesson shares: the goal pattern, the extraction result and the upsert of one lesson."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memory_plane.device_memory import DeviceMemory, mask_values, occurs
from memory_plane.lifecycle import FileProblemError

from ._lesson_context import LessonContext
from ._model import TaskEpisode
from ._steps import Step

log = logging.getLogger("memory_plane")


WEAK_INTENTS = frozenset({"open_app", "check_info", "search"})
"""Intents nearly every goal also names (retrieval's broad intents): alone they do not say which task it is."""

# A quoted value (not an apostrophe between letters: "Bob's"), in ASCII or CJK quotes.
_QUOTED = re.compile("(?<![A-Za-z])[\"“”'‘’「」『』][^\"“”'‘’「」『』]{0,300}[\"“”'‘’「」『』](?![A-Za-z])")


def masked_goal(ep: TaskEpisode) -> str:
    """A goal's text with its values masked: quoted text and the target as ``…``, numbers as ``#``, lowercase,
    without punctuation (two goals that differ only in what they type, name or count mask alike)."""
    text = _QUOTED.sub(" … ", ep.user_goal)
    target = ep.normalized_goal.target
    if target and target.strip():
        # Where it stands as a word: a short target ("Al") is not masked inside another word ("Alarm").
        text = re.sub("(?<![A-Za-z0-9])" + re.escape(target.strip()) + "(?![A-Za-z0-9])", " … ", text,
                      flags=re.IGNORECASE)
    text = re.sub(r"\d+(?:[.:]\d+)*", "#", text.lower())
    text = re.sub(r"[^\w#…\s]+", " ", text)
    text = re.sub(r"…(?:\s*…)+", "…", " ".join(text.split()))
    return shortened(text, 120)


def shortened(text: str, limit: int) -> str:
    """A text within ``limit`` characters that keeps its head and its end: a long goal's last words often say
    what tells it from another (the app it is done in, the product it is about), so they are not cut away."""
    if len(text) <= limit:
        return text
    tail = limit // 3
    head, end = text[:limit - tail - 3], text[-tail:]
    if " " in head and not text[len(head)].isspace():
        head = head.rsplit(" ", 1)[0]  # whole words only, at both ends
    if " " in end and not text[-tail - 1].isspace():
        end = end.split(" ", 1)[1]
    return f"{head.rstrip()} … {end.lstrip()}"


def goal_pattern(ep: TaskEpisode) -> str:
    """The goal group a lesson is kept for: a specific intent alone when a target is its variable part (send a
    message to anyone), a specific intent with the masked text otherwise (dark mode and font size stay two
    lessons), and the masked text alone when the intent is weak (open, check, search) or unknown: five tasks
    that all open one app are five groups."""
    intent = ep.normalized_goal.intent if ep.normalized_goal.intent not in (None, "unknown") else None
    if intent in WEAK_INTENTS:
        intent = None
    if intent and ep.normalized_goal.target:
        return intent
    text = masked_goal(ep)
    return f"{intent}: {text}" if intent else text


TITLE_TEXT = 90  # the masked goal's share of a title: a distinguishing suffix still fits in the bound


def title_text(ep: TaskEpisode, values: Iterable[str] = ()) -> str:
    """A goal's text for a title with only its values masked (``…``): quoted text, the values its steps took
    from the goal (``values``), numbers as ``#``; every other word kept, the parsed target too (two tasks that
    differ in it are two tasks)."""
    text = _QUOTED.sub(" … ", ep.user_goal)
    text = mask_values(text, [v for v in values if v and v.strip()], " … ")
    text = re.sub(r"\d+(?:[.:]\d+)*", "#", text.lower())
    text = re.sub(r"[^\w#…\s]+", " ", text)
    return re.sub(r"…(?:\s*…)+", "…", " ".join(text.split()))


def goal_title(ep: TaskEpisode, app_name: str | None, values: Iterable[str] = (), *,
               device: DeviceMemory | None = None, app_id: str | None = None, pattern: str | None = None) -> str:
    """A lesson's title: its app and the goal with its values masked (``title_text``). Two different tasks never
    share one: when a procedure of another goal group (``pattern``) of the app already holds it (``device``),
    the goal's own words are added to tell them apart; the same task with other values shares it."""
    title = f"{app_name or 'Device'}: {shortened(title_text(ep, values), TITLE_TEXT)}"
    if device is None:
        return title[:120]
    taken = any(e.get("title") == title and e.get("goal") != pattern
                for e in device.entries_where("procedure", app=app_id))
    if taken:
        # What the mask hid tells the two apart: this goal's values, else its words the title does not show.
        hidden = [m.strip(" '\"“”‘’「」『』") for m in _QUOTED.findall(ep.user_goal)]
        hidden += [v for v in values if v and occurs(v, ep.user_goal)]
        if not hidden:
            shown = set(title.lower().split())
            hidden = [w for w in re.sub(r"[^\w\s]+", " ", ep.user_goal.lower()).split() if w not in shown]
        words = " ".join(dict.fromkeys(h for h in hidden if h)) or ep.user_goal
        title = f"{title} ({words[:max(8, 120 - len(title) - 3)]})"
    return title[:120]


@dataclass
class ExtractionResult:
    """What one extraction wrote: items created and updated by type, and what it skipped."""

    created: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    skipped_tombstoned: int = 0
    steps: int = 0
    errors: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # items this episode created or updated

    def bump(self, kind: str, item_type: str) -> None:
        """Count one created or updated item."""
        d = self.created if kind == "created" else self.updated
        d[item_type] = d.get(item_type, 0) + 1

    @property
    def duplicates_avoided(self) -> int:
        """Lessons that updated an existing item instead of adding a twin."""
        return sum(self.updated.values())


class LessonWriter:
    """The device memory lessons are written to, and the one upsert of an item every kind of lesson uses."""

    def __init__(self, device: DeviceMemory) -> None:
        self.device = device

    def upsert(self, lesson: LessonContext, res: ExtractionResult, item_type: str, item_id: str, create: Any,
               merge: Any, lesson_key: str, *, evidence: list[Step]) -> Any:
        """Create the item (``create``) or merge this episode into it (``merge``), once per episode, with the
        evidence of ``evidence``; counted in ``res``. A tombstoned item stays forgotten, a broken file is skipped."""
        state: dict[str, str | None] = {"kind": None}
        ref = lesson.evidence_of(evidence)  # the calls and results that show this lesson

        def change(cur: Any) -> Any:
            now = self.device.clock()
            if cur is None:
                item = create()
                item.lesson_key = lesson_key
                item.add_evidence(ref)
                item.renew(now)
                state["kind"] = "created"
                return item
            if any(r.id == lesson.ep.id and r.type == "episode" for r in cur.evidence_refs):
                return None  # this episode was already applied (a retried job): apply once
            merge(cur)
            cur.add_evidence(ref)
            cur.updated_at = now
            if cur.status in ("active", "expired"):
                cur.status = "active"
                cur.renew(now)
            state["kind"] = "updated"
            return cur

        try:
            out = self.device.upsert(item_type, item_id, change)
        except FileProblemError as exc:
            # This item's file is broken (a hand edit verify will name): skip this one lesson only; the
            # other items of the same kind (further steps, other anchors) are still written.
            res.errors.append(f"{item_type} {item_id}: {exc}")
            log.error("memory: lesson %s of %s skipped, its file is unreadable: %s", item_id, lesson.ep.id, exc)
            return None
        if out is None and state["kind"] is None:
            res.skipped_tombstoned += 1
        elif state["kind"]:
            res.bump(str(state["kind"]), item_type)
            if item_id not in res.ids:
                res.ids.append(item_id)
        return out


def setter_of(fields: dict[str, Any]) -> Any:
    """A change function for YamlCollection.update that sets fields on an existing item."""

    def change(cur: Any) -> Any:
        return cur.model_copy(update=fields) if cur is not None else None

    return change
