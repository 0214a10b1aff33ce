"""Capsules: bands ① and ② of a chunk as a capsule lens writes them, their checks, and the offline lens."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from ._records import StepRecord

_INTERVAL = re.compile(r"^-?\s*Steps?\s+(\d+)(?:\s*[–-]\s*(\d+))?\s*:", re.MULTILINE)


class Capsule(BaseModel):
    """Bands ① and ② of a chunk (what a capsule lens produces)."""

    doing: str = ""
    did: str = ""
    effect: str = ""
    verified_facts: list[str] = Field(default_factory=list)
    unresolved: list[str] = Field(default_factory=list)
    failed_paths: list[str] = Field(default_factory=list)
    important_entities: list[str] = Field(default_factory=list)
    entry_state: str | None = None
    exit_state: str | None = None
    intervals: list[str] = Field(default_factory=list)  # "Steps a–b: …" rows
    model: str | None = Field(default=None, exclude=True)  # the model that wrote it (kept in the chunk's file)


def coverage_problem(intervals: list[str], start: int, end: int) -> str | None:
    """Why ② does not cover steps start..end exactly once (gaps, overlaps, out of range), or None."""
    seen: dict[int, int] = {}
    for row in intervals:
        m = _INTERVAL.match(row.strip())
        if not m:
            return f"row without a step reference: {row[:60]!r}"
        a = int(m.group(1))
        b = int(m.group(2) or a)
        if a > b:
            return f"reversed range {a}-{b}"
        for s in range(a, b + 1):
            if s < start or s > end:
                return f"step {s} is outside {start}-{end}"
            seen[s] = seen.get(s, 0) + 1
    missing = [s for s in range(start, end + 1) if s not in seen]
    if missing:
        return f"steps not covered: {missing[:10]}"
    twice = [s for s, n in seen.items() if n > 1]
    if twice:
        return f"steps covered twice: {twice[:10]}"
    return None


def notes_problem(capsule: Capsule, notes: Iterable[str]) -> str | None:
    """Why ① misses a note key written in the segment, or None."""
    text = " ".join([capsule.effect, capsule.did, capsule.doing, *capsule.verified_facts])
    missing = [n for n in notes if n and n not in text]
    return f"notes not named in the synopsis: {missing}" if missing else None


def check_capsule(capsule: Capsule, records: list[StepRecord]) -> str | None:
    """Mechanical checks a capsule must pass before its chunk may replace raw turns."""
    if not records:
        return "empty segment"
    problem = coverage_problem(capsule.intervals, records[0].step, records[-1].step)
    if problem:
        return problem
    return notes_problem(capsule, [n for r in records for n in r.notes_written])


CAPSULE_INPUT_TOKENS = 6000  # what a capsule lens is given for one segment, at most


def capsule_input(records: list[StepRecord], summaries: dict[int, str],
                  max_tokens: int = CAPSULE_INPUT_TOKENS) -> str:
    """What a capsule lens summarises, per step: time, exact action and the validator's verdict, the
    screen, the visual summary, the agent's reasoning, the validator's facts, recovery attempts, notes written
    (each key with an excerpt of its content, or else the tool's result) and user instructions verbatim; within
    ``max_tokens``: reasoning, results and summaries are cut first (shorter and shorter), facts, notes and
    instructions never (a note's excerpt keeps at least its first 120 characters)."""
    from ._perception import estimate_text_tokens

    def render(cut: int) -> str:
        lines: list[str] = []
        plans = list(dict.fromkeys(r.plan.strip().splitlines()[0] for r in records if r.plan and r.plan.strip()))
        if plans:
            lines.append("Plan: " + " | ".join(p[:200] for p in plans[:3]))
        for r in records:
            v = r.validator or {}
            verdict = "executed" if v.get("executed", True) else "not executed"
            result = (r.result or "").replace("\n", " ")
            lines.append(f"- Step {r.step} ({r.t}): {r.action_line()} -> {verdict}"
                         + (f"; {_cut(result, cut)}" if result and cut else ""))
            where = "/".join(x for x in (r.package, r.activity) if x)
            if where:
                lines.append(f"  screen: {where}")
            if cut and summaries.get(r.step):
                lines.append(f"  visual summary: {_cut(summaries[r.step], 2 * cut)}")
            if cut and r.thought:
                lines.append(f"  reasoning: {_cut(r.thought.replace(chr(10), ' '), 2 * cut)}")
            facts = [str(f) for f in v.get("facts", []) or []]
            if facts:
                lines.append("  validator facts: " + "; ".join(facts))
            for rec in r.failure_recovery:
                lines.append(f"  recovery: {_cut(str(rec.get('action') or rec), max(cut, 80))}")
            for k in r.notes_written:
                excerpt = (r.note_excerpts or {}).get(k)
                if excerpt:  # the key and what it says (never cut below a line: notes are not to be lost)
                    tail = f': "{_cut(excerpt, max(2 * cut, 120))}"'
                else:
                    tail = f" (tool result: {_cut(result, cut)})" if result and cut else ""
                lines.append(f"  note written: {k}{tail}")
            for u in r.user_instructions:
                lines.append(f'  User @ Step {r.step}: "{u}"')
        return "\n".join(lines)

    for cut in (400, 200, 100, 50, 0):
        text = render(cut)
        if estimate_text_tokens(text) <= max_tokens:
            return text
    return text  # only the parts that are never cut are left: a segment is at most max_steps steps


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(0, n - 1)] + "…"


@runtime_checkable
class CapsuleLens(Protocol):
    """Writes bands ① and ② of a segment. Must be neutral; may raise to signal a transient failure."""

    name: str

    def capsule(self, records: list[StepRecord], summaries: dict[int, str]) -> Capsule:
        """The capsule of a closed segment."""
        ...


class OfflineCapsuleLens:
    """Bands ① and ② built mechanically from step records: exact, neutral, never more than was recorded."""

    name = "offline"
    version = 1

    def capsule(self, records: list[StepRecord], summaries: dict[int, str]) -> Capsule:
        """The capsule of a closed segment, from its records."""
        first, last = records[0], records[-1]
        pkgs = list(dict.fromkeys(r.package for r in records if r.package))
        facts = list(dict.fromkeys(str(f) for r in records for f in (r.validator or {}).get("facts", []) or []))
        failed = list(dict.fromkeys(f"{r.action_line()} on {r.activity or r.package or '?'}" for r in records
                                    if (r.validator or {}).get("executed") is False or r.failure_recovery))
        entities = list(dict.fromkeys(r.target_label for r in records if r.target_label))[:20]
        notes = list(dict.fromkeys(n for r in records for n in r.notes_written))
        subgoals = list(dict.fromkeys(r.plan.splitlines()[0] for r in records if r.plan))
        intervals: list[str] = []
        i = 0
        while i < len(records):
            j = i
            # Group consecutive steps that did the same kind of thing on the same screen.
            while j + 1 < len(records) and records[j + 1].action.get("name") == records[i].action.get("name") \
                    and records[j + 1].activity == records[i].activity:
                j += 1
            a, b = records[i], records[j]
            where = a.activity or a.package or "the screen"
            what = a.action_line() if i == j else f"{a.action.get('name')} x{j - i + 1} ({a.action_line()} … " \
                                                  f"{b.action_line()})"
            intervals.append(f"- Steps {a.step}–{b.step}: {what} on {where}" if i != j
                             else f"- Step {a.step}: {what} on {where}")
            i = j + 1
        effect = []
        if facts:
            effect.append("verified: " + "; ".join(facts[:10]))
        if notes:
            said = {k: x for r in records for k, x in (r.note_excerpts or {}).items()}  # the newest excerpt of each
            effect.append("notes written: " + ", ".join(f'{n} ("{_cut(said[n], 80)}")' if said.get(n) else n
                                                         for n in notes))
        return Capsule(
            doing=subgoals[0] if subgoals else f"steps {first.step}–{last.step}",
            did=f"{len(records)} actions in {', '.join(pkgs) or 'the device'}",
            effect="; ".join(effect) or f"ended on {last.activity or last.package or 'an unknown screen'}",
            verified_facts=facts, unresolved=[], failed_paths=failed, important_entities=entities,
            entry_state=first.activity or first.package, exit_state=last.activity or last.package,
            intervals=intervals,
        )
