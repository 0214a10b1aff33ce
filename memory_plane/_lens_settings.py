"""The `lenses` section of config.yaml, apart from the lenses: checking a config imports no model client."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field, model_validator


class GeminiSettings(BaseModel):
    """The `lenses` section: models, fallback chains, timeouts, concurrency, the endpoint."""

    # A misspelt key is an error naming it, not silently ignored.
    model_config = ConfigDict(defer_build=True, extra="forbid")

    step_model: str = "gemini-3.5-flash-lite"
    capsule_model: str = "gemini-3.8-flash"
    step_fallbacks: list[str] = Field(default_factory=lambda: ["gemini-3.8-flash"])
    capsule_fallbacks: list[str] = Field(default_factory=lambda: ["gemini-3.5-flash-lite"])
    timeout_s: float = 20.0
    concurrency: int = 2
    base_url: str | None = None  # tests and the benchmark point this at a fake server on 127.0.0.1
    api_key: str | None = None
    temperature: float = 0.2
    max_output_tokens: int = 600
    # A capsule's answer is a JSON object with a row per step group, written after the model thinks: thinking
    # and the answer share this cap, so it is larger than a step summary's (a 12-step capsule runs ~700 tokens).
    capsule_max_output_tokens: int = 4096
    capsule_input_tokens: int = 6000  # a segment's steps as the capsule lens gets them, at most (002 §5 inputs)
    # Thinking shares max_output_tokens with the answer: a short summary thinks little (low), so that it is
    # not cut off. One of minimal, low, medium, high; None leaves the model's default.
    thinking_level: str | None = "low"
    max_image_side: int = 768  # frames are downscaled to this long side and sent as JPEG

    @model_validator(mode="after")
    def _models_from_env(self) -> GeminiSettings:
        # A fleet can move to a new model without editing every device's config.yaml.
        self.step_model = os.environ.get("MEMPLANE_STEP_MODEL") or self.step_model
        self.capsule_model = os.environ.get("MEMPLANE_CAPSULE_MODEL") or self.capsule_model
        return self

    def key(self) -> str | None:
        """The API key: explicit, else GEMINI_API_KEY, else GOOGLE_API_KEY."""
        return self.api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")


__all__ = ["GeminiSettings"]
