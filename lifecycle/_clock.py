"""Time: an injectable clock, RFC 3339 timestamps, TTL durations, and when a clock is not to be believed."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone

Clock = Callable[[], datetime]
"""A function returning the current time as an aware UTC datetime."""


def system_clock() -> datetime:
    """Return the current time in UTC (freezegun-friendly)."""
    return datetime.now(timezone.utc)


def format_ts(dt: datetime) -> str:
    """Format a datetime as RFC 3339 UTC with a trailing Z."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    dt = dt.astimezone(timezone.utc)
    if dt.microsecond:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


_FRACTION = re.compile(r"^(.*T\d\d:\d\d:\d\d)\.(\d+)(.*)$")


def parse_ts(value: object) -> datetime:
    """Parse an RFC 3339 timestamp (or a YAML datetime/date) into an aware UTC datetime."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        # Python 3.10's fromisoformat wants exactly 3 or 6 fraction digits. (Most timestamps have none: the
        # pattern is not even tried then, for the hundreds a first retrieve parses.)
        m = _FRACTION.match(text) if "." in text else None
        if m:
            text = f"{m.group(1)}.{(m.group(2) + '000000')[:6]}{m.group(3)}"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"not an RFC 3339 timestamp: {value!r}") from None
    else:
        raise ValueError(f"not a timestamp: {value!r}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([wdhms])\s*$")
_UNIT_SECONDS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(value: object) -> timedelta | None:
    """Parse a TTL such as ``45d``, ``12h`` or ``forever`` (None means no expiry)."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return timedelta(seconds=float(value))
    if not isinstance(value, str):
        raise ValueError(f"not a duration: {value!r}")
    if value.strip().lower() in ("", "forever", "never", "none"):
        return None
    m = _DURATION.match(value.lower())
    if not m:
        raise ValueError(f"not a duration (use e.g. 30d, 12h, 90m, 45s or forever): {value!r}")
    return timedelta(seconds=float(m.group(1)) * _UNIT_SECONDS[m.group(2)])


def format_duration(td: timedelta | None) -> str:
    """Format a timedelta as the largest whole unit (``forever`` for None)."""
    if td is None:
        return "forever"
    secs = int(td.total_seconds())
    for unit in ("d", "h", "m"):
        if secs and secs % _UNIT_SECONDS[unit] == 0:
            return f"{secs // _UNIT_SECONDS[unit]}{unit}"
    return f"{secs}s"


BUILD_DATE = datetime(2025, 1, 1, tzinfo=timezone.utc)
"""No correct clock reads earlier: this package did not exist before it. A time written before it came from an
unset clock (a phone at 1970 until network time arrives): its age is unknown, never "long ago"."""
MAX_CLOCK_LEAP = timedelta(days=730)
"""How far past the newest write in the tree a clock may read before GC and expiry stop believing it."""
CLOCK_SKEW = timedelta(days=1)
"""How far before the newest write in the tree a clock may read (time zones, network time corrections)."""


def unset_clock(*times: object) -> bool:
    """Whether any of these write times came from an unset clock (before ``BUILD_DATE``; missing or unreadable
    ones say nothing)."""
    for value in times:
        if value is None or value == "":
            continue
        try:
            if parse_ts(value) < BUILD_DATE:
                return True
        except (ValueError, TypeError, OverflowError):
            continue
    return False


def expiry_believed(expires: datetime, *written: object) -> bool:
    """Whether a past ``expires`` may hide or remove a memory: not when it was computed under an unset clock
    (before ``BUILD_DATE``, by a record that says it was written then); such a memory's age is unknown."""
    return not (expires < BUILD_DATE and unset_clock(*written))


def clock_doubt(now: datetime, newest: datetime | None, where: str = "") -> str | None:
    """Why ``now`` cannot be believed for removing things by age, or None: a clock before ``BUILD_DATE``, earlier
    than the newest write in the tree (``newest``, found in ``where``), or more than ``MAX_CLOCK_LEAP`` after it."""
    at = f" ({where})" if where else ""
    if now < BUILD_DATE:
        return f"the clock reads {format_ts(now)}, before {BUILD_DATE.date()}: it is not set"
    if newest is None:
        return None
    if now < newest - CLOCK_SKEW:
        return (f"the clock reads {format_ts(now)}, earlier than the newest write in the tree, "
                f"{format_ts(newest)}{at}")
    if now > newest + MAX_CLOCK_LEAP:
        return (f"the clock reads {format_ts(now)}, more than {MAX_CLOCK_LEAP.days} days after the newest write in "
                f"the tree, {format_ts(newest)}{at}")
    return None


def elapsed_label(start: datetime, at: datetime) -> str:
    """Render a time relative to a session start as ``T+mm:ss`` (never "ago")."""
    secs = max(0, int((at - start).total_seconds()))
    minutes, s = divmod(secs, 60)
    return f"T+{minutes:02d}:{s:02d}"
