"""StepsLog: a transcript's own files, each written scrubbed and guarded below the memory root.

``steps.jsonl`` is what a cold start replays; the chunk files are what compaction writes beside it.
The ledger and its compaction share one StepsLog, so both write through the same redaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import append_line, atomic_write, dumps_compact

STEPS_FILE = "steps.jsonl"


class StepsLog:
    """Appends to ``steps.jsonl`` and writes the transcript's files, every one through ``redact``."""

    def __init__(self, directory: Path, root: Path | None) -> None:
        self.dir = directory
        self.root = root  # the memory root: no write below it follows a link (None: a ledger on its own)
        self.redact: Callable[[Any], Any] = lambda v: v  # the recorder's: text typed into password fields scrubbed

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one line to steps.jsonl (what a cold start replays)."""
        append_line(self.dir / STEPS_FILE, dumps_compact(self.redact(dict(record))), fsync=False, root=self.root)

    def write(self, path: Path, text: str) -> None:
        """Write a file of the transcript whole (a chunk's markdown), its text redacted."""
        atomic_write(path, self.redact(text), root=self.root)
