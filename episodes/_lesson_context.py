"""What one episode shows, as every lesson writer needs it: device, language, screen, apps and their
names, pages, tools, packages, how each app was entered, and the app facts the episode observed."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memory_plane.device_memory import DeviceMemory
from memory_plane.lifecycle import EvidenceRef

from ._blame import lift_demotion
from ._model import TaskEpisode
from ._steps import TEXT_TOOLS, Step, effective_path, is_system_screen


class LessonContext:
    """Facts about one episode shared by every lesson writer.

    The apps are what the phone showed, system screens (a launcher) left out: ``apps`` (each gets a
    profile), ``goal_app`` (the app the goal names, only when the phone showed it), ``task_app`` (the
    goal's app, else the app the path's work happened in: every task-wide lesson is filed under it) and
    ``app_of(step)`` (the app one step acted in). A word of the goal never makes an app on its own."""

    def __init__(self, ep: TaskEpisode, steps: list[Step], device: DeviceMemory) -> None:
        self.ep = ep
        self.steps = steps
        self.device = device
        self.catalog = device.catalog
        self.device_id = ep.device_scope.device_id or "default"
        self.language = ep.device_scope.language
        self.input_method = ep.device_scope.input_method
        self.declared: list[str] = []  # memories the agent said it followed
        self.stopped = False  # the run stopped rather than ended: its path and its end are not known
        self.events: Sequence[Mapping[str, Any]] | None = None  # the episode's events, when the caller read them
        self.blamed: dict[str, list[str]] = {}  # app and goal pattern -> the procedure followed into the failure
        self.decisions: list[tuple[list[str], str, str, str | None, list[str]]] = []
        screen = None
        if ep.device_scope.screen and "x" in ep.device_scope.screen:
            try:
                a, b = ep.device_scope.screen.lower().split("x")
                screen = (int(a), int(b))
            except ValueError:
                screen = None
        self.observed_screen = next((s.screen for s in steps if s.screen), None)
        if screen is None:
            screen = self.observed_screen
        self.screen = screen
        self.screen_text = f"{screen[0]}x{screen[1]}" if screen else None
        self.apps: list[str] = []  # the apps the phone showed, system screens left out: each gets a profile
        self.app_names: dict[str, list[str]] = {}
        self.pages_by_app: dict[str, list[str]] = {}
        self.tools_by_app: dict[str, list[str]] = {}
        self.packages_by_app: dict[str, list[str]] = {}
        # A name is a system screen when any observation of it says so (a launcher's package is only
        # reported with the result that reached it, not with the calls made on it).
        self._system = {app for s in steps for app, pkg in _named_apps(s) if app and is_system_screen(app, pkg)}
        for s in steps:
            for app, page in ((s.app_before, s.page_before), (s.app_after, s.page_after)):
                if not app:
                    continue
                aid = self.canon(app)
                if aid is None:
                    continue
                if aid not in self.apps and app not in self._system:
                    self.apps.append(aid)
                self.app_names.setdefault(aid, [])
                if app not in self.app_names[aid]:
                    self.app_names[aid].append(app)
                if page and page not in self.pages_by_app.setdefault(aid, []):
                    self.pages_by_app[aid].append(page)
            for app in {s.app_before, s.app_after}:  # the tool that entered an app counts for it too
                aid = self.canon(app)
                if aid and s.tool not in self.tools_by_app.setdefault(aid, []):
                    self.tools_by_app[aid].append(s.tool)
            if s.package_after and s.app_after:
                aid = self.canon(s.app_after)
                if aid and s.package_after not in self.packages_by_app.setdefault(aid, []):
                    self.packages_by_app[aid].append(s.package_after)
        if not any(s.app_before or s.app_after for s in steps):
            # Nothing observed (a runtime that reports no screen): an app launched without error is one the
            # phone showed; the goal's words alone never are.
            for s in steps:
                name = launched_app(s)
                aid = self.canon(name) if name and not s.is_error and not is_system_screen(name) else None
                if aid and aid not in self.apps:
                    self.apps.append(aid)
                    self.app_names.setdefault(aid, [str(name)])
        self.goal_app = self._named_and_shown()
        self.task_app = self.goal_app or self._work_app()
        self.first_app = self.apps[0] if self.apps else None

    def _named_and_shown(self) -> str | None:
        """The app the goal names, when the phone showed it (matched through the catalog's names, aliases and
        packages): its id as observed. A name the episode never reached makes no app."""
        named = [self.ep.normalized_goal.app, *(a for a, _, _ in self.catalog.find_in_text(self.ep.user_goal))]
        for name in dict.fromkeys(n for n in named if isinstance(n, str) and n.strip()):
            for aid in self.apps:
                seen = [aid, *self.app_names.get(aid, []), *self.packages_by_app.get(aid, [])]
                if any(self.catalog.same_app(name, s) for s in seen):
                    return aid
        return None

    def _work_app(self) -> str | None:
        """The app the path's work happened in: the shown app of the most effective steps (the last one to have
        a step on a tie), else the last app shown."""
        counts: dict[str, int] = {}
        last: dict[str, int] = {}
        for i, s in enumerate(effective_path([s for s in self.steps if not s.is_error])):
            aid = self.app_of(s)
            if aid is not None:
                counts[aid] = counts.get(aid, 0) + 1
                last[aid] = i
        if counts:
            return max(counts, key=lambda a: (counts[a], last[a]))
        return self.apps[-1] if self.apps else None

    def app_of(self, step: Step) -> str | None:
        """The app a step acted in: the app it started in, or, from a system screen (a launcher), the app it
        entered; None when neither is an app the phone showed (a step on the home screen)."""
        for app in (step.app_before, step.app_after):
            aid = self.canon(app)
            if aid is not None and aid in self.apps and app not in self._system:
                return aid
        if not (step.app_before or step.app_after):
            name = launched_app(step)
            aid = self.canon(name)
            return aid if aid in self.apps else None
        return None

    def app_at(self, step: Step) -> str | None:
        """The app a lesson about one step belongs to: the app the phone showed the step in, else the task's
        app (a failure on the home screen is the task's); never a system screen, never an app not reached."""
        return self.app_of(step) or self.task_app

    def decide(self, ids: list[str], rule: str, decision: str, detail: str | None = None,
               against: list[str] | None = None) -> None:
        """Queue a line for lifecycle/conflicts.jsonl (written after the item locks are released): ``ids``
        are the memories the decision applies to, ``against`` the ones they conflict with."""
        self.decisions.append((ids, rule, decision, detail, list(against or [])))

    def resolve(self, item: Any, app_id: str | None) -> None:
        """New success evidence for a conflicted path: re-scope it to now and reactivate it when it outweighs."""
        if item.status != "conflicted" or not self.ep.outcome.success:
            return
        if any(str(c).startswith("mem_") for c in item.conflicts_with):
            return  # overridden by a user rule: user rules win over new automatic evidence
        extra = item.model_extra if item.model_extra is not None else {}
        if extra.get("stale_key"):
            item.applicability = self.applicability(app_id)  # verified again under the current environment
            extra.pop("stale_key", None)
            extra.pop("stale_reason", None)
        if item.success_count > item.failure_count:
            lift_demotion(item, by_episode=self.ep.id)
            self.decide([item.id], "resolved_by_new_evidence", "active",
                        f"{item.success_count} successes vs {item.failure_count} failures")

    def canon(self, name: str | None) -> str | None:
        """Canonical app id of an observed app name."""
        return self.catalog.app_id_for(name) if name else None

    def display(self, app_id: str | None) -> str | None:
        """A readable name of an app id: as observed, else from the catalog."""
        if not app_id:
            return None
        if self.app_names.get(app_id):
            return self.app_names[app_id][0]
        info = self.catalog.get(app_id)
        return info.display if info else app_id

    def applicability(self, app_id: str | None) -> dict[str, Any]:
        """Where a path lesson applies: this device, language, screen and app."""
        out = {"device_id": self.device_id, "language": self.language, "screen": self.screen_text, "app": app_id,
               "input_method": self.input_method}
        return {k: v for k, v in out.items() if v}

    def evidence_of(self, steps: list[Step]) -> EvidenceRef:
        """The evidence ref of this episode naming the calls and results of ``steps`` (at most 40 ids)."""
        ids = list(dict.fromkeys(i for s in steps for i in s.event_ids))
        return EvidenceRef(type="episode", id=self.ep.id, event_ids=ids[:40])

    def failure_text(self) -> str | None:
        """Why the episode failed, in one line."""
        o = self.ep.outcome
        text = o.failure_reason or o.error or o.completion_reason
        return " ".join(text.split())[:200] if text else None

    def app_facts(self, app_id: str) -> dict[str, Any]:
        """What this episode showed about one app: how it was entered and from where, dialogs met (and what
        dismissed them), the login state it reported, the names the goal used for it."""
        entries: dict[str, str] = {}
        dialogs: list[str] = []
        login: str | None = None
        for i, s in enumerate(self.steps):
            if self.canon(s.app_after) != app_id:
                continue
            if self.canon(s.app_before) != app_id and s.page_after:
                how = self.open_method(app_id)
                entries[s.page_after] = f"{how[0] if how else s.tool} from {s.app_before or '?'}/{s.page_before or '?'}"
            obs = s.extra.get("observed") or {}
            state = obs.get("login_state") if isinstance(obs, dict) else None
            if isinstance(state, str) and state.strip():
                login = state.strip()
            found = obs.get("dialogs") if isinstance(obs, dict) else None
            for d in ([found] if isinstance(found, str) else found if isinstance(found, list) else []):
                text = " ".join(str(d).split())[:80]
                nxt = self.steps[i + 1] if i + 1 < len(self.steps) else None
                nxt_obs = (nxt.extra.get("observed") or {}) if nxt else {}
                gone = nxt is not None and str(d) not in json.dumps(nxt_obs.get("dialogs") or [], ensure_ascii=False)
                if gone and nxt is not None:
                    what = nxt.target_label or nxt.content or nxt.coords or ""
                    text += f" → dismissed by {nxt.tool} {str(what)[:40]}".rstrip()
                dialogs.append(text)
        goal_app = self.ep.normalized_goal.app
        goal_names = [goal_app] if goal_app and self.canon(goal_app) == app_id else []
        # The goal's own name for the app: what the episode typed or launched to enter this app, when the
        # goal says it too (团团 for a shop app): the phone showed which app that name opens.
        opened = self.open_method(app_id)
        query = opened[1].strip() if opened and opened[1] and opened[2] else None
        if query and 1 < len(query) <= 40 and query.lower() in self.ep.user_goal.lower() and query not in goal_names:
            goal_names.append(query)
        return {"entries": entries, "dialogs": dialogs, "login_state": login, "goal_names": goal_names}

    def open_method(self, app_id: str) -> tuple[str, str | None, bool] | None:
        """How the app was entered in this episode: (method, query, worked)."""
        typed: str | None = None
        for s in self.steps:
            entered = self.canon(s.app_after) == app_id and self.canon(s.app_before) != app_id
            if s.tool in TEXT_TOOLS and s.text:
                if entered:
                    return ("typed_into", None, not s.is_error)  # the typing happened in the app itself
                typed = s.text
            launch = is_launch(s)
            if launch and (self.canon(s.text or str(s.tool_input.get("app") or s.tool_input.get("app_name") or ""))
                           == app_id or entered):
                name = s.tool_input.get("app") or s.tool_input.get("app_name") or s.text
                return ("launch_app", str(name) if name else None, not s.is_error)
            if entered:
                return ("system_search" if typed else "tap_icon", typed, not s.is_error)
        return None


def is_launch(s: Step) -> bool:
    """Whether a step is a launch of an app by name."""
    return any(k in s.tool.lower() for k in ("launch", "open_app", "start_app")) or s.tool_input.get("action") == "open"


def launched_app(s: Step) -> str | None:
    """The app a launch step names (None for any other step)."""
    if not is_launch(s):
        return None
    name = s.tool_input.get("app") or s.tool_input.get("app_name") or s.tool_input.get("package") or s.text
    return str(name) if isinstance(name, str) and name.strip() else None


def _named_apps(s: Step) -> list[tuple[str | None, str | None]]:
    """The (app, package) pairs a step's observations name."""
    before = s.extra.get("observed_before") or {}
    pkg_before = before.get("package") if isinstance(before, dict) else None
    return [(s.app_before, pkg_before if isinstance(pkg_before, str) else None), (s.app_after, s.package_after)]
