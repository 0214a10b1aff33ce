"""What a long-term forget does: the tombstone first, then the text scrubbed from the tree, the file last.

Order, and why:
1. a tombstone per memory (with its content hash) is appended and fsynced under the store's lock: from then
   on the memory is forgotten whatever happens next (a save of the same text answers ``ignored``, retrieval
   and recall leave its file out);
2. the text is replaced by ``[forgotten]`` wherever the tree copied it (``_scrub``), while the memory's own
   file still holds it;
3. the index lines (blanked in place: ``IndexFile.blank_out``), the files, their rows of the candidates index and
   ``profile.md`` go last.

A kill between 1 and 3 leaves a forgotten memory's file: the next forget, ``verify --fix`` or GC finds it
by its tombstone and runs 2 and 3 again with the text the file still holds (``finish_forgets``).

Forgetting a memory also forgets the older memories it replaced (its ``supersedes`` chain): they said the
same, less specifically, and would keep the text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memory_plane.lifecycle import (
    FileProblemError,
    UnsafePathError,
    UsageError,
    content_hash,
    index_stamp,
    index_writes,
    is_safe_id,
    remove_path,
)

from ._long_term_model import LongTermMemory, _norm
from ._scrub import scrub_tree

if TYPE_CHECKING:
    from ._long_term import LongTermStore

__all__ = ["check_forget_id", "finish_forgets", "run_forget"]

KIND = "memory"
"""The type a long-term memory's tombstone names."""


def check_forget_id(item_id: object) -> str:
    """The id if a memory can have it, else a UsageError naming it (never an OSError from a file name)."""
    if isinstance(item_id, str) and is_safe_id(item_id):
        return item_id
    text = str(item_id)
    shown = repr(text[:80]) + (f" (and {len(text) - 80} more characters)" if len(text) > 80 else "")
    raise UsageError(f"no memory can have the id {shown}: ids are 1-80 characters of a-z, 0-9, _ and -")


def _key(mem: LongTermMemory) -> str:
    return content_hash("long_term", mem.type, _norm(mem.content))


def run_forget(store: LongTermStore, mem_id: str, reason: str) -> bool:
    """Forget a memory and the ones it replaced (see the module); True if it existed."""
    check_forget_id(mem_id)
    with store.lock():
        mem = store.get(mem_id)
        if mem is None:
            return False
        chain = _chain(store, mem)
        already = store.tombstones.blocked_ids()
        for m in chain:
            if m.id not in already:  # a leftover forgotten again: its tombstone is written once
                # Appended and fsynced before anything is removed: a kill from here on leaves a forgotten file.
                store.tombstones.add(KIND, m.id, reason=reason, content_hashes=[_key(m), m.lesson_key or ""])
    _complete(store, chain)
    return True


def _chain(store: LongTermStore, mem: LongTermMemory) -> list[LongTermMemory]:
    """The memory and every replaced memory it superseded, directly or through another: found through the
    candidates index when it is current (a row per file names what replaced it), else through index.yaml (its
    lines name the same; it is checked against the files first), each one read from its file, so a forget reads
    the memories it removes, not every memory of the store."""
    successors: Callable[[str], list[str]]
    if store.candidates.current():
        successors = store.candidates.replaced_by
    else:
        by_successor: dict[str, list[str]] = {}
        for e in store.entries():
            if e.get("status") == "replaced" and isinstance(e.get("superseded_by"), str):
                by_successor.setdefault(e["superseded_by"], []).append(str(e["id"]))
        successors = lambda mem_id: by_successor.get(mem_id, [])  # noqa: E731
    chain, seen = [mem], {mem.id}
    frontier = [mem]
    while frontier:
        cur = frontier.pop()
        for mem_id in [*successors(cur.id), *([cur.supersedes] if cur.supersedes else [])]:
            if mem_id in seen:
                continue
            seen.add(mem_id)
            try:
                m = store.get(mem_id)
            except (FileProblemError, UnsafePathError):
                continue  # a link by hand to no memory, or to one that does not read: nothing of it to forget
            if m is not None and m.status == "replaced" and (m.superseded_by == cur.id or m.id == cur.supersedes):
                chain.append(m)
                frontier.append(m)
    return chain


def _complete(store: LongTermStore, mems: list[LongTermMemory]) -> list[str]:
    """Steps 2 and 3 for tombstoned memories: the text scrubbed, then their files; the paths changed."""
    # Outside the store's lock: the scrub takes the session's, the episodes' and the device's locks.
    hook = store.index_hook
    changed = scrub_tree(store.root, [t for m in mems for t in (m.content, m.title or "")],
                         lock_timeout=store.lock_timeout, keep=(hook.kept,) if hook is not None else ())
    names = [store.path_for(m.id).name for m in mems]
    with store.lock():
        with index_writes(store):
            current = store.candidates.current()
            # Their lines blanked in place where the candidates index saw them start (checked there first): the
            # index file is never rewritten, so a forget costs what it removes, whatever the store's size.
            blanked: list[Callable[[tuple[Any, Any] | None], None]] = []
            stamp = index_stamp(store) if hook is not None else None

            def forgetting(spans: list[tuple[int, bytes]]) -> None:
                # The snapshot of the index loses their words before their lines do (a kill in between leaves a
                # snapshot that no longer vouches for the file: it is checked, or dropped).
                if hook is not None:
                    blanked.append(hook.forgetting(store.index.path, spans))

            gone = store.index.blank_out([m.id for m in mems], store.candidates.line_hints(names) if current else None,
                                         before=forgetting)
            if hook is not None and gone and not blanked:
                hook.dropped()  # the index was rewritten without them: the snapshot cannot say which lines went
            for m in mems:
                path = store.path_for(m.id)
                if path.exists():
                    remove_path(store.root, path)  # every removal of a memory file is this one
                    changed.append(store.rel(path))
            for done in blanked:  # lines and files went together: the index still matches its files
                done((stamp, index_stamp(store)))
            # The rows go with the files (their deleted pages overwritten): no key of the text stays, even in an
            # index that was behind the folder (left behind: the next save brings it up to date).
            store.candidates.drop(names, seal=current)
        store.update_profile(mems)  # their lines go (read again only when one of them was in profile.md)
    return changed


def finish_forgets(store: LongTermStore, *, dry_run: bool = False) -> list[str]:
    """Files of forgotten memories a killed forget left behind, removed (and their text scrubbed) unless
    ``dry_run``; their paths, relative to the root."""
    left: list[LongTermMemory] = []
    for mem_id in store.tombstones.forgotten_of(KIND):
        try:
            mem = store.get(mem_id)
        except (OSError, FileProblemError, UnsafePathError):
            continue  # unreadable: verify names the file itself
        if mem is not None:
            left.append(mem)
    if dry_run or not left:
        return [store.rel(store.path_for(m.id)) for m in left]
    _complete(store, left)
    return [store.rel(store.path_for(m.id)) for m in left]
