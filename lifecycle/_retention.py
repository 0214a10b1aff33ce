"""lifecycle/retention.yaml: TTL per memory type and grace periods, with defaults for missing keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from ._atomic import read_bytes_nofollow
from ._clock import format_duration, parse_duration
from ._errors import ConfigError, ParseError
from ._yaml import decode_utf8, load_yaml

DEFAULT_TTL: dict[str, str] = {
    "device_profile": "90d", "app_profile": "30d", "procedure": "45d", "navigation": "30d", "calibration": "30d",
    "failure": "60d", "ui_anchor": "30d", "episode_trace": "30d", "episode_summary": "180d",
    "profile": "forever", "rule": "forever", "preference": "forever", "fact": "180d", "long_term_procedure": "45d",
}
DEFAULT_GRACE: dict[str, str] = {
    "expired": "14d", "replaced": "30d", "deleted": "0d", "tombstone": "365d", "quarantine": "30d",
    "temp_files": "1h", "session_archive": "30d",
}


@dataclass
class Retention:
    """TTL and grace durations (None means forever)."""

    ttl: dict[str, timedelta | None] = field(default_factory=dict)
    grace: dict[str, timedelta | None] = field(default_factory=dict)
    path: str | None = None

    def ttl_text(self, kind: str) -> str:
        """The TTL of a memory type as text (``45d``, ``forever``)."""
        return format_duration(self.ttl.get(kind, parse_duration(DEFAULT_TTL.get(kind, "30d"))))

    def ttl_of(self, kind: str) -> timedelta | None:
        """The TTL of a memory type."""
        if kind in self.ttl:
            return self.ttl[kind]
        return parse_duration(DEFAULT_TTL.get(kind, "30d"))

    def grace_of(self, kind: str) -> timedelta | None:
        """A grace period."""
        if kind in self.grace:
            return self.grace[kind]
        return parse_duration(DEFAULT_GRACE.get(kind, "30d"))

    def to_dict(self) -> dict[str, Any]:
        """Effective values as text."""
        return {"ttl": {k: format_duration(v) for k, v in self.ttl.items()},
                "grace": {k: format_duration(v) for k, v in self.grace.items()}}


def _line_of(text: str, section: str, key: str) -> int | None:
    in_section = False
    for n, line in enumerate(text.split("\n"), start=1):
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped:
            continue
        if not line.startswith((" ", "\t")):
            in_section = stripped.startswith(f"{section}:")
            continue
        if in_section and stripped.strip().startswith(f"{key}:"):
            return n
    return None


def load_retention(path: str | Path | None) -> Retention:
    """Read retention.yaml; a missing file or key means the default, a bad value is a ConfigError."""
    ret = Retention(ttl={k: parse_duration(v) for k, v in DEFAULT_TTL.items()},
                    grace={k: parse_duration(v) for k, v in DEFAULT_GRACE.items()},
                    path=str(path) if path else None)
    if path is None:
        return ret
    try:
        text = decode_utf8(read_bytes_nofollow(path), path)
    except FileNotFoundError:
        return ret
    except ParseError as exc:  # not UTF-8: the same ConfigError as bad YAML (the agent then uses defaults)
        raise ConfigError(path, exc.line, exc.message) from None
    try:
        data = load_yaml(text, path)
    except ParseError as exc:
        raise ConfigError(path, exc.line, exc.message) from None
    if data is None:
        return ret
    if not isinstance(data, dict):
        raise ConfigError(path, 1, "retention.yaml must be a mapping with 'ttl' and 'grace' sections")
    for section, target in (("ttl", ret.ttl), ("grace", ret.grace)):
        values = data.get(section)
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ConfigError(path, _line_of(text, section, "") or 1, f"'{section}' must be a mapping")
        for key, raw in values.items():
            try:
                target[str(key)] = parse_duration(raw)
            except ValueError as exc:
                raise ConfigError(path, _line_of(text, section, str(key)), f"{section}.{key}: {exc}") from None
    return ret
