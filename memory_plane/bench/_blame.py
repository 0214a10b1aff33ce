"""The blame scenario of `bench lessons`: on the simulated phone, which memories a failure demotes.

Scripted, through the runtime's public path (``ScriptedAgent``: retrieve, recorder, ``commit_episode``):

1. build: two rounds of the demo's task types (chat, order, a setting) teach memories of every kind;
2. failures unrelated to what was learned: two tasks in apps the device has no lesson for (an alarm in
   the clock, an event in the calendar) that the agent cannot do;
3. failures caused by a memory: WeChat's contact search returns nothing (the phone, not the memory, is
   perturbed); the agent follows its chat procedure, types the name and finds no result, twice;
4. later successes: search works again; three rounds of the three task types.

Ground truth is the design's rule (being shown is not being used), applied to each failed
episode's own events: a memory *led* to the failure when it is the procedure the agent followed and
whose steps it executed, a navigation rule whose transition the episode took and that led elsewhere, a
calibration while a tap had no effect, or a UI anchor whose label was missing from its page when the
episode was there. Every other memory that existed before the episode did not lead to it.

A demotion, read from the item files and ``lifecycle/conflicts.jsonl`` around each failed episode: an
item that was active and is not, whose confidence fell, or that a new conflict line names with a
decision other than ``active``. A demoted memory is restored when, after the later successes, it is
active again (and, for the stricter count, back to at least its confidence before the first demotion).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_plane.device_memory import ITEM_TYPES, Calibration, Navigation, UiAnchor, type_of_id
from memory_plane.episodes import Step, coords_close, pair_steps

from ..sim import Element, Result, ScriptedAgent, SimPhone, Task, tasks_for
from ._lessons import audit_traces, traced_summary
from ._util import r, temp_root

REPLAY_TOOLS = frozenset({"launch_app", "home", "back"})  # steps the agent's replay skips


@dataclass
class _Phone(SimPhone):
    """The simulated phone with one fault that can be switched on: WeChat's contacts do not load (the
    contact list is empty and the contact search finds nobody); chats, tabs and other apps still work."""

    contacts_down: bool = False
    missed_taps: int = 0  # taps that hit no element: what a calibration would be to blame for

    def call(self, tool: str, args: dict[str, Any]) -> Result:
        """Run one tool, counting taps that hit nothing (the scenario's truth about coordinates)."""
        res = super().call(tool, args)
        if res.output == "tapped nothing":
            self.missed_taps += 1
        return res

    def _search_page(self, kind: str, names: list[str]) -> list[Element]:
        if self.contacts_down and kind == "contact":
            return [Element("search_box", self.label("search_box"), self._box(0.05, 0.05, 0.9, 0.05), "input")]
        return super()._search_page(kind, names)

    def elements(self) -> list[Element]:
        """The page's elements; with the fault on, the contact list shows only its tabs."""
        els = super().elements()
        if self.contacts_down and self.page == "wx_contacts":
            return [e for e in els if not e.key.startswith("contact:")]
        return els


def snapshot(plane: Any) -> dict[str, tuple[str, str, float]]:
    """Every device item as its file says now: id -> (type, status, confidence)."""
    out = {p.id: ("device_profile", p.status, float(p.confidence)) for p in plane.device.profiles.all()}
    for t in ITEM_TYPES:
        if t == "device_profile":
            continue
        for read in plane.device.collection(t).iter_items():
            if read.record is not None:
                out[read.record.id] = (t, read.record.status, float(read.record.confidence))
    return out


def demotions(before: dict[str, tuple[str, str, float]], after: dict[str, tuple[str, str, float]],
              conflict_lines: list[dict[str, Any]]) -> set[str]:
    """Items that existed before and were demoted: left active, lost confidence, or were named by a
    conflict decision other than ``active``."""
    out = set()
    for iid, (_, status, conf) in before.items():
        now = after.get(iid)
        if now is None:
            continue
        if (status == "active" and now[1] != "active") or now[2] < conf - 1e-9:
            out.add(iid)
    for line in conflict_lines:
        if str(line.get("decision")) != "active":
            out |= {str(i) for i in line.get("ids") or [] if str(i) in before}
    return out


def _visible(s: Step) -> list[str] | None:
    obs = s.extra.get("observed")
    text = obs.get("visible_text") if isinstance(obs, dict) else None
    return [str(t) for t in text] if isinstance(text, list) else None


def culprits(plane: Any, steps: list[Step], followed: str | None, existing: set[str],
             missed_taps: int) -> tuple[set[str], set[str]]:
    """The memories that led to a failed episode by the design's rule, applied to its steps; and the UI
    anchors left undecided (their label was missing from their page, though the agent may not have
    looked for it), which count neither as collateral nor as led."""
    led: set[str] = set()
    undecided: set[str] = set()
    if followed:
        proc = plane.device.get(followed)
        wanted = {(st.tool, st.page_name) for st in getattr(proc, "steps", []) if st.tool not in REPLAY_TOOLS}
        if any((s.tool, s.page_before) in wanted for s in steps):
            led.add(followed)  # its steps were executed, and the task failed on its path
    for iid in existing:
        if type_of_id(iid) not in ("navigation", "calibration", "ui_anchor"):
            continue
        item = plane.device.get(iid)
        if isinstance(item, Navigation):
            for s in steps:
                same = (s.app_before, s.page_before, s.tool) == (item.from_app, item.from_page, item.tool) and (
                    coords_close(s.coords, item.coords) or (item.text is not None and s.text == item.text))
                if same and s.has_result and (s.app_after, s.page_after) != (item.to_app, item.to_page):
                    led.add(iid)
        elif isinstance(item, Calibration) and missed_taps:
            led.add(iid)  # a tap landed on nothing: the coordinates may be to blame
        elif isinstance(item, UiAnchor):
            for s in steps:
                seen = _visible(s)
                if (s.app_after, s.page_after) == (item.app_name, item.page_name) and seen is not None and (
                        item.label not in seen):
                    undecided.add(iid)
    return led, undecided - led


def _tasks(zh_goals: list[tuple[str, str, str]]) -> list[Task]:
    return [Task(goal, kind, app, None) for goal, kind, app in zh_goals]


UNRELATED = [("打开时钟，设一个早上7点的闹钟", "alarm", "clock"),
             ("打开日历，添加明天下午3点的会议", "event", "calendar")]
CAUSED = [Task("打开微信，找到孙七，准备发消息", "chat", "wechat", "孙七"),
          Task("打开微信，找到周八，准备发消息", "chat", "wechat", "周八")]


def run_scenario(short: bool = False) -> dict[str, Any]:
    """Build, fail (unrelated, then caused), recover; demotions against the scenario's ground truth."""
    from .._plane import MemoryPlane

    phone = _Phone(render_images=True)
    rounds_after = 2 if short else 3
    out: dict[str, Any] = {}
    with temp_root() as root, MemoryPlane.open(root) as plane:
        agent = ScriptedAgent(phone, plane)
        build = [t for no in (0, 1) for t in tasks_for("zh-CN", no)]
        out["build_tasks"] = len(build)
        out["build_succeeded"] = sum(1 for t in build if agent.run(t).true_success)
        failures: list[dict[str, Any]] = []
        first_conf: dict[str, float] = {}
        for label, task in [*(("unrelated", t) for t in _tasks(UNRELATED)), *(("caused", t) for t in CAUSED)]:
            phone.contacts_down = label == "caused"
            phone.missed_taps = 0
            before = snapshot(plane)
            lines_before = len(plane.device.conflicts.records())
            run = agent.run(task)
            after = snapshot(plane)
            lines = plane.device.conflicts.records()[lines_before:]
            steps = pair_steps(plane.episodes.events(run.episode_id).records) if run.episode_id else []
            followed = next((i for i in run.used_refs if type_of_id(i) == "procedure"), None)
            guilty, undecided = culprits(plane, steps, followed, set(before), phone.missed_taps)
            demoted = demotions(before, after, lines)
            for iid in demoted:
                first_conf.setdefault(iid, before[iid][2])
            failures.append({
                "goal": task.goal, "kind": label, "failed": not run.true_success, "shown": len(run.refs),
                "followed_procedure": followed, "led_to_failure": sorted(guilty),
                "undecided": sorted(undecided), "demoted_led": sorted(demoted & guilty),
                "demoted_undecided": sorted(demoted & undecided),
                "demoted_collateral": sorted(demoted - guilty - undecided),
                "collateral_by_type": _by_type(demoted - guilty - undecided)})
        phone.contacts_down = False
        later = [t for no in range(2, 2 + rounds_after) for t in tasks_for("zh-CN", no)]
        out["later_tasks"] = len(later)
        out["later_succeeded"] = sum(1 for t in later if agent.run(t).true_success)
        final = snapshot(plane)
        traces = audit_traces(plane)
    demoted_any = sorted(first_conf)
    back = [i for i in demoted_any if i in final and final[i][1] == "active"]
    full = [i for i in back if final[i][2] >= first_conf[i] - 1e-9]
    collateral = sum(len(f["demoted_collateral"]) for f in failures)
    led = sum(len(f["led_to_failure"]) for f in failures)
    out.update({
        "failures": failures,
        "failures_that_failed": sum(1 for f in failures if f["failed"]),
        "collateral_demotions": collateral,
        "collateral_by_type": _by_type([i for f in failures for i in f["demoted_collateral"]]),
        "led_to_failure": led,
        "led_demoted": sum(len(f["demoted_led"]) for f in failures),
        "procedure_followed_demoted": sum(1 for f in failures if f["followed_procedure"]
                                          and f["followed_procedure"] in f["demoted_led"]),
        "procedure_followed_in_failures": sum(1 for f in failures if f["followed_procedure"]
                                              and f["followed_procedure"] in f["led_to_failure"]),
        "undecided_demoted": sum(len(f["demoted_undecided"]) for f in failures),
        "demoted": len(demoted_any),
        "restored_active": len(back),
        "restored_to_confidence": len(full),
        "still_demoted": {i: final[i][1] for i in demoted_any if i in final and final[i][1] != "active"},
        "restored_share": r(len(back) / len(demoted_any)) if demoted_any else None,
        "traced": traced_summary(traces),
        "traced_by_type": traces,
    })
    return out


def _by_type(ids: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in ids:
        t = type_of_id(i) or "other"
        out[t] = out.get(t, 0) + 1
    return dict(sorted(out.items()))
