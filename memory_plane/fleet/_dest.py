"""Where fleet files live: a local folder or any fsspec URL (``s3://bucket/prefix``), and its manifests."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import UsageError, atomic_write, guarded_makedirs, slug_id

TABLES = ("episodes", "lessons", "tombstones", "long_term")
"""The tables a phone writes; ``long_term`` only when the user asks for it (``--include-long-term``)."""


def device_part(device: str) -> str:
    """A device id as a partition value (``device=<id>``): safe in a path and in an object key."""
    return slug_id(device) or "default"


def jsonl_gz(rows: list[dict[str, Any]]) -> bytes:
    """Rows as gzip-compressed newline-delimited JSON (mtime 0: the same rows give the same bytes)."""
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True, default=str) + "\n" for r in rows)
    return gzip.compress(text.encode("utf-8"), mtime=0)


def read_jsonl_gz(data: bytes, where: str) -> list[dict[str, Any]]:
    """The rows of a part file; a line that is no JSON object is an error naming the file and line."""
    rows = []
    for n, line in enumerate(gzip.decompress(data).decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{where}:{n}: not a JSON row ({exc})") from None
        if not isinstance(row, dict):
            raise UsageError(f"{where}:{n}: not a JSON object")
        rows.append(row)
    return rows


def sha256(data: bytes) -> str:
    """The hex sha256 a manifest names a file by."""
    return hashlib.sha256(data).hexdigest()


@dataclass
class FleetDest:
    """One fleet folder (local or an fsspec URL): read and write files by their path below it."""

    url: str
    fs: Any
    base: str

    @classmethod
    def open(cls, url: str) -> FleetDest:
        """The folder at ``url``; fsspec (and s3fs for ``s3://``) load here only, never on the phone's hot path.
        S3 endpoint and credentials come the usual AWS way (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...)."""
        if not url or not str(url).strip():
            raise UsageError("a fleet folder or URL is needed (a path, or s3://bucket/prefix)")
        try:
            from fsspec.core import url_to_fs
        except ImportError:
            raise UsageError("fleet commands need the fleet extra: pip install 'memory-plane[fleet]'") from None
        try:
            fs, base = url_to_fs(str(url))
        except (ImportError, ValueError) as exc:
            raise UsageError(f"cannot open {url}: {exc} (s3:// needs s3fs, in the fleet extra)") from None
        return cls(str(url), fs, str(base).rstrip("/"))

    @property
    def local(self) -> bool:
        """Whether the folder is on this machine's filesystem."""
        return "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))

    def path(self, rel: str) -> str:
        """The full path of ``rel`` in the filesystem's terms."""
        return f"{self.base}/{rel}"

    def write(self, rel: str, data: bytes) -> None:
        """Write one whole file: locally through the atomic write (a reader never sees half of it), remotely as
        one object upload (an object store shows an object whole or not at all)."""
        if self.local:
            # The fleet folder is the root here: a link planted below it is refused, never followed.
            root = Path(self.base)
            root.mkdir(parents=True, exist_ok=True)
            guarded_makedirs(root, os.path.dirname(self.path(rel)))
            atomic_write(self.path(rel), data, root=root)
        else:
            self.fs.pipe_file(self.path(rel), data)

    def read(self, rel: str) -> bytes:
        """One file's bytes."""
        data = self.fs.cat_file(self.path(rel))
        return bytes(data)

    def manifests(self, device: str | None = None) -> list[str]:
        """The manifests (paths relative to the folder), of one device or of all, in export order."""
        self.fs.invalidate_cache()  # another phone or process may have written since this filesystem listed it
        pattern = self.path(f"manifests/device={device_part(device)}/*.json" if device else "manifests/*/*.json")
        prefix = self.base + "/"  # fsspec lists paths as it was given the base: without the protocol
        rels = [str(p)[len(prefix):] for p in self.fs.glob(pattern) if str(p).startswith(prefix)]
        return sorted(rels, key=os.path.basename)  # export ids sort in the order the exports were made

    def manifest(self, rel: str) -> dict[str, Any]:
        """One manifest; one that is no JSON object is an error naming it."""
        try:
            data = json.loads(self.read(rel))
        except ValueError as exc:
            raise UsageError(f"{self.path(rel)}: not a manifest ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("files"), list):
            raise UsageError(f"{self.path(rel)}: not a manifest (no list of files)")
        return data
