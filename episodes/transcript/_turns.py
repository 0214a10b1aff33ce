"""A committed step as the transcript shows it: its messages, when its screenshot gives way, and sizes.

Pure functions of a turn, the configuration and the summaries: the ledger decides when to call them
and persists what they decide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_plane.lifecycle import dumps_compact

from .._transcript_config import TranscriptSection
from ._chunks import Chunk, Era
from ._messages import Message, Part, image, text
from ._perception import estimate_image_tokens, estimate_text_tokens
from ._records import StepRecord, SummaryRecord

PENDING_PLACEHOLDER = "[visual summary pending; evidence at step {step}]"
FAILED_PLACEHOLDER = "[visual summary unavailable; evidence at step {step}]"


@dataclass
class Staged:
    """This turn's tail: what the model sees now and has not acted on yet."""

    screenshot: str | None = None
    width: int | None = None
    height: int | None = None
    elements: list[dict[str, Any]] = field(default_factory=list)
    ui_text: list[str] = field(default_factory=list)
    plan: str | None = None
    user_instructions: list[str] = field(default_factory=list)
    package: str | None = None
    activity: str | None = None
    dhash: str | None = None


@dataclass
class Turn:
    """One committed step as it appears in the transcript."""

    record: StepRecord
    image_size: tuple[int | None, int | None] = (None, None)
    decision: str | None = None  # None: image still shown; else the text that replaced it
    decided_at: int | None = None
    _cache: dict[tuple[bool, bool], tuple[Message, ...]] = field(default_factory=dict)


def scrub_decision(turn: Turn, total: int, summary: SummaryRecord | None, cfg: TranscriptSection) -> str | None:
    """The text that replaces a turn's screenshot now (at depth K), or None while the image stays."""
    depth = total - turn.record.step + 1
    k, grace = cfg.image_scrub_depth, cfg.pending_grace_steps
    if turn.decision is not None or not turn.record.pre_image or depth < k:
        return None
    s = summary
    if s is not None and s.status == "ready" and s.text:
        return f"[Visual summary of step {turn.record.step}] {s.text}"
    if s is not None and s.status in ("failed", "stale"):
        return FAILED_PLACEHOLDER.format(step=turn.record.step)
    if depth >= k + grace or not cfg.visual_summaries:
        return PENDING_PLACEHOLDER.format(step=turn.record.step)
    return None  # lossless while pending: keep the image a little longer


def turn_messages(turn: Turn, depth: int, cfg: TranscriptSection) -> tuple[Message, ...]:
    """The user, model and tool messages of a committed step at this depth (cached on the turn)."""
    strip = cfg.scrub_edge and depth >= cfg.xml_scrub_depth
    show_image = turn.decision is None
    key = (strip, show_image)
    cached = turn._cache.get(key)
    if cached is not None:
        return cached
    r = turn.record
    head = f"Step {r.step} ({r.t}) screen: {'/'.join(x for x in (r.package, r.activity) if x) or 'unknown'}"
    user_parts: list[Part] = [text(head)]
    for instr in r.user_instructions:
        user_parts.append(text(f"User @ Step {r.step}: {instr}"))  # never stripped, never evicted
    if not strip:
        if r.ui_text:
            user_parts.append(text("--- UI Element List ---\n" + "\n".join(r.ui_text)))
        if r.plan:
            user_parts.append(text("--- Plan ---\n" + r.plan))
    if r.pre_image:
        user_parts.append(image(r.pre_image) if show_image else text(turn.decision or ""))
    model_parts: list[Part] = []
    if r.thought:
        model_parts.append(text(r.thought))
    model_parts.append(Part("call", name=str(r.action.get("name")), args=dict(r.action.get("args") or {}),
                            call_id=r.step_id, signature=r.thought_signature))
    response: dict[str, Any] = {"result": r.result}
    if r.validator is not None:
        response["validator"] = r.validator
    if r.failure_recovery:
        response["recovery"] = r.failure_recovery
    if r.same_turn:
        response["read_before"] = r.same_turn  # what the turn's other tools returned, as excerpts with their files
    msgs = (Message("user", tuple(user_parts), r.step, "A"), Message("model", tuple(model_parts), r.step, "A"),
            # The response sits right after its call: a pair is never split by any scrub or cut.
            Message("tool", (Part("result", name=str(r.action.get("name")), args=response, call_id=r.step_id),),
                    r.step, "A"))
    turn._cache[key] = msgs
    return msgs


def frozen_key(snapshot: str | None, eras: Sequence[Era], chunks: Sequence[Chunk]) -> tuple[Any, ...]:
    """What the frozen zone depends on (it is rebuilt only when this changes)."""
    return (snapshot, tuple((e.start, e.end, e.paragraph, e.narrative) for e in eras),
            tuple(c.chunk_id for c in chunks))


def frozen_messages(snapshot: str | None, eras: Sequence[Era], chunks: Sequence[Chunk]) -> list[Message]:
    """The frozen zone F: the emergency snapshot, then eras, then chunks."""
    msgs: list[Message] = []
    if snapshot:
        msgs.append(Message("user", (text(snapshot),), None, "F"))
    for e in eras:
        msgs.append(Message("user", (text(e.render()),), None, "F"))
    for c in chunks:
        msgs.append(Message("user", (text(c.render()),), None, "F"))
    return msgs


def stable_prefix_len(messages: list[Message], turns: Sequence[Turn], cfg: TranscriptSection) -> int:
    """How many leading messages can no longer change (S, F and decided turns past the edge)."""
    total = len(turns)
    n = 0
    for m in messages:
        if m.zone in ("S", "F"):
            n += 1
            continue
        if m.zone != "A" or m.step is None:
            break
        depth = total - m.step + 1
        turn = turns[m.step - 1]
        settled = (turn.decision is not None or not turn.record.pre_image) and depth > cfg.xml_scrub_depth
        if not settled:
            break
        n += 1
    return n


def message_tokens(m: Message, image_size: tuple[int | None, int | None]) -> int:
    """Heuristic size of one message; its images are ``image_size``."""
    total = 0
    for p in m.parts:
        if p.kind == "image":
            total += estimate_image_tokens(*image_size)
        elif p.kind == "text":
            total += estimate_text_tokens(p.text)
        else:
            total += estimate_text_tokens(dumps_compact(p.args or {})) + 4
    return total


def similar_step(turns: Sequence[Turn], dhash: str, max_distance: int) -> int | None:
    """The older step whose screenshot's dHash is within ``max_distance`` bits of this one (the closest, the
    later on a tie); None when none is, or when one of the last 3 steps already is (just seen)."""
    from .._artifacts import hamming

    def distance(t: Turn) -> int | None:
        other = t.record.dhash
        if not other or len(other) != len(dhash):
            return None
        try:
            return hamming(other, dhash)
        except ValueError:
            return None

    if any(x is not None and x <= max_distance for x in map(distance, turns[-3:])):
        return None  # the screen is one the model has just seen: nothing to point at
    best: tuple[int, int] | None = None  # (distance, -step)
    for t in turns[:-3]:
        x = distance(t)
        if x is not None and x <= max_distance and (best is None or (x, -t.record.step) < best):
            best = (x, -t.record.step)
    return None if best is None else -best[1]
