"""Band ③ of a chunk: the mechanical one-line-per-step rows no compaction ever shortens."""

from __future__ import annotations

from collections.abc import Iterable

from ._records import StepRecord


def ledger_rows(records: Iterable[StepRecord], width: str = "full") -> list[str]:
    """Band ③: one row per step (recovery sub-actions indented, user instructions verbatim)."""
    return [row for r in records for row in step_rows(r, width)]


def step_rows(r: StepRecord, width: str = "full") -> list[str]:
    """The band-③ lines of one step: its row, then its recovery and user-instruction sub-rows."""
    out: list[str] = []
    result = (r.result or "").replace("\n", " ")
    v = r.validator or {}
    verdict = "executed" if v.get("executed", True) else "not executed"
    if width == "min":
        out.append(f"- Step {r.step} ({r.t}): {r.action_line()}")
    else:
        out.append(f"- Step {r.step} ({r.t}): {r.action_line()} -> {verdict}"
                   + (f"; {result[:160]}" if result else ""))
        for rec in r.failure_recovery:
            out.append(f"  - recovery: {str(rec.get('action') or rec)[:160]}")
    for u in r.user_instructions:
        out.append(f'  - User @ Step {r.step}: "{u}"')
    return out
