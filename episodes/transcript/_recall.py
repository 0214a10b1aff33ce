"""recall_history: bounded, on-demand access to any step, summary, chunk, note, UI text or saved tool output."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz, process

from memory_plane.lifecycle import UsageError, read_bytes_nofollow, safe_join

from ._perception import estimate_text_tokens
from ._records import StepRecord
from ._step_rows import step_rows

RECALL_HISTORY_TOOL: dict[str, Any] = {
    "name": "recall_history",
    "description": ("Bring back exact details of earlier steps of this task that were compacted: actions, "
                    "results (a large tool output in full, as saved on disk), summaries, UI text, screens, "
                    "recovery attempts, notes and user instructions, "
                    "optionally one step's screenshot. Worth its cost when an old exact value is needed (a code, "
                    "a name, a number), the screen resembles an earlier one, two steps made no progress, the "
                    "same action is about to be tried a third time, a summary conflicts with what you see, or "
                    "the user asks to go back to an earlier state. Do not call it on ordinary steps: the "
                    "history above already holds the facts. Give a query, a step range (every step in it, "
                    "up to the token budget), or both (the steps of the range that match); or a screen (its hash or a "
                    "screenshot) for the steps whose screen looks like it."),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "words to look for (a name, a code, a screen, an error)"},
            "step_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2,
                           "description": "[first, last]: every step of the range, up to the token budget"},
            "include_details": {"type": "boolean", "description": "thought, full result and UI text"},
            "include_images": {"type": "boolean", "description": "the screenshot of at most one step"},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 5,
                            "description": "hits of a query without a step range"},
            "screen_hash": {"type": "string",
                            "description": "a screen's dHash (hex): the steps whose screen looks like it"},
            "image": {"type": "string", "description": "a screenshot of this task (its file, such as "
                      "artifacts/step_012.jpg): the steps whose screen looks like it"},
        },
    },
}


@dataclass
class RecallResult:
    """What recall_history returns: results that each name their step, and at most one image."""

    results: list[dict[str, Any]] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The tool response."""
        return {"results": self.results, "images": self.images, "truncated": self.truncated}


def recall(records: list[StepRecord], summaries: dict[int, str], chunk_texts: list[tuple[int, int, str]],
           episode_dir: Path, *, query: str | None = None, step_range: list[int] | tuple[int, int] | None = None,
           include_details: bool = False, include_images: bool = False, max_results: int = 5,
           max_tokens: int = 2000, extra: list[tuple[int, str, str]] = (),  # type: ignore[assignment]
           screen: str | None = None, max_distance: int = 5) -> RecallResult:
    """Search the task's history (steps, summaries, chunks, notes, events, UI text, saved tool outputs) within bounds.

    A step range returns every step in it (its row, with its recovery and user-instruction lines) up to the
    token budget, only the matching ones when a query is given too; a query alone returns at most
    ``max_results`` hits. Everything returned (labels and keys included) counts against ``max_tokens``."""
    q = (query or "").strip()
    if not q and not step_range and not screen:
        raise UsageError("recall_history needs a query, a step_range or a screen (its hash or an image)")
    max_results = max(1, min(5, int(max_results)))
    out = RecallResult()
    budget = max_tokens - _cost({"results": [], "images": [], "truncated": True})
    by_step = {r.step: r for r in records}
    low = q.lower()
    # Saved outputs are read only when something will use them (a query, or a range's details).
    saved = saved_outputs(records, episode_dir) if low or (step_range and include_details) else []
    if low:
        extra = [*extra, *((step, "output", f"{ref}:{hit}") for step, ref, text in saved
                           if (hit := _best_line(low, text)))]
    # A step's details give the output its stand-in replaced (not one the same-turn budget kept on disk).
    outputs = {step: (ref, text) for step, ref, text in saved if ref == by_step[step].envelope_ref}
    if screen:
        _recall_screen(out, budget, records, summaries, screen, max_distance, step_range, low, extra,
                       max_results, include_images, episode_dir)
        return out
    if step_range:
        _recall_range(out, budget, by_step, summaries, episode_dir, step_range, q, low, include_details,
                      include_images, extra, outputs)
        return out
    _recall_query(out, budget, records, by_step, summaries, chunk_texts, episode_dir, low, include_details,
                  include_images, max_results, extra)
    return out


