"""Prompt templates (package data): each has a version recorded with the outputs it produced."""

from __future__ import annotations

import dataclasses
from importlib import resources


@dataclasses.dataclass(frozen=True)
class Prompt:
    """A template and its version."""

    name: str
    version: int
    output: str
    template: str

    def render(self, **values: object) -> str:
        """The template with its {placeholders} filled in, in one pass: a value that itself contains
        ``{recent}`` (screen text can) is never expanded again."""
        import re

        return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0),
                      self.template)


def load(name: str) -> Prompt:
    """Read prompts/<name>.md (frontmatter: name, version, output)."""
    text = resources.files(__name__).joinpath(f"{name}.md").read_text("utf-8")
    _, head, body = text.split("---", 2)
    meta = dict(line.split(":", 1) for line in head.strip().splitlines() if ":" in line)
    return Prompt(meta.get("name", name).strip(), int(meta.get("version", "1")), meta.get("output", "text").strip(),
                  body.lstrip("\n"))


__all__ = ["Prompt", "load"]
