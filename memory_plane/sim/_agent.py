"""A scripted agent that uses MemoryPlane exactly as the on-device runtime would.

Without memory it explores (depth-first over visible elements, with a step limit). With a
MemoryContext it launches apps by the package an app profile learned, replays the best
procedure (adapting targets and scrolling for a moved item), honours failure cautions, and
still declares success only from the current observation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_plane.device_memory import AppProfile, Failure, Procedure, slot_mark

from .._retrieve_types import CurrentEnvironmentHints, MemoryRetrieveRequest
from ._world import APPS, PAGE_NAMES, PINYIN, Element, Result, SimPhone

TOOLS = ["touch_gesture", "mouse_click", "keyboard_text", "launch_app", "swipe", "back", "home"]
FINAL_WORDS = {"message", "add", "checkout", "pay"}


@dataclass
class Task:
    """A goal on the simulated phone and how the phone proves it is done."""

    goal: str
    kind: str  # chat | order | dark | font
    app: str
    target: str | None = None

    def check(self, phone: SimPhone) -> bool:
        """Ground truth: the phone's state satisfies the goal."""
        if self.kind == "chat":
            return phone.page == "wx_chat" and phone.arg == self.target
        if self.kind == "order":
            return phone.page == "mt_checkout" and self.target in phone.cart
        if self.kind == "dark":
            return phone.dark_mode
        if self.kind == "font":
            return phone.font_large
        return False


