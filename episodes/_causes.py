"""Why a task failed, read off its events (the design's write strategy), not only the caller's words.

A failure is keyed by its cause, as the events show it: where it happened (the app and page the phone
showed) and the symptom there, with what identifies that symptom on the page (``CauseKey.subject``):

- ``dialog_blocking``: a dialog was open before the step (``observed_state["dialogs"]``) and the step got
  nowhere; identified by the dialog's text;
- ``input_not_accepted``: the text tool's error, or typed text absent from the next ``visible_text``;
  identified by the field (its label, or the tap that focused it);
- ``element_missing``: the tool said its element was not there, or the label tapped was on nothing the screen
  listed; identified by the missing label;
- ``vision_uncertain``: the screen the step acted on was read with low confidence (the observed state's
  ``confidence``, as the Go recorder and the design's observed state carry it, or an OCR/vision confidence
  field, under ``LOW_CONFIDENCE``), or the tool's error says the screen could not be recognised, and the
  step aimed at nothing there or got nowhere; identified by the tool and its label;
- ``page_unchanged``: an action changed nothing the phone reports (once or repeated); identified by the tool
  and its label;
- ``sign_in_wall``: the task ended on a page asking to sign in (its name, a password field, the login state
  the phone reported); the page identifies it;
- ``timeout``: a tool's error says it timed out, or the run ended waiting on a page that never changed; the
  page identifies it;
- ``tool_error`` / ``unexplained``: the failing step, when the events show none of the above; its tool.

One failure has one primary cause: the symptom at the failing step (the first step with an error, else the
last step; trailing waits on an unchanged page are that page's timeout), tested in the order above, so a
symptom that explains another is the one kept (a dialog in the way explains a tap without effect; a tool's
own error explains the error dialog that carries it). The other symptoms the run showed are listed in the
episode's ``failure_causes`` only. The runtime's phase, the tool and the free text are examples beside the
mode, never part of it, so one cause met by several goals (or phased differently by the runtime) is one
failure mode. Each cause names the steps that show it, so the failure memory it becomes carries those event
ids as evidence.

An unfinished run did not fail and has no cause (``outcome_unfinished``): interrupted, raised, ending on a call
that never got its result, or one the runtime ended without a word on why (no phase, reason or error) that
the events do not show stuck where it stopped (the record stopped while the task was going on).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from memory_plane.lifecycle import content_hash

from ._path_agreement import mask
from ._steps import TEXT_TOOLS, Step, is_system_screen, screen_label

WAIT_TOOLS = ("wait", "screenshot", "wait_for_stable_screen", "get_state", "read_screen")
NEAR_PX = 48.0  # taps this close count as the same point
REPEATS = 3  # taps at one point without effect before it is a cause
UNFINISHED_PHASES = ("interrupted", "exception")
"""Phases of a run that stopped rather than failed: the recorder died, or the runtime raised."""

# Generic, multilingual signals (English, Chinese, Japanese, Spanish, French, German): words of the
# phone's own messages, never of one app.
SIGN_IN_WORDS = ("sign in", "sign-in", "signin", "log in", "log-in", "login", "登录", "登入", "ログイン",
                 "iniciar sesión", "connexion", "se connecter", "anmelden")
PASSWORD_WORDS = ("password", "密码", "パスワード", "contraseña", "mot de passe", "passwort")
SIGNED_OUT_STATES = ("logged_out", "signed_out", "logged out", "signed out", "not_logged_in", "未登录")
TIMEOUT_WORDS = ("timeout", "timed out", "time out", "超时", "タイムアウト", "tiempo de espera", "délai dépassé",
                 "zeitüberschreitung")
MISSING_WORDS = ("not found", "no such element", "cannot find", "can't find", "could not find", "unable to find",
                 "unable to locate", "does not exist", "not visible", "找不到", "未找到", "没有找到", "不存在",
                 "見つかりません", "no encontrado", "introuvable", "nicht gefunden")
INPUT_ERROR_WORDS = ("input method", "ime", "keyboard", "输入法", "键盘")
# A screen the OCR or vision model could not read: the phone's and the models' own words for it.
VISION_ERROR_WORDS = ("ocr", "recognize", "recognise", "recognition", "low confidence", "uncertain", "unreadable",
                      "could not read the screen", "识别", "看不清", "不确定", "認識", "reconocer", "reconnaître",
                      "erkennen")
# Fields of an observed state that say how sure the reading of the screen was (0..1).
CONFIDENCE_KEYS = ("confidence", "ocr_confidence", "vision_confidence", "recognition_confidence")
LOW_CONFIDENCE = 0.5
"""A screen read with less confidence than this was uncertain."""


KEY_FORM = 2
"""The form of ``CauseKey.as_dict`` (``form``): a stored cause of another form (an older key that held the
runtime's phase and the tool) meets no cause of this one, and its memory expires by its TTL."""
NO_WORD_PHASES = (None, "unknown")
"""Phases that say nothing about why a run failed (the recorder's default when the runtime named none)."""


@dataclass(frozen=True)
class CauseKey:
    """What makes two failures the same failure mode: where (app, page), the symptom, and what identifies the
    symptom there (``subject``: a dialog's text, a field, a tool and label, a missing label; None where the
    page alone is enough)."""

    app: str | None
    page: str | None
    symptom: str
    subject: str | None = None

    def label(self) -> str:
        """``symptom: subject on page``, as the episode's failure_causes list and the memory's mode hold it."""
        what = f" {self.subject}" if self.subject else ""
        return f"{self.symptom}:{what} on {self.page or '?'}"

    def as_dict(self) -> dict[str, Any]:
        """The key as the failure memory stores it (``cause``), with its form."""
        return {**asdict(self), "form": KEY_FORM}

    @classmethod
    def of(cls, value: Any) -> CauseKey | None:
        """The key a failure memory stores, or None when it holds none, not a whole one, or one of another
        form (an older memory: nothing meets it again, it expires)."""
        if not isinstance(value, Mapping) or value.get("form") != KEY_FORM or not value.get("symptom"):
            return None

        def text(k: str) -> str | None:
            v = value.get(k)
            return str(v) if v is not None else None

        return cls(text("app"), text("page"), str(value["symptom"]), text("subject"))

    def failure_id(self, device_id: str) -> str:
        """The failure memory's id: a hash of the device and this key alone."""
        return f"fail_{content_hash(device_id, 'cause', KEY_FORM, self.app, self.page, self.symptom, self.subject)}"


@dataclass
class Cause:
    """One failure cause: its symptom, what identifies it on its page (``subject``), where it happened (the
    step's observed app and page), the lesson in plain words and the steps that show it."""

    kind: str
    lesson: str
    steps: list[Step] = field(default_factory=list)
    page: str | None = None
    app: str | None = None
    subject: str | None = None

    @property
    def step(self) -> Step:
        """The step the cause happened at (the last that shows it)."""
        return self.steps[-1]

    def key(self, app: str | None, target: str | None) -> CauseKey:
        """The cause's key: ``app`` as the caller resolved it (the app the phone showed the step in, never a
        launcher), the page and subject with the episode's own target masked."""
        return CauseKey(app, mask(self.page, target), self.kind, mask(self.subject, target))

    def trigger(self, key: CauseKey) -> dict[str, Any]:
        """The trigger of the failure memory (kind first; then where it happened and what it was)."""
        out = {"kind": self.kind, "tool": self.step.tool, "page": key.page, "app": self.app, "subject": key.subject}
        return {k: v for k, v in out.items() if v}


def unfinished(phase: str | None, steps: list[Step]) -> bool:
    """Whether a run stopped rather than failed, by its phase and steps alone: interrupted, raised, or ending
    on a call with no result."""
    return phase in UNFINISHED_PHASES or bool(steps and not steps[-1].has_result)


def outcome_unfinished(outcome: Any, steps: list[Step]) -> bool:
    """``unfinished`` for a failed episode's outcome and its device steps; and a run the runtime ended without
    a word on why (no phase, reason or error) that the events do not show stuck where it stopped (the record
    stopped while the task was going on). Judged only where the phone reported its pages."""
    if getattr(outcome, "success", False):
        return False
    phase = getattr(outcome, "failure_phase", None)
    if unfinished(phase, steps):
        return True
    silent = phase in NO_WORD_PHASES and not (getattr(outcome, "failure_reason", None)
                                              or getattr(outcome, "error", None))
    return silent and bool(steps) and bool(steps[-1].page_after or steps[-1].page_before) and not _stuck(steps)


def _stuck(steps: list[Step]) -> bool:
    """Whether the events show a run failing where it stopped: an error, a dialog in the way, text or an
    element that was not there, waits on a page that never changed, the same action again without effect.
    A last step that took effect, or one tap that changed nothing to see (a field's focus), is no sign."""
    last = steps[-1]
    if failing_step(steps) == len(steps) - 1 and not last.is_error and (last.changed_page
                                                                        or last.changed_screen is True):
        return False
    cause = primary_cause(steps)
    if cause is None or cause.kind == "sign_in_wall":
        return False
    if cause.kind != "page_unchanged":
        return True
    prev = steps[-2] if len(steps) > 1 else None
    return prev is not None and _unchanged(prev) and _action(prev) == _action(last)


def _unchanged(s: Step) -> bool:
    """The action changed nothing the phone reports: same page, and the same screen where it is known."""
    if s.changed_page or s.is_error or not s.has_result:
        return False
    same_obs = s.changed_screen is False
    return same_obs or (s.extra.get("dhash") is not None and s.extra.get("dhash") == s.extra.get("dhash_before"))


def _observed(s: Step, key: str, before: bool = False) -> Any:
    obs = s.extra.get("observed_before" if before else "observed") or {}
    return obs.get(key) if isinstance(obs, Mapping) else None


def _dialogs(s: Step, before: bool = False) -> list[str]:
    d = _observed(s, "dialogs", before)
    if isinstance(d, str):
        return [d] if d.strip() else []
    return [" ".join(str(x).split()) for x in d if x and str(x).strip()] if isinstance(d, list) else []


def _visible(s: Step) -> str | None:
    vt = _observed(s, "visible_text")
    if isinstance(vt, list):
        return " ".join(str(x) for x in vt)
    return vt if isinstance(vt, str) else None


SHORT_WORD = 4
"""A Latin word this short is matched as a whole word: "ime" is not inside "time", nor "ocr" inside "democracy";
a longer one is matched inside others too (its forms: "unrecognized", "timeouts")."""


@functools.lru_cache(maxsize=64)
def _words_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    parts = [rf"(?<![a-z0-9]){re.escape(w)}(?![a-z0-9])" if w.isascii() and len(w) <= SHORT_WORD else re.escape(w)
             for w in words]
    return re.compile("|".join(parts))


def _has(text: str | None, words: tuple[str, ...]) -> bool:
    return _words_pattern(words).search((text or "").lower()) is not None


def _screen_words(s: Step, before: bool) -> list[str] | None:
    """The labels and texts the screen listed (elements and visible text), None when it listed none."""
    out: list[str] = []
    known = False
    for key in ("elements", "visible_text"):
        v = _observed(s, key, before)
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list):
            continue
        known = True
        for e in v:
            if isinstance(e, Mapping):
                out.extend(str(e[k]) for k in ("label", "text", "content_desc") if e.get(k))
            elif e:
                out.append(str(e))
    return out if known else None


