"""Why a task failed, read off its events (the design's write strategy), not only the caller's words.

A failure is keyed by its cause: the runtime's phase, the tool of the step it happened at, the app and page
(as the phone showed them) and the symptom the events show there:

- ``repeated_tap_no_effect``: the same point tapped again and again, nothing changed;
- ``page_unchanged``: an action changed nothing the phone reports;
- ``dialog_blocking``: a dialog was open and the next step got nowhere (``observed_state["dialogs"]``);
- ``input_not_accepted``: typed text absent from the next ``visible_text``, or an input-method error;
- ``element_missing``: the tool said its element was not there, or the label tapped was on no element or
  text the screen listed, and nothing changed;
- ``sign_in_wall``: the task ended on a page asking to sign in (the page's name, a password field, the
  login state the phone reported);
- ``timeout``: a tool's error says it timed out;
- ``tool_error`` / ``unexplained``: at the failing step, when the events show none of the above.

The caller's free text is never part of the key (the failure memory keeps it as an example), so one cause
met by several goals is one failure mode. Each cause names the steps that show it, so the failure memory it
becomes carries those event ids as evidence. An unfinished run (interrupted, raised, or ending on a call that
never got its result) did not fail: it has no cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from memory_plane.lifecycle import content_hash

from ._path_agreement import mask
from ._steps import TEXT_TOOLS, Step, is_system_screen

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


@dataclass(frozen=True)
class CauseKey:
    """What makes two failures the same failure mode: phase, tool, app, page and symptom."""

    phase: str
    tool: str
    app: str | None
    page: str | None
    symptom: str

    def label(self) -> str:
        """``symptom: tool on page``, as the episode's failure_causes list and the memory's mode hold it."""
        return f"{self.symptom}: {self.tool} on {self.page or '?'}"

    def as_dict(self) -> dict[str, Any]:
        """The key as the failure memory stores it (``cause``)."""
        return asdict(self)

    @classmethod
    def of(cls, value: Any) -> CauseKey | None:
        """The key a failure memory stores, or None when it holds none (or not a whole one)."""
        if not isinstance(value, Mapping):
            return None
        phase, tool, symptom = value.get("phase"), value.get("tool"), value.get("symptom")
        if not (phase and tool and symptom):
            return None
        app, page = value.get("app"), value.get("page")
        return cls(str(phase), str(tool), str(app) if app is not None else None,
                   str(page) if page is not None else None, str(symptom))

    def failure_id(self, device_id: str) -> str:
        """The failure memory's id: a hash of the device and this key alone."""
        return f"fail_{content_hash(device_id, self.phase, self.tool, self.app, self.page, self.symptom)}"


@dataclass
class Cause:
    """One failure cause: its symptom, where it happened (the step's tool, observed app and page), the lesson
    in plain words and the steps that show it."""

    kind: str
    lesson: str
    steps: list[Step] = field(default_factory=list)
    page: str | None = None
    app: str | None = None

    @property
    def step(self) -> Step:
        """The step the cause happened at (the last that shows it)."""
        return self.steps[-1]

    def key(self, phase: str | None, app: str | None, target: str | None) -> CauseKey:
        """The cause's key: ``app`` as the caller resolved it (the app the phone showed the step in, never a
        launcher), the page with the episode's own target masked."""
        return CauseKey(phase or "unknown", self.step.tool, app, mask(self.page, target), self.kind)

    def trigger(self, key: CauseKey) -> dict[str, Any]:
        """The trigger of the failure memory (kind first; then where it happened)."""
        out = {"kind": self.kind, "tool": self.step.tool, "page": key.page, "app": self.app}
        return {k: v for k, v in out.items() if v}


def unfinished(phase: str | None, steps: list[Step]) -> bool:
    """Whether a run stopped rather than failed: interrupted, raised, or ending on a call with no result."""
    return phase in UNFINISHED_PHASES or bool(steps and not steps[-1].has_result)


def _unchanged(s: Step) -> bool:
    """The action changed nothing the phone reports: same page, and the same screen where it is known."""
    if s.changed_page or s.is_error or not s.has_result:
        return False
    same_obs = s.changed_screen is False
    return same_obs or (s.extra.get("dhash") is not None and s.extra.get("dhash") == s.extra.get("dhash_before"))


def _observed(s: Step, key: str, before: bool = False) -> Any:
    obs = s.extra.get("observed_before" if before else "observed") or {}
    return obs.get(key) if isinstance(obs, Mapping) else None


def _dialogs(s: Step) -> list[str]:
    d = _observed(s, "dialogs")
    if isinstance(d, str):
        return [d]
    return [str(x) for x in d if x] if isinstance(d, list) else []


def _visible(s: Step) -> str | None:
    vt = _observed(s, "visible_text")
    if isinstance(vt, list):
        return " ".join(str(x) for x in vt)
    return vt if isinstance(vt, str) else None


def _has(text: str | None, words: tuple[str, ...]) -> bool:
    low = (text or "").lower()
    return any(w in low for w in words)


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