def tasks_for(language: str, round_no: int, n: int = 3, seed: int = 0) -> list[Task]:
    """n tasks of the three task types, with targets that differ by round (similar goals, not the same)."""
    zh = language.lower().startswith("zh")
    people_zh = ["张三", "李四", "赵六", "孙七", "周八", "吴九", "郑十"]
    people_en = ["Alice", "Bob", "Carol", "Dave", "Eve", "Frank", "Grace"]
    shops_zh = ["蜜雪冰城", "瑞幸咖啡", "喜茶", "奈雪"]
    shops_en = ["CoCo", "Tims", "CoCo", "Tims"]
    out: list[Task] = []
    for i in range(n):
        k = round_no * n + i + 3 * seed
        kind = ("chat", "order", "setting")[i % 3]
        if kind == "chat":
            who = (people_zh if zh else people_en)[(k // 3) % 7]
            goal = (f"打开微信，找到{who}，准备发消息" if zh
                    else f"Open WeChat, find {who} and get ready to send a message")
            out.append(Task(goal, "chat", "wechat", who))
        elif kind == "order":
            shop = (shops_zh if zh else shops_en)[(k // 3) % 4]
            goal = f"在美团点一杯{shop}" if zh else f"Order {shop} on Meituan"
            out.append(Task(goal, "order", "meituan", shop))
        else:
            dark = (k // 3) % 2 == 0
            if zh:
                goal = "打开设置，开启深色模式" if dark else "打开设置，调大字体大小"
            else:
                goal = "Turn on dark mode in Settings" if dark else "Make the font size larger in Settings"
            out.append(Task(goal, "dark" if dark else "font", "settings", None))
    return out


@dataclass
class TaskRun:
    """What happened in one task."""

    task: Task
    steps: int = 0
    declared_success: bool = False
    true_success: bool = False
    refs: list[str] = field(default_factory=list)
    used_refs: list[str] = field(default_factory=list)
    cautions: list[str] = field(default_factory=list)
    caution_failures: int = 0  # failures of a kind a caution shown for this task warned about
    stale_refs: int = 0
    episode_id: str | None = None
    errors: int = 0


@dataclass
class _Knowledge:
    package: str | None = None
    procedure: Procedure | None = None
    ascii_only: bool = False


class ScriptedAgent:
    """Runs tasks on a SimPhone, with or without a MemoryPlane."""

    def __init__(self, phone: SimPhone, plane: Any = None, *, step_limit: int = 40, device_id: str = "default") -> None:
        self.phone = phone
        self.plane = plane
        self.step_limit = step_limit
        self.device_id = device_id

    # -- one task -------------------------------------------------------------------

    def run(self, task: Task) -> TaskRun:
        """Do one task; commit its episode when a plane is attached."""
        phone = self.phone
        run = TaskRun(task)
        req = MemoryRetrieveRequest(input=task.goal, device_id=self.device_id, tool_names=TOOLS,
                                    current_hints=CurrentEnvironmentHints(
                                        language=phone.language, screen_width=phone.screen[0],
                                        screen_height=phone.screen[1]))
        know = _Knowledge()
        rec = None
        if self.plane is not None:
            memory = self.plane.retrieve(req)
            run.refs = memory.refs()
            know = self._read_memory(memory, task, run)
            rec = self.plane.new_episode_recorder(req, memory)
        self._rec, self._run, self._know = rec, run, know
        self.obs = phone.observe()
        try:
            self._open_app(task)
            if know.procedure is not None and not self._met(task):
                self._replay(task, know.procedure)
            if not self._met(task):
                self._explore(task, set(), 0)
        except _StepLimit:
            pass
        # Completion needs the current observation; memory never proves it.
        run.declared_success = self._met(task)
        run.true_success = task.check(phone)
        if rec is not None:
            ep = rec.finish(success=run.declared_success, final_state=self.obs.get("page"),
                            completion_reason="the current screen shows the goal state" if run.declared_success
                            else None,
                            failure_phase=None if run.declared_success else
                            ("max_iterations" if run.steps >= self.step_limit else "state_mismatch"),
                            failure_reason=None if run.declared_success else "goal state not reached",
                            entities=[task.target] if task.target else ())
            run.episode_id = ep.id
            self.plane.commit_episode(ep)
            self.plane.flush(30)
        return run

    def _read_memory(self, memory: Any, task: Task, run: TaskRun) -> _Knowledge:
        know = _Knowledge()
        get = self.plane.device.get
        lang = self.phone.language.lower()
        screen = f"{self.phone.screen[0]}x{self.phone.screen[1]}"
        for hit in memory.common.app_profiles:
            item = get(hit.id)
            if isinstance(item, AppProfile) and item.app_id == task.app and item.packages:
                know.package = item.packages[0]
                run.used_refs.append(hit.id)
                break
        for hit in memory.common.procedures:
            item = get(hit.id)
            if not isinstance(item, Procedure):
                continue
            appl = item.applicability
            if str(appl.get("language", lang)).lower() != lang or appl.get("screen", screen) != screen:
                run.stale_refs += 1  # shown as applicable though made under another environment
            if know.procedure is None and item.app_id == task.app:
                know.procedure = item
                run.used_refs.append(hit.id)
        for hit in memory.common.calibration_notes:
            anchor = get(hit.id) if hit.id.startswith("ui_") else None
            appl = anchor.applicability if anchor is not None else {}
            if anchor is not None and (str(appl.get("language", lang)).lower() != lang
                                       or appl.get("screen", screen) != screen):
                run.stale_refs += 1  # screen text and a position from another UI language or screen
        for hit in memory.common.failure_modes:
            run.cautions.append(hit.id)
            item = get(hit.id) if hit.id.startswith("fail_") else None
            if isinstance(item, Failure) and item.trigger.get("input_contains_non_ascii"):
                know.ascii_only = True
                run.used_refs.append(hit.id)
        return know

    # -- acting ---------------------------------------------------------------------

    def act(self, tool: str, args: dict[str, Any], label: str | None = None, *, narration: str | None = None) -> Result:
        """One tool call, recorded as the runtime would: what it said it does, and the label it targets."""
        if self._run.steps >= self.step_limit:
            raise _StepLimit
        self._run.steps += 1
        if self._rec is not None:
            self._rec.tool_call(tool, args, content=narration or (f"tap {label!r}" if label else None),
                                target_label=label)
        res = self.phone.call(tool, args)
        if self._rec is not None:
            self._rec.tool_result(tool, is_error=not res.ok, output=res.output, error=res.error,
                                  screenshot=res.screenshot or None, observed_state=res.observation)
        if not res.ok:
            self._run.errors += 1
            if tool == "keyboard_text" and self._know.ascii_only:
                self._run.caution_failures += 1
        self.obs = res.observation
        return res

    def tap(self, e: Element) -> Result:
        """Tap an element's centre."""
        x, y = e.center
        return self.act("mouse_click", {"x": x, "y": y}, e.label)

    def type_text(self, text: str) -> Result:
        """Type, falling back to pinyin when the input method refuses (unless a caution said so first)."""
        if self._know.ascii_only and not text.isascii():
            text = PINYIN.get(text, text)
        res = self.act("keyboard_text", {"text": text})
        if not res.ok and not text.isascii() and text in PINYIN:
            res = self.act("keyboard_text", {"text": PINYIN[text]})
        return res

    def find(self, label: str | None) -> Element | None:
        """An element of the current screen by its label."""
        if not label:
            return None
        return next((e for e in self.phone.elements() if e.label == label), None)

    # -- goal -------------------------------------------------------------------------

    def _met(self, task: Task) -> bool:
        o = self.obs
        zh = self.phone.zh
        if task.kind == "chat":
            return str(o.get("page", "")).startswith(PAGE_NAMES["wx_chat"][0 if zh else 1]) and \
                o.get("title") == task.target
        if task.kind == "order":
            return str(o.get("page", "")) == PAGE_NAMES["mt_checkout"][0 if zh else 1] and \
                task.target in (o.get("order") or [])
        if task.kind == "dark":
            return bool(o.get("dark_mode"))
        if task.kind == "font":
            return bool(o.get("font_large"))
        return False

    # -- opening the app -----------------------------------------------------------------

    def _in_app(self, task: Task) -> bool:
        return self.obs.get("package") == APPS[task.app][2]

    def _handle_dialog(self) -> None:
        if self.phone.page == "wx_perm":
            allow = self.find(self.phone.label("allow"))
            if allow:
                self.tap(allow)

    def _open_app(self, task: Task) -> None:
        pkg = self._know.package
        if pkg and self.act("launch_app", {"app": pkg}, narration=f"launch {self.phone.app_name(task.app)}").ok:
            self._handle_dialog()
            return
        name = self.phone.app_name(task.app)
        self.act("touch_gesture", {"type": "home"}, narration="home")
        for _ in range(2):
            icon = self.find(name)
            if icon is not None:
                self.tap(icon)
                self._handle_dialog()
                return
            self.act("swipe", {"direction": "left"}, narration="next launcher page")
        self.act("touch_gesture", {"type": "home"}, narration="home")
        self.type_text(PINYIN.get(APPS[task.app][0], APPS[task.app][1].lower()))
        icon = self.find(name)
        if icon is not None:
            self.tap(icon)
            self._handle_dialog()

    # -- replaying a procedure ---------------------------------------------------------------

    def _replay(self, task: Task, proc: Procedure) -> None:
        if self._rec is not None:
            self._rec.memory_used(proc.id, note="replaying its steps")  # as a runtime says what it follows
        old = proc.steps_target or (proc.targets[-1] if proc.targets else None)
        typed_old: list[str] = []

        def subst(text: str | None) -> str | None:
            if text is None or old is None or task.target is None:
                return text
            if text == old:
                return task.target
            if text == PINYIN.get(old, old.lower()):
                return PINYIN.get(task.target, task.target)
            return text

        def page_of(st: Any) -> str | None:
            if st.page_name and old and task.target:
                return str(st.page_name).replace(old, task.target)
            return st.page_name

        # The steps with this task's values in the procedure's slots (the substitution above stays for what
        # is not a slot: a value typed as pinyin, a page named after the old target).
        steps = [st for st in proc.steps_for_goal(task.goal) if st.tool not in ("launch_app", "home", "back")]
        if not (task.target and old) and task.goal not in proc.goal_examples and steps:
            steps = steps[:-1]  # another goal of the same app: reuse the way there, not its final action
        i = 0
        while i < len(steps):
            if self._met(task) or not self._in_app(task):
                return
            st = steps[i]
            here = str(self.obs.get("page"))
            if page_of(st) != here:
                # Sync to the current screen: skip steps of screens that did not appear this time
                # (a dialog already answered), or give up on the procedure if none matches.
                later = next((j for j in range(i + 1, len(steps)) if page_of(steps[j]) == here), None)
                if later is None:
                    return
                i = later
                continue
            if st.tool == "keyboard_text" and st.text:
                # A typed query is about this task's target, whatever the old episode searched for.
                typed_old.append(st.text)
                text = task.target or subst(st.text) or st.text
                if st.slot and text == slot_mark(st.slot):
                    return  # a value this goal does not give: explore from here rather than type its name
                if not self.type_text(text).ok:
                    return
            elif st.tool == "swipe":
                if not (task.target and self.find(task.target)):  # scroll only when the item is not in view
                    self.act("swipe", {"direction": st.action or "up"}, narration=st.narration or st.description)
            elif st.tool in ("mouse_click", "touch_gesture", "tap"):
                shown = st.target_label or st.description
                label = task.target if shown in typed_old and task.target else subst(shown)
                el = self.find(label)
                tries = 0
                while el is None and self.phone.page == "wx_contacts" and tries < 6:
                    # The item may sit further down, or above if an earlier scroll went past it.
                    self.act("swipe", {"direction": "up" if tries < 3 else "down"}, narration="scroll the list")
                    el = self.find(label)
                    tries += 1
                if el is None:
                    return  # the screen no longer matches the procedure: explore from here
                self.tap(el)
            i += 1

    # -- exploring ------------------------------------------------------------------------

    def _ordered(self, task: Task) -> list[Element]:
        els = [e for e in self.phone.elements() if e.kind != "input" and e.key != "deny"
               and not e.key.startswith("app:")]
        wanted = {"dark": "dark", "font": "font"}.get(task.kind)

        def rank(e: Element) -> int:
            if task.target and e.label == task.target:
                return 0
            if e.key == wanted or e.key in FINAL_WORDS:
                return 1
            return 2

        return sorted(els, key=rank)

    def _explore(self, task: Task, visited: set[str], depth: int) -> bool:
        if self._met(task):
            return True
        page = str(self.obs.get("page"))
        if page in visited or depth > 6:
            return False
        visited.add(page)
        if task.target and self.phone.page == "wx_contacts":
            # A long list: scroll for the name before opening every entry on the way.
            for _ in range(4):
                if self.find(task.target) is not None:
                    break
                self.act("swipe", {"direction": "up"}, narration="scroll the list")
        search = [e for e in self.phone.elements() if e.kind == "input" and e.key in ("search", "search_box")]
        if search and task.target and self.phone.typed == "":
            res = self.type_text(task.target)
            if res.ok and str(self.obs.get("page")) != page and self._explore(task, visited, depth + 1):
                return True
            if self._met(task):
                return True
        for e in self._ordered(task):
            current = self.find(e.label)
            if current is None:
                continue
            before = str(self.obs.get("page"))
            self.tap(current)
            if self._met(task):
                return True
            after = str(self.obs.get("page"))
            if after != before:
                if self._explore(task, visited, depth + 1):
                    return True
                if str(self.obs.get("page")) != before:
                    self.act("back", {}, narration="back")
        return False


class _StepLimit(Exception):
    """The task used its step budget."""


def no_memory_steps(phone: SimPhone, task: Task, step_limit: int = 40) -> TaskRun:
    """Run a task without memory on a copy of the phone (the baseline), leaving the phone untouched."""
    import copy

    clone = copy.deepcopy(phone)
    clone.render_images = False
    return ScriptedAgent(clone, None, step_limit=step_limit).run(task)


__all__ = ["TOOLS", "ScriptedAgent", "Task", "TaskRun", "no_memory_steps", "tasks_for"]

