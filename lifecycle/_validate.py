"""Validating item files a person may have edited: a field of the wrong shape is named, not fatal.

A hand edit such as ``confidence: high`` or ``initial_state: {app: 5}`` must not make the whole item
unreadable (and so hidden from retrieval, or quarantined by ``verify --fix``). The field is treated
as absent, the item loads, and the problem is kept beside the record for verify to report with the
file and line. Only what no default can stand in for (a missing or unsafe ``id``, a file that is not
a mapping) still fails the item.
"""

from __future__ import annotations

import re
import threading
import weakref
from pathlib import Path
from typing import Any, TypeVar

import pydantic

from ._errors import ValidationError

R = TypeVar("R", bound=pydantic.BaseModel)

MAX_REPAIRS = 50  # fields dropped per file before the item is given up as unreadable

# Problems of records that loaded with a field set aside, by record identity. Records are ordinary
# pydantic models shared by several stores, so the note lives here instead of on each model class.
_problems: dict[int, list[ValidationError]] = {}
_guard = threading.Lock()


def _forget(key: int) -> None:
    with _guard:
        _problems.pop(key, None)


def field_problems(record: Any) -> list[ValidationError]:
    """Fields of a loaded record that were set aside because of their shape (empty when none)."""
    with _guard:
        return list(_problems.get(id(record), ()))


def key_line(text: str, key: str) -> int | None:
    """Return the 1-based line of a top-level ``key:`` in YAML text, if present."""
    m = re.search(rf"^{re.escape(str(key))}\s*:", text, re.MULTILINE)
    return text.count("\n", 0, m.start()) + 1 if m else None


def loc_line(text: str, loc: tuple[Any, ...]) -> int | None:
    """Best-effort 1-based line of a nested field (``initial_state.app``) in block YAML text."""
    names = [str(p) for p in loc if isinstance(p, str)]
    if not names:
        return None
    line = key_line(text, names[0])
    if line is None:
        return None
    lines = text.split("\n")
    for name in names[1:]:
        pat = re.compile(rf"^\s+(?:-\s+)?{re.escape(name)}\s*:")
        nxt = next((i + 1 for i in range(line, len(lines)) if pat.match(lines[i])), None)
        if nxt is None:
            break
        line = nxt
    return line


def _required(model: type[pydantic.BaseModel], name: Any) -> bool:
    info = model.model_fields.get(str(name))
    return info is not None and info.is_required()


def _has(container: Any, key: Any) -> bool:
    if isinstance(container, dict):
        return key in container
    return isinstance(container, list) and isinstance(key, int) and 0 <= key < len(container)


def _drop(data: Any, loc: tuple[Any, ...], fallback: dict[str, Any]) -> bool:
    """Remove (or replace by its fallback) the value at loc; False if loc cannot be reached."""
    if not loc:
        return False
    parent = data
    for part in loc[:-1]:
        if not _has(parent, part):
            return False
        parent = parent[part]
    last = loc[-1]
    if isinstance(parent, dict) and last in parent:
        if len(loc) == 1 and last in fallback:
            parent[last] = fallback[last]
        else:
            del parent[last]
        return True
    if isinstance(parent, list) and isinstance(last, int) and 0 <= last < len(parent):
        del parent[last]
        return True
    return False


def _copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_copy(v) for v in data]
    return data


def _blame(model: type[pydantic.BaseModel], data: dict[str, Any], exc: Exception, path: Path) -> list[Any]:
    """The top-level field whose value made validation raise something other than a ValidationError.

    Every validator should refuse a bad shape with ValueError; one that does not (a TypeError from
    iterating a number) must still cost that one field, never the whole item or the caller's run.
    """
    for key in data:
        if _required(model, key):
            continue
        try:
            model.model_validate({k: v for k, v in data.items() if k != key})
        except pydantic.ValidationError:
            pass
        except Exception:  # still raising without this key: not the culprit
            continue
        return [{"loc": (key,), "msg": f"{type(exc).__name__}: {str(exc)[:120]}", "type": "value_error"}]
    raise ValidationError(path, None, f"unreadable: {type(exc).__name__}: {str(exc)[:120]}")


def validate_record(model: type[R], data: Any, path: Path, text: str) -> R:
    """Validate parsed YAML against a model; a field of the wrong shape is set aside (see field_problems).

    ValidationError (file, line, field) only when the item cannot stand without the field. A model may
    name, in a ``LENIENT_FALLBACK`` class attribute, values to use instead of dropping a top-level field
    (an unknown ``status`` becomes ``inactive``: a memory a person switched off must stay off).
    """
    if not isinstance(data, dict):
        raise ValidationError(path, 1, "item file must be a YAML mapping")
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as first:
        errors = first.errors()
    except Exception as exc:  # a validator met a shape it did not expect: find the field, never fail the file
        errors = _blame(model, data, exc, path)
    fallback: dict[str, Any] = dict(getattr(model, "LENIENT_FALLBACK", {}) or {})
    if isinstance(getattr(model, "TYPE", None), str):
        # The folder an item lives in already says its type: a mangled ``type:`` costs nothing but itself.
        fallback.setdefault("type", model.TYPE)  # type: ignore[attr-defined]
    work = _copy(data)
    notes: list[ValidationError] = []
    for _ in range(MAX_REPAIRS):
        err = errors[0]
        loc = tuple(err.get("loc") or ())
        field = ".".join(str(p) for p in loc) or "?"
        line = loc_line(text, loc)
        # A nested record missing a key it needs (an evidence ref without id) goes as a whole.
        target = loc[:-1] if err.get("type") == "missing" else loc
        required = len(target) == 1 and _required(model, target[0]) and target[0] not in fallback
        if not target or required or not _drop(work, target, fallback):
            raise ValidationError(path, line, f"field {field}: {err.get('msg')}")
        loc = target
        used = fallback.get(str(loc[0])) if len(loc) == 1 and loc[0] in fallback else None
        what = f"treated as {used!r}" if used is not None else "treated as absent"
        notes.append(ValidationError(path, line, f"field {field}: {err.get('msg')} ({what})"))
        try:
            record = model.model_validate(work)
        except pydantic.ValidationError as again:
            errors = again.errors()
            continue
        except Exception as exc:  # as above
            errors = _blame(model, work, exc, path)
            continue
        key = id(record)
        with _guard:
            _problems[key] = notes
        weakref.finalize(record, _forget, key)
        return record
    raise ValidationError(path, notes[0].line if notes else None, f"more than {MAX_REPAIRS} fields of the wrong shape")
