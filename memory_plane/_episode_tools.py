"""The memory tools that look back: past episodes, this conversation's earlier parts, this task's transcript."""

from __future__ import annotations

import json
from typing import Any

from memory_plane.episodes import shown_tool_input
from memory_plane.episodes.transcript import estimate_text_tokens as estimate_tokens
from memory_plane.lifecycle import UsageError, counted, field_str, field_text, is_safe_id, one_line

from ._tool_answers import ToolResult, bounded, shown
from ._tool_args import InspectEpisodeArgs, RecallHistoryArgs, RecallSessionArgs
from .retrieval import quote_data


def _attr(value: object) -> str:
    """A short name from a file (an app, a tool, a step), as one plain line of at most 80 characters."""
    return one_line("" if value is None else str(value))[:80]


def _as_data(value: Any) -> Any:
    """A ledger answer with every string in it one line of data (the JSON keeps its shape)."""
    if isinstance(value, str):
        return one_line(value)
    if isinstance(value, dict):
        return {k: _as_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_data(v) for v in value]
    return value


class EpisodeTools:
    """inspect_episode, recall_session_chunks and recall_history over a plane's episodes and session, and a
    task's ledger; each answer within the budget the dispatcher gives."""

    def __init__(self, plane: Any) -> None:
        self.plane = plane

    def inspect_episode(self, a: InspectEpisodeArgs, budget_tokens: int) -> ToolResult:
        """One episode: goal, outcome, the lessons it taught, and a window of its events."""
        eid = a.episode_id.strip()
        ep = self.plane.episodes.get(eid) if is_safe_id(eid) else None
        if ep is None:
            return ToolResult(f"no episode {eid!r} (episode ids look like ep_20261201_3f9a1c2b7d)", is_error=True)
        o = ep.outcome
        records = self.plane.episodes.events(eid).records
        total = len(records)
        window = records[a.offset: a.offset + (a.max_events or 0)]
        end = a.offset + len(window)
        shown = f"events {a.offset + 1}-{end} of {total}" if window else f"0 of {counted(total, 'event')}"
        more = (f"; {total - end} more: inspect_episode offset={end}" if end < total and a.max_events else "")
        why = o.failure_reason or o.error or o.completion_reason or ""
        head = (f"episode {ep.id}: goal {quote_data(ep.user_goal)}; app {quote_data(ep.app() or '?', 80)}; "
                f"{'succeeded' if o.success else 'failed'}"
                + (f" ({o.failure_phase}: {quote_data(why)})" if not o.success else "")
                + f"; {counted(ep.metrics.tool_steps, 'step')}; {shown}{more}")
        taught = self._taught(ep)
        if taught:
            head += "\ntaught (memory: the events that show it): " + "; ".join(taught)
        lines: list[str] = []
        first_event: list[int] = []  # the event each line starts from, to say where a cut answer resumes
        for n, ev in enumerate(window, start=a.offset):
            kind = ev.get("type")
            evid = f" [{_attr(ev['event_id'])}]" if isinstance(ev.get("event_id"), str) else ""
            if kind == "tool_call":
                # The arguments as JSON (its strings are quoted and escaped), on one line without invisible characters.
                given = shown_tool_input(ev.get("tool_input"))
                args = one_line(json.dumps(given, ensure_ascii=False, default=str))[:160]
                lines.append(f"step {_attr(ev.get('step'))}: {_attr(ev.get('tool_name'))} {args}"
                             + (f" — {quote_data(str(ev['content']))}" if ev.get("content") else "") + evid)
            elif kind == "tool_result":
                obs = ev.get("observed_state") or {}
                # The page and app are what a screen said: data, quoted (a page name may hold a heading).
                where = (f" app={quote_data(field_text(obs.get('app')), 80)} "
                         f"page={quote_data(field_text(obs.get('page')), 120)}"
                         ) if isinstance(obs, dict) and obs else ""
                lines.append(f"  -> {'error ' + quote_data(str(ev.get('error'))) if ev.get('is_error') else 'ok'}"
                             + where + evid)
            else:
                continue
            first_event.append(n)

        def resume(i: int) -> str:
            at = first_event[i]
            return (f"… {counted(total - at, 'more event')} not shown (answer budget): inspect_episode offset={at} "
                    "reads on (a lower max_events gives smaller parts)")

        text = bounded(lines, budget_tokens, head, resume)
        return ToolResult(text, refs=[ep.id])

    def _taught(self, ep: Any) -> list[str]:
        """The lessons an episode taught, each with the event ids its evidence names (at most 8)."""
        out = []
        for mid in ep.reusable_lessons[:8]:
            try:
                item = self.plane.device.get(mid)
            except Exception:  # a broken file: named without its events (verify reports the file)
                item = None
            refs = [r for r in (item.evidence_refs if item is not None else []) if r.id == ep.id]
            ids = list(dict.fromkeys(i for r in refs for i in r.event_ids))  # two refs may name the same events
            out.append(f"{mid} ({', '.join(ids[:6])}{' …' if len(ids) > 6 else ''})" if ids else mid)
        more = len(ep.reusable_lessons) - 8
        return out + ([f"{more} more in episode.yaml reusable_lessons"] if more > 0 else [])

    def recall_session(self, a: RecallSessionArgs, budget_tokens: int) -> ToolResult:
        """Earlier parts of this conversation: by id, by query, or the newest first."""
        from ._retrieve_types import MemoryHit

        session = self.plane.session
        query = " ".join([a.query, *a.tags, *a.entities]).strip()
        note = ("closed sessions are not searched here: include_archived is not supported" if a.include_archived
                else "")
        entries = [c for c in session.chunk_index.read().entries if field_str(c.get("status")) in (None, "active")]
        lines: list[str] = []
        if a.chunk_ids:  # asked for by id: the summary and what was said, event by event
            by_id = {c["id"]: c for c in entries}
            for cid in a.chunk_ids:
                c = by_id.get(cid)
                if c is None:
                    lines.append(f"[{_attr(cid)}] no such part of this conversation")
                    continue
                lines.append(f"[{cid}] {quote_data(field_text(c.get('summary')))}")
                for ev in session.chunk_events(c):
                    who = field_str(ev.get("role")) or field_str(ev.get("type")) or "?"
                    lines.append(f"  {who}: {quote_data(field_text(ev.get('content')), 300)}")
            if not query:
                return shown(budget_tokens, lines, [],
                             f"{counted(len(a.chunk_ids), 'part')} of this conversation by id:", note=note)
        if not query:
            # Go's empty tags ([]) mean "recent history": the newest parts, newest first.
            hits = [MemoryHit(id=c["id"], type="session_chunk", score=1.0, confidence=1.0,
                              text=field_text(c.get("summary"))) for c in reversed(entries)]
            head = "no query: the most recent earlier parts of this conversation, newest first:"
        else:
            hits = session.recall_session_chunks(query, limit=a.offset + a.limit + 1)
            head = "earlier parts of this conversation:"
        page = hits[a.offset: a.offset + a.limit]
        if not page and not lines:
            what = f"matches {quote_data(query, 120)}" if query else "was compressed yet"
            return ToolResult(f"nothing earlier in this conversation {what}" + (f" past offset {a.offset}"
                              if a.offset else "") + (f" ({note})" if note else ""))
        lines += [f"[{h.id}] {quote_data(h.text)}" for h in page]
        return shown(budget_tokens, lines, [], f"{len(page)} {head}", tool="recall_session_chunks",
                     offset=a.offset, more_exists=len(hits) > a.offset + a.limit, note=note)

    def recall_history(self, a: RecallHistoryArgs, ledger: Any, budget_tokens: int) -> ToolResult:
        """Earlier steps of this task from its transcript ledger, as JSON cut to the budget by dropping rows."""
        if not a.query and not a.step_range and not a.screen_hash and not a.image:
            return ToolResult("recall_history needs a query, a step_range [first, last], or a screen (screen_hash "
                              "or image)", is_error=True)
        rng = a.step_range[:2] if a.step_range and len(a.step_range) >= 2 else None
        try:
            res = ledger.recall_history(query=a.query, step_range=rng, include_details=a.include_details,
                                        include_images=a.include_images, max_results=a.max_results,
                                        screen_hash=a.screen_hash, image=a.image)
        except UsageError as exc:
            return ToolResult(str(exc), is_error=True)
        data = _as_data(res.to_dict())
        text = json.dumps(data, ensure_ascii=False)
        while estimate_tokens(text) > budget_tokens and data["results"]:
            data["results"].pop()  # the answer fits by dropping its last rows, never by replacing all of it
            data["truncated"] = True
            text = json.dumps(data, ensure_ascii=False)
        return ToolResult(text)
