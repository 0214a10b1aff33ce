"""History chunks: three bands per closed segment, eras, period paragraphs and the emergency snapshot.

① synopsis (what it was for, what was done, what it left behind, with structured fields),
② an interval narrative checked to cover every step exactly once, ③ a mechanical one-line-per-
step ledger that no compaction ever shortens (only the period paragraph of the oldest era drops
steps, keeping their range and recall pointer). User instructions stay verbatim at every level.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ._capsules import Capsule


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
            if self.notes:  # the synopsis that would name them is not there yet: a note is never lost
                lines.append("  Notes: " + ", ".join(self.notes))
        lines.append("③\n" + "\n".join(self.rows))
        return "\n".join(lines)

    def to_markdown(self) -> str:
        """The chunk file: YAML frontmatter (identity and structured fields) and the three bands."""
        from memory_plane.lifecycle import render_frontmatter

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
        from memory_plane.lifecycle import parse_frontmatter

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


# A note a synopsis names: a path under notes/ or a markdown file name (the design's "pointer and key points").
_NOTE_REF = re.compile(r"(?<![\w/.-])((?:notes/)[\w./-]+|[\w.-]+\.md)\b")
PERIOD_MAX_FACTS = 4  # verified facts a period paragraph shows, the first ones (the rest: its recall pointer)


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

    def notes(self) -> list[str]:
        """The notes its chunks wrote (their keys) and the note files their synopses name, in order, once each."""
        refs: list[str] = []
        for ch in self.chunks:
            refs.extend(ch.notes)
            if ch.capsule is not None:
                refs.extend(_NOTE_REF.findall(" ".join((ch.capsule.effect, ch.capsule.did))))
        return list(dict.fromkeys(r.rstrip(".,;:") for r in refs if r))

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
        notes = self.notes()
        if notes:  # ① prose is not shown at this level: the notes it named are
            lines.append("  Notes: " + ", ".join(notes))
        for ch in self.chunks:
            if self.narrative:
                heads = [r.split(":", 1)[0] + ":" + r.split(":", 1)[1][:40] for r in ch.capsule.intervals] \
                    if ch.capsule else [f"Steps {ch.start}–{ch.end}: (pending)"]
                lines.append("② " + " | ".join(h.lstrip("- ") for h in heads))
            lines.append("③\n" + "\n".join(ch.rows))
        return "\n".join(lines)

    def _paragraph(self, m: dict[str, list[str]], t0: str, t1: str) -> list[str]:
        # Mechanical, never a summary of summaries: what the era was doing (the first chunk that says), the first
        # sentence of what each chunk did (its milestone title when the capsule is missing, else its step range),
        # the notes they wrote or named, the first verified facts (the era's own record, in the order they were
        # established), failed paths; every part bounded.
        doing = next((ch.capsule.doing.strip() for ch in self.chunks if ch.capsule and ch.capsule.doing.strip()), "")
        did_parts = [first_sentence(ch.capsule.did) if ch.capsule and ch.capsule.did.strip()
                     else ch.milestone_title or ch.milestone or f"steps {ch.start}–{ch.end}" for ch in self.chunks]
        did = "; ".join(dict.fromkeys(d.rstrip(".。") for d in did_parts if d))
        did = (did[:297] + "…") if len(did) > 300 else did
        notes = self.notes()
        facts = m["verified_facts"]
        shown = facts[:self.max_facts] if self.max_facts > 0 else []
        failed = m["failed_paths"][-8:]
        text = f"[{self.label} | Steps {self.start}–{self.end} | {t0} → {t1}] {doing.rstrip('.。') or 'Earlier work'}."
        if did:
            text += f" Did: {did}."
        if notes:
            text += " Notes: " + ", ".join(notes[-12:]) + "."
        if shown:
            text += " Verified: " + "; ".join(shown) + "."
        if len(facts) > len(shown):
            text += f" (+{len(facts) - len(shown)} later verified facts: recall_history)"
        if failed:
            text += " Failed paths: " + "; ".join(failed) + "."
        return [text, f"  (recall_history(step_range=[{self.start}, {self.end}]) brings any of these steps back)"]


_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[。！？]")


def first_sentence(textv: str) -> str:
    """The first sentence of a text (English or Chinese punctuation), bounded to 200 characters."""
    t = " ".join(textv.split())
    hit = _SENTENCE_END.search(t)
    out = t[: hit.end()] if hit else t
    return out if len(out) <= 200 else out[:199] + "…"


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
