"""recall_history: bounded, on-demand access to any step, summary, chunk, note or UI text of the task."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz

from lifecycle import UsageError, safe_join

from ._chunks import ledger_rows
from ._perception import estimate_text_tokens
from ._records import StepRecord

RECALL_HISTORY_TOOL: dict[str, Any] = {
    "name": "recall_history",
    "description": ("Bring back details of earlier steps of this task that were compacted: exact actions, "
                    "results, summaries, UI text, notes, optionally one step's screenshot. Give a query, a step "
                    "range, or both."),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "words to look for (a name, a code, a screen, an error)"},
            "step_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2,
                           "description": "[first, last] step numbers to return in full"},
            "include_details": {"type": "boolean", "description": "thought, full result and UI text"},
            "include_images": {"type": "boolean", "description": "the screenshot of at most one step"},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 5},
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
           max_tokens: int = 2000, extra: list[tuple[int, str, str]] = ()) -> RecallResult:  # type: ignore[assignment]
    """Search the task's history (steps, summaries, chunks, notes, events, UI text) within bounds."""
    q = (query or "").strip()
    if not q and not step_range:
        raise UsageError("recall_history needs a query or a step_range")
    max_results = max(1, min(5, int(max_results)))
    out = RecallResult()
    budget = max_tokens
    by_step = {r.step: r for r in records}
    if step_range:
        a, b = int(step_range[0]), int(step_range[1])
        if a > b:
            a, b = b, a
        rows = ledger_rows([by_step[s] for s in range(a, b + 1) if s in by_step])
        for row, s in zip(rows, [s for s in range(a, b + 1) if s in by_step]):
            if len(out.results) >= max_results:
                out.truncated = True
                break
            item: dict[str, Any] = {"step": s, "kind": "ledger", "text": row}
            if include_details:
                r = by_step[s]
                # Details count against the same budget as the row (a result can be long): each part is
                # cut to what is left rather than dropped whole.
                room = max(0, budget - estimate_text_tokens(row))
                item["details"] = _bounded_details(
                    {"thought": r.thought, "result": r.result, "ui_text": " | ".join(r.ui_text[:40]),
                     "summary": summaries.get(s)}, room)
            cost = _cost(item)
            if cost > budget:
                out.truncated = True
                break
            budget -= cost
            out.results.append(item)
        if include_images:
            _attach_image(out, [by_step[s] for s in range(a, b + 1) if s in by_step], episode_dir)
        return out
    candidates: list[tuple[float, int, str, str]] = []
    low = q.lower()
    for r in records:
        fields = [("step", f"{r.action_line()} -> {r.result or ''}"), ("ui", " | ".join(r.ui_text)),
                  ("thought", r.thought or ""), ("facts", "; ".join(map(str, (r.validator or {}).get("facts", []))))]
        if summaries.get(r.step):
            fields.append(("summary", summaries[r.step]))
        for kind, textv in fields:
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
        if score < 60 or len(out.results) >= max_results:
            break
        if (step, kind) in seen:
            continue
        seen.add((step, kind))
        excerpt = textv if len(textv) <= 600 else textv[:600] + "…"
        cost = estimate_text_tokens(excerpt)
        if cost > budget:
            out.truncated = True
            break
        budget -= cost
        item = {"step": step, "kind": kind, "text": excerpt, "score": round(score, 1)}
        if include_details and step in by_step:
            r = by_step[step]
            item["details"] = _bounded_details({"action": r.action_line(), "t": r.t, "result": (r.result or "")[:400]},
                                               max(0, budget))
            extra_cost = _cost(item) - cost
            if extra_cost > budget:
                del item["details"]
            else:
                budget -= extra_cost
        out.results.append(item)
    if include_images and out.results:
        best = [by_step[out.results[0]["step"]]] if out.results[0]["step"] in by_step else []
        _attach_image(out, best, episode_dir)
    return out


def _cost(item: dict[str, Any]) -> int:
    """Tokens of one result as the model receives it (the text and any details)."""
    details = item.get("details") or {}
    return estimate_text_tokens(str(item.get("text", ""))) + sum(
        estimate_text_tokens(str(v)) for v in details.values() if v)


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
        room -= estimate_text_tokens(out[k])
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
