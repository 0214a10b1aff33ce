"""CompactionHost: what layered compaction needs from the ledger it compacts, and the ledger's view of its state."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, cast

from ._capsules import CapsuleLens
from ._messages import Message
from ._records import SummaryBook
from ._turns import Turn

T = TypeVar("T")


class CompactionHost(Protocol):
    """What layered compaction needs from the ledger it compacts (a TranscriptLedger)."""

    turns: list[Turn]  # every committed turn, in order (the host appends; compaction only reads)
    summaries: SummaryBook  # the visual summaries a capsule lens is given
    capsule_lens: CapsuleLens  # writes the capsule of a closed segment (may be swapped after start)
    goal: str | None  # the task's goal, as the snapshot names it
    redact: Callable[[Any], Any]  # scrubs text typed into password fields from what is written
    root: Path | None  # the memory root: no write below it follows a link (None: a ledger on its own)

    def append_record(self, record: Mapping[str, Any]) -> None:
        """Append one line to steps.jsonl (what a restart replays)."""

    def submit_capsule(self, job: Callable[[], None]) -> bool:
        """Run a capsule job in the background; False when it was refused (the pool is full or closed)."""

    def tokens_of(self, m: Message) -> int:
        """Heuristic size of one message."""

    def estimated_tokens(self) -> int:
        """Heuristic size of the rendered transcript."""

    def prompt_tokens(self) -> int:
        """The size the thresholds read."""

    def frozen_tokens(self) -> int:
        """Heuristic size of the frozen zone F."""

    def prompt_changed(self) -> None:
        """F was rewritten: the last measured prompt size no longer describes the prompt."""


class CompactionState(Generic[T]):
    """A host attribute that is its compaction's, read-only (``ledger.chunks`` is ``ledger.compaction.chunks``)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> T:
        if obj is None:
            return cast(T, self)  # on the class: the descriptor itself (help(), introspection)
        return cast(T, getattr(obj.compaction, self.name))
