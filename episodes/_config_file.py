"""read_config: config.yaml under the memory root, read so that a task never fails for it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from memory_plane.lifecycle import FileProblemError, load_yaml_file

log = logging.getLogger("memory_plane")

CONFIG_FILE = "config.yaml"


def read_config(root: Path) -> dict[str, Any]:
    """config.yaml under the memory root ({} when missing; a broken or unreadable file is logged and ignored)."""
    try:
        data = load_yaml_file(Path(root) / CONFIG_FILE)
    except FileNotFoundError:
        return {}
    except (FileProblemError, OSError) as exc:
        log.error("memory: config.yaml ignored: %s", exc)
        return {}
    return data if isinstance(data, dict) else {}
