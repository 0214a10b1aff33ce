"""`memplane retrieve | episodes | device | memory`: what the agent would get, and what the tree holds."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from typing import Any

from memory_plane.episodes import shown_tool_input
from memory_plane.lifecycle import (
    MemoryPlaneError,
    UsageError,
    counted,
    field_num,
    parse_duration,
    parse_ts,
    read_bytes_nofollow,
)

from .._retrieve_types import CATEGORY_ORDER
from ._common import EXIT_OK, cell, conf, hints, invoked_as, open_plane, print_json

_FACTORS = (("goal_similarity", "sim", "how close the goal is to the memory's goal or words (1 = the same)"),
            ("entity_or_app_match", "app", "whether it is about the goal's app or entities (1 = the same app)"),
            ("applicability", "appl", "how much of the device, language, screen and app it was made under the "
                                      "request confirms (a mismatch drops it instead)"),
            ("confidence", "conf", "its own confidence (an episode: 1 if it succeeded, 0.8 if not)"),
            ("recency", "rec", "1 when validated now, falling with age (0.5 when its time is unknown)"),
            ("validation", "valid", "how outcomes bear it out: (successes + 1) / (successes + failures + 2); an "
                                    "episode: 1 if it succeeded, 0.5 if not"),
            ("conflict_or_stale_penalty", "pen", "0.5 when it names a conflict, fails more than it succeeds, lacks "
                                                 "evidence or its episodes are gone; weighs against"),
            ("no_evidence", "noev", "1 when nothing on disk shows it (part of pen)"))
"""Each score factor of `retrieve --explain`: its key in --json, its column, and what it measures."""


def cmd_retrieve(args: argparse.Namespace) -> int:
    """`memplane retrieve GOAL`: what the agent would get for a goal."""
    from .._retrieve_types import MemoryRetrieveRequest

    notes: list[str] = []
    with open_plane(args) as plane:
        device = args.device
        if device is None:
            # A phone's own tree knows one device: that is the one asked about, not "default"
            # (which such a tree may not have).
            device = plane.device.profiles.sole_device_id()
            if device is not None:
                notes.append(f"device {device} (the only device this tree knows; --device picks another)")
        req = MemoryRetrieveRequest(input=args.goal, device_id=device, current_hints=hints(args))
        memory = plane.explain(req) if args.explain else plane.retrieve(req)
        known = sorted({p.device_id or "default" for p in plane.device.profiles.all()})
    by_device = sum(1 for d in memory.dropped_items if str(d.get("detail") or "").startswith("device_id"))
    if not memory.refs() or by_device:
        n = by_device or memory.dropped.get("inapplicable", 0)
        if n and len(known) > 1:
            notes.append(f"{counted(n, 'memory', 'memories')} dropped as inapplicable (made on another device?): "
                         f"this tree knows devices "
                         f"{', '.join(known)}; --device names one")
    if args.explain:
        data = {"goal": args.goal, "device": req.device_id or "default", **memory.explain(), "notes": notes}
        print_json(data) if args.json else print("\n".join(explain_lines(data)))
    elif args.json:
        print_json({**memory.to_dict(), "device": req.device_id or "default", "notes": notes})
    else:
        print(memory.render(), end="")
        for n in notes:
            print(f"note: {n}", file=sys.stderr)
    return EXIT_OK


def explain_lines(data: dict[str, Any]) -> list[str]:
    """`retrieve --explain` as a table: each hit's score factors, then each dropped candidate and why."""
    q = data.get("query") or {}
    out = [f"goal: {data.get('goal') or q.get('text', '')!r}  device={data.get('device', 'default')}  "
           f"intent={q.get('intent')}  app={q.get('app')}  target={q.get('target')}"]
    out += [f"note: {n}" for n in data.get("notes") or []]
    short_of = {k: short for k, short, _ in _FACTORS}
    terms = [f"{'-' if w < 0 else '+'} {abs(w):.2f}·{short_of.get(k, k)}"
             for k, w in (data.get("weights") or {}).items()]
    if terms:
        out.append(f"score = {' '.join(terms).lstrip('+ ')} (+ a user rule's bonus)")
        out += [f"  {short:>5}  {what}" for _, short, what in _FACTORS]
    head = "  ".join(f"{short:>5}" for _, short, _ in _FACTORS)
    for cat in CATEGORY_ORDER:
        hits = (data.get("hits") or {}).get(cat) or []
        if not hits:
            continue
        out.append("")
        out.append(f"{cat} ({len(hits)})")
        out.append(f"  {'id':30} {'score':>6}  {head}  title")
        for h in hits:
            f = h.get("factors") or {}
            title = str(h.get("title") or h.get("text") or "")[:60]
            if not f:
                # Not scored (the device's own profile): shown whatever the goal, so it has no factors.
                out.append(f"  {cell(h.get('id'), 30)} {'-':>6}  {'always shown, not scored':{len(head)}}  {title}")
                continue
            vals = "  ".join(f"{field_num(f.get(k), 0.0):5.2f}" for k, _, _ in _FACTORS)
            out.append(f"  {cell(h.get('id'), 30)} {field_num(h.get('score'), 0.0):6.3f}  {vals}  {title}")
    dropped = data.get("dropped") or {}
    items = data.get("dropped_items") or []
    out.append("")
    counts = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())) or "none"
    # "budget": a memory that passed every filter but did not fit the block's size (the weakest go first).
    out.append(f"dropped by the hard filters: {counts}" + (" (budget: did not fit the block)" if "budget" in dropped
                                                            else ""))
    for d in items:
        out.append(f"  {cell(d.get('id'), 30)} {cell(d.get('reason'), 22)} {d.get('detail') or ''}")
    return out


