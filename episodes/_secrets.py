"""Text typed into a password field: how a screen or a tool result says the field is one, and the typed
values a recorder keeps out of every file it writes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import atomic_write, dumps_compact, read_bytes_nofollow

from ._sanitize import REDACTED, TEXT_KEYS, redact_text_fields, sanitize

# Keys whose value names the kind of field in focus ("password", Android's "textPassword", "secure").
_KIND_KEYS = ("field_type", "input_type", "inputType", "content_type", "keyboard_type", "text_content_type")
_KINDS = re.compile(r"password|passcode|secure|secret|\bpin\b", re.IGNORECASE)
# Flags a runtime sets on the focused field (true when it is a password or otherwise secret field).
_FLAGS = ("is_password", "password", "secure", "is_secure", "sensitive", "secure_text_entry", "is_sensitive")
# Where a runtime nests the focused field rather than describing it at the top of the state.
_FOCUS_KEYS = ("focused", "focused_field", "focused_element", "field", "input_field")
MIN_SECRET = 3  # shorter values ("a", "ok") would scrub ordinary words out of every later event


def marks_password(state: Any) -> bool:
    """Whether an observed state (or a tool's output, a mapping or its JSON text) reports a password field in
    focus."""
    if isinstance(state, str) and state.lstrip().startswith("{") and len(state) < 100_000:
        try:
            state = json.loads(state)
        except (ValueError, RecursionError):
            return False
    if not isinstance(state, Mapping):
        return False
    for key in _KIND_KEYS:
        v = state.get(key)
        if isinstance(v, str) and _KINDS.search(v.replace("_", " ")):
            return True
    for key in _FLAGS:
        v = state.get(key)
        if v is True or (isinstance(v, str) and v.strip().lower() in ("true", "yes", "1")):
            return True
    return any(isinstance(state.get(k), Mapping) and marks_password(state[k]) for k in _FOCUS_KEYS)


def typed_values(data: Any) -> list[str]:
    """The text a tool input types (its text fields, or the input itself when it is a bare string)."""
    if isinstance(data, Mapping):
        return [v for k, v in data.items() if k in TEXT_KEYS and isinstance(v, str) and v.strip()]
    return [data] if isinstance(data, str) and data.strip() else []


class Secrets:
    """The values typed into password fields so far; every string written afterwards is scrubbed of them."""

    def __init__(self) -> None:
        self.values: set[str] = set()

    def remember(self, data: Any) -> bool:
        """Keep the typed values of a tool input; True when one was not known yet."""
        new = {v for v in typed_values(data) if len(v) >= MIN_SECRET} - self.values
        self.values |= new
        return bool(new)

    def scrub(self, value: Any) -> Any:
        """The value with every known secret replaced by ``[redacted]`` (strings inside lists and dicts too)."""
        if not self.values:
            return value
        if isinstance(value, str):
            for s in sorted(self.values, key=len, reverse=True):  # a longer secret holding a shorter one first
                # As typed, and as it stands inside JSON text (a tool call's ``tool_input`` is the JSON of its
                # arguments: a quote or backslash in the secret is escaped there).
                for form in dict.fromkeys((s, json.dumps(s, ensure_ascii=False)[1:-1], json.dumps(s)[1:-1])):
                    value = value.replace(form, REDACTED)
            return value
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.scrub(v) for v in value]
        return value


def scrub_jsonl(path: Path, secrets: Secrets, root: Path | None = None) -> None:
    """Rewrite a jsonl file whole (atomically) with every known secret scrubbed from its records."""
    try:
        text = read_bytes_nofollow(path).decode("utf-8", "replace")
    except FileNotFoundError:
        return
    out = []
    for line in text.splitlines():
        try:
            out.append(dumps_compact(secrets.scrub(json.loads(line))))
        except ValueError:  # a torn or hand-broken line: scrubbed as text
            out.append(secrets.scrub(line))
    atomic_write(path, "".join(f"{line}\n" for line in out if line.strip()), root=root)


class TypingGuard:
    """Keeps typed text off the disk until the field is known: a call that types text waits for its result
    before it is written, and a result that reports a password field makes that text a secret (``reveal``)."""

    def __init__(self) -> None:
        self.secrets = Secrets()
        self._held: dict[str, Any] | None = None  # the event of the typing call waiting for its result
        self._held_input: Any = None
        self._written: Any = None  # the input of a typing call already written whose result has not come

    def hold(self, record: dict[str, Any], raw_input: Any) -> None:
        """Keep a typing call's event (and its input, unredacted) until the next event."""
        self._held, self._held_input = record, raw_input

    def release(self) -> dict[str, Any] | None:
        """The held event, to be written now (before any other); None when nothing is held."""
        record, self._held = self._held, None
        if record is not None:
            self._written = self._held_input
        return record

    def result_written(self) -> None:
        """A tool result was written: a later result does not speak for the typing call before it."""
        self._written = None

    def reveal(self, written: list[Path], on_error: Callable[[str, BaseException], None],
               root: Path | None = None) -> None:
        """The latest typing call went into a password field, as its result says: its text is a secret after all.

        Held, its event is redacted before it is written; the files that already hold the text (``written``:
        the events, when another event came before the result; a transcript step the runtime committed
        first) are rewritten whole, scrubbed, rather than left holding it."""
        typed = self._held_input if self._held is not None else self._written
        if typed is None or not self.secrets.remember(typed):
            return
        if self._held is not None:
            self._held.update(tool_input=sanitize(redact_text_fields(typed)), sensitive=True)
            self._held.pop("target_label", None)
            written = written[1:]
        for path in written:
            try:
                scrub_jsonl(path, self.secrets, root)
            except Exception as exc:
                on_error(f"cannot scrub a secret from {path.name}", exc)
