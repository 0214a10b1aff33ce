"""YamlCollection: a flat folder of ``<id>.yaml`` items (the device memories) on the collection base."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pydantic

from ._atomic import read_bytes_nofollow
from ._clock import Clock
from ._collection import ItemCollection
from ._guarded import guarded_unlink
from ._index import field_str, rebuild_entries
from ._index_check import index_writes
from ._layout import FlatLayout
from ._locks import DEFAULT_LOCK_TIMEOUT
from ._paths import is_safe_id, safe_join
from ._validate import validate_record
from ._yaml import dump_yaml, load_yaml, read_item_text

R = TypeVar("R", bound=pydantic.BaseModel)


class YamlCollection(ItemCollection[R]):
    """A folder of ``<id>.yaml`` items with a one-line-per-item index.yaml and one lock."""

    guard_linked = True

    def __init__(
        self,
        root: Path,
        rel_dir: str,
        model: type[R],
        *,
        index_entry: Callable[[R], dict[str, Any]] | None = None,
        sort_key: Callable[[Mapping[str, Any]], Any] | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        clock: Clock | None = None,
    ) -> None:
        # The folder itself may have been replaced by a symlink: the collection then reads nothing and
        # refuses writes (item_path checks every component) instead of failing the whole plane.
        super().__init__(FlatLayout(Path(root), rel_dir), name=rel_dir, lock_timeout=lock_timeout, clock=clock)
        self.rel_dir = rel_dir
        self.model = model
        self._index_entry = index_entry
        self._sort_key = sort_key

    # -- what is this store's -----------------------------------------------------

    def load_path(self, path: Path) -> R:
        """Load and validate one item file; ParseError/ValidationError on bad content."""
        text = read_item_text(path)
        data = load_yaml(text, path)
        return validate_record(self.model, data, path, text)

    def dump(self, record: R, old_text: str | None) -> str:
        """The YAML of a record, keeping the comments of the file it replaces."""
        to_yaml = getattr(record, "to_yaml_dict", None)
        return dump_yaml(to_yaml() if to_yaml else record.model_dump(mode="json", exclude_none=True), old_text)

    def entry_for(self, record: R) -> dict[str, Any]:
        """The index line of a record."""
        if self._index_entry is not None:
            entry = self._index_entry(record)
        else:
            data = record.model_dump(mode="json", exclude_none=True)
            entry = {k: data[k] for k in ("id", "type", "status", "title", "expires_at") if k in data}
        entry.setdefault("path", self.layout.name_for(record.id))  # type: ignore[attr-defined]
        return entry

    def order_entries(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """By the collection's sort key, then id."""
        return rebuild_entries(entries, self._sort_key)

    # -- paths ------------------------------------------------------------------

    def item_path(self, item_id: str) -> Path:
        """Path of an item file; refuses ids that are not safe."""
        return self.layout.path_of(item_id)

    def path_of(self, item_id: str) -> Path:
        """The file of an item: ``<id>.yaml``, or the file the index names for it (renamed by a person)."""
        path = self.item_path(item_id)
        if os.path.lexists(path):
            return path
        current = self.index.read()
        i = current.position(item_id)  # O(1): this runs for every new item
        name = field_str(current.entries[i].get("path")) if i is not None else None
        if name and name != path.name:
            try:
                other = safe_join(self.root, self.rel_dir, name)
            except ValueError:
                return path
            if other.parent == path.parent and os.path.lexists(other):
                return other
        return path

    def find(self, item_id: str) -> R | None:
        """An item by the id inside it: its own file, the file its index line names, or any file of the folder
        that holds that id (renamed by a person, not yet indexed). Slower than get on a miss: for people."""
        item = self.get(item_id)
        if item is not None:
            return item
        path = self.renamed_path(item_id)
        if path is None:
            return None
        try:
            return self.load_path(path)
        except FileNotFoundError:
            return None

    def renamed_path(self, item_id: str) -> Path | None:
        """The item file of the folder whose ``id:`` line is this id (a scan of the folder: a miss only)."""
        if self.linked() or not is_safe_id(item_id):
            return None
        pat = re.compile(rb"^id:\s*[\"']?" + re.escape(item_id.encode()) + rb"[\"']?\s*(?:#.*)?$", re.MULTILINE)
        for name in self.layout.item_paths():
            try:
                head = read_bytes_nofollow(name, 4096)
            except OSError:
                continue
            if pat.search(head):
                return name
        return None

    # -- writing ----------------------------------------------------------------

    def delete(self, item_id: str) -> bool:
        """Remove an item's index line, then its file; return True if it existed."""
        with self.lock(), index_writes(self):
            path = self.path_of(item_id)
            self.index.remove([item_id])
            return guarded_unlink(self.root, path)