def _recall_range(out: RecallResult, budget: int, by_step: dict[int, StepRecord], summaries: dict[int, str],
                  episode_dir: Path, step_range: list[int] | tuple[int, int], q: str, low: str,
                  include_details: bool, include_images: bool, extra: list[tuple[int, str, str]],
                  outputs: dict[int, tuple[str, str]]) -> None:
    """Every step of the range (only the matching ones with a query) into ``out``, within ``budget``; a step's
    details give its full saved output in place of the stand-in the prompt showed."""
    a, b = int(step_range[0]), int(step_range[1])
    if a > b:
        a, b = b, a
    chosen = [by_step[s] for s in range(a, b + 1) if s in by_step]
    if q:
        extra_by_step: dict[int, list[str]] = {}
        for s, _kind, textv in extra:
            extra_by_step.setdefault(s, []).append(textv)
        chosen = [r for r in chosen if max((_score(low, t) for t in [
            *(t for _k, t in _fields(r, summaries)), *extra_by_step.get(r.step, [])] if t), default=0.0) >= 60]
    for r in chosen:
        item: dict[str, Any] = {"step": r.step, "kind": "ledger", "text": "\n".join(step_rows(r))}
        if include_details:
            # Details count against the same budget as the row (a result can be long): each part is
            # cut to what is left rather than dropped whole (JSON escaping and keys measured, then cut again).
            full = outputs.get(r.step)
            parts = {"thought": r.thought, "result": full[1] if full else r.result,
                     "ui_text": " | ".join(r.ui_text[:40]),
                     "screen": "/".join(x for x in (r.package, r.activity) if x) or None,
                     "summary": summaries.get(r.step)}
            room = budget - _cost(item) - 12
            for _ in range(4):
                item["details"] = _bounded_details(parts, max(0, room))
                over = _cost(item) - budget
                if over <= 0:
                    break
                room -= over + 4
            else:
                item.pop("details", None)
        cost = _cost(item)
        if cost > budget:
            out.truncated = True
            break
        budget -= cost
        out.results.append(item)
    if include_images:
        shown = [r for r in chosen if any(x["step"] == r.step for x in out.results)]
        _attach_image(out, shown or chosen, episode_dir)


def _recall_screen(out: RecallResult, budget: int, records: list[StepRecord], summaries: dict[int, str],
                   screen: str, max_distance: int, step_range: list[int] | tuple[int, int] | None, low: str,
                   extra: list[tuple[int, str, str]], max_results: int, include_images: bool,
                   episode_dir: Path) -> None:
    """The steps whose screen is within ``max_distance`` dHash bits of ``screen`` (in the range, matching the
    query, when given), the closest first (the later on a tie), at most ``max_results``, within ``budget``."""
    from .._artifacts import hamming

    a, b = (int(step_range[0]), int(step_range[1])) if step_range else (1, 10**9)
    a, b = min(a, b), max(a, b)
    extra_by_step: dict[int, list[str]] = {}
    for s, _kind, textv in extra:
        extra_by_step.setdefault(s, []).append(textv)
    near: list[tuple[int, int, StepRecord]] = []
    for r in records:
        if not r.dhash or len(r.dhash) != len(screen) or not a <= r.step <= b:
            continue
        try:
            d = hamming(r.dhash, screen)
        except ValueError:
            continue  # a hash that is not hex (a hand-edited ledger) matches nothing
        if d > max_distance:
            continue
        if low and max((_score(low, t) for t in [*(t for _k, t in _fields(r, summaries)),
                                                 *extra_by_step.get(r.step, [])] if t), default=0.0) < 60:
            continue
        near.append((d, -r.step, r))
    near.sort(key=lambda x: (x[0], x[1]))
    for d, _s, r in near:
        if len(out.results) >= max_results:
            out.truncated = True
            break
        item = {"step": r.step, "kind": "screen", "distance": d, "text": "\n".join(step_rows(r))}
        if summaries.get(r.step):
            item["summary"] = summaries[r.step][:600]
        cost = _cost(item)
        if cost > budget:
            out.truncated = True
            break
        budget -= cost
        out.results.append(item)
    if include_images and out.results:
        _attach_image(out, [x[2] for x in near[:1]], episode_dir)


