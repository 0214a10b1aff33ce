"""A forget right after a retrieve leaves no forgotten word in the postings the retrieve was still writing in the
background (they would land after the forget dropped the cache).

It reaches inside `retrieval._postings_cache` to slow the background write down, so the race is certain instead of
a matter of timing."""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from typing import Any

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.retrieval import _postings_cache

WORD = "Quorvexity"


def test_a_forget_waits_for_the_postings_a_retrieve_is_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "m"
    plane = MemoryPlane.open(root)
    for i in range(80):  # enough memories for the long-term postings to be persisted under .cache/
        plane.long_term.save_memory(type="fact", content=f"filler fact number {i} about topic {i * 7}")
    mem = plane.long_term.save_memory(type="fact", content=f"The {WORD} gate code of the Zorbix flat is 4417")
    save = _postings_cache.TokenCache.save

    def slow_save(self: Any, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.5)  # the forget starts while the retrieve's postings are being written
        save(self, *args, **kwargs)

    monkeypatch.setattr(_postings_cache.TokenCache, "save", slow_save)
    plane.retrieve(MemoryRetrieveRequest(input="what is the Zorbix gate code"))
    assert plane.forget(mem.id)
    plane.flush()
    plane.close()
    for p in (root / ".cache").rglob("*.gz"):
        assert WORD.lower().encode() not in gzip.decompress(p.read_bytes()).lower(), p
