"""Safe ids and paths: every name that reaches the filesystem passes through here."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
import unicodedata
from collections.abc import Mapping
from pathlib import Path

from ._errors import UnsafePathError

DEFAULT_ROOT = "/userdata/agent/memory"
ROOT_ENV = "MEMPLANE_ROOT"
MAX_ID_LEN = 80
_ID_RE = re.compile(r"^[a-z0-9_-]{1,80}$")


def resolve_root(cli_root: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Choose the memory root: ``--root`` over ``$MEMPLANE_ROOT`` over the device default."""
    env = os.environ if env is None else env
    raw = cli_root if cli_root not in (None, "") else env.get(ROOT_ENV) or DEFAULT_ROOT
    return Path(os.path.abspath(os.fspath(raw)))


def is_safe_id(value: object) -> bool:
    """Tell whether a value is a safe id: ASCII ``[a-z0-9_-]``, 1 to 80 chars."""
    return isinstance(value, str) and bool(_ID_RE.match(value)) and value not in (".", "..")


def check_id(value: object) -> str:
    """Return the value if it is a safe id, else raise UnsafePathError."""
    if not is_safe_id(value):
        raise UnsafePathError(str(value)[:120], "ids are 1-80 chars of [a-z0-9_-]")
    return value  # type: ignore[return-value]


def nfkc(text: str) -> str:
    """Text in Unicode NFKC form: composed and decomposed, full-width and ordinary forms become one.

    Every text that is compared, keyed or turned into an id passes here; ASCII is left as it is, so ids of
    ASCII text are the same as before text was normalised."""
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def content_hash(*parts: object, length: int = 12) -> str:
    """Hash trimmed, NFKC-normalised parts (NUL-separated) into ``length`` hex chars: stable ids from content."""
    h = hashlib.sha1()
    for part in parts:
        h.update(nfkc(str(part if part is not None else "")).strip().encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:length]


def slugify(name: str, max_len: int = 40) -> str:
    """Lowercase ASCII slug of a name (``Open WeChat!`` -> ``open-wechat``); may be empty."""
    text = unicodedata.normalize("NFKD", str(name))
    text = text.encode("ascii", "ignore").decode("ascii").lower()
    text = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    return text[:max_len].strip("-")


def slug_id(name: str, prefix: str = "") -> str:
    """Make a safe id from any name: ``prefix`` + slug, plus a short hash when the slug is lossy."""
    raw = nfkc(str(name))  # "ＷｅＣｈａｔ" and "WeChat", "Café" composed or not: one id
    slug = slugify(raw)
    lossy = not slug or slug != raw.strip().lower() or len(raw) > 40
    body = slug
    if lossy:
        digest = content_hash(raw, length=8)
        body = f"{slug}-{digest}" if slug else digest
    ident = f"{prefix}{body}"[:MAX_ID_LEN]
    return check_id(ident)


def check_relpath(rel: str | os.PathLike[str]) -> str:
    """Validate a relative path from a file (index ``path``, ``screenshot_ref``): no escape possible."""
    text = os.fspath(rel)
    if not isinstance(text, str) or not text:
        raise UnsafePathError(str(text), "empty path")
    if "\0" in text:
        raise UnsafePathError(text[:120], "NUL byte in path")
    if text.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", text) or os.path.isabs(text):
        raise UnsafePathError(text[:120], "absolute path")
    parts = re.split(r"[/\\]", text)
    if any(p in ("..",) for p in parts):
        raise UnsafePathError(text[:120], "'..' in path")
    if any(p == "" for p in parts[:-1]):
        raise UnsafePathError(text[:120], "empty path component")
    return "/".join(p for p in parts if p not in ("", "."))


def safe_join(root: Path, *parts: str, follow_symlinks: bool = False) -> Path:
    """Join relative parts under root; raise UnsafePathError if the result leaves the root.

    Unless ``follow_symlinks``, a symlink on the way (below the root) is also refused, so a
    link planted in the tree cannot redirect a write or a delete outside it.
    """
    rel = "/".join(check_relpath(p) for p in parts if p not in ("", "."))
    if not rel:
        return Path(root)
    # Plain string operations (the retriever joins a few paths on every retrieve); the same answers as
    # comparing Path objects and their parents. A relative root ("." too) is compared as an absolute path.
    root_s = os.path.normpath(root)
    target_s = os.path.normpath(os.path.join(root_s, rel))
    root_a, target_a = (root_s, target_s) if os.path.isabs(root_s) else (os.path.abspath(root_s),
                                                                         os.path.abspath(target_s))
    prefix = root_a if root_a.endswith(os.sep) else root_a + os.sep
    if target_a != root_a and not target_a.startswith(prefix):
        raise UnsafePathError(rel, "resolves outside the memory root")
    if not follow_symlinks and target_a != root_a:
        cur = "" if root_s == os.curdir else root_s  # as Path(".") / "x" reads: "x"
        for comp in target_a[len(prefix):].split(os.sep):
            cur = os.path.join(cur, comp)
            try:
                st = os.lstat(cur)
            except (FileNotFoundError, NotADirectoryError):  # nothing below exists, so no link either
                break
            if stat.S_ISLNK(st.st_mode):
                raise UnsafePathError(rel, f"symlink in path at {cur}")
    return Path(target_s)


def has_symlink(root: Path, path: Path) -> bool:
    """Whether any component of path below root is a symlink (reads and writes there are refused)."""
    root_s, path_s = os.fspath(root), os.fspath(path)
    if not (os.path.isabs(root_s) and os.path.isabs(path_s)):  # a relative root ("." too): compared absolute,
        root_s, path_s = os.path.abspath(root_s), os.path.abspath(path_s)  # from the working folder of now
    steps = _steps_below(root_s, path_s)
    if steps is None:
        return True  # not below root at all: treat as unsafe
    return first_link(steps) is not None


def first_link(steps: tuple[str, ...]) -> str | None:
    """The first of these paths (from ``_steps_below``) that is a symlink, asked with ``lstat`` now; None if none."""
    for cur in steps:
        try:
            if stat.S_ISLNK(os.lstat(cur).st_mode):
                return cur
        except (FileNotFoundError, NotADirectoryError):  # a missing part or a file on the way: no link below
            return None
    return None


@functools.lru_cache(maxsize=4096)
def _steps_below(root: str, path: str) -> tuple[str, ...] | None:
    """The paths from just below ``root`` down to ``path`` (both absolute), one per component (None: not below
    root). Plain string operations, kept per pair: every collection asks on every retrieve, and only the
    ``lstat`` of each step can change between two asks."""
    root_s, path_s = os.path.normpath(root), os.path.normpath(path)
    if path_s == root_s:
        return ()
    prefix = root_s if root_s.endswith(os.sep) else root_s + os.sep
    if not path_s.startswith(prefix):
        return None
    steps = []
    cur = root_s
    for comp in path_s[len(prefix):].split(os.sep):
        cur = os.path.join(cur, comp)
        steps.append(cur)
    return tuple(steps)


def is_within(root: Path, path: Path) -> bool:
    """Tell whether a path (normalised, links not resolved) lies inside root."""
    root_norm = Path(os.path.normpath(root))
    p = Path(os.path.normpath(path))
    return p == root_norm or root_norm in p.parents
