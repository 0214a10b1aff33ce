"""History chunks: three bands per closed segment, eras, period paragraphs and the emergency snapshot.

① synopsis (what it was for, what was done, what it left behind, with structured fields),
② an interval narrative checked to cover every step exactly once, ③ a mechanical one-line-per-
step ledger that no compaction ever shortens (only the period paragraph of the oldest era drops
steps, keeping their range and recall pointer). User instructions stay verbatim at every level.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

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
    """What a capsule lens summarises, per step (002 §5): time, exact action and the validator's verdict, the
    screen, the visual summary, the agent's reasoning, the validator's facts, recovery attempts, notes written
    (with the tool's result) and user instructions verbatim; within ``max_tokens``: reasoning, results and
    summaries are cut first (shorter and shorter), facts, notes and instructions never."""
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
            effect.append("notes written: " + ", ".join(notes))
        return Capsule(
            doing=subgoals[0] if subgoals else f"steps {first.step}–{last.step}",
            did=f"{len(records)} actions in {', '.join(pkgs) or 'the device'}",
            effect="; ".join(effect) or f"ended on {last.activity or last.package or 'an unknown screen'}",
            verified_facts=facts, unresolved=[], failed_paths=failed, important_entities=entities,
            entry_state=first.activity or first.package, exit_state=last.activity or last.package,
            intervals=intervals,
        )


@dataclass
class Chunk:
    """A closed segment folded into three bands."""

    start: int
    end: int
    t_start: str
    t_end: str
    reason: str
    capsule: Capsule | None
    rows: list[str]
    user_rows: list[str]
    version: int = 1
    lens: str = "offline"
    status: str = "ready"  # ready | pending (③ only, forced by the hard threshold)
    milestone: str | None = None  # the subgoal hash the segment worked on (checkpoint verdicts name it)
    annotations: list[str] = field(default_factory=list)  # post-hoc checkpoint verdicts (band ①)
    number: int | None = None  # the chunk's ordinal in the session (its label in the header)
    milestone_title: str | None = None  # the subgoal's title (the plan's first line), shown in the header
    session_id: str | None = None
    source_step_ids: list[str] = field(default_factory=list)
    model: str | None = None  # the model that wrote ①② (offline: none)
    created_at: str | None = None
    notes: list[str] = field(default_factory=list)  # note keys written in the segment

    @property
    def chunk_id(self) -> str:
        """Stable identity: the step range."""
        return f"chunk_{self.start:04d}_{self.end:04d}"

    def render(self, narrative: str = "full") -> str:
        """The chunk as it appears in F."""
        title = self.milestone_title or self.milestone
        label = f" | milestone {title}" if title else ""
        num = f" {self.number}" if self.number is not None else ""
        head = f"[Chunk{num} | Steps {self.start}–{self.end} | {self.t_start} → {self.t_end} | {self.reason}{label}]"
        lines = [head]
        for note in self.annotations:
            lines.append(f"  Checkpoint: {note}")
        c = self.capsule
        if c is not None:
            lines.append(f"① Doing: {c.doing}. Did: {c.did}. Effect: {c.effect}.")
            for label, values in (("Verified", c.verified_facts), ("Unresolved", c.unresolved),
                                  ("Failed paths", c.failed_paths), ("Entities", c.important_entities)):
                if values:
                    lines.append(f"  {label}: " + "; ".join(values))
            if c.entry_state or c.exit_state:
                lines.append(f"  Entry: {c.entry_state}  Exit: {c.exit_state}")
            rows = c.intervals if narrative == "full" else [r.split(":", 1)[0] + ":" + r.split(":", 1)[1][:40]
                                                            for r in c.intervals]
            lines.append("② " + ("\n  ".join(rows) if rows else "(none)"))
        else:
            lines.append(f"① ② pending: recall_history(step_range=[{self.start}, {self.end}]) has the details")
        lines.append("③\n" + "\n".join(self.rows))
        return "\n".join(lines)

    def to_markdown(self) -> str:
        """The chunk file: YAML frontmatter (identity and structured fields) and the three bands."""
        from lifecycle import render_frontmatter

        c = self.capsule
        meta: dict[str, Any] = {"chunk_id": self.chunk_id, "chunk_number": self.number,
                                "session_id": self.session_id, "start_step": self.start, "end_step": self.end,
                                "source_step_ids": self.source_step_ids, "t_start": self.t_start,
                                "t_end": self.t_end, "reason": self.reason, "version": self.version,
                                "lens": self.lens, "model": self.model, "created_at": self.created_at,
                                "status": self.status, "milestone": self.milestone,
                                "milestone_title": self.milestone_title, "notes": self.notes,
                                "annotations": self.annotations}
        if c is not None:
            meta["capsule"] = c.model_dump()
        meta["user_rows"] = self.user_rows
        return render_frontmatter(meta, "\n" + self.render() + "\n")

    @classmethod
    def from_markdown(cls, text: str, path: Any = None) -> Chunk:
        """Read a chunk file back."""
        from lifecycle import parse_frontmatter

        meta, body = parse_frontmatter(text, path)
        rows_part = body.split("③\n", 1)[1] if "③\n" in body else ""
        rows = [ln for ln in rows_part.strip("\n").split("\n") if ln.strip()]
        cap = Capsule.model_validate(meta["capsule"]) if meta.get("capsule") else None

        def opt(key: str) -> str | None:
            v = meta.get(key)
            return None if v is None else str(v)

        num = meta.get("chunk_number")
        return cls(int(meta["start_step"]), int(meta["end_step"]), str(meta["t_start"]), str(meta["t_end"]),
                   str(meta.get("reason", "")), cap, rows, list(meta.get("user_rows") or []),
                   int(meta.get("version", 1)), str(meta.get("lens", "offline")), str(meta.get("status", "ready")),
                   meta.get("milestone"), [str(a) for a in meta.get("annotations") or []],
                   int(num) if isinstance(num, int) else None, opt("milestone_title"), opt("session_id"),
                   [str(x) for x in meta.get("source_step_ids") or []], opt("model"), opt("created_at"),
                   [str(x) for x in meta.get("notes") or []])


PERIOD_MAX_FACTS = 16  # verified facts a period paragraph shows (the rest: its recall pointer)


@dataclass
class Era:
    """Several old chunks: ① merged as structured sets, ② headline rows, ③ kept; or, past the era cap, a
    period paragraph (``paragraph``), and adjacent period paragraphs merged into a wider period."""

    chunks: list[Chunk]
    paragraph: bool = False  # a period paragraph: its steps' rows are dropped (recall brings them back)
    number: int = 0  # the era's ordinal in the session (``[Era N | ...]``)
    last_number: int | None = None  # a wider period merged from eras number..last_number
    max_facts: int = PERIOD_MAX_FACTS
    narrative: bool = True  # False: ① merged + ③ only (the ladder's step before the period paragraph)

    @property
    def start(self) -> int:
        """First step."""
        return self.chunks[0].start

    @property
    def end(self) -> int:
        """Last step."""
        return self.chunks[-1].end

    @property
    def label(self) -> str:
        """``Era 3`` or, for a merged period, ``Era 1–3``."""
        last = self.last_number
        return f"Era {self.number}" + (f"–{last}" if last is not None and last != self.number else "")

    def merged(self) -> dict[str, list[str]]:
        """Structured fields of the chunks as ordered sets."""
        out: dict[str, list[str]] = {"verified_facts": [], "unresolved": [], "failed_paths": [],
                                     "important_entities": []}
        for ch in self.chunks:
            if ch.capsule is None:
                continue
            for k in out:
                for v in getattr(ch.capsule, k):
                    if v not in out[k]:
                        out[k].append(v)
        return out

    def render(self) -> str:
        """The era (or the period paragraph) as it appears in F."""
        t0, t1 = self.chunks[0].t_start, self.chunks[-1].t_end
        m = self.merged()
        user_rows = [u for ch in self.chunks for u in ch.user_rows]
        if self.paragraph:
            return "\n".join(self._paragraph(m, t0, t1) + user_rows)
        lines = [f"[{self.label} | Steps {self.start}–{self.end} | {t0} → {t1}]"]
        for label, key in (("Verified", "verified_facts"), ("Unresolved", "unresolved"),
                           ("Failed paths", "failed_paths"), ("Entities", "important_entities")):
            if m[key]:
                lines.append(f"  {label}: " + "; ".join(m[key]))
        for ch in self.chunks:
            if self.narrative:
                heads = [r.split(":", 1)[0] + ":" + r.split(":", 1)[1][:40] for r in ch.capsule.intervals] \
                    if ch.capsule else [f"Steps {ch.start}–{ch.end}: (pending)"]
                lines.append("② " + " | ".join(h.lstrip("- ") for h in heads))
            lines.append("③\n" + "\n".join(ch.rows))
        return "\n".join(lines)

    def _paragraph(self, m: dict[str, list[str]], t0: str, t1: str) -> list[str]:
        # Mechanical, never a summary of summaries: what the chunks were doing (their milestone title when
        # the capsule is missing), the notes they wrote, a capped list of verified facts (the newest kept:
        # an older fact is more likely to have been superseded), failed paths; every part bounded.
        doing = list(dict.fromkeys((ch.capsule.doing if ch.capsule else ch.milestone_title or ch.milestone or "")
                                   for ch in self.chunks))
        did = "; ".join(d for d in doing if d)
        did = (did[:297] + "…") if len(did) > 300 else (did or "earlier work")
        notes = list(dict.fromkeys(n for ch in self.chunks for n in ch.notes))
        facts = m["verified_facts"]
        shown = facts[-self.max_facts:] if self.max_facts > 0 else []
        failed = m["failed_paths"][-8:]
        text = f"[{self.label} | Steps {self.start}–{self.end} | {t0} → {t1}] {did}."
        if notes:
            text += " Notes: " + ", ".join(notes[-12:]) + "."
        if shown:
            text += " Verified: " + "; ".join(shown) + "."
        if len(facts) > len(shown):
            text += f" (+{len(facts) - len(shown)} older verified facts)"
        if failed:
            text += " Failed paths: " + "; ".join(failed) + "."
        return [text, f"  (recall_history(step_range=[{self.start}, {self.end}]) brings any of these steps back)"]


SNAPSHOT_FIELDS = ("verified_facts", "unresolved", "failed_paths", "important_entities")
SNAPSHOT_MAX_ITEMS = {"verified_facts": 48, "unresolved": 12, "failed_paths": 16, "important_entities": 20}
SNAPSHOT_MAX_SPANS = 12  # range lines of the snapshot's step index (older steps than its rows)


def compose_snapshot(previous: dict[str, Any] | None, goal: str | None, plan: str | None, eras: list[Era],
                     chunks: list[Chunk], records: list[StepRecord], state: str | None,
                     row_tokens: int) -> tuple[str, dict[str, Any]]:
    """The emergency snapshot of steps 1..len(records): everything F held (the previous snapshot included)
    merged as structured sets, the user instructions verbatim, and a bounded step index: rows for the last
    steps (within ``row_tokens``), ranges for the older ones. Returns (text, state to persist)."""
    from ._perception import estimate_text_tokens

    prev = previous or {}
    merged: dict[str, list[str]] = {k: list(prev.get(k) or []) for k in SNAPSHOT_FIELDS}
    all_chunks = [c for e in eras for c in e.chunks] + list(chunks)

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
    # The step index: rows for the newest steps, then ranges (a chunk's or an era's, else the gaps).
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


@dataclass
class Segment:
    """A closed range of steps waiting for its capsule before it may replace raw turns."""

    start: int
    end: int
    reason: str
    attempts: int = 0
    chunk: Chunk | None = None
    failed: bool = False
    failed_at: int = 0  # the step count when its capsule last failed (retries are spaced from it)
    rounds: int = 0  # capsule rounds retried after a failure
    extra: dict[str, Any] = field(default_factory=dict)
