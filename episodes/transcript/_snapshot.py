"""The emergency snapshot: everything F held folded into structured sets and a bounded step index."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._chunks import Chunk, Era
from ._records import StepRecord
from ._step_rows import step_rows

SNAPSHOT_FIELDS = ("verified_facts", "unresolved", "failed_paths", "important_entities")
SNAPSHOT_MAX_ITEMS = {"verified_facts": 48, "unresolved": 12, "failed_paths": 16, "important_entities": 20}
SNAPSHOT_MAX_SPANS = 12  # range lines of the snapshot's step index (older steps than its rows)


def compose_snapshot(previous: dict[str, Any] | None, goal: str | None, plan: str | None, eras: list[Era],
                     chunks: list[Chunk], records: list[StepRecord], state: str | None,
                     row_tokens: int) -> tuple[str, dict[str, Any]]:
    """The emergency snapshot of steps 1..len(records): everything F held (the previous snapshot included)
    merged as structured sets, the user instructions verbatim, and a bounded step index: rows for the last
    steps (within ``row_tokens``), ranges for the older ones. Returns (text, state to persist)."""
    prev = previous or {}
    all_chunks = [c for e in eras for c in e.chunks] + list(chunks)
    merged, dropped = _merged_sets(prev, all_chunks, records)
    rows, first_row = _newest_rows(records, row_tokens)
    spans = _older_spans(prev, eras, all_chunks, records, first_row)
    users = [f'  - User @ Step {r.step}: "{u}"' for r in records for u in r.user_instructions]
    lines = ["[Session snapshot]", f"overall_goal: {goal or '(unknown)'}", f"plan_state: {plan or '(none)'}"]
    for k in SNAPSHOT_FIELDS:
        more = f" (+{dropped[k]} older: recall_history)" if dropped.get(k) else ""
        lines.append(f"{k}: " + ("; ".join(merged[k]) or "(none)") + more)
    lines.append(f"device_app_state: {state or '(unknown)'}")
    lines.append("user instructions:" if users else "user instructions: (none)")
    lines.extend(users)
    lines.append("step index:")
    for a, b, t0, t1, label in spans:
        lines.append(f"- Steps {a}–{b} ({t0} → {t1})" + (f": {label}" if label else "")
                     + f" — recall_history(step_range=[{a}, {b}])")
    lines.extend(rows)
    state_out = {**merged, "dropped": dropped, "spans": spans, "until": len(records)}
    return "\n".join(lines), state_out


def _merged_sets(prev: dict[str, Any], all_chunks: list[Chunk],
                 records: list[StepRecord]) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """The snapshot's structured sets (newest last, capped) and how many of each were dropped."""
    merged: dict[str, list[str]] = {k: list(prev.get(k) or []) for k in SNAPSHOT_FIELDS}

    def add(key: str, values: Iterable[str]) -> None:
        for v in values:
            v = str(v)
            if v in merged[key]:
                merged[key].remove(v)  # seen again: it moves to the newest end
            merged[key].append(v)

    for ch in sorted(all_chunks, key=lambda c: c.start):
        if ch.capsule is not None:
            for k in SNAPSHOT_FIELDS:
                add(k, getattr(ch.capsule, k))
    # Validator facts outrank any capsule, and steps no chunk covers (raw turns folded now) have only them.
    done_until = int(prev.get("until", 0))
    for r in records[done_until:]:
        add("verified_facts", [str(f) for f in (r.validator or {}).get("facts", []) or []])
        if (r.validator or {}).get("executed") is False:
            add("failed_paths", [f"{r.action_line()} on {r.activity or r.package or '?'}"])
    dropped = dict(prev.get("dropped") or {})
    for k, cap in SNAPSHOT_MAX_ITEMS.items():
        if len(merged[k]) > cap:
            dropped[k] = int(dropped.get(k, 0)) + len(merged[k]) - cap
            merged[k] = merged[k][-cap:]
    return merged, dropped


def _newest_rows(records: list[StepRecord], row_tokens: int) -> tuple[list[str], int]:
    """Rows for the newest steps within ``row_tokens`` (at least one), and the first step they show."""
    from ._perception import estimate_text_tokens

    rows: list[str] = []
    first_row = len(records) + 1
    used = 0
    for r in reversed(records):
        line = step_rows(r, "min")[0]
        cost = estimate_text_tokens(line)
        if rows and used + cost > row_tokens:
            break
        rows.insert(0, line)
        used += cost
        first_row = r.step
    return rows, first_row


def _older_spans(prev: dict[str, Any], eras: list[Era], all_chunks: list[Chunk], records: list[StepRecord],
                 first_row: int) -> list[list[Any]]:
    """Ranges for the steps older than the rows (a chunk's or an era's, else the gaps), at most
    ``SNAPSHOT_MAX_SPANS``."""
    spans: list[list[Any]] = [list(x) for x in prev.get("spans") or []]
    known = [(e.start, e.end, e.chunks[0].t_start, e.chunks[-1].t_end, e.label) for e in eras if e.paragraph]
    known += [(c.start, c.end, c.t_start, c.t_end, c.milestone_title or (c.capsule.doing if c.capsule else ""))
              for c in all_chunks if not any(e.paragraph and e.start <= c.start <= e.end for e in eras)]
    covered = max((int(s[1]) for s in spans), default=0)
    by_step = {r.step: r for r in records}
    for a, b, t0, t1, label in sorted(known):
        if b <= covered or a >= first_row:
            continue
        a = max(a, covered + 1)
        b = min(b, first_row - 1)
        if a > covered + 1:
            spans.append([covered + 1, a - 1, by_step[covered + 1].t, by_step[a - 1].t, ""])
        spans.append([a, b, by_step[a].t if a in by_step else t0, by_step[b].t if b in by_step else t1, label])
        covered = b
    if covered + 1 < first_row:
        spans.append([covered + 1, first_row - 1, by_step[covered + 1].t, by_step[first_row - 1].t, ""])
    while len(spans) > SNAPSHOT_MAX_SPANS:
        # Merge the adjacent pair that spans the fewest steps: older steps end in wider ranges.
        i = min(range(len(spans) - 1), key=lambda j: (spans[j + 1][1] - spans[j][0], j))
        x, y = spans[i], spans[i + 1]
        label = "; ".join(dict.fromkeys(v for v in (x[4], y[4]) if v))
        spans[i: i + 2] = [[x[0], y[1], x[2], y[3], label[:120]]]
    return spans