def _sign_in_wall(s: Step) -> bool:
    """Whether the screen after a step asks to sign in: its page's name, a password field, or the login state
    the phone reported; visible text counts only when it asks for both a sign-in and a password."""
    state = _observed(s, "login_state")
    if isinstance(state, str) and state.strip().lower() in SIGNED_OUT_STATES:
        return True
    if _has(s.page_after, SIGN_IN_WORDS):
        return True
    elements = _observed(s, "elements")
    if isinstance(elements, list) and any(
            isinstance(e, Mapping) and (e.get("password") is True or _has(str(e.get("type") or e.get("class") or ""),
                                                                         ("password",)))
            for e in elements):
        return True
    visible = _visible(s)
    return _has(visible, SIGN_IN_WORDS) and _has(visible, PASSWORD_WORDS)


def _reading_confidence(s: Step) -> float | None:
    """How sure the reading of the screen the step acted on was (the lowest confidence its observed state before
    the step gives, else the one after), None when none is given."""
    for before in (True, False):
        found = []
        for key in CONFIDENCE_KEYS:
            v = _observed(s, key, before)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= v <= 1.0:
                found.append(float(v))
        if found:
            return min(found)
    return None


def _vision_uncertain(s: Step) -> bool:
    """Whether the step acted on a screen read with low confidence, or its error says the screen was not
    recognised."""
    if s.is_error:
        return _has(s.error, VISION_ERROR_WORDS)
    conf = _reading_confidence(s)
    return conf is not None and conf < LOW_CONFIDENCE


