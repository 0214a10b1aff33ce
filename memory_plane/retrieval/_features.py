"""What retrieval reads of one index line: the words a goal is matched against, and its query-independent facts."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from memory_plane.lifecycle import BUILD_DATE, expiry_believed, field_num, field_str, field_text, parse_ts

APP_BOUND = ("procedure", "navigation", "app_profile", "failure", "ui_anchor")
ENV_KEYS = ("device_id", "language", "screen", "app", "input_method")
_ALIASES = {"device_id": ("device_id", "device"), "language": ("language", "lang"), "screen": ("screen", "resolution"),
            "app": ("app", "app_id", "app_name"), "input_method": ("input_method",)}
_OWN_KEYS = frozenset({"device_id", "language", "screen"})  # also read from the entry itself
FLEET_PENALTY = 0.2  # a lesson pulled from the fleet that has not yet worked on this phone
UNVERIFIED_PENALTY = 0.5  # a memory its own success did not show done (outcome doubt) weighs as one without evidence
BAD_TIME = datetime.min  # marks an unparsable timestamp (treated as expired)
NO_ENV: tuple[str | None, ...] = (None,) * len(ENV_KEYS)


class Feat(NamedTuple):
    """What retrieval needs of an entry beyond its text, parsed once."""

    status: str
    expires: datetime | None
    when: datetime | None
    appl: tuple[str | None, ...]
    app: str | None
    confidence: float
    validation: float
    penalty: float
    has_evidence: bool


def parse_when(value: Any) -> datetime | None:
    """A timestamp field as a datetime; None when absent, BAD_TIME when unreadable."""
    if not value:
        return None
    try:
        return parse_ts(value)
    except (ValueError, TypeError, OverflowError):
        return BAD_TIME


def appl_key(e: dict[str, Any]) -> tuple[str | None, ...]:
    """The environment a memory was made under, one lowercase value (or None) per ENV_KEYS."""
    appl = e.get("applicability")
    if not isinstance(appl, dict):
        appl = {}
    if not appl and not any(k in e for k in _OWN_KEYS):
        return NO_ENV  # a memory of no environment (most long-term memories): nothing to look up
    out = []
    for key in ENV_KEYS:  # plain loops: this runs for every candidate of a first retrieve
        v = None
        for alias in _ALIASES[key]:
            v = field_str(appl.get(alias))
            if v:
                break
        if not v and key in _OWN_KEYS:
            v = field_str(e.get(key))
        out.append(v.lower() if v else None)
    return tuple(out)


def episode_features(e: dict[str, Any]) -> Feat:
    """The query-independent facts of one episode's index line."""
    ok = e.get("success") is True
    return Feat((field_str(e.get("status")) or "active").strip().lower(), None, parse_when(e.get("started_at")),
                appl_key(e), field_str(e.get("app")), 1.0 if ok else 0.8, 1.0 if ok else 0.5, 0.0, True)


_PLAIN_KEYS = frozenset({"id", "type", "status", "title", "summary", "source", "priority", "confidence", "tags",
                         "entities", "created_at", "path"})
"""The fields of a memory's index line that decide none of its features but its status and confidence."""


def memory_features(e: dict[str, Any], item_type: str, evidence: bool) -> Feat:
    """The query-independent facts of one device or long-term memory's index line (``item_type``: the entry's
    type, for whether it is bound to its app; ``evidence``: whether something on disk shows it)."""
    if e.keys() <= _PLAIN_KEYS and e.get("source") != "fleet" and (evidence or item_type not in APP_BOUND):
        # A line of no counts, times, environment, app or doubt (most of a store's rules and facts, each read at a
        # fresh process's first retrieve): what the general path below makes of it, without asking each field.
        return Feat((field_str(e.get("status")) or "active").strip().lower(), None, None, NO_ENV, None,
                    min(1.0, max(0.0, field_num(e.get("confidence", 0.5), 0.0))), 0.5, 0.0, evidence)
    return general_features(e, item_type, evidence)


