"""The bottom layer: the life of every memory file.

Tree layout, atomic writes and appends, locks, codecs (item YAML, index lines, jsonl,
markdown frontmatter), the record envelope, collections, verify and GC. Nothing here
imports the layers above (device_memory, episodes, memory_plane).
"""

from ._atomic import append_line, atomic_write, create_exclusive, fsync_dir, is_temp_name, read_bytes_nofollow
from ._clock import Clock, elapsed_label, format_duration, format_ts, parse_duration, parse_ts, system_clock
from ._collection import Collection, ItemRead, Problem, YamlCollection, key_line, validate_record
from ._envelope import STATUSES, EvidenceRef, Record, Status, StrList, Timestamp
from ._errors import (
    ConfigError,
    FileProblemError,
    LockTimeout,
    MemoryPlaneError,
    ParseError,
    StorageError,
    UnsafePathError,
    UsageError,
    ValidationError,
    YamlBombError,
)
from ._frontmatter import parse_frontmatter, render_frontmatter, split_frontmatter
from ._gc import GcReport, remove_path, stale_temp_files, tree_size, walk_files
from ._index import INDEX_HEADER, INDEX_NAME, IndexFile, IndexRead, format_entry, parse_index
from ._journal import ConflictLog, TombstoneLog
from ._jsonl import JsonlProblem, JsonlRead, dumps_compact, parse_jsonl, read_jsonl
from ._locks import DEFAULT_LOCK_TIMEOUT, collection_lock, locked
from ._paths import (
    DEFAULT_ROOT,
    ROOT_ENV,
    check_id,
    check_relpath,
    content_hash,
    is_safe_id,
    is_within,
    resolve_root,
    safe_join,
    slug_id,
    slugify,
)
from ._retention import DEFAULT_GRACE, DEFAULT_TTL, Retention, load_retention
from ._tree import DEVICE_COLLECTIONS, LAYOUT_DIRS, init_tree, template_files
from ._verify import QUARANTINE_DIR, VerifyReport, quarantine, verify_collections
from ._yaml import check_budget, decode_utf8, dump_yaml, load_yaml, load_yaml_file

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_ROOT",
    "DEFAULT_TTL",
    "DEVICE_COLLECTIONS",
    "INDEX_HEADER",
    "INDEX_NAME",
    "LAYOUT_DIRS",
    "QUARANTINE_DIR",
    "ROOT_ENV",
    "STATUSES",
    "Clock",
    "Collection",
    "ConfigError",
    "ConflictLog",
    "EvidenceRef",
    "FileProblemError",
    "GcReport",
    "IndexFile",
    "IndexRead",
    "ItemRead",
    "JsonlProblem",
    "JsonlRead",
    "LockTimeout",
    "MemoryPlaneError",
    "ParseError",
    "Problem",
    "Record",
    "Retention",
    "Status",
    "StorageError",
    "StrList",
    "Timestamp",
    "TombstoneLog",
    "UnsafePathError",
    "UsageError",
    "ValidationError",
    "VerifyReport",
    "YamlBombError",
    "YamlCollection",
    "append_line",
    "atomic_write",
    "check_budget",
    "check_id",
    "check_relpath",
    "collection_lock",
    "content_hash",
    "create_exclusive",
    "decode_utf8",
    "dump_yaml",
    "dumps_compact",
    "elapsed_label",
    "format_duration",
    "format_entry",
    "format_ts",
    "fsync_dir",
    "init_tree",
    "is_safe_id",
    "is_temp_name",
    "is_within",
    "key_line",
    "load_retention",
    "load_yaml",
    "load_yaml_file",
    "locked",
    "parse_duration",
    "parse_frontmatter",
    "parse_index",
    "parse_jsonl",
    "parse_ts",
    "quarantine",
    "read_bytes_nofollow",
    "read_jsonl",
    "remove_path",
    "render_frontmatter",
    "resolve_root",
    "safe_join",
    "slug_id",
    "slugify",
    "split_frontmatter",
    "stale_temp_files",
    "system_clock",
    "template_files",
    "tree_size",
    "validate_record",
    "verify_collections",
    "walk_files",
]
