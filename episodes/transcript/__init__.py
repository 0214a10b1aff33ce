"""The on-device transcript of a long task: four zones, a scrub edge, step summaries, beside the episode."""

from .._transcript_config import ChunkingSection, RecallSection, TranscriptConfig, TranscriptSection
from ._capsules import (
    Capsule,
    CapsuleLens,
    OfflineCapsuleLens,
    capsule_input,
    check_capsule,
    coverage_problem,
    notes_problem,
)
from ._chunks import Chunk, Era
from ._ledger import TranscriptLedger, load_image_bytes
from ._lens import (
    MAX_REQUESTS_PER_MODEL,
    LensOutput,
    OfflineVisualLens,
    RequestBudget,
    VisualJob,
    VisualLens,
    current_budget,
)
from ._messages import Message, Part, image, text, to_genai
from ._neutral import BANNED_WORDS, banned_words_in, check_summary, degenerate_reason
from ._perception import (
    TokenMeter,
    envelope,
    estimate_image_tokens,
    estimate_text_tokens,
    hit_test,
    label_action,
    ui_diff,
)
from ._recall import RECALL_HISTORY_TOOL, RecallResult, recall
from ._records import StepRecord, SummaryBook, SummaryEvidence, SummaryRecord
from ._service import ServiceStats, StepMemoryService
from ._step_rows import ledger_rows
from ._turns import FAILED_PLACEHOLDER, PENDING_PLACEHOLDER, Staged, Turn

__all__ = [
    "BANNED_WORDS",
    "FAILED_PLACEHOLDER",
    "MAX_REQUESTS_PER_MODEL",
    "PENDING_PLACEHOLDER",
    "RECALL_HISTORY_TOOL",
    "Capsule",
    "CapsuleLens",
    "Chunk",
    "ChunkingSection",
    "Era",
    "LensOutput",
    "Message",
    "OfflineCapsuleLens",
    "OfflineVisualLens",
    "Part",
    "RecallResult",
    "RecallSection",
    "RequestBudget",
    "ServiceStats",
    "Staged",
    "StepMemoryService",
    "StepRecord",
    "SummaryBook",
    "SummaryEvidence",
    "SummaryRecord",
    "TokenMeter",
    "TranscriptConfig",
    "TranscriptLedger",
    "TranscriptSection",
    "Turn",
    "VisualJob",
    "VisualLens",
    "banned_words_in",
    "capsule_input",
    "check_capsule",
    "check_summary",
    "coverage_problem",
    "current_budget",
    "degenerate_reason",
    "envelope",
    "estimate_image_tokens",
    "estimate_text_tokens",
    "hit_test",
    "image",
    "label_action",
    "ledger_rows",
    "load_image_bytes",
    "notes_problem",
    "recall",
    "text",
    "to_genai",
    "ui_diff",
]