def _since(text: str) -> datetime:
    """--since: an ISO date/time, or a duration back from now (``7d``, ``12h``)."""
    try:
        delta = parse_duration(text)
    except ValueError:
        delta = None
    if delta is not None:
        return datetime.now(timezone.utc) - delta
    try:
        return parse_ts(text if "T" in text else f"{text}T00:00:00Z")
    except ValueError:
        raise UsageError(f"--since takes a date (2026-11-30), a time (2026-11-30T08:00:00Z) or a duration "
                         f"(7d, 12h), not {text!r}") from None


def _episode_rows(plane: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = plane.episodes.newest()
    if args.app:
        app = plane.device.catalog.app_id_for(args.app)
        rows = [e for e in rows if isinstance(e.get("app"), str)
                and plane.device.catalog.app_id_for(e["app"]) == app]
    if args.failed:
        rows = [e for e in rows if e.get("success") is not True]
    if args.since:
        since = _since(args.since)
        kept = []
        for e in rows:
            try:
                if parse_ts(e.get("started_at")) >= since:
                    kept.append(e)
            except (ValueError, TypeError):
                continue
        rows = kept
    return rows


def _one(what: str, item_id: str, get: Any) -> Any:
    """The item `COMMAND show ID` asks for; an error (exit 1, one JSON line with --json) when there is none."""
    item = get(item_id)
    if item is None:
        raise MemoryPlaneError(f"no {what} {item_id}")
    return item


def _refuse_stray_id(args: argparse.Namespace) -> None:
    """`episodes list ID`, `device list ID`: an id there would be ignored, so it is refused."""
    if getattr(args, "stray", None):
        raise UsageError(f"`{args.command} list` takes no id (got {' '.join(args.stray)}); "
                         f"`{invoked_as()} {args.command} show ID` shows one")


ARGS_SHOWN = 100
"""A call's arguments are shown up to this many characters in `episodes show` (the file holds them whole)."""


def event_lines(events: list[dict[str, Any]], where: Any) -> list[str]:
    """`episodes show`'s event list: counted as the episode counts them (its ``metrics.events``: the task's own
    events, without the finish event the recorder adds to keep the outcome), each call with its arguments."""
    finish = sum(1 for ev in events if ev.get("type") == "finish")
    head = f"# {counted(len(events) - finish, 'event')}"
    out = [head + (" and the finish event (the outcome)" if finish else "") + f" in {where}"]
    for ev in events:
        what = str(ev.get("tool_name") or ev.get("content") or "")[:60]
        if ev.get("type") == "tool_call" and "tool_input" in ev:
            shown = json.dumps(shown_tool_input(ev.get("tool_input")), ensure_ascii=False, default=str)
            what += " " + (shown if len(shown) <= ARGS_SHOWN else shown[:ARGS_SHOWN - 1] + "…")
        extra = ev.get("screenshot_ref") or ""
        out.append(f"  {ev.get('event_id')} {cell(ev.get('type'), 18)} {what} {extra}".rstrip())
    return out


def cmd_episodes(args: argparse.Namespace) -> int:
    """`memplane episodes list|show`: past tasks."""
    _refuse_stray_id(args)
    with open_plane(args) as plane:
        if args.action == "list":
            rows = _episode_rows(plane, args)
            shown = rows[: args.limit]
            if args.json:
                print_json(shown)
                return EXIT_OK
            for e in shown:
                mark = "ok  " if e.get("success") is True else "FAIL"
                print(f"{e['id']}  {mark}  {cell(e.get('started_at'), 24)}  {cell(e.get('goal'), 70).rstrip()}")
            total = len(rows)
            more = f"; --limit {total} shows all" if total > len(shown) else ""
            print(f"({len(shown)} of {counted(total, 'episode')}{more})" if total != len(shown)
                  else f"({counted(total, 'episode')})")
            return EXIT_OK
        ep = _one("episode", args.id, plane.episodes.get)
        events = plane.episodes.events(args.id).records
        if args.json:
            print_json({"episode": ep.to_yaml_dict(), "events": events})
            return EXIT_OK
        path = plane.episodes.episode_dir(args.id)
        print(read_bytes_nofollow(path / "episode.yaml").decode("utf-8", "replace"), end="")
        for line in event_lines(events, path / "events.jsonl"):
            print(line)
    return EXIT_OK


def cmd_device(args: argparse.Namespace) -> int:
    """`memplane device list|show`: device memories."""
    _refuse_stray_id(args)
    with open_plane(args) as plane:
        if args.action == "list":
            app = plane.device.catalog.app_id_for(args.app) if args.app else None
            entries = plane.device.entries(args.type, app)
            if args.json:
                print_json(entries)
                return EXIT_OK
            for e in entries:
                print(f"{e['id']:28} {cell(e.get('type'), 14)} {cell(e.get('status'), 10)} "
                      f"{conf(e.get('confidence', 0))}  {str(e.get('summary') or e.get('title') or '')[:70]}")
            print(f"({counted(len(entries), 'item')})")
            return EXIT_OK
        if args.action == "history":
            return _device_history(plane, args)
        if args.action == "revert":
            return _device_revert(plane, args)
        item = _one("device memory", args.id, plane.device.get)
        if args.json:
            print_json(item.to_yaml_dict())
        else:
            from memory_plane.lifecycle import dump_yaml

            print(dump_yaml(item.to_yaml_dict()), end="")
    return EXIT_OK


def _device_history(plane: Any, args: argparse.Namespace) -> int:
    """`memplane device history ID`: the item's revisions, oldest first (a table, or JSON)."""
    revs = plane.device.history(args.id)
    if args.json:
        print_json({"id": args.id, "revisions": [r.to_dict() for r in revs]})
        return EXIT_OK
    for r in revs:
        why = " ".join(x for x in (r.rule, f"episode {r.episode}" if r.episode else None, r.detail and f"({r.detail})")
                       if x)
        print(f"#{r.rev}  {r.at or '?'}  {why or 'change'}")
        for c in r.changes:
            print(f"    {c['field']}: {_value(c, 'old')} → {_value(c, 'new')}")
    print(f"({len(revs)} revisions; `memplane device revert {args.id} --to N` goes back to one)")
    return EXIT_OK


def _value(change: dict[str, Any], key: str) -> str:
    """One side of a field change, on one bounded line (``(absent)`` when the field was not there)."""
    if key not in change:
        return "(absent)"
    text = json.dumps(change[key], ensure_ascii=False, default=str)
    return text if len(text) <= 100 else text[:99] + "…"


def _device_revert(plane: Any, args: argparse.Namespace) -> int:
    """`memplane device revert ID --to N`: the item as it was after revision N, written as a new revision."""
    before = plane.device.history(args.id)
    plane.device.revert(args.id, args.to)
    after = plane.device.history(args.id)
    made = after[-1] if after and (not before or after[-1].rev > before[-1].rev) else None
    if args.json:
        print_json({"id": args.id, "reverted_to": args.to, "revision": made.to_dict() if made else None})
    elif made is None:
        print(f"{args.id}: already as revision {args.to} left it (nothing to change)")
    else:
        print(f"{args.id}: back to revision {args.to} as revision {made.rev} (changed {', '.join(made.fields())})")
    return EXIT_OK


def cmd_memory(args: argparse.Namespace) -> int:
    """`memplane memory save|recall|forget`: long-term memory."""
    if args.action == "recall" and not args.text and not args.type:
        raise UsageError("memory recall needs a QUERY, a --type, or both")
    with open_plane(args) as plane:
        if args.action == "save":
            if args.overrides and args.type != "rule":
                raise UsageError("--overrides goes with --type rule")
            if args.type == "rule":
                r = plane.save_rule(args.text, overrides=args.overrides, title=args.title, tags=args.tag,
                                    entities=args.entity, force=args.force)
            else:
                r = plane.long_term.save_memory(type=args.type, content=args.text, title=args.title, tags=args.tag,
                                                entities=args.entity, force=args.force)
            # The library speaks of force=True; the command line has its own flag for it.
            reason = r.reason.replace("force=True", "--force") if r.reason else None
            out = {"id": r.id, "status": r.status, "reason": reason, "superseded": r.superseded, "note": r.note}
            print_json(out) if args.json else print(f"{r.status}: {r.id}" + (f" ({reason})" if reason else "")
                                                    + (f"; {r.note}" if r.note else ""))
            return EXIT_OK
        if args.action == "recall":
            types = [args.type] if args.type else None
            if args.text:
                hits = plane.long_term.recall_memory(args.text, limit=args.limit or 5, types=types)
            else:
                hits = plane.long_term.list_memories(types or [], limit=args.limit or 50)
            if args.json:
                print_json([h.model_dump() for h in hits])
            elif not hits:
                print(f"no memory matches {args.text!r}" if args.text else f"no active {args.type} memory")
            else:
                for h in hits:
                    print(f"[{h.id} type={h.type} score={h.score:.2f}] {h.text}")
            return EXIT_OK
        if not plane.forget(args.text, reason=args.reason):
            raise MemoryPlaneError(f"no memory {args.text}")
        print_json({"id": args.text, "forgotten": True}) if args.json else print("forgotten")
        return EXIT_OK