def _recall_query(out: RecallResult, budget: int, records: list[StepRecord], by_step: dict[int, StepRecord],
                  summaries: dict[int, str], chunk_texts: list[tuple[int, int, str]], episode_dir: Path, low: str,
                  include_details: bool, include_images: bool, max_results: int,
                  extra: list[tuple[int, str, str]]) -> None:
    """The best ``max_results`` hits of the query into ``out``, within ``budget``."""
    candidates: list[tuple[float, int, str, str]] = []
    for r in records:
        for kind, textv in _fields(r, summaries):
            if textv:
                candidates.append((_score(low, textv), r.step, kind, textv))
    for start, _end, textv in chunk_texts:
        for line in textv.splitlines():
            candidates.append((_score(low, line), start, "chunk", line))
    for step, kind, textv in extra:
        candidates.append((_score(low, textv), step, kind, textv))
    candidates.sort(key=lambda c: (-c[0], -c[1]))
    seen: set[tuple[int, str]] = set()
    for score, step, kind, textv in candidates:
        if score < 60:
            break
        if (step, kind) in seen:
            continue
        if len(out.results) >= max_results:
            out.truncated = True
            break
        seen.add((step, kind))
        excerpt = textv if len(textv) <= 600 else textv[:600] + "…"
        item = {"step": step, "kind": kind, "text": excerpt, "score": round(score, 1)}
        cost = _cost(item)
        if cost > budget:
            out.truncated = True
            break
        budget -= cost
        if include_details and step in by_step:
            r = by_step[step]
            details = _bounded_details({"action": r.action_line(), "t": r.t, "result": (r.result or "")[:400]},
                                       max(0, budget - 12))
            extra_cost = _cost({**item, "details": details}) - cost
            if details and extra_cost <= budget:
                item["details"] = details
                budget -= extra_cost
        out.results.append(item)
    if include_images and out.results:
        best = [by_step[out.results[0]["step"]]] if out.results[0]["step"] in by_step else []
        _attach_image(out, best, episode_dir)


OUTPUT_READ_BYTES = 1 << 20  # read of one saved tool output, at most
OUTPUT_SCAN_BYTES = 4 << 20  # reads of saved outputs for one recall, at most (the newest first)
OUTPUT_LINE_CHARS = 600  # a line of a saved output as a hit shows it


def saved_outputs(records: list[StepRecord], episode_dir: Path) -> list[tuple[int, str, str]]:
    """The full tool outputs the prompt did not show whole, as (step, its file, its text), read bounded: the
    step's result a stand-in replaced, and the outputs read before its action that the same-turn budget cut.

    Each file is read up to ``OUTPUT_READ_BYTES`` and all of them up to ``OUTPUT_SCAN_BYTES``, newest step
    first, so a recall over a long task with many large outputs stays bounded; a file that is missing, a link
    or not a file is skipped."""
    out: list[tuple[int, str, str]] = []
    left = OUTPUT_SCAN_BYTES
    for r in sorted(records, key=lambda r: -r.step):
        refs = [r.envelope_ref, *(o.get("ref") for o in r.same_turn or () if isinstance(o, dict))]
        for ref in dict.fromkeys(x for x in refs if isinstance(x, str) and x):
            if left <= 0:
                return out
            try:
                raw = read_bytes_nofollow(safe_join(episode_dir, ref), max_bytes=min(left, OUTPUT_READ_BYTES))
            except (OSError, ValueError):
                continue
            left -= len(raw)
            out.append((r.step, ref, raw.decode("utf-8", errors="replace")))
    return out


