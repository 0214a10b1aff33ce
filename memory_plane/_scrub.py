"""Forgotten text, scrubbed from every file of the tree that holds it: the session, closed sessions, episodes,
device memories and the derived caches.

A forget removes a memory's own file last; before that, each other place its text was copied to (a frozen
prompt block, a session event, an episode's events and transcript, the episode index, a lesson learned from
the episode, a persisted postings cache) is rewritten with the text replaced by ``[forgotten]``. The text is
matched in every form it can take there: NFC, NFD, NFKC and NFKD; whitespace folded or not (a run of spaces
or line breaks in the memory matches any run in the file, and JSON's escaped ``\\n``); quotes and non-ASCII
characters escaped as JSON writes them (once or more); and cut short (a tool call's excerpt, an index
summary's 240 characters) after at least its first 24 characters.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from memory_plane.episodes import recording_is_live
from memory_plane.lifecycle import (
    DEFAULT_LOCK_TIMEOUT,
    INDEX_NAME,
    IndexFile,
    ParseError,
    atomic_write,
    collection_lock,
    dump_yaml,
    dumps_compact,
    has_symlink,
    load_yaml,
    read_bytes_nofollow,
    remove_path,
)

__all__ = ["FORGOTTEN", "ForgottenText", "scrub_tree"]

FORGOTTEN = "[forgotten]"
MIN_CHARS = 4
"""Shorter texts (a title like "Mom") are not scrubbed: they would blank unrelated words."""
HEAD = 24
"""A copy cut short still holding this many characters of a forgotten text is scrubbed too."""
_FORM_NAMES: tuple[Literal["NFC", "NFD", "NFKC", "NFKD"], ...] = ("NFC", "NFD", "NFKC", "NFKD")
_SPACE = r"(?:\s|\\+[nrt]|\\+u00a0|\\+u3000)+"
_LOCKS = {".lock", ".recording.lock"}
_STRUCTURED = (".json", ".jsonl", ".yaml")
_FORMAT_KEYS = frozenset({"id", "type", "status", "role", "source", "event_id", "episode_id", "session_id", "path",
                          "ts", "reason", "kind", "category"})
"""Fields whose values are the format's own words or ids, never stored text: never scrubbed."""
_FIELD = re.compile(r"[a-z][a-z0-9_]*")
_SCRUB_FOLDERS = ("session_archive", "episodes", "device")


def _char_pattern(c: str) -> str:
    """One character as a file may hold it: itself, or escaped as JSON (quotes, backslashes, \\uXXXX) once
    or more (a tool call's arguments quoted inside a JSON string)."""
    forms = {re.escape(c)}
    for escaped in {json.dumps(c)[1:-1], json.dumps(c, ensure_ascii=True)[1:-1]}:
        if escaped != c and escaped.startswith("\\"):
            forms.add(r"\\+" + re.escape(escaped[1:]))
    return forms.pop() if len(forms) == 1 else "(?:" + "|".join(sorted(forms, key=len, reverse=True)) + ")"


@functools.lru_cache(maxsize=4096)
def _token(c: str) -> re.Pattern[str]:
    """One character of a folded text as a pattern (a space: any run of whitespace, raw or escaped)."""
    return re.compile(_SPACE if c == " " else _char_pattern(c))


