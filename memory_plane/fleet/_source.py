"""Reading a fleet folder: only the files its manifests name, each checked against the manifest's sha256."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import UsageError

from ._dest import TABLES, FleetDest, read_jsonl_gz, sha256


@dataclass
class FleetSource:
    """The checked files of a fleet folder by table, as local paths both engines read (a remote folder's files are
    fetched into a temporary folder first, removed by ``close``)."""

    url: str
    files: dict[str, list[str]] = field(default_factory=dict)
    manifests: int = 0
    _tmp: str | None = None

    @classmethod
    def open(cls, url: str) -> FleetSource:
        """Every file a manifest names, checked; a file whose bytes differ from its manifest is an error naming
        it (a part file no manifest names, such as a killed export's, is not read)."""
        dest = FleetDest.open(url)
        src = cls(url, {t: [] for t in TABLES})
        if not dest.local:
            src._tmp = tempfile.mkdtemp(prefix="memplane-fleet-")
        try:
            for rel in dest.manifests():
                manifest = dest.manifest(rel)
                src.manifests += 1
                for entry in manifest["files"]:
                    src._take(dest, entry, rel)
        except BaseException:
            src.close()
            raise
        return src

    def _take(self, dest: FleetDest, entry: Any, manifest: str) -> None:
        if not isinstance(entry, dict) or entry.get("table") not in TABLES or not isinstance(entry.get("path"), str):
            raise UsageError(f"{dest.path(manifest)}: a file entry without a known table and path: {entry!r}")
        rel = str(entry["path"])
        if rel.startswith("/") or ".." in rel.split("/"):
            raise UsageError(f"{dest.path(manifest)}: a file outside the fleet folder: {rel}")
        data = dest.read(rel)
        if sha256(data) != entry.get("sha256"):
            raise UsageError(f"{dest.path(rel)}: its sha256 is not the one {manifest} names (changed or torn)")
        if self._tmp is None:
            path = dest.path(rel)
        else:
            path = os.path.join(self._tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            Path(path).write_bytes(data)
        self.files[str(entry["table"])].append(path)

    def rows(self, table: str) -> list[dict[str, Any]]:
        """Every row of one table, in export order."""
        out: list[dict[str, Any]] = []
        for path in self.files.get(table, []):
            out += read_jsonl_gz(Path(path).read_bytes(), path)
        return out

    def close(self) -> None:
        """Remove the fetched copies of a remote folder's files."""
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> FleetSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
