"""Why a task failed, read off its events (the design's write strategy), not only the caller's words.

Four causes the phone's own observations show: the screen did not change after an action, a dialog was in
the way, typed text did not arrive, and the same point was tapped again and again without effect. Each
names the steps that show it, so the failure memory it becomes carries those event ids as evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._steps import TEXT_TOOLS, Step

WAIT_TOOLS = ("wait", "screenshot", "wait_for_stable_screen", "get_state", "read_screen")
NEAR_PX = 48.0  # taps this close count as the same point
REPEATS = 3  # taps at one point without effect before it is a cause


@dataclass
class Cause:
    """One failure cause: its kind, what it was about, the lesson in plain words, the steps that show it."""

    kind: str
    detail: str
    lesson: str
    steps: list[Step] = field(default_factory=list)

    def label(self) -> str:
        """``kind: detail``, as the episode's failure_causes list holds it."""
        return f"{self.kind}: {self.detail}" if self.detail else self.kind

    def trigger(self) -> dict[str, Any]:
        """The trigger of the failure memory (kind first; then where it happened)."""
        s = self.steps[-1]
        out = {"kind": self.kind, "tool": s.tool, "page": s.page_before or s.page_after, "app": s.app_before}
        if s.coords:
            out["coords"] = s.coords
        return {k: v for k, v in out.items() if v}


def _unchanged(s: Step) -> bool:
    """The action changed nothing the phone reports: same page, and the same screen where it is known."""
    if s.changed_page or s.is_error or not s.has_result:
        return False
    same_obs = s.changed_screen is False
    return same_obs or (s.extra.get("dhash") is not None and s.extra.get("dhash") == s.extra.get("dhash_before"))


def _dialogs(s: Step) -> list[str]:
    obs = s.extra.get("observed") or {}
    d = obs.get("dialogs") if isinstance(obs, dict) else None
    if isinstance(d, str):
        return [d]
    return [str(x) for x in d if x] if isinstance(d, list) else []


def _visible(s: Step) -> str | None:
    obs = s.extra.get("observed") or {}
    vt = obs.get("visible_text") if isinstance(obs, dict) else None
    if isinstance(vt, list):
        return " ".join(str(x) for x in vt)
    return vt if isinstance(vt, str) else None


def classify(steps: list[Step]) -> list[Cause]:
    """The failure causes the events of one episode show, each once, in the order they happened."""
    causes: list[Cause] = []
    seen: set[str] = set()

    def add(c: Cause) -> None:
        if c.label() not in seen:
            seen.add(c.label())
            causes.append(c)

    run: list[Step] = []
    for i, s in enumerate(steps):
        # Repeated taps at one point with no effect.
        p = s.point()
        if p is not None and _unchanged(s):
            q = run[-1].point() if run else None
            if q is not None and abs(p[0] - q[0]) <= NEAR_PX and abs(p[1] - q[1]) <= NEAR_PX:
                run.append(s)
            else:
                run = [s]
            if len(run) == REPEATS:
                add(Cause("repeated_tap_no_effect", f"{s.coords} on {s.page_before or '?'}",
                          f"Tapping {s.coords} on {s.page_before or 'this page'} {REPEATS} times changed nothing: "
                          "the target is elsewhere or not tappable; look at the screen and choose another way.",
                          list(run)))
        elif p is None or not _unchanged(s):
            run = []
        # A dialog in the way: one was open after this step, and the next step got nowhere (or none came).
        dialogs = _dialogs(s)
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if dialogs and (nxt is None or not nxt.changed_page):
            add(Cause("dialog_blocking", dialogs[0][:60],
                      f"A dialog ({dialogs[0][:60]}) was open on {s.page_after or 'the page'}: dismiss or answer it "
                      "before the next action.", [s]))
        # Typed text that did not arrive.
        if s.tool in TEXT_TOOLS and s.text and len(s.text) >= 2:
            visible = _visible(s)
            ime_error = bool(s.error and any(w in s.error.lower() for w in ("input method", "ime", "keyboard")))
            if ime_error or (visible is not None and s.text not in visible):
                add(Cause("input_not_accepted", s.text[:40],
                          f"Typing {s.text[:40]!r} did not reach the field: focus the field first, or check the "
                          "input method.", [s]))
        # An action that changed nothing at all.
        if s.tool not in WAIT_TOOLS and s.point() is None and s.tool not in TEXT_TOOLS and _unchanged(s):
            add(Cause("page_unchanged", f"{s.tool} on {s.page_before or '?'}",
                      f"{s.tool} on {s.page_before or 'this page'} left the screen unchanged: it had no effect here.",
                      [s]))
    # A single tap that changed nothing is worth naming when nothing else explains the failure.
    if not causes:
        for s in steps:
            if s.point() is not None and _unchanged(s):
                add(Cause("page_unchanged", f"{s.tool} {s.coords} on {s.page_before or '?'}",
                          f"{s.tool} at {s.coords} on {s.page_before or 'this page'} left the screen unchanged.", [s]))
                break
    return causes