def _best_line(query: str, text: str) -> str | None:
    """``N: line`` of the line of a saved output that best matches the query (an exact match first), or None.

    Lines are the file's (broken at LF only, a CR kept out of the text shown), so N is the line an editor shows;
    a line longer than ``OUTPUT_LINE_CHARS`` is shown as the part around the match (a compact JSON output is one
    line, its value anywhere in it)."""
    lines = text.split("\n")
    low = text.lower()
    at = low.find(query)
    if at >= 0 and len(low) == len(text):
        i = text.count("\n", 0, at)
        col, width = at - (text.rfind("\n", 0, at) + 1), len(query)
    else:
        # No exact match, or one whose position lowercasing moved (a letter that lowercases to two): line by line.
        exact = next((n for n, line in enumerate(lines) if query in line.lower()), None)
        if exact is not None:
            i = exact
            col, width = lines[i].lower().find(query), len(query)
        else:
            if len(query) < 3:
                return None
            best = process.extractOne(query, lines, scorer=fuzz.partial_ratio, processor=str.lower,
                                      score_cutoff=60)
            if best is None:
                return None
            i = best[2]
            where = fuzz.partial_ratio_alignment(query, lines[i].lower())
            col, width = (where.dest_start, where.dest_end - where.dest_start) if where else (0, 0)
    return f"{i + 1}: {_around(lines[i].replace(chr(13), ' '), col, width)}"


def _around(line: str, col: int, width: int) -> str:
    """``line`` within ``OUTPUT_LINE_CHARS``: whole when it fits, else the part centred on [col, col + width)."""
    if len(line) <= OUTPUT_LINE_CHARS:
        return line
    start = max(0, min(col + width // 2 - OUTPUT_LINE_CHARS // 2, len(line) - OUTPUT_LINE_CHARS))
    part = line[start:start + OUTPUT_LINE_CHARS - 2]
    return ("…" if start > 0 else "") + part + ("…" if start + len(part) < len(line) else "")


def _fields(r: StepRecord, summaries: dict[int, str]) -> list[tuple[str, str]]:
    """The searchable texts of one step: action and result, UI, reasoning, facts, screen, recovery, summary."""
    fields = [("step", f"{r.action_line()} -> {r.result or ''}"), ("ui", " | ".join(r.ui_text)),
              ("thought", r.thought or ""), ("facts", "; ".join(map(str, (r.validator or {}).get("facts", [])))),
              ("screen", " ".join(x for x in (r.package, r.activity) if x))]
    if r.failure_recovery:
        fields.append(("recovery", "; ".join(json.dumps(x, ensure_ascii=False, default=str)
                                             for x in r.failure_recovery)))
    if summaries.get(r.step):
        fields.append(("summary", summaries[r.step]))
    return fields


def _cost(item: dict[str, Any]) -> int:
    """Tokens of a result as the model receives it: the JSON, labels and keys included."""
    return estimate_text_tokens(json.dumps(item, ensure_ascii=False))


def _bounded_details(details: dict[str, Any], room: int) -> dict[str, Any]:
    """Details cut so that together they fit ``room`` tokens (each part keeps its head)."""
    out: dict[str, Any] = {}
    for k, v in details.items():
        if not v:
            continue
        text = str(v)
        while text and estimate_text_tokens(text) > room:
            text = text[: max(0, int(len(text) * 0.7) - 1)]
        if not text:
            break
        out[k] = text if text == str(v) else text + "…"
        room -= estimate_text_tokens(out[k]) + estimate_text_tokens(k) + 2
    return out


def _score(query: str, textv: str) -> float:
    t = textv.lower()
    if query in t:
        return 100.0
    return float(fuzz.partial_ratio(query, t)) if len(query) >= 3 else 0.0


def _attach_image(out: RecallResult, records: list[StepRecord], episode_dir: Path) -> None:
    # Images of at most one step, and only files that exist.
    for r in records:
        for ref in (r.pre_image, r.post_image):
            if not ref:
                continue
            try:
                p = safe_join(episode_dir, ref)
            except ValueError:
                continue
            if p.is_file():
                out.images.append(ref)
        if out.images:
            return