def _missing(s: Step) -> bool:
    """The tool said its element was not there, or the label it tapped was on nothing the screen listed."""
    if s.is_error:
        return _has(s.error, MISSING_WORDS)
    if not s.target_label or s.point() is None or not _unchanged(s):
        return False
    words = _screen_words(s, before=True)
    label = s.target_label.strip().lower()
    return words is not None and not any(label in w.lower() for w in words)


def _text_lost(s: Step) -> bool:
    """Typed text that did not arrive: an input-method error, or the text absent from the next screen."""
    if s.tool not in TEXT_TOOLS or not s.text or len(s.text) < 2:
        return False
    visible = _visible(s)
    return _has(s.error, INPUT_ERROR_WORDS) or (visible is not None and s.text not in visible)


def _field(steps: list[Step], i: int) -> str | None:
    """The field a text step typed into: its own label, else the last tap before it on the same page (the
    tap that focused the field)."""
    s = steps[i]
    if s.target_label:
        return s.target_label
    for p in reversed(steps[:i]):
        if p.changed_page or (p.page_after or p.page_before) != (s.page_before or s.page_after):
            return None
        if p.point() is not None:
            return screen_label(p)
    return None


def _action(s: Step) -> str:
    """A tool and the label it aimed at: what identifies an action without effect."""
    label = screen_label(s)
    return f"{s.tool} {label}" if label else s.tool


