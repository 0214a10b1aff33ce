"""What a long-term save does: ignore a duplicate, supersede what it replaces, or stand beside the user's word."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memory_plane.lifecycle import FileProblemError, StorageError, UnsafePathError, UsageError

from ._contradiction import contradicts, meaning_length
from ._long_term_candidates import Probe
from ._long_term_model import (
    GENERIC_ENTITIES,
    PRIORITY,
    USER_WORD_TYPES,
    LongTermMemory,
    SaveResult,
    _norm,
    is_users,
    one_line_title,
)
from ._tokens import token_set

if TYPE_CHECKING:
    from ._long_term import LongTermStore


@dataclass
class SaveRequest:
    """One save_memory call, its text already trimmed and its id derived from it."""

    type: str
    text: str
    key: str
    mem_id: str
    title: str | None
    tags: list[str]
    entities: list[str]
    force: bool
    priority: int | None
    ttl: str | None
    applicability: dict[str, Any] | None
    source_refs: Iterable[str]
    source: str

    @property
    def by_model(self) -> bool:
        """Whether the model's save_memory tool asked."""
        return self.source == "model"

    @property
    def guarded(self) -> bool:
        """The user's word stands: a model save never replaces the user's rule or preference."""
        return self.by_model and self.type in USER_WORD_TYPES


@dataclass
class Plan:
    """What a new memory does to the active ones of its type."""

    replaced: list[LongTermMemory] = field(default_factory=list)
    blocked: list[LongTermMemory] = field(default_factory=list)  # the user's memories a model save contradicts
    beside: list[str] = field(default_factory=list)  # the user's memories a model save would have replaced
    reason: str | None = None
    contradicted: list[str] = field(default_factory=list)


def run_save(store: LongTermStore, req: SaveRequest) -> SaveResult:
    """Save under the store's lock (new file first, then the ones it replaces), then log the conflicts."""
    with store.lock():
        blocked = store.tombstones.blocked_ids()
        forgotten = req.mem_id in blocked
        if not req.force and (forgotten or req.key in store.tombstones.blocked_hashes()):
            return SaveResult(req.mem_id, "ignored", "forgotten on purpose (force=True saves it again)")
        if forgotten:
            # Saved again on purpose: the file written now is no forget's leftover (before it is written).
            store.tombstones.saved_again("memory", req.mem_id)
        req.mem_id = _own_id(store, req)
        actives = [m for m in _candidates(store, req) if m.id not in blocked or m.id == req.mem_id]
        early = _early_answer(store, req, actives)
        if early is not None:
            return early
        plan = _plan(req, actives)
        mem, now = _new_memory(store, req, plan)
        store._write(mem)
        for old_mem in plan.replaced:
            # New file first, then the old one marked replaced: a crash between leaves two actives,
            # which the next save dedupes, never zero.
            old_mem.status = "replaced"
            old_mem.superseded_by = mem.id
            old_mem.updated_at = now
            store._write(old_mem)
        store.update_profile([mem, *plan.replaced])
    return _answer(store, req, plan, mem)


def _candidates(store: LongTermStore, req: SaveRequest) -> list[LongTermMemory]:
    """The active memories of the save's type it may match, in file order: the ones the candidates index
    names (and the user's memories a held conflict of this id names), else every one."""
    found = store.candidate_actives(Probe(req.type, _norm(req.text), req.entities, req.tags))
    if found is None:
        return [m for m in (i.record for i in store.iter_items()) if m is not None and m.status == "active"
                and m.type == req.type]
    held = _conflicted(store, req.mem_id)
    have = {m.id for m in found}
    extra = [m for m in (_get(store, x) for x in held if x not in have)
             if m is not None and m.status == "active" and m.type == req.type]
    if not extra:
        return found
    order = {n: i for i, n in enumerate(sorted(store.path_for(m.id).name for m in [*found, *extra]))}
    return sorted([*found, *extra], key=lambda m: order[store.path_for(m.id).name])


def _get(store: LongTermStore, mem_id: str) -> LongTermMemory | None:
    try:
        return store.get(mem_id)
    except (OSError, FileProblemError, UsageError, UnsafePathError):
        return None


def _conflicted(store: LongTermStore, mem_id: str) -> list[str]:
    """The ids an already conflicted memory of this id names."""
    cur = _get(store, mem_id)
    return list(cur.conflicts_with) if cur is not None and cur.status == "conflicted" else []


def _own_id(store: LongTermStore, req: SaveRequest) -> str:
    """The id a new memory of this text gets: the text's own id, unless a file of the other source holds it.

    Ids come from the text, so the model saving the words of the user's replaced rule would otherwise rewrite
    the user's file (its source, its created_at, the history its successor's ``supersedes`` points at); a
    file of the other source is never written over: the new memory takes the first free id after it.
    """
    for n in range(_MAX_TWINS):
        cand = req.mem_id if n == 0 else f"{req.mem_id}_{req.source}{n if n > 1 else ''}"
        try:
            cur = store.get(cand)
        except (OSError, FileProblemError):
            continue  # a file that does not load is nobody's to write over (verify quarantines it)
        if cur is None or is_users(cur) != req.by_model:
            return cand
    raise StorageError(store.path_for(req.mem_id), f"no free id after {_MAX_TWINS} memories of the same text")


_MAX_TWINS = 50


