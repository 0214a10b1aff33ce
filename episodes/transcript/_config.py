"""Transcript configuration: one YAML section, an independent switch per capability, seed defaults."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TranscriptSection(_Section):
    """The ledger and its scrub edge."""

    scrub_edge: bool = True
    visual_summaries: bool = True
    envelopes: bool = True
    similarity_hints: bool = True
    image_scrub_depth: int = Field(default=3, ge=1)
    pending_grace_steps: int = Field(default=3, ge=0)
    xml_scrub_depth: int = Field(default=1, ge=1)
    summary_concurrency: int = Field(default=2, ge=1)
    summary_timeout_s: float = 30.0
    summary_retries: int = Field(default=2, ge=0)
    summary_queue: int = Field(default=256, ge=1)
    envelope_chars: int = 6000
    envelope_lines: int = 120
    envelope_tokens: int = 4000


class ChunkingSection(_Section):
    """Layered compaction (three-band chunks, eras, the emergency snapshot)."""

    enabled: bool = True
    context_budget_tokens: int = 80_000
    soft_ratio: float = 0.7
    hard_ratio: float = 0.9
    min_active_steps: int = Field(default=5, ge=1)
    max_steps: int = 12
    target_source_tokens: int = 2000
    max_chunks: int = 8
    max_eras: int = 4


class RecallSection(_Section):
    """recall_history bounds."""

    enabled: bool = True
    max_results: int = 5
    max_text_tokens: int = 2000
    max_image_steps: int = 1


class TranscriptConfig(_Section):
    """The `transcript`, `chunking` and `recall` sections; anything missing takes its default."""

    transcript: TranscriptSection = Field(default_factory=lambda: TranscriptSection())
    chunking: ChunkingSection = Field(default_factory=lambda: ChunkingSection())
    recall: RecallSection = Field(default_factory=lambda: RecallSection())

    @classmethod
    def from_mapping(cls, data: Any) -> TranscriptConfig:
        """Build from a parsed YAML mapping (None or {} gives the defaults)."""
        return cls.model_validate(data or {})

    @classmethod
    def plain(cls) -> TranscriptConfig:
        """Every switch off: a plain append-only transcript."""
        return cls(transcript=TranscriptSection(scrub_edge=False, visual_summaries=False, envelopes=False,
                                                similarity_hints=False),
                   chunking=ChunkingSection(enabled=False), recall=RecallSection(enabled=False))
