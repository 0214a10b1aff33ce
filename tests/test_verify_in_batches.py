"""Verify and GC stream through a store (digests, removal candidates) and still report exactly what a check of
every parsed record reported: findings, marks, the rebuilt index and profile.md, GC's plan."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

from memory_plane import MemoryPlane
from memory_plane.lifecycle import GcReport, load_retention

THEN = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def _messy_tree(root: Path) -> None:
    """Twelve memories of four types, then a copy holding one id twice, a file renamed by hand, a broken file."""
    with MemoryPlane.open(root, clock=lambda: THEN) as plane:
        for i in range(12):
            plane.long_term.save_memory(type=("rule", "preference", "profile", "fact")[i % 4],
                                        content=f"memory number {i} about the {('gym', 'bank', 'cafe')[i % 3]} "
                                                f"code {i * 7}", priority=40 + i)
    mem = root / "long_term" / "memories"
    files = sorted(mem.glob("*.md"))
    shutil.copy(files[0], mem / "mem_copy_of_first.md")
    files[1].rename(mem / "mem_renamed_by_hand.md")
    files[2].write_text("---\nid: [unclosed\n---\nbroken\n")


# What verify reported on this tree when it held every parsed record of a store at once.
PROBLEMS = [
    ("parse", "long_term/memories/mem_4f973234995c.md"),
    ("duplicate_id", "long_term/memories/mem_copy_of_first.md"),
    ("name_mismatch", "long_term/memories/mem_renamed_by_hand.md"),
]
INDEX = [
    ("mem_86cbe42c5019", "expired", "memories/mem_86cbe42c5019.md"),
    ("mem_f704be8f8303", "active", "memories/mem_f704be8f8303.md"),
    ("mem_1e63e6e39685", "active", "memories/mem_1e63e6e39685.md"),
    ("mem_86f225ee4023", "active", "memories/mem_86f225ee4023.md"),
    ("mem_2453da2a1ce6", "active", "memories/mem_renamed_by_hand.md"),
    ("mem_90ea363ab8ff", "active", "memories/mem_90ea363ab8ff.md"),
    ("mem_c4c0f9bf3ca6", "active", "memories/mem_c4c0f9bf3ca6.md"),
    ("mem_baf03c1086c7", "expired", "memories/mem_baf03c1086c7.md"),
    ("mem_a38cbb2edd6f", "active", "memories/mem_a38cbb2edd6f.md"),
    ("mem_817c6aff3a45", "active", "memories/mem_817c6aff3a45.md"),
    ("mem_91935478b3b7", "active", "memories/mem_91935478b3b7.md"),
]
# The copy of a preference is listed twice, as the file-by-file build always listed it.
PROFILE = ["mem_f704be8f8303", "mem_1e63e6e39685", "mem_1e63e6e39685", "mem_86f225ee4023", "mem_90ea363ab8ff",
           "mem_c4c0f9bf3ca6", "mem_a38cbb2edd6f", "mem_817c6aff3a45", "mem_91935478b3b7"]


def test_a_store_checked_in_one_streaming_pass_reports_what_it_reported_before(tmp_path: Path) -> None:
    import json

    root = tmp_path / "m"
    _messy_tree(root)
    with MemoryPlane.open(root) as plane:
        rep = plane.verify(now=NOW)
    assert [(p.category, p.path) for p in rep.problems] == PROBLEMS
    assert rep.checked == 14
    assert rep.stats["expired_marked"] == ["mem_86cbe42c5019", "mem_baf03c1086c7", "mem_2453da2a1ce6"]
    assert rep.rebuilt_indexes == ["long_term"]
    lines = [json.loads(ln[2:]) for ln in (root / "long_term" / "index.yaml").read_text().splitlines()
             if ln.startswith("- {")]
    assert [(e["id"], e["status"], e["path"]) for e in lines] == INDEX
    profile = [ln[3:].split(" ", 1)[0] for ln in (root / "long_term" / "profile.md").read_text().splitlines()
               if ln.startswith("- [")]
    assert profile == PROFILE
    with MemoryPlane.open(root) as plane:  # a second verify finds what the first found
        again = plane.verify(now=NOW)
    assert [(p.category, p.path) for p in again.problems] == PROBLEMS


def test_gc_given_only_its_candidates_plans_what_it_plans_from_every_item(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _messy_tree(root)
    later = datetime(2027, 6, 1, tzinfo=timezone.utc)
    with MemoryPlane.open(root) as plane:
        plane.verify(now=later)  # marks the facts expired; past their grace by ``later``
        store, ret = plane.long_term, load_retention(None)
        every = list(store.iter_items())
        few = [i for i in every if store.gc_candidate(i, ret, later)]
        assert 0 < len(few) < len(every)
        full, streamed = GcReport(dry_run=True), GcReport(dry_run=True)
        assert store.collect(ret, full, later, True, items=every) == store.collect(ret, streamed, later, True,
                                                                                     items=few)
        assert full.to_dict() == streamed.to_dict() and full.removed
