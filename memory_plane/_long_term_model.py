"""The long-term memory record (markdown with frontmatter), its types and the answer of a save."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from memory_plane.lifecycle import Record, StrList, nfkc, one_line

LongTermType = Literal["profile", "rule", "preference", "procedure", "fact"]
LONG_TERM_TYPES: tuple[str, ...] = ("profile", "rule", "preference", "procedure", "fact")
PROFILE_TYPES: tuple[str, ...] = ("profile", "rule", "preference")
PRIORITY = {"rule": 90, "preference": 80, "profile": 70, "procedure": 60, "fact": 50}
GENERIC_ENTITIES = frozenset({"user", "me", "my", "you", "i", "我", "用户"})
MAX_CONTENT = 4000
SOURCES: tuple[str, ...] = ("user", "model")
"""Who saved a memory: ``user`` (the CLI, the API by default) or ``model`` (the model's save_memory tool)."""
USER_WORD_TYPES: tuple[str, ...] = ("rule", "preference")
"""Types where the user's word stands: the model's save_memory never supersedes the user's."""


def is_users(mem: LongTermMemory) -> bool:
    """Whether a memory counts as the user's own word (a file without ``source``, written before the field
    existed, counts as the user's: letting the model retire a user's rule is the worse mistake)."""
    return mem.source != "model"


class LongTermMemory(Record):
    """One long-term memory (the body of its markdown file is the content)."""

    type: LongTermType = "fact"  # type: ignore[assignment]
    priority: int = 50
    time_scope: str | None = None
    traceability: str = "full"
    tags: StrList = Field(default_factory=list)
    entities: StrList = Field(default_factory=list)
    source_refs: StrList = Field(default_factory=list)
    lesson_key: str | None = None
    source: str | None = None  # user | model (None: written before sources were recorded; counts as the user's)
    content: str = Field(default="", exclude=True)

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, v: Any) -> Any:
        # A hand-typed "Model " is the model; anything else a person wrote counts as the user's (see is_users).
        return v.strip().lower() or None if isinstance(v, str) else v

    def to_frontmatter(self) -> dict[str, Any]:
        """The frontmatter mapping (content lives in the body)."""
        return self.to_yaml_dict()


@dataclass
class SaveResult:
    """Answer of save_memory: the id and saved | ignored | superseded | conflicted."""

    id: str
    status: str
    reason: str | None = None
    superseded: list[str] | None = None
    # conflicted: the user's own memories this model save contradicts (they stay active, it does not).
    conflicts_with: list[str] | None = None
    note: str | None = None  # e.g. the text was cut to MAX_CONTENT characters


def _norm(text: str) -> str:
    """A memory's text as saves compare and key it: NFKC (one form for composed, decomposed and full-width
    text), lower case, whitespace folded."""
    return " ".join(nfkc(text).lower().split())


def one_line_title(title: str | None, content: str = "") -> str:
    """A memory's title: one line (``lifecycle.one_line``), else the first line of its content, at most 120
    characters. A title is a heading of the file: a line break in it would start the content early."""
    first = next((ln for ln in content.split("\n") if ln.strip()), "")
    return (one_line(title or "") or one_line(first))[:120]


def _body(mem: LongTermMemory) -> str:
    # The title is one line whatever the frontmatter holds (a hand edit, a file from before titles were one
    # line): the first line of the body is the heading, everything after it the content.
    return f"\n# {one_line_title(mem.title, mem.content)}\n\n{mem.content.strip()}\n"


def _content_of(body: str) -> tuple[str | None, str]:
    text = body.strip("\n")
    # The heading is the first line only: "[ \t]" and not "\s", which would reach over an empty title's
    # line break and take the content's first line for the title.
    m = re.match(r"#[ \t]+([^\n]*)(?:\n|$)", text)
    if m:
        return m.group(1).strip() or None, text[m.end():].strip()
    return None, text.strip()