def _early_answer(store: LongTermStore, req: SaveRequest, actives: list[LongTermMemory]) -> SaveResult | None:
    """The answer when nothing new is written: the same conflict again, a duplicate, the user taking it over."""
    norm = _norm(req.text)
    if req.guarded:
        held = _held_conflict(store, req.mem_id, actives)
        if held:  # the same contradicting save again: one conflict, logged once
            return SaveResult(req.mem_id, "conflicted", _stands(req.type, held), conflicts_with=held)
    # "Long enough to mean something" is measured the same way for CJK and Latin text.
    for m in actives:
        old = _norm(m.content)
        if old == norm and not req.by_model and not is_users(m):
            # The user says what the model had saved: from now on it is the user's own word.
            m.source, m.updated_at = "user", store.clock()
            store._write(m)
            store.update_profile([m])
            return SaveResult(m.id, "saved", "the model had saved the same; it is now the user's own")
        if old == norm or (meaning_length(norm) >= 8 and norm in old and (req.by_model or is_users(m))):
            return SaveResult(m.id, "ignored", "the same or a broader memory exists")
    return None


def _plan(req: SaveRequest, actives: list[LongTermMemory]) -> Plan:
    """Which active memories the new one replaces, contradicts, or must stand beside."""
    plan = Plan()
    norm = _norm(req.text)
    for m in actives:
        old = _norm(m.content)
        topic = bool(set(map(str.lower, m.entities)) & set(map(str.lower, req.entities)) - GENERIC_ENTITIES
                     or set(map(str.lower, m.tags)) & set(map(str.lower, req.tags)))
        opposite = req.type in USER_WORD_TYPES and contradicts(old, norm, same_topic=topic)
        if req.guarded and is_users(m):
            if opposite:
                plan.blocked.append(m)
            elif (meaning_length(old) >= 8 and old in norm) or _same_subject(m, req.entities, req.tags, old, norm):
                plan.beside.append(m.id)
            continue
        if meaning_length(old) >= 8 and old in norm:
            plan.replaced.append(m)  # the new memory says the same, more specifically
        elif opposite:
            # Two rules that cannot both be followed: the newer word wins (the user's over the model's).
            plan.replaced.append(m)
            plan.contradicted.append(m.id)
            plan.reason = f"contradicts {m.id}, which it replaces"
        elif _same_subject(m, req.entities, req.tags, old, norm):
            plan.replaced.append(m)  # same subject, same kind, mostly the same words
    if plan.blocked:
        plan.replaced, plan.contradicted = [], []  # a memory that is not followed replaces nothing
    return plan


def _new_memory(store: LongTermStore, req: SaveRequest, plan: Plan) -> tuple[LongTermMemory, Any]:
    """The memory a save writes, and the time it was made."""
    now = store.clock()
    kind = req.type
    ttl_kind = "long_term_procedure" if kind == "procedure" else kind
    mem = LongTermMemory(
        id=req.mem_id, type=kind, title=one_line_title(req.title, req.text),  # type: ignore[arg-type]
        content=req.text, priority=req.priority if req.priority is not None else PRIORITY[kind],
        confidence=0.9 if kind == "rule" else 0.8, tags=req.tags, entities=req.entities,
        source_refs=list(req.source_refs), created_at=now, updated_at=now,
        ttl=req.ttl or store.retention.ttl_text(ttl_kind), applicability=req.applicability or {},
        lesson_key=req.key, source=req.source,
    )
    mem.renew(now)
    mem.supersedes = plan.replaced[0].id if plan.replaced else None
    if plan.blocked:
        mem.status = "conflicted"
        mem.conflicts_with = [m.id for m in plan.blocked]
    return mem, now


def _answer(store: LongTermStore, req: SaveRequest, plan: Plan, mem: LongTermMemory) -> SaveResult:
    """The conflict log names both sides (outside the collection's lock: the log has its own); the answer."""
    if plan.blocked:
        held = [m.id for m in plan.blocked]
        store.conflicts.add([mem.id, *held], rule="user_memory_stands", decision="conflicted",
                            evidence={"memory": mem.id, "source": req.source, "conflicts_with": held,
                                      "kept_active": held})
        return SaveResult(mem.id, "conflicted", _stands(req.type, held), conflicts_with=held)
    for old_id in plan.contradicted:
        store.conflicts.add([mem.id, old_id], rule="contradiction", decision="superseded",
                            evidence={"memory": mem.id, "source": req.source, "conflicts_with": [old_id],
                                      "superseded": old_id})
    if plan.replaced:
        return SaveResult(mem.id, "superseded", plan.reason, [m.id for m in plan.replaced])
    if plan.beside:
        return SaveResult(mem.id, "saved", f"kept beside the user's own {', '.join(plan.beside)}, which a model "
                                           "save does not replace")
    return SaveResult(mem.id, "saved")


def _held_conflict(store: LongTermStore, mem_id: str, actives: list[LongTermMemory]) -> list[str]:
    """The user's active memories an already conflicted model memory of this id contradicts ([] if none)."""
    try:
        cur = store.get(mem_id)
    except (OSError, FileProblemError):
        return []
    if cur is None or cur.status != "conflicted":
        return []
    live = {m.id for m in actives if is_users(m)}
    return [x for x in cur.conflicts_with if x in live]


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
