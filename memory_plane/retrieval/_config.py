"""RetrieveConfig: the caps per section, the thresholds and the size budget of the prompt block."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

CAPS = {"device_profile": 1, "app_profiles": 2, "long_term": 4, "procedures": 3, "navigation": 4,
        "similar_episodes": 3, "calibration_notes": 3, "failure_modes": 4, "conflicts": 3}
ROUTE = {"app_profile": "app_profiles", "procedure": "procedures", "navigation": "navigation",
         "calibration": "calibration_notes", "failure": "failure_modes", "ui_anchor": "calibration_notes"}


@dataclass
class RetrieveConfig:
    """Caps, thresholds and the size budget of the prompt block."""

    caps: dict[str, int] = field(default_factory=lambda: dict(CAPS))
    budget_chars: int = 4000
    min_similarity: float = 0.25
    # A long-term memory's word match under this is noise (the goal's commonest words, which every memory may
    # hold): counted as none, so a rule shares its order with the rules no word reaches, and a search need not
    # visit every memory holding such a word (what makes a retrieve's work grow with the store).
    noise_similarity: float = 0.01
    episode_max_age_days: float = 180.0
    recency_days: float = 30.0
    search_limit: int = 60
    app_bound_limit: int = 40
    # Keep the postings of large indexes in <root>/.cache/retrieve so a fresh process need not tokenise
    # them again (written in the background when missing or behind; never on a read-only tree).
    persist_postings: bool = True
    # From this many lines, the long-term index is kept as a snapshot beside it (``_snapshot``): a fresh process reads
    # only the lines, postings and verdicts its first goals need, instead of the whole index (with persist_postings).
    snapshot_min: int = 1000

    def verdicts_key(self) -> str:
        """What a rule's settled verdict depends on of this config (a snapshot's verdicts are used under the same)."""
        return repr(replace(self, persist_postings=True, snapshot_min=0))