def general_features(e: dict[str, Any], item_type: str, evidence: bool) -> Feat:
    """``memory_features`` asked of every field (what it comes to for any line)."""
    s, f = max(0, int(field_num(e.get("success_count"), 0))), max(0, int(field_num(e.get("failure_count"), 0)))
    status = (field_str(e.get("status")) or "active").strip().lower()
    penalty = 0.0
    if (item_type in APP_BOUND and not evidence) or e.get("traceability") == "excerpt_only":
        penalty = 0.5  # missing evidence or broken traceability (its episodes are gone): downweighted
    if f > s or e.get("conflicts_with"):
        penalty = max(penalty, 0.5)
    if e.get("verified") is False:
        penalty = max(penalty, UNVERIFIED_PENALTY)  # taught by a success nothing confirmed: below a verified one
    if e.get("source") == "fleet" and s == 0:
        # Only other phones' evidence: below this phone's own for the same goal, until it succeeds here too.
        penalty = max(penalty, FLEET_PENALTY)
    when = parse_when(e.get("last_validated_at")) or parse_when(e.get("updated_at"))
    expires = parse_when(e.get("expires_at"))
    if expires is not None and expires is not BAD_TIME and expires < BUILD_DATE and not expiry_believed(
            expires, e.get("created_at"), e.get("updated_at"), e.get("last_validated_at")):
        expires = None  # computed under an unset clock (a phone at 1970): its age is unknown, it is not hidden
    if when is BAD_TIME or (when is not None and when < BUILD_DATE):
        when = None  # unknown, not ancient
    appl = appl_key(e)
    if item_type == "app_profile" and (appl[1] or appl[2]):
        # An app profile's language and screen say where it was last seen, not where it holds: what it knows of
        # the app (its package, pages, known issues) helps under another language or screen too, and the agent
        # reads the labels off the screen in front of it (bench replay: 99 steps after the environment changes
        # when a profile was hidden there, 89 when shown).
        appl = (appl[0], None, None, *appl[3:])
    return Feat(status, expires, when,
                appl, field_str(e.get("app")), min(1.0, max(0.0, field_num(e.get("confidence", 0.5), 0.0))),
                (s + 1) / (s + f + 2), penalty, evidence)


def device_text(e: dict[str, Any]) -> str:
    """The words of a device memory's index line that a goal is matched against."""
    return " ".join(x for x in map(field_text, (e.get("title"), e.get("summary"), e.get("app_name"), e.get("app"),
                                           e.get("page"), e.get("tags"))) if x)


def episode_text(e: dict[str, Any]) -> str:
    """The words of an episode's index line that a goal is matched against (its goal and app)."""
    goal, app = e.get("goal"), e.get("app")
    if isinstance(goal, str) and (app is None or isinstance(app, str)):  # the usual line, 10,000 times at start-up
        return f"{goal} {app}" if goal and app else goal or app or ""
    return " ".join(x for x in map(field_text, (goal, app)) if x)


def long_term_text(e: dict[str, Any]) -> str:
    """The words of a long-term memory's index line that a goal is matched against."""
    title, summary, tags, entities = e.get("title"), e.get("summary"), e.get("tags"), e.get("entities")
    if (type(title) is str and type(summary) is str and type(tags) is list and type(entities) is list
            and all(type(t) is str for t in tags) and all(type(t) is str for t in entities)):
        # The line as the store writes it, every entry at a fresh process's start: the same words as below
        # (field_text of each field, the empty ones left out) without a call per field.
        return " ".join(x for x in (title, summary, " ".join(t for t in tags if t), " ".join(t for t in entities if t))
                        if x)
    return " ".join(x for x in map(field_text, (title, summary, tags, entities)) if x)


def said_text(e: dict[str, Any]) -> str:
    """What an index line says a memory is about: its title and summary (what its stance is taken of)."""
    return f"{field_text(e.get('title'))}\n{field_text(e.get('summary'))}"
