"""Transcript configuration: the design's file layout, an independent switch per capability.

`config.yaml` may hold the sections at the top level or under `agent.memory`, as the design writes them:
`transcript.{enabled, context_budget_tokens, soft_ratio, hard_ratio, min_active_steps, image_scrub_depth,
pending_grace_steps, xml_scrub_depth, similarity_hint, similarity_max_distance}`, `chunking.{max_steps,
target_source_tokens, model, max_chunks, max_eras}`, `step_lens.model`, `recall.{enabled, max_results,
max_text_tokens}`, `runtime.{max_concurrency, retry_limit, flush_timeout_s}`. Keys this project placed
elsewhere (the budget and ratios under `chunking`, `similarity_hints`, `summary_*`) stay accepted. An unknown
key is reported once with its path, never a reason to fail a task.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

log = logging.getLogger("memory_plane")


class _Section(BaseModel):
    # Unknown keys are kept (and reported by unknown_keys), so a typo is named instead of silently ignored.
    model_config = ConfigDict(defer_build=True, extra="allow")


class TranscriptSection(_Section):
    """The ledger and its scrub edge."""

    enabled: bool = True  # false: a plain append-only transcript, every capability off
    scrub_edge: bool = True
    visual_summaries: bool = True
    envelopes: bool = True
    similarity_hints: bool = True
    similarity_max_distance: int = Field(default=5, ge=0, le=64)  # dHash bits; the design's calibration
    image_scrub_depth: int = Field(default=3, ge=1)
    pending_grace_steps: int = Field(default=3, ge=0)
    xml_scrub_depth: int = Field(default=1, ge=1)
    summary_concurrency: int = Field(default=2, ge=1)
    # An answer slower than this is counted (ServiceStats.slow) and still used: the lens keeps its own deadline
    # (lenses.timeout_s) and an answer that arrived within it was paid for.
    summary_timeout_s: float = 30.0
    summary_retries: int = Field(default=3, ge=0)  # the design's runtime.retry_limit
    summary_queue: int = Field(default=256, ge=1)
    # Seconds before the service's next round after every model was unavailable, doubling each round.
    summary_backoff_s: float = Field(default=0.5, ge=0)
    flush_timeout_s: float = Field(default=30.0, ge=0)
    # A single tool output above 16K tokens goes into the same-turn envelope (the design's threshold); a
    # smaller one too when it would carry the prompt past chunking.hard_ratio (the same-turn guard).
    envelope_chars: int = 64_000
    envelope_lines: int = 4000
    envelope_tokens: int = 16_000
    # Same-turn budgets (the design's 20K/28K): what one turn adds before its decision (its tail and the outputs
    # of tools that do not end the turn). Past the soft one older outputs become excerpts; at the hard one a
    # decision is forced.
    same_turn_soft_tokens: int = Field(default=20_000, ge=1)
    same_turn_hard_tokens: int = Field(default=28_000, ge=1)


class ChunkingSection(_Section):
    """Layered compaction (three-band chunks, eras, the emergency snapshot)."""

    enabled: bool = True
    context_budget_tokens: int = 80_000
    soft_ratio: float = 0.7
    hard_ratio: float = 0.9
    # Segments close a little below the soft ratio so that the prompt never crosses it while a chunk is
    # being made: None means soft_ratio - 0.1, so moving soft_ratio moves the close point with it (bench
    # compaction: max prompt / budget 0.687 with 0.6 = 0.7 - 0.1; closing at 0.7 itself let it pass 0.7).
    segment_close_ratio: float | None = Field(default=None, gt=0, le=1)
    min_active_steps: int = Field(default=5, ge=1)
    # An activity change closes a segment (the design's trigger) once it holds min_segment_steps, so a
    # screen change of a long task does not make one-step chunks (bench compaction: 19 compactions instead
    # of 11 with it, every goal still held).
    activity_boundaries: bool = True
    min_segment_steps: int = Field(default=3, ge=1)
    # A pause this long between two steps closes the segment (the design's "long work-segment pause"): 300 s is
    # about 17 times the median step interval the design measured (17.15 s); 0 turns it off.
    pause_close_s: float = Field(default=300.0, ge=0)
    max_steps: int = 12
    target_source_tokens: int = 2000
    max_chunks: int = 8
    max_eras: int | None = None  # None follows max_chunks (the design's default)
    # The layers past the eras, each bounded (so they never outgrow the budget): at most max_periods period
    # paragraphs (the adjacent pair spanning the fewest steps merges into a wider period), each showing its
    # first period_max_facts verified facts (the design's four); and F as a whole at most frozen_ratio of the
    # budget (the oldest layer steps down first), so a task of any length stays under the soft ratio.
    max_periods: int = Field(default=4, ge=1)
    period_max_facts: int = Field(default=4, ge=0)
    frozen_ratio: float = Field(default=0.35, gt=0, le=1)
    # The emergency snapshot's step index: rows for the newest steps within this share of the budget, ranges
    # for older ones (at most 12), so a snapshot at step 1,200 is no larger than one at step 200.
    snapshot_rows_ratio: float = Field(default=0.08, gt=0, le=1)
    model: str | None = None  # the capsule model (the `lenses` section's capsule_model when unset)

    @model_validator(mode="after")
    def _eras(self) -> ChunkingSection:
        if self.max_eras is None:
            self.max_eras = self.max_chunks
        return self

    def close_ratio(self) -> float:
        """Where the soft threshold closes the open segment: segment_close_ratio, else soft_ratio - 0.1."""
        if self.segment_close_ratio is not None:
            return self.segment_close_ratio
        return max(0.05, self.soft_ratio - 0.1)


class RecallSection(_Section):
    """recall_history bounds."""

    enabled: bool = True
    max_results: int = 5
    max_text_tokens: int = 2000
    max_image_steps: int = 1


class StepLensSection(_Section):
    """The per-step visual lens."""

    model: str | None = None  # the `lenses` section's step_model when unset


# The design's keys that this project keeps in another section: (design section, key) -> (ours, key).
_MOVED = {
    ("transcript", "context_budget_tokens"): ("chunking", "context_budget_tokens"),
    ("transcript", "soft_ratio"): ("chunking", "soft_ratio"),
    ("transcript", "hard_ratio"): ("chunking", "hard_ratio"),
    ("transcript", "min_active_steps"): ("chunking", "min_active_steps"),
    ("transcript", "similarity_hint"): ("transcript", "similarity_hints"),
    ("runtime", "max_concurrency"): ("transcript", "summary_concurrency"),
    ("runtime", "retry_limit"): ("transcript", "summary_retries"),
    ("runtime", "flush_timeout_s"): ("transcript", "flush_timeout_s"),
}
SECTIONS = ("transcript", "chunking", "recall", "step_lens", "runtime")
OTHER_SECTIONS = ("lenses", "policies", "memory", "agent")  # other parts of config.yaml, not read here


class TranscriptConfig(_Section):
    """The `transcript`, `chunking`, `recall` and `step_lens` sections; anything missing takes its default."""

    transcript: TranscriptSection = Field(default_factory=lambda: TranscriptSection())
    chunking: ChunkingSection = Field(default_factory=lambda: ChunkingSection())
    recall: RecallSection = Field(default_factory=lambda: RecallSection())
    step_lens: StepLensSection = Field(default_factory=lambda: StepLensSection())

    @classmethod
    def normalize(cls, data: Any) -> dict[str, Any]:
        """The design's layout (top level or under agent.memory) in this project's sections."""
        if not isinstance(data, dict):
            return {}
        nested = data.get("agent", {}).get("memory") if isinstance(data.get("agent"), dict) else None
        src = {**data, **nested} if isinstance(nested, dict) else dict(data)
        out: dict[str, dict[str, Any]] = {k: dict(v) for k in SECTIONS if isinstance(v := src.get(k), dict)}
        for (sec, key), (to_sec, to_key) in _MOVED.items():
            if key in out.get(sec, {}):
                value = out[sec].pop(key)
                out.setdefault(to_sec, {}).setdefault(to_key, value)  # an explicit key of ours wins
        out.pop("runtime", None)
        # Other top-level keys pass through, so that a misspelt section is reported by unknown_keys.
        extra = {k: v for k, v in src.items() if k not in SECTIONS and k not in OTHER_SECTIONS}
        return {**extra, **out}

    @classmethod
    def from_mapping(cls, data: Any) -> TranscriptConfig:
        """Build from a parsed config.yaml mapping (None or {} gives the defaults); unknown keys are logged
        once with their path; ``transcript.enabled: false`` turns every capability off."""
        cfg = cls.model_validate(cls.normalize(data))
        for path in cfg.unknown_keys():
            log.warning("config.yaml: unknown key %s ignored", path)
        if not cfg.transcript.enabled:
            return cls.plain()
        return cfg

    def unknown_keys(self) -> list[str]:
        """Paths of keys no section knows (``chunking.max_step`` for a typo)."""
        out = [f"{name}.{k}" for name in ("transcript", "chunking", "recall", "step_lens")
               for k in (getattr(self, name).model_extra or {})]
        return out + [k for k in (self.model_extra or {}) if k not in SECTIONS + OTHER_SECTIONS]

    @classmethod
    def plain(cls) -> TranscriptConfig:
        """Every switch off: a plain append-only transcript."""
        return cls(transcript=TranscriptSection(enabled=False, scrub_edge=False, visual_summaries=False,
                                                envelopes=False, similarity_hints=False),
                   chunking=ChunkingSection(enabled=False), recall=RecallSection(enabled=False))
