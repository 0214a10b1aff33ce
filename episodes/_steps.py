"""Pair tool calls with their results and read app, page, coordinates and text off them."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._sanitize import REDACTED
from ._tool_inputs import parse_tool_input, tool_coords, tool_text

TEXT_TOOLS = ("keyboard_text", "type", "input_text", "type_text", "enter_text")
"""Tools that type text (what lessons about input read)."""
MEMORY_TOOLS = frozenset({"save_memory", "recall_memory", "forget_memory", "recall_device_memory", "inspect_episode",
                          "recall_session_chunks", "recall_history"})
"""The model's own memory tools: calls to them act on memory, not on the phone, and teach no device lesson."""


@dataclass
class Step:
    """One tool call with its result and the observed state before and after it."""

    index: int
    tool: str
    tool_input: dict[str, Any]
    call_event: str | None = None
    result_event: str | None = None
    content: str | None = None
    coords: str | None = None
    text: str | None = None
    target_label: str | None = None
    app_before: str | None = None
    page_before: str | None = None
    app_after: str | None = None
    page_after: str | None = None
    package_after: str | None = None
    is_error: bool = False
    error: str | None = None
    screen: tuple[int, int] | None = None
    has_result: bool = False
    obs_before: str | None = None
    obs_after: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def changed_screen(self) -> bool | None:
        """Whether the observation changed across the call (None when either side is unknown)."""
        if self.obs_before is None or self.obs_after is None:
            return None
        return self.obs_before != self.obs_after

    @property
    def event_ids(self) -> list[str]:
        """Ids of the call and result events."""
        return [e for e in (self.call_event, self.result_event) if e]

    @property
    def changed_page(self) -> bool:
        """True when the observed app/page after the call differs from before it."""
        return bool(self.page_after) and (self.app_before, self.page_before) != (self.app_after, self.page_after)

    def point(self) -> tuple[float, float] | None:
        """The tap point of a single-point action (None for swipes and non-coordinate actions)."""
        if not self.coords or "->" in self.coords:
            return None
        try:
            xs, ys = self.coords.split(",")
            return float(xs.split("=")[1]), float(ys.split("=")[1])
        except (ValueError, IndexError):
            return None


def _obs_app(obs: Mapping[str, Any] | None) -> tuple[str | None, str | None, str | None]:
    if not isinstance(obs, Mapping):
        return None, None, None
    app = obs.get("app") or obs.get("app_name")
    page = obs.get("page") or obs.get("page_name") or obs.get("activity")
    pkg = obs.get("package")
    return (str(app) if app else None, str(page) if page else None, str(pkg) if pkg else None)


def _signature(obs: Any) -> str | None:
    if not isinstance(obs, Mapping):
        return None
    return json.dumps(obs, sort_keys=True, ensure_ascii=False, default=str)


def pair_steps(events: Iterable[Mapping[str, Any]]) -> list[Step]:
    """Steps of an episode: each call takes app/page from the latest observation before it."""
    steps: list[Step] = []
    pending: list[Step] = []
    last_app = last_page = None
    last_sig: str | None = None
    last_dhash: str | None = None
    last_obs: Mapping[str, Any] | None = None
    for ev in events:
        etype = ev.get("type")
        if etype == "tool_call":
            name = str(ev.get("tool_name") or "").strip()
            if not name:
                continue  # an empty action teaches nothing
            ti = parse_tool_input(ev.get("tool_input"))
            label = ev.get("target_label") or ti.get("target_label") or ti.get("label")
            text = tool_text(ti)
            sensitive = bool(ev.get("sensitive")) or text == REDACTED
            if sensitive:
                text = label = None  # typed into a password field: what was typed teaches nothing, and is not known
            step = Step(
                index=len(steps) + 1, tool=name, tool_input=ti, call_event=ev.get("event_id"),
                content=str(ev["content"]) if ev.get("content") else None, coords=tool_coords(ti), text=text,
                target_label=str(label) if label else None,
                app_before=ev.get("app") or last_app, page_before=ev.get("page") or last_page,
                obs_before=last_sig,
            )
            if sensitive:
                step.extra["sensitive"] = True  # something was typed, though what is not known
            if last_dhash is not None:
                step.extra["dhash_before"] = last_dhash
            if last_obs is not None:
                step.extra["observed_before"] = last_obs
            steps.append(step)
            pending.append(step)
        elif etype == "tool_result":
            name = str(ev.get("tool_name") or "").strip()
            match = next((s for s in pending if s.tool == name), pending[0] if pending else None)
            app, page, pkg = _obs_app(ev.get("observed_state"))
            if app:
                last_app = app
            if page:
                last_page = page
            sig = _signature(ev.get("observed_state"))
            if sig is not None:
                last_sig = sig
            if match is None:
                continue
            match.obs_after = sig
            pending.remove(match)
            match.has_result = True
            match.result_event = ev.get("event_id")
            match.is_error = bool(ev.get("is_error"))
            match.error = str(ev["error"]) if ev.get("error") else None
            match.app_after, match.page_after, match.package_after = app or last_app, page or last_page, pkg
            obs = ev.get("observed_state")
            if isinstance(obs, Mapping):
                match.extra["observed"] = obs  # dialogs, visible text, input method: what failure causes read
                last_obs = obs
            if isinstance(ev.get("dhash"), str):
                match.extra["dhash"] = last_dhash = ev["dhash"]
            w, h = ev.get("width"), ev.get("height")
            if isinstance(w, int) and isinstance(h, int) and w > 0 and h > 0:
                match.screen = (w, h)
        elif etype == "verifier_decision":
            app, page, _ = _obs_app(ev.get("observed_state"))
            last_app, last_page = app or last_app, page or last_page
    return steps


