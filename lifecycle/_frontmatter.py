"""Markdown with a YAML frontmatter block (``---`` fenced), LF or CRLF."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._errors import ParseError
from ._yaml import dump_yaml, load_yaml


def split_frontmatter(text: str, path: str | Path | None = None) -> tuple[str, str, int]:
    """Split into (frontmatter YAML, body, first body line); ParseError if the fence is missing."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise ParseError(path, 1, "missing '---' frontmatter fence on the first line")
    for i in range(1, len(lines)):
        # The closing fence starts its line: an indented "---" is a line of a block string in the YAML (a
        # value holding a line break and "---" must not end the frontmatter there and spill into the body).
        if lines[i].rstrip() in ("---", "..."):
            return "\n".join(lines[1:i]) + "\n", "\n".join(lines[i + 1 :]), i + 2
    raise ParseError(path, len(lines), "frontmatter is not closed by a '---' line")


def parse_frontmatter(text: str, path: str | Path | None = None) -> tuple[dict[str, Any], str]:
    """Parse markdown into (frontmatter mapping, body text)."""
    head, body, _ = split_frontmatter(text, path)
    try:
        meta = load_yaml(head, path)
    except ParseError as exc:
        # The YAML starts on line 2 of the file.
        line = exc.line + 1 if exc.line is not None else None
        raise type(exc)(path, line, exc.message) from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ParseError(path, 2, "frontmatter must be a mapping")
    return meta, body


def render_frontmatter(meta: Mapping[str, Any], body: str, existing_text: str | None = None) -> str:
    """Render frontmatter plus body, keeping comments of an existing frontmatter."""
    old_head = None
    if existing_text:
        try:
            old_head, _, _ = split_frontmatter(existing_text)
        except ParseError:
            old_head = None
    head = dump_yaml(meta, old_head)
    if not body.startswith("\n"):
        body = "\n" + body
    return f"---\n{head}---{body}" if body.endswith("\n") else f"---\n{head}---{body}\n"