def _where(s: Step, after: bool = False) -> tuple[str | None, str | None]:
    """The app (not a system screen, when the step saw another) and page a step happened on."""
    apps = [s.app_after, s.app_before] if after else [s.app_before, s.app_after]
    app = next((a for a in apps if a and not is_system_screen(a)), apps[0] or apps[1])
    return app, (s.page_after or s.page_before) if after else (s.page_before or s.page_after)


def _cause(kind: str, lesson: str, steps: list[Step], after: bool = False, subject: str | None = None) -> Cause:
    app, page = _where(steps[-1], after)
    return Cause(kind, lesson, list(steps), page, app, subject)


def _no_effect_run(steps: list[Step], i: int) -> list[Step]:
    """The taps at one point without effect that end at step ``i`` (just that step when it is no tap)."""
    run = [steps[i]]
    p = steps[i].point()
    if p is None:
        return run
    for s in reversed(steps[:i]):
        q = s.point()
        if q is None or not _unchanged(s) or abs(p[0] - q[0]) > NEAR_PX or abs(p[1] - q[1]) > NEAR_PX:
            break
        run.insert(0, s)
    return run


def _dialog_cause(s: Step, text: str, before: bool) -> Cause:
    page = (s.page_before if before else s.page_after) or "the page"
    return _cause("dialog_blocking", f"A dialog ({text[:60]}) was open on {page}: dismiss or answer it before the "
                                     "next action.", [s], after=not before, subject=text)


def _input_cause(steps: list[Step], i: int) -> Cause:
    s = steps[i]
    name = _field(steps, i)
    return _cause("input_not_accepted", f"Text typed with {s.tool} into {name or 'the field'} on "
                                        f"{s.page_before or 'this page'} did not reach it: check the field and the "
                                        "input (a value it refuses, the focus, the input method).", [s], subject=name)


def _missing_cause(s: Step) -> Cause:
    label = screen_label(s) if not s.is_error or s.target_label else None
    return _cause("element_missing", f"What {s.tool} aimed at ({label or 'its target'}) was not on "
                                     f"{s.page_before or 'this page'}: scroll, search or open the page that holds "
                                     "it first.", [s], subject=label)


def _vision_cause(s: Step) -> Cause:
    conf = _reading_confidence(s)
    how = f" (confidence {conf:.2f})" if conf is not None else ""
    return _cause("vision_uncertain", f"The screen {_action(s)} acted on at {s.page_before or 'this page'} was read "
                                      f"uncertainly{how}: take a fresh screenshot and read it again before acting on "
                                      "it.", [s], subject=_action(s))


def _unchanged_cause(steps: list[Step], i: int) -> Cause:
    run = _no_effect_run(steps, i)
    s = steps[i]
    times = f" {len(run)} times" if len(run) > 1 else ""
    return _cause("page_unchanged", f"{_action(s)} on {s.page_before or 'this page'}{times} left the screen "
                                    "unchanged: it has no effect here; look at the screen and choose another way.",
                  run, subject=_action(s))