SYSTEM_SCREEN_WORDS = ("launcher", "systemui", "system ui", "home screen", "桌面", "主屏幕")
"""Words that mark a system screen (a launcher, the status bar) in an app name or package."""


def is_system_screen(app: Any, package: Any = None) -> bool:
    """Whether an observed app is a system screen a task passes through rather than the app it is in."""
    text = " ".join(str(v).lower() for v in (app, package) if isinstance(v, str))
    return any(w in text for w in SYSTEM_SCREEN_WORDS)


def device_steps(steps: list[Step]) -> list[Step]:
    """The steps that acted on the phone (the model's memory tools left out)."""
    return [s for s in steps if s.tool not in MEMORY_TOOLS]


def screen_label(s: Step) -> str | None:
    """What the phone showed at a step's target: the label the runtime read off the screen (the call's
    ``target_label``/``label``), else the element whose bounds contain the tap, if the result listed
    elements. Never the runtime's narration (``content``)."""
    if s.target_label:
        return s.target_label
    pt = s.point()
    obs = s.extra.get("observed_before") or {}
    elements = obs.get("elements") if isinstance(obs, Mapping) else None
    if pt is None or not isinstance(elements, list):
        return None
    best: tuple[float, str] | None = None
    for e in elements:
        if not isinstance(e, Mapping):
            continue
        b, label = e.get("bounds"), e.get("label") or e.get("text")
        if not isinstance(b, (list, tuple)) or len(b) != 4 or not isinstance(label, str) or not label.strip():
            continue
        try:
            x0, y0, x1, y1 = (float(v) for v in b)
        except (TypeError, ValueError):
            continue
        if x0 <= pt[0] <= x1 and y0 <= pt[1] <= y1:
            area = (x1 - x0) * (y1 - y0)
            if best is None or area < best[0]:
                best = (area, label.strip())  # whole: only a rendered line is bounded
    return best[1] if best else None


COMMIT_WORDS = (
    "save", "done", "ok", "okay", "confirm", "send", "submit", "apply", "log in", "login", "sign in", "sign up",
    "register", "create", "post", "publish", "update", "accept", "finish", "yes",
    "保存", "完成", "确定", "确认", "发送", "提交", "应用", "登录", "登入", "注册", "创建", "发布", "更新",
    "好的", "是", "同意",
    "guardar", "enviar", "aceptar", "listo", "enregistrer", "envoyer", "valider", "terminé", "speichern",
    "senden", "fertig", "bestätigen", "salvar", "concluído",
    "保存する", "送信", "完了", "저장", "보내기", "확인", "완료",
)
"""Labels that commit what was entered (a secondary signal: what the screens show decides first)."""


