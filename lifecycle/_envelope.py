"""The record envelope every memory shares: identity, status, TTL, evidence, conflicts."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, field_validator

from ._clock import expiry_believed, format_ts, parse_duration, parse_ts
from ._paths import is_safe_id

Status = Literal["active", "replaced", "deleted", "conflicted", "expired", "inactive"]
STATUSES: tuple[str, ...] = ("active", "replaced", "deleted", "conflicted", "expired", "inactive")
"""``inactive`` is for people: a memory switched off by hand, never retrieved, never removed by GC."""


# Words docs/files.md documents for switching a memory off by hand: read as ``inactive`` and not a problem
# (a hand-set ``status: disabled`` must not make every nightly verify exit 1).
OFF_WORDS = ("disabled", "off")


def normalize_status(value: Any) -> Any:
    """A status as people type it (``Active``, `` inactive ``, ``disabled``) in the form the schema uses."""
    if not isinstance(value, str):
        return value
    word = value.strip().lower()
    return "inactive" if word in OFF_WORDS else word


def _lenient_ts(value: Any) -> Any:
    # A timestamp a person mistyped is kept as its text (so nothing is lost) and treated as
    # expired by is_expired(), instead of making the whole item unreadable.
    if value is None or value == "":
        return None
    try:
        return parse_ts(value)
    except ValueError:
        return str(value)


def _ser_ts(value: datetime | str | None) -> str | None:
    if isinstance(value, datetime):
        return format_ts(value)
    return value


Timestamp = Annotated[datetime | str | None, BeforeValidator(_lenient_ts), PlainSerializer(_ser_ts)]


class EvidenceRef(BaseModel):
    """A pointer to what taught a memory: an episode (and its event ids) or another memory."""

    # Every model of the project defers its schema to its first validation: a process that only retrieves builds
    # the few it reads, not all of them at import (a third of what import cost).
    model_config = ConfigDict(defer_build=True, extra="allow")

    type: str = "episode"
    id: str
    # Empty lists and dicts are defaults, not factories: pydantic copies a default for each instance, and a builtin
    # factory (list, dict) makes it read the builtin's signature by tokenizing its text, milliseconds on the
    # first model a process builds (a start's first retrieve).
    event_ids: list[str] = Field(default_factory=list)

    @field_validator("event_ids", mode="before")
    @classmethod
    def _list(cls, v: Any) -> Any:
        return as_list(v)


def as_list(v: Any) -> list[Any]:
    """A list field as read from a file: None is empty; anything but a list is refused (ValueError).

    A mapping or a number where a list belongs (``steps: 5``, ``steps: {a: 1}``) must not be iterated
    into something else: validation names it and the field is treated as absent (one broken field
    costs that field, not the item).
    """
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return list(v)
    raise ValueError(f"must be a list, not {type(v).__name__}")


def _str_list(v: Any) -> Any:
    if v is None:
        return []
    if isinstance(v, str):
        return [v] if v else []
    if isinstance(v, (bool, int, float)):
        return [as_text(v)]
    return [str(x) for x in as_list(v) if x is not None and str(x) != ""]


StrList = Annotated[list[str], BeforeValidator(_str_list)]


def as_text(value: Any) -> Any:
    """A scalar where text is expected, as text: ``5`` -> ``"5"``, ``["WeChat"]`` -> ``"WeChat"``.

    What the phone reports and what people type is not always a string; a value that can be read as
    one is kept as one. Anything else (a mapping, a list of mappings) is left for validation to refuse.
    """
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        words = [as_text(v) for v in value if v is not None and not isinstance(v, (dict, list, tuple))]
        words = [w for w in words if isinstance(w, str) and w.strip()]
        return words[0] if words else None
    return value


Text = Annotated[str | None, BeforeValidator(as_text)]
"""An optional text field that reads numbers and one-element lists as text."""


class Record(BaseModel):
    """Fields every memory file carries; unknown keys a person added survive a round trip."""

    model_config = ConfigDict(defer_build=True, extra="allow", populate_by_name=True)

    id: str
    type: str
    status: Status = "active"
    title: str | None = None
    applicability: dict[str, Any] = Field(default_factory=dict)
    confidence: float = 0.5
    ttl: str | None = None
    expires_at: Timestamp = None
    created_at: Timestamp = None
    updated_at: Timestamp = None
    last_validated_at: Timestamp = None
    success_count: int = 0
    failure_count: int = 0
    evidence_refs: list[EvidenceRef] = Field(default_factory=list)
    evidence_count: int = 0  # every evidence ref ever added (the list keeps the first and the newest)
    conflicts_with: StrList = Field(default_factory=list)
    supersedes: str | None = None
    superseded_by: str | None = None

    ENVELOPE_HEAD: ClassVar[tuple[str, ...]] = ("id", "type", "status", "title")
    # A status nobody defined means someone wanted the memory off: keep it off (verify names it).
    LENIENT_FALLBACK: ClassVar[dict[str, Any]] = {"status": "inactive"}

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, v: Any) -> Any:
        return normalize_status(v)

    @field_validator("id")
    @classmethod
    def _safe_id(cls, v: str) -> str:
        if not is_safe_id(v):
            raise ValueError("id must be 1-80 chars of [a-z0-9_-]")
        return v

    @field_validator("confidence", mode="before")
    @classmethod
    def _clamp(cls, v: Any) -> Any:
        if v is None:
            return 0.5
        if isinstance(v, (dict, list, tuple)) or v != v:  # a mapping, a list or NaN is no confidence
            raise ValueError("must be a number between 0 and 1")
        return min(1.0, max(0.0, float(v)))

    @field_validator("success_count", "failure_count", "evidence_count", mode="before")
    @classmethod
    def _count(cls, v: Any) -> Any:
        if v is None:
            return 0
        if isinstance(v, (dict, list, tuple)):
            raise ValueError("must be a whole number")
        try:
            return max(0, int(v))
        except (OverflowError, TypeError) as exc:  # infinity, or a value int() does not take
            raise ValueError("must be a whole number") from exc

    @field_validator("applicability", mode="before")
    @classmethod
    def _mapping(cls, v: Any) -> Any:
        return {} if v is None else v

    @field_validator("evidence_refs", mode="before")
    @classmethod
    def _refs(cls, v: Any) -> Any:
        out = []
        for r in as_list(v):
            out.append({"type": "episode", "id": r} if isinstance(r, str) else r)
        return out

    # -- lifecycle helpers -------------------------------------------------

    def is_expired(self, now: datetime) -> bool:
        """Tell whether the memory is past expires_at (an unparsable expires_at counts as expired; one computed
        under an unset clock, before the build date, does not: that memory's age is unknown)."""
        if self.status == "expired":
            return True
        if self.expires_at is None:
            return False
        if isinstance(self.expires_at, str):
            return True
        return self.expires_at <= now and expiry_believed(self.expires_at, self.created_at, self.updated_at,
                                                          self.last_validated_at)

    def renew(self, now: datetime, ttl: str | None = None) -> None:
        """Mark validated now and push expires_at to now + TTL."""
        if ttl is not None:
            self.ttl = ttl
        self.last_validated_at = now
        self.updated_at = now
        delta: timedelta | None = parse_duration(self.ttl) if self.ttl else None
        self.expires_at = now + delta if delta is not None else None

    def add_evidence(self, ref: EvidenceRef, cap: int = 20) -> None:
        """Add an evidence ref (merging event ids of the same ref); past ``cap`` refs keep the first one
        (what taught the memory) and the newest, and ``evidence_count`` counts every ref ever added."""
        for old in self.evidence_refs:
            if old.type == ref.type and old.id == ref.id:
                old.event_ids = list(dict.fromkeys([*old.event_ids, *ref.event_ids]))[:40]
                return
        self.evidence_count = max(self.evidence_count, len(self.evidence_refs)) + 1
        self.evidence_refs.append(ref)
        if len(self.evidence_refs) > cap:
            self.evidence_refs = [self.evidence_refs[0], *self.evidence_refs[-(cap - 1):]]

    # -- serialisation -------------------------------------------------------

    def to_yaml_dict(self) -> dict[str, Any]:
        """Dump for YAML: head keys, type-specific fields, envelope fields, then extra keys."""
        data = self.model_dump(mode="json", exclude_none=True, by_alias=True)
        envelope = set(Record.model_fields)
        order = list(self.ENVELOPE_HEAD)
        order += [k for k in type(self).model_fields if k not in envelope]
        order += [k for k in Record.model_fields if k not in self.ENVELOPE_HEAD]
        out: dict[str, Any] = {}
        for k in order:
            if k in data and not _empty(data[k], k):
                out[k] = data[k]
        for k, v in data.items():
            if k not in out and k not in type(self).model_fields:
                out[k] = v  # keys a person added
        return out


def _empty(value: Any, key: str) -> bool:
    # Keep files short: drop empty lists/maps, but never counts or required keys.
    if key == "evidence_count":
        return not value  # only worth a line once the list has been capped or grown
    return isinstance(value, (list, dict)) and not value and key not in ("id", "type")