def _at(steps: list[Step], i: int) -> Cause | None:
    """The symptom the events show at step ``i``, the one that explains the others first."""
    s = steps[i]
    if s.is_error:
        # The tool's own error says what happened (an error dialog after it only carries it).
        if _has(s.error, TIMEOUT_WORDS):
            return _cause("timeout", f"{s.tool} on {s.page_before or 'this page'} timed out: wait for the screen "
                                     "to settle and check it before repeating.", [s])
        if _has(s.error, MISSING_WORDS):
            return _missing_cause(s)
        if _text_lost(s):
            return _input_cause(steps, i)
        if _vision_uncertain(s):
            return _vision_cause(s)
        return None
    if i == len(steps) - 1 and _sign_in_wall(s):
        return _cause("sign_in_wall", f"{s.page_after or 'The screen'} asked to sign in: the task needs a "
                                      "signed-in account; sign in (or ask the user) first.", [s], after=True)
    shown = _dialogs(s, before=True)
    if shown and (_unchanged(s) or _text_lost(s)):
        return _dialog_cause(s, shown[0], before=True)
    if _text_lost(s):
        return _input_cause(steps, i)
    if _vision_uncertain(s) and (_missing(s) or (s.tool not in WAIT_TOOLS and _unchanged(s))
                                 or (i == len(steps) - 1 and s.tool not in WAIT_TOOLS)):
        # A misread screen explains the label that was not there, or the tap that hit nothing.
        return _vision_cause(s)
    if _missing(s):
        return _missing_cause(s)
    if s.tool not in WAIT_TOOLS and _unchanged(s):
        return _unchanged_cause(steps, i)
    opened = _dialogs(s)
    if opened and i == len(steps) - 1:
        return _dialog_cause(s, opened[0], before=False)
    return None


def primary_cause(steps: list[Step]) -> Cause | None:
    """The cause of a failure: the symptom at its failing step (the first error, else the last step; a run
    that ends waiting on a page that never changes timed out there). None when the step shows none."""
    at = failing_step(steps)
    if at is None:
        return None
    if not steps[at].is_error and steps[at].tool in WAIT_TOOLS:
        j = at
        while j >= 0 and steps[j].tool in WAIT_TOOLS:
            j -= 1
        waits = steps[j + 1:]
        if all(not w.changed_page and w.changed_screen is not True and not w.is_error for w in waits):
            page = waits[-1].page_after or waits[-1].page_before
            return _cause("timeout", f"{page or 'The page'} never changed while the run waited: it may not load; "
                                     "check the connection or go back and try another way.", waits, after=True)
        if j < 0:
            return None
        at = j
    return _at(steps, at)


def classify(steps: list[Step]) -> list[Cause]:
    """Every symptom the events of one episode show, each once (by kind and where), in the order they
    happened: the episode's failure_causes list (its failure memory is ``primary_cause``)."""
    causes: list[Cause] = []
    seen: set[tuple[str, str | None, str | None]] = set()

    def add(c: Cause | None) -> None:
        if c is not None and (c.kind, c.page, c.subject) not in seen:
            seen.add((c.kind, c.page, c.subject))
            causes.append(c)

    for i, s in enumerate(steps):
        if len(_no_effect_run(steps, i)) >= REPEATS and s.point() is not None and _unchanged(s):
            page = s.page_before or "this page"
            add(_cause("repeated_tap_no_effect", f"Tapping one point on {page} {REPEATS} times changed nothing: the "
                                                 "target is elsewhere or not tappable; look at the screen and choose "
                                                 "another way.", _no_effect_run(steps, i)[-REPEATS:],
                       subject=_action(s)))
        add(_at(steps, i) if s.has_result else None)
    return causes


def failing_step(steps: list[Step]) -> int | None:
    """Index of the step the failure happened at: the first error, else the last step."""
    for i, s in enumerate(steps):
        if s.is_error:
            return i
    return len(steps) - 1 if steps else None


def failure_cause(steps: list[Step], outcome: Any) -> Cause | None:
    """The primary cause of a failed run (``outcome``: the episode's): what the events show at its failing
    step, else that step as a tool error or unexplained; None for a success or a run that did not finish."""
    if getattr(outcome, "success", False) or outcome_unfinished(outcome, steps):
        return None
    found = primary_cause(steps)
    if found is not None:
        return found
    at = failing_step(steps)
    if at is None:
        return None
    s = steps[at]
    page = s.page_before or "this page"
    if s.is_error:
        return _cause("tool_error", f"{s.tool} on {page} failed with an error: check the current observation "
                                    "before repeating it.", [s], subject=s.tool)
    return _cause("unexplained", f"The task failed after {s.tool} on {page}: check the current observation before "
                                 "repeating this path; completion needs fresh evidence.", [s], subject=s.tool)