def _anchors(text: str) -> set[bytes]:
    """The longest whole word of a text (the last may be cut), as bytes raw and as JSON escapes it."""
    words = text.split()
    word = max(words[:-1] or words, key=len)
    return {word.encode("utf-8", "surrogatepass"), json.dumps(word)[1:-1].encode("ascii"),
            # JSON and YAML written without ASCII escapes: a backslash or quote escaped, the rest as it is.
            json.dumps(word, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")}


def _cut_forms(text: str, head: re.Pattern[str], rest: list[re.Pattern[str]]) -> str:
    """Replace each match of ``head`` and as many ``rest`` tokens as follow it (never ending on whitespace)."""
    out: list[str] = []
    done = 0
    for m in head.finditer(text):
        if m.start() < done:
            continue
        end = pos = m.end()
        for tok in rest:
            t = tok.match(text, pos)
            if t is None:
                break
            pos = t.end()
            if tok.pattern != _SPACE:
                end = pos  # a cut at a space keeps the space (a line break between two lines stays)
        out += [text[done:m.start()], FORGOTTEN]
        done = end
    return "".join(out) + text[done:] if out else text


def _text_pattern(text: str) -> str:
    """A text as a pattern: each run of whitespace matches any run (raw or escaped), each character as JSON
    may write it."""
    parts: list[str] = []
    for word in text.split():
        if parts:
            parts.append(_SPACE)
        parts.append("".join(_char_pattern(c) for c in word))
    return "".join(parts)


class ForgottenText:
    """The forms of some forgotten texts, and what replaces them in a file's text."""

    def __init__(self, texts: Iterable[str]) -> None:
        variants: set[str] = set()
        for raw in texts:
            text = " ".join(str(raw or "").split())
            if len(text) >= MIN_CHARS:
                variants.update(unicodedata.normalize(f, text) for f in _FORM_NAMES)
        # Longest first: a text that holds another is replaced whole, not around the shorter one.
        ordered = sorted(variants, key=len, reverse=True)
        self.empty = not ordered
        # A word every match holds (in the head, for a cut text), raw and JSON-escaped, as bytes: a file that
        # holds none of them is never decoded or searched.
        self.anchors = sorted({a for v in ordered for a in _anchors(v[:HEAD] if len(v) > HEAD else v)})
        # Not preceded by a backslash: a match never starts inside an escape (the "n" of "\n").
        self.pattern = re.compile(r"(?<!\\)(?:" + "|".join(_text_pattern(v) for v in ordered) + ")") \
            if ordered else None
        # A text cut short where it was copied (a tool call's excerpt, a summary's 240 characters): its first
        # HEAD characters, then as many of the following ones as the file holds.
        self.heads = [(re.compile(r"(?<!\\)" + _text_pattern(v[:HEAD])), [_token(c) for c in v[HEAD:]])
                      for v in ordered if len(v) > HEAD]

    def may_hold(self, data: bytes) -> bool:
        """Whether the bytes may hold a forgotten text (a cheap test before decoding)."""
        return not self.empty and any(a in data for a in self.anchors)

    def scrub(self, text: str) -> str:
        """The text with every forgotten form, whole or cut after its first HEAD characters, replaced by
        ``[forgotten]``."""
        if self.pattern is None:
            return text
        # The long texts (whole or cut) first: a shorter one (a title, the first line) replaced first would
        # break the head of a longer one and leave its rest.
        for head, rest in self.heads:
            text = _cut_forms(text, head, rest)
        return self.pattern.sub(FORGOTTEN, text)

    def scrub_file(self, path: Path, root: Path) -> bool:
        """Rewrite one text file of the tree under ``root`` (whole, atomically) without the forgotten text; True
        if it changed."""
        try:
            data = read_bytes_nofollow(path)
        except OSError:
            return False
        if not self.may_hold(data):
            return False
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False  # a screenshot or other binary file: no text of ours
        if path.name == INDEX_NAME:
            # Index lines are JSON in YAML: their entries are scrubbed by value and written back as lines.
            index = IndexFile(path, root)
            read = index.read()
            entries = [self._walk(e) for e in read.entries]
            if read.problems or entries == read.entries:
                return False  # a torn index is left to its rebuild
            index.write(entries)
            return True
        new = self._by_value(path, text) if path.suffix in _STRUCTURED else None
        if new is None:
            new = self.scrub(text)  # markdown, text, or a file that does not parse
        if new == text:
            return False
        atomic_write(path, new, root=root)
        return True

    def _walk(self, value: Any, key: Any = None) -> Any:
        """A parsed value with every string scrubbed, except the format's own words (a type, a status, an id)."""
        if isinstance(value, str):
            return value if key in _FORMAT_KEYS else self.scrub(value)
        if isinstance(value, list):
            return [self._walk(v, key) for v in value]
        if isinstance(value, dict):
            # A key is scrubbed only when it is not a field name ("status"): a page name can be a key.
            return {(k if not isinstance(k, str) or _FIELD.fullmatch(k) else self.scrub(k)): self._walk(v, k)
                    for k, v in value.items()}
        return value

    def _by_value(self, path: Path, text: str) -> str | None:
        """A JSON, jsonl or YAML mapping file with each string scrubbed, written back in its format (None: it
        does not parse as one). Never a raw replacement: ``[forgotten]`` outside a string is a list."""
        try:
            if path.suffix == ".jsonl":
                return "\n".join(self._line(x) for x in text.split("\n"))
            if path.suffix == ".json":
                return json.dumps(self._walk(json.loads(text)), ensure_ascii=False, indent=2) + "\n"
            data = load_yaml(text, path)
        except (ValueError, ParseError):
            return None
        return dump_yaml(self._walk(data), text) if isinstance(data, dict) else None

    def _line(self, line: str) -> str:
        """One jsonl line scrubbed by value (a torn line as text)."""
        if not line.strip():
            return line
        try:
            record = json.loads(line)
        except ValueError:
            return self.scrub(line)
        walked = self._walk(record)
        return line if walked == record else dumps_compact(walked)  # a line without the text stays as written


def _files(folder: Path, skip: Callable[[Path], bool] = lambda _p: False) -> Iterator[Path]:
    """Regular files under a folder (never through a symlink), lock files left out."""
    for dirpath, dirnames, names in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d != "artifacts" and not skip(here / d))
        for name in sorted(names):
            p = here / name
            if name in _LOCKS or name.startswith(".done-"):
                continue
            try:
                if stat.S_ISREG(os.lstat(p).st_mode):
                    yield p
            except OSError:
                continue


def scrub_tree(root: Path, texts: Iterable[str], *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
               keep: Iterable[str] = ()) -> list[str]:
    """Replace forgotten texts with ``[forgotten]`` in every file of the tree that holds them, each folder
    under its own lock, and drop the derived postings caches and snapshots, but those named in ``keep`` (their
    keeper takes the text out of them); the paths changed, relative to the root.

    Long-term memory files are not touched (the forget removes them); an episode still being recorded is
    left to its recorder."""
    root = Path(root)
    matcher = ForgottenText(texts)
    if matcher.empty:
        return []
    from ._session import SessionStore

    # The live session first, through its store: its chunk index records the scrubbed chunks' checksums.
    changed = SessionStore(root, lock_timeout=lock_timeout).scrub_with(matcher)
    for top in _SCRUB_FOLDERS:
        base = root / top
        if has_symlink(root, base) or not base.is_dir():
            continue
        # One lock per collection folder (a file in the folder itself is under the folder's lock).
        groups = [base, *sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())] \
            if top == "device" else [base]
        for group in groups:
            files = [group / n for n in sorted(os.listdir(group)) if (group / n).is_file()] \
                if top == "device" and group == base else list(_files(group, recording_is_live))
            hits = [f for f in files if _holds(matcher, f)]
            if not hits:
                continue
            # Closed sessions are moved under the session lock; device/profile.yaml is the profiles store's.
            lock_dir = root / "session" if top == "session_archive" else \
                root / "device" / "profiles" if group == base and top == "device" else group
            with collection_lock(lock_dir, lock_timeout):
                changed += [str(f.relative_to(root)) for f in hits if matcher.scrub_file(f, root)]
    cache = root / ".cache" / "retrieve"
    kept = frozenset(keep)
    if not has_symlink(root, cache) and cache.is_dir():
        for f in sorted(cache.iterdir()):
            journal = f.name.endswith(".sqlite-journal")
            if journal and not f.is_symlink():
                # A killed write's pages as they were (forgotten words among them): it goes, with the file it was of
                # (torn without it).
                for g in (f, f.with_name(f.name[:-len("-journal")])):
                    if g.is_file() and not g.is_symlink():
                        remove_path(root, g)
                        changed.append(str(g.relative_to(root)))
                continue
            if f.name.endswith((".json.gz", ".sqlite")) and f.name not in kept and not f.is_symlink() and f.exists():
                # Derived postings may hold the words of the text; the next retrieve rebuilds them.
                remove_path(root, f)
                changed.append(str(f.relative_to(root)))
    return changed


def _holds(matcher: ForgottenText, path: Path) -> bool:
    try:
        return matcher.may_hold(read_bytes_nofollow(path))
    except OSError:
        return False