def _norm_label(label: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", label).casefold().split())


def is_commit_label(label: str | None) -> bool:
    """Whether a tapped label reads as a commit (Save, OK, LOG IN, 保存, 确定 ...): the whole label, or its
    first words (``Save changes``), in the multilingual word list."""
    if not label:
        return False
    text = _norm_label(label).strip(" .!…>→»")
    for w in COMMIT_WORDS:
        if text == w:
            return True
        if w.isascii():
            if text.startswith(w + " ") and len(text.split()) <= len(w.split()) + 2:
                return True
        elif text.startswith(w) and len(text) <= len(w) + 2:
            return True
    return False


def is_typing(s: Step) -> bool:
    """Whether a step typed something (a password field's step too, though its text is not kept)."""
    return s.tool in TEXT_TOOLS or s.text is not None or bool(s.extra.get("sensitive"))


def _is_scroll(s: Step) -> bool:
    return "swipe" in s.tool.lower() or "scroll" in s.tool.lower() or bool(s.coords and "->" in s.coords) or (
        isinstance(s.tool_input.get("direction"), str))


def entered(s: Step) -> bool:
    """Whether a step entered or chose something: it typed, it tapped a commit label, or it changed what its
    page shows without leaving it (a toggle, a selection, a check), not by scrolling."""
    if s.is_error:
        return False
    if is_typing(s) or is_commit_label(screen_label(s)):
        return True
    same_page = s.page_after is not None and (s.app_after, s.page_after) == (s.app_before, s.page_before)
    return same_page and s.changed_screen is True and not _is_scroll(s)


def effective_path(steps: list[Step]) -> list[Step]:
    """The complete path without what changed nothing: a loop back to an earlier screen is cut only when
    nothing was entered or committed on the way (no typing, no choice, no commit, and the screen came back
    as it was left); a create or edit task that ends where it started keeps its work. A tap that changed
    nothing is dropped when it names nothing or is tapped again at once (``_prepares``), and the last step (the
    one that completes the task) is never cut."""
    path: list[Step] = []
    seen: dict[tuple[str | None, str | None], int] = {}  # page -> where the path stood on it
    left: dict[tuple[str | None, str | None], str | None] = {}  # page -> what it showed when the path left it
    for i, s in enumerate(steps):
        last = i == len(steps) - 1
        before = (s.app_before, s.page_before)
        if before[1] is not None and before not in seen:
            seen[before] = len(path)
        after = (s.app_after, s.page_after)
        # Same page and, when the observation is known, nothing on it changed either (a toggle or an
        # "add to cart" changes the screen without changing the page, and is kept).
        unchanged = s.changed_screen is False or (s.changed_screen is None and after == before)
        noop = s.has_result and after == before and not is_typing(s) and after[1] is not None and unchanged
        if noop and not last and not _prepares(s, steps[i + 1]):
            continue
        if after[1] is not None and after != before:
            if before[1] is not None:
                left[before] = s.obs_before
            if after in seen:
                cut = seen[after]
                then = left.get(after)
                # Back where we were: the loop changed nothing when nothing in it entered or committed
                # anything and the page shows what it showed when the path left it.
                changed = (any(entered(x) for x in (*path[cut:], s))
                           or (then is not None and s.obs_after is not None and s.obs_after != then))
                if not changed and not last:
                    del path[cut:]
                    seen = {k: v for k, v in seen.items() if v < cut}
                    seen[after] = len(path)
                    continue
                path.append(s)
                seen[after] = len(path)
                continue
        path.append(s)
    return path


def _prepares(s: Step, nxt: Step) -> bool:
    """Whether a tap that changed nothing the record shows is still part of the work: it names what it tapped
    (a field focused before typing, "Select all" before acting on the selection) and the next step is not the
    same tap again (a retry of a tap that did nothing)."""
    label = screen_label(s)
    if not label or is_typing(s):
        return False
    return not (nxt.tool == s.tool and screen_label(nxt) == label)


def _xy(coords: str | None) -> tuple[float, float] | None:
    # "x=12, y=34" as recorded by the recorder; a swipe ("->") has no single point.
    if not coords or "->" in coords:
        return None
    try:
        xs, ys = coords.split(",")
        return float(xs.split("=")[1]), float(ys.split("=")[1])
    except (ValueError, IndexError):
        return None


def coords_close(a: str | None, b: str | None, tolerance: float = 48.0) -> bool:
    """Whether two recorded tap positions are within ``tolerance`` pixels on both axes."""
    pa, pb = _xy(a), _xy(b)
    return pa is not None and pb is not None and abs(pa[0] - pb[0]) <= tolerance and abs(pa[1] - pb[1]) <= tolerance


def step_action(s: Step) -> str | None:
    """The short action word of a step (a button, direction, app or key), if its input names one."""
    for key in ("type", "button", "direction", "app", "app_name", "action", "key"):
        v = s.tool_input.get(key)
        if isinstance(v, str) and v:
            return v  # whole: a launch name or a label is a target, only its rendered line is bounded
    return None


def step_note(s: Step) -> str | None:
    """What a step led to: its error, or the app/page it reached."""
    if s.is_error:
        return f"error: {s.error or 'tool error'}"[:120]
    if s.app_after or s.page_after:
        return "page=" + "/".join(x for x in (s.app_after, s.page_after) if x)  # an unknown side is left out, not "?"
    return None
