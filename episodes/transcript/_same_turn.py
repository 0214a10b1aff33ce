"""Same-turn budgets: tool outputs the model reads before it decides, bounded by a soft and a hard limit.

Within one turn the model may call tools that do not end the turn (read a note, list files, run a shell
command, recall history); their outputs grow the prompt of every later call of that turn. Past the soft limit
the older outputs give way to their envelopes (the full text stays on disk) and the context says the budget
is spent; at the hard limit no further output is shown and the model is told to decide now with a
turn-ending action. The limits count what the turn adds (its tail and everything these tools returned, as
read, so compressing older outputs never buys room for more exploration), not the whole prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from memory_plane.lifecycle import dumps_compact

from ._perception import envelope, estimate_text_tokens

COMPRESSED_TOKENS = 500  # an older output past the soft limit keeps an envelope of about this size
SOFT_NOTE = ("Same-turn budget: {used} of {soft} tokens used by this turn's tool outputs; older outputs are now "
             "shown as excerpts (full text on disk). Prefer deciding over more exploration.")
HARD_NOTE = ("Same-turn hard limit reached ({used} of {hard} tokens): no more exploration. Choose a turn-ending "
             "action now with what you have.")
REFUSED = ("[not shown: the same-turn hard limit ({hard} tokens) is reached; full output at {ref}. Decide now "
           "with a turn-ending action.]")


@dataclass
class SameTurnOutput:
    """One tool output of the current turn as the model sees it."""

    tool: str
    text: str  # what is shown: the output, or its envelope, or the refusal
    tokens: int  # the size of what is shown
    original_tokens: int
    ref: str | None = None  # the full output's file (relative to the episode) when it is not shown whole
    compressed: bool = False

    def summary(self) -> dict[str, Any]:
        """What the committed step keeps of it: the tool, the sizes, the file and a short excerpt."""
        out: dict[str, Any] = {"tool": self.tool, "tokens": self.original_tokens, "excerpt": self.text[:200]}
        if self.ref:
            out["ref"] = self.ref
        return out


@dataclass
class SameTurnBudget:
    """The outputs of the current turn and the soft and hard limits they are held to."""

    soft: int
    hard: int
    outputs: list[SameTurnOutput] = field(default_factory=list)

    def used(self, tail_tokens: int) -> int:
        """What the turn has added so far: its tail plus every output as the tool returned it."""
        return tail_tokens + sum(o.original_tokens for o in self.outputs)

    def forced(self, tail_tokens: int) -> bool:
        """Whether a decision is forced: the turn has reached its hard limit."""
        return self.used(tail_tokens) >= self.hard

    def add(self, tool: str, output: str, tail_tokens: int, save: Callable[[str], str],
            patterns: Iterable[str] = ()) -> SameTurnOutput:
        """Add one output; ``save(text)`` writes the full output to disk and returns its ref. Returns the entry."""
        size = estimate_text_tokens(output)
        if self.forced(tail_tokens):
            ref = save(output)
            shown = REFUSED.format(hard=self.hard, ref=ref)
            entry = SameTurnOutput(tool, shown, estimate_text_tokens(shown), size, ref, compressed=True)
            self.outputs.append(entry)
            return entry
        pats = list(patterns)
        if self.used(tail_tokens) + size > self.soft:
            for old in self.outputs:
                if not old.compressed and old.tokens > COMPRESSED_TOKENS:
                    self._compress(old, save, COMPRESSED_TOKENS, pats, None)
        room = self.hard - self.used(tail_tokens)
        entry = SameTurnOutput(tool, output, size, size)
        if size > room:
            # Shown only as far as the hard limit allows: an envelope (matched lines, errors, head and tail).
            self._compress(entry, save, max(0, room), pats, output)
        self.outputs.append(entry)
        return entry

    @staticmethod
    def _compress(entry: SameTurnOutput, save: Callable[[str], str], limit: int, patterns: list[str],
                  full: str | None) -> None:
        text = full if full is not None else entry.text
        ref = entry.ref or save(text)
        env = envelope(text, limit_chars=limit * 4, limit_lines=10**9, limit_tokens=limit, patterns=patterns,
                       full_ref=ref)
        if env is not None:
            entry.text = dumps_compact(env)
            entry.tokens = estimate_text_tokens(entry.text)
        entry.ref, entry.compressed = ref, True

    def notes(self, tail_tokens: int) -> list[str]:
        """The lines the tail shows: the outputs, then what the budget says (nothing below the soft limit)."""
        lines = [f"Tool output ({o.tool}, this turn): {o.text}" for o in self.outputs]
        used = self.used(tail_tokens)
        if used >= self.hard:
            lines.append(HARD_NOTE.format(used=used, hard=self.hard))
        elif used > self.soft or any(o.compressed for o in self.outputs):
            lines.append(SOFT_NOTE.format(used=used, soft=self.soft))
        return lines
