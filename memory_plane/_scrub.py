"""Forgotten text, scrubbed from every file of the tree that holds it: the session, closed sessions, episodes,
device memories and the derived caches.

A forget removes a memory's own file last; before that, each other place its text was copied to (a frozen
prompt block, a session event, an episode's events and transcript, the episode index, a lesson learned from
the episode, a persisted postings cache) is rewritten with the text replaced by ``[forgotten]``. The text is
matched in every form it can take there: NFC, NFD, NFKC and NFKD; whitespace folded or not (a run of spaces
or line breaks in the memory matches any run in the file, and JSON's escaped ``\\n``); quotes and non-ASCII
characters escaped as JSON writes them; and, for a memory longer than 240 characters, the first 240
characters of the folded text, as an index summary and the prompt block cut it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Literal

from lifecycle import DEFAULT_LOCK_TIMEOUT, atomic_write, collection_lock, has_symlink, read_bytes_nofollow, remove_path

__all__ = ["FORGOTTEN", "ForgottenText", "scrub_tree"]

FORGOTTEN = "[forgotten]"
MIN_CHARS = 4
"""Shorter texts (a title like "Mom") are not scrubbed: they would blank unrelated words."""
CUT = 240
"""Where an index summary and a prompt block cut a memory's folded text."""
_FORM_NAMES: tuple[Literal["NFC", "NFD", "NFKC", "NFKD"], ...] = ("NFC", "NFD", "NFKC", "NFKD")
_SPACE = r"(?:\s|\\[nrt]|\\u00a0|\\u3000)+"
_LOCKS = {".lock", ".recording.lock"}
_SCRUB_FOLDERS = ("session_archive", "episodes", "device")


def _char_pattern(c: str) -> str:
    """One character as a file may hold it: itself, or escaped as JSON (quotes, backslashes, \\uXXXX)."""
    forms = {re.escape(c)}
    escaped = json.dumps(c)[1:-1]
    if escaped != c:
        forms.add(re.escape(escaped))
    ascii_escaped = json.dumps(c, ensure_ascii=True)[1:-1]
    if ascii_escaped != c:
        forms.add(re.escape(ascii_escaped))
    return forms.pop() if len(forms) == 1 else "(?:" + "|".join(sorted(forms, key=len, reverse=True)) + ")"


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
            if len(text) < MIN_CHARS:
                continue
            for t in (text, text[:CUT] if len(text) > CUT else ""):
                if t:
                    variants.update(unicodedata.normalize(f, t) for f in _FORM_NAMES)
        # Longest first: a text that holds another is replaced whole, not around the shorter one.
        ordered = sorted(variants, key=len, reverse=True)
        self.empty = not ordered
        # Each form's longest word, as bytes: a file none of them is in is never decoded or searched.
        self.anchors = sorted({max(v.split(), key=len).encode("utf-8", "surrogatepass") for v in ordered})
        # Not preceded by a backslash: a match never starts inside an escape (the "n" of "\n").
        self.pattern = re.compile(r"(?<!\\)(?:" + "|".join(_text_pattern(v) for v in ordered) + ")") \
            if ordered else None

    def may_hold(self, data: bytes) -> bool:
        """Whether the bytes may hold a forgotten text (a cheap test before decoding)."""
        return not self.empty and any(a in data for a in self.anchors)

    def scrub(self, text: str) -> str:
        """The text with every forgotten form replaced by ``[forgotten]``."""
        return text if self.pattern is None else self.pattern.sub(FORGOTTEN, text)

    def scrub_file(self, path: Path) -> bool:
        """Rewrite one text file (whole, atomically) without the forgotten text; True if it changed."""
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
        new = self.scrub(text)
        if new == text:
            return False
        atomic_write(path, new)
        return True


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


def _live(folder: Path) -> bool:
    """Whether an episode folder is still being recorded: a live recorder holds the flock on its lock file
    (a crashed one's lock file is free, and its episode is scrubbed)."""
    try:
        fd = os.open(folder / ".recording.lock", os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the flock taken here
    return False


def scrub_tree(root: Path, texts: Iterable[str], *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> list[str]:
    """Replace forgotten texts with ``[forgotten]`` in every file of the tree that holds them, each folder
    under its own lock, and drop the derived postings caches; the paths changed, relative to the root.

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
                if top == "device" and group == base else list(_files(group, _live))
            hits = [f for f in files if _holds(matcher, f)]
            if not hits:
                continue
            # Closed sessions are moved under the session lock; device/profile.yaml is the profiles store's.
            lock_dir = root / "session" if top == "session_archive" else \
                root / "device" / "profiles" if group == base and top == "device" else group
            with collection_lock(lock_dir, lock_timeout):
                changed += [str(f.relative_to(root)) for f in hits if matcher.scrub_file(f)]
    cache = root / ".cache" / "retrieve"
    if not has_symlink(root, cache) and cache.is_dir():
        for f in sorted(cache.iterdir()):
            if f.name.endswith(".json.gz") and not f.is_symlink():
                # Derived postings may hold the words of the text; the next retrieve rebuilds them.
                remove_path(root, f)
                changed.append(str(f.relative_to(root)))
    return changed


def _holds(matcher: ForgottenText, path: Path) -> bool:
    try:
        return matcher.may_hold(read_bytes_nofollow(path))
    except OSError:
        return False