def _missing(s: Step) -> bool:
    """The tool said its element was not there, or the label it tapped was on nothing the screen listed."""
    if s.is_error:
        return _has(s.error, MISSING_WORDS)
    if not s.target_label or s.point() is None or not _unchanged(s):
        return False
    words = _screen_words(s, before=True)
    label = s.target_label.strip().lower()
    return words is not None and not any(label in w.lower() for w in words)


def _where(s: Step, after: bool = False) -> tuple[str | None, str | None]:
    """The app (not a system screen, when the step saw another) and page a step happened on."""
    apps = [s.app_after, s.app_before] if after else [s.app_before, s.app_after]
    app = next((a for a in apps if a and not is_system_screen(a)), apps[0] or apps[1])
    return app, (s.page_after or s.page_before) if after else (s.page_before or s.page_after)


def _cause(kind: str, lesson: str, steps: list[Step], after: bool = False) -> Cause:
    app, page = _where(steps[-1], after)
    return Cause(kind, lesson, list(steps), page, app)


def classify(steps: list[Step]) -> list[Cause]:
    """The failure causes the events of one episode show, each once per key, in the order they happened."""
    causes: list[Cause] = []
    seen: set[tuple[str, str, str | None]] = set()

    def add(c: Cause) -> None:
        if (c.kind, c.step.tool, c.page) not in seen:
            seen.add((c.kind, c.step.tool, c.page))
            causes.append(c)

    run: list[Step] = []
    for i, s in enumerate(steps):
        page = s.page_before or "this page"
        # Repeated taps at one point with no effect.
        p = s.point()
        if p is not None and _unchanged(s):
            q = run[-1].point() if run else None
            if q is not None and abs(p[0] - q[0]) <= NEAR_PX and abs(p[1] - q[1]) <= NEAR_PX:
                run.append(s)
            else:
                run = [s]
            if len(run) == REPEATS:
                add(_cause("repeated_tap_no_effect",
                           f"Tapping one point on {page} {REPEATS} times changed nothing: the target is elsewhere "
                           "or not tappable; look at the screen and choose another way.", run))
        elif p is None or not _unchanged(s):
            run = []
        if s.is_error and _has(s.error, TIMEOUT_WORDS):
            add(_cause("timeout", f"{s.tool} on {page} timed out: wait for the screen to settle and check it "
                                  "before repeating.", [s]))
        if _missing(s):
            add(_cause("element_missing", f"What {s.tool} aimed at was not on {page}: scroll, search or open the "
                                          "page that holds it first.", [s]))
        # A dialog in the way: one was open after this step, and the next step got nowhere (or none came).
        dialogs = _dialogs(s)
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if dialogs and (nxt is None or not nxt.changed_page):
            add(_cause("dialog_blocking", f"A dialog ({dialogs[0][:60]}) was open on {s.page_after or 'the page'}: "
                                          "dismiss or answer it before the next action.", [s], after=True))
        # Typed text that did not arrive.
        if s.tool in TEXT_TOOLS and s.text and len(s.text) >= 2:
            visible = _visible(s)
            if _has(s.error, INPUT_ERROR_WORDS) or (visible is not None and s.text not in visible):
                add(_cause("input_not_accepted", f"Text typed with {s.tool} on {page} did not reach the field: "
                                                 "focus the field first, or check the input method.", [s]))
        # An action that changed nothing at all.
        if s.tool not in WAIT_TOOLS and s.point() is None and s.tool not in TEXT_TOOLS and _unchanged(s):
            add(_cause("page_unchanged", f"{s.tool} on {page} left the screen unchanged: it had no effect here.",
                       [s]))
    # A sign-in wall: the task ended on a screen asking to sign in.
    last = next((s for s in reversed(steps) if s.has_result), None)
    if last is not None and _sign_in_wall(last):
        add(_cause("sign_in_wall", f"{last.page_after or 'The screen'} asked to sign in: the task needs a signed-in "
                                   "account; sign in (or ask the user) first.", [last], after=True))
    # A single tap that changed nothing is worth naming when nothing else explains the failure.
    if not causes:
        for s in steps:
            if s.point() is not None and _unchanged(s):
                add(_cause("page_unchanged", f"{s.tool} on {s.page_before or 'this page'} left the screen "
                                             "unchanged: it had no effect here.", [s]))
                break
    return causes


def failing_step(steps: list[Step]) -> int | None:
    """Index of the step the failure happened at: the first error, else the last step."""
    for i, s in enumerate(steps):
        if s.is_error:
            return i
    return len(steps) - 1 if steps else None


def failure_causes(steps: list[Step], phase: str | None) -> list[Cause]:
    """The causes of a failed run: what the events show, else the failing step as a tool error or unexplained;
    none for a run that did not finish."""
    if unfinished(phase, steps):
        return []
    found = classify(steps)
    if found:
        return found
    at = failing_step(steps)
    if at is None:
        return []
    s = steps[at]
    page = s.page_before or "this page"
    if s.is_error:
        return [_cause("tool_error", f"{s.tool} on {page} failed with an error: check the current observation "
                                     "before repeating it.", [s])]
    return [_cause("unexplained", f"The task failed after {s.tool} on {page}: check the current observation before "
                                  "repeating this path; completion needs fresh evidence.", [s])]
