"""Typed device memories on the shared envelope: one YAML file each."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memory_plane.lifecycle import Record, StrList, as_list, content_hash

from ._slots import fill, mask_values, substitute

# Caps so cumulative lists never grow without bound (newest kept).
CAPS: dict[str, int] = {
    "pages_seen": 50, "tools_used": 30, "known_issues": 20, "display_names": 20, "aliases": 20, "packages": 10,
    "common_dialogs": 20, "open_methods": 10, "goal_examples": 5, "steps": 30, "tags": 20, "entities": 20,
    "screens": 10, "labels": 10, "targets": 5, "reasons": 5, "goals": 10, "goal_groups": 10,
}


MAX_KEY = 200
"""The longest name written as a mapping key (a YAML reader refuses implicit keys over 1,024 characters)."""


def bounded_key(name: str) -> str:
    """A name fit to be a mapping key: a longer one is cut, with a hash of the whole so two stay apart."""
    if len(name) <= MAX_KEY:
        return name
    return f"{name[:MAX_KEY - 13]}…{content_hash(name)}"


def cap_list(values: list[Any], name: str) -> list[Any]:
    """Keep the newest ``CAPS[name]`` values of a list."""
    n = CAPS.get(name)
    return values[-n:] if n and len(values) > n else values


def merge_unique(old: list[Any], new: list[Any], name: str) -> list[Any]:
    """Union in first-seen order (values already there keep their place, so a rewrite changes only what
    is new); over the cap, the oldest values not seen again now are the ones dropped."""
    fresh = [v for v in new if v is not None and v != ""]
    out: list[Any] = []
    for v in [*old, *fresh]:
        if v not in out:
            out.append(v)
    n = CAPS.get(name)
    if n and len(out) > n:
        excess = len(out) - n
        kept = []
        for v in out:
            if excess and v not in fresh:
                excess -= 1
                continue
            kept.append(v)
        out = kept[-n:]
    return out


class DeviceItem(Record):
    """Fields every device memory has beyond the envelope."""

    device_id: str | None = None
    app_id: str | None = None
    app_name: str | None = None
    page_name: str | None = None
    summary: str | None = None
    lesson_key: str | None = None
    priority: int | None = None
    # Empty lists and dicts are defaults, not factories: pydantic copies a default for each instance, and a builtin
    # factory (list, dict) makes it read the builtin's signature by tokenizing its text, milliseconds on the
    # first model a process builds (a start's first retrieve).
    tags: StrList = Field(default_factory=list)
    entities: StrList = Field(default_factory=list)

    TYPE: ClassVar[str] = "device_item"
    DEFAULT_TTL: ClassVar[str] = "30d"

    @model_validator(mode="before")
    @classmethod
    def _default_type(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("type"):
            data = {**data, "type": cls.TYPE}
        return data

    def body(self) -> str:
        """The one-line text shown in prompts and index summaries."""
        return self.summary or self.title or self.id

    def required_tools(self) -> list[str]:
        """Agent tools this memory's actions need (empty: it needs none in particular)."""
        return []

    def shown_line(self) -> str:
        """The body on one line, as an index and a prompt show it; a lesson pulled from other phones says so."""
        text = " ".join(self.body().split())
        extra = self.model_extra or {}
        if extra.get("source") == "fleet":
            text = f"From the fleet (verified on {extra.get('fleet_devices') or 'several'} other devices): {text}"
        return text

    def refresh_summary(self) -> None:
        """Write the shown text into ``summary`` again after a change (what the index line and a grep read)."""
        self.summary = self.body()


class ScreenInfo(BaseModel):
    """Screenshot geometry of a device."""

    model_config = ConfigDict(defer_build=True, extra="allow")

    screenshot_width: int | None = None
    screenshot_height: int | None = None
    density: str | None = None


class DeviceProfile(DeviceItem):
    """Stable facts of one device: OS, language, screen, input method."""

    model: str | None = None
    os_name: str | None = "android"
    os_version: str | None = None
    language: str | None = None
    input_method: str | None = None
    screen: ScreenInfo = Field(default_factory=ScreenInfo)
    TYPE: ClassVar[str] = "device_profile"
    DEFAULT_TTL: ClassVar[str] = "90d"

    def body(self) -> str:
        """Device summary line."""
        parts = [f"Device {self.device_id or 'default'}"]
        if self.language:
            parts.append(f"language {self.language}")
        if self.screen.screenshot_width and self.screen.screenshot_height:
            parts.append(f"screenshots {self.screen.screenshot_width}x{self.screen.screenshot_height}")
        if self.input_method:
            parts.append(f"input method {self.input_method}")
        return ", ".join(parts)


class OpenMethod(BaseModel):
    """A way to open an app, with how often it worked."""

    model_config = ConfigDict(defer_build=True, extra="allow")

    method: str
    query: str | None = None
    success_count: int = 0
    failure_count: int = 0


class AppProfile(DeviceItem):
    """What the device taught about one app (cumulative across episodes)."""

    display_names: StrList = Field(default_factory=list)
    aliases: StrList = Field(default_factory=list)
    packages: StrList = Field(default_factory=list)
    open_methods: list[OpenMethod] = Field(default_factory=list)
    known_entries: dict[str, str] = Field(default_factory=dict)
    common_dialogs: StrList = Field(default_factory=list)
    login_state: str | None = "unknown"
    pages_seen: StrList = Field(default_factory=list)
    tools_used: StrList = Field(default_factory=list)
    known_issues: StrList = Field(default_factory=list)
    TYPE: ClassVar[str] = "app_profile"
    DEFAULT_TTL: ClassVar[str] = "30d"

    @field_validator("known_entries", mode="after")
    @classmethod
    def _bounded_entries(cls, v: dict[str, str]) -> dict[str, str]:
        return {bounded_key(str(k)): x for k, x in v.items()}

    def note_entry(self, page: str, how: str) -> None:
        """Remember how a page of the app was entered (keyed by the page's name, bounded)."""
        self.known_entries[bounded_key(page)] = how

    def body(self) -> str:
        """App summary line: names, pages, tools, best open method."""
        name = self.app_name or (self.display_names[0] if self.display_names else self.app_id)
        parts = [f"App {name}"]
        if self.packages:
            parts.append(f"package {self.packages[0]}")
        if self.open_methods:
            best = max(self.open_methods, key=lambda m: (m.success_count - m.failure_count, m.success_count))
            q = f" {best.query!r}" if best.query else ""
            parts.append(f"opens via {best.method}{q} ({best.success_count} ok/{best.failure_count} failed)")
        if self.pages_seen:
            parts.append("pages: " + ", ".join(self.pages_seen[-8:]))
        if self.tools_used:
            parts.append("tools: " + ", ".join(self.tools_used[-6:]))
        if self.known_issues:
            parts.append("known issue: " + self.known_issues[-1])
        return "; ".join(parts)


PROSE_STEP = "step"
MAX_STEP_LINE = 240  # the longest rendered step: the stored values stay whole


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def slot_mark(name: str) -> str:
    """How a slot the goal does not give is shown in a step: ``{name}``."""
    return "{" + name + "}"  # the tool of a step written as plain text in a hand-made procedure


class ProcedureStep(BaseModel):
    """One verified action of a procedure."""

    model_config = ConfigDict(defer_build=True, extra="allow")

    tool: str
    action: str | None = None
    description: str | None = None
    coords: str | None = None
    text: str | None = None
    app_name: str | None = None
    page_name: str | None = None
    target_label: str | None = None
    outcome_note: str | None = None
    narration: str | None = None  # what the runtime said it was doing (not what the screen showed)
    slot: str | None = None  # the goal's value this step's text (else its label) is: a name of Procedure.slots

    def render(self) -> str:
        """``tool(@x=..,y=.., text="…", desc="…") → page=App/Page``; stored values are whole, the line is bounded."""
        args = []
        if self.action:
            args.append(_bounded(self.action, 60))
        if self.coords:
            args.append(f"@{self.coords}")
        if self.text:
            args.append(f'text="{_bounded(self.text, 80)}"')
        if self.target_label:
            args.append(f"label={_bounded(self.target_label, 60)!r}")
        if self.slot:
            args.append(f"slot={self.slot}")
        if self.description and self.description != self.target_label:
            args.append(f'desc="{self.description[:60]}"')
        elif not self.description and not self.target_label and self.narration:
            args.append(f'said="{self.narration[:60]}"')  # nothing from the screen: the runtime's words, marked
        out = f"{self.tool}({', '.join(args)})"
        if self.outcome_note:
            out += f" → {_bounded(self.outcome_note, 100)}"
        return _bounded(out, MAX_STEP_LINE)


PROCEDURE_SCOPES = ("device", "app")
"""What a procedure is about (the design's ``scope``): the device as a whole (any app: "open apps through system
search"), or the tasks of one app (``app_id``)."""


class Procedure(DeviceItem):
    """A verified way to reach a goal on an app: the exact steps that worked."""

    scope: str | None = None  # one of PROCEDURE_SCOPES; a file without one: "app" when it names an app, else "device"
    goal_pattern: str | None = None
    intent: str | None = None
    goal_examples: StrList = Field(default_factory=list)
    targets: StrList = Field(default_factory=list)
    steps_target: str | None = None  # the target of the episode the steps come from
    steps: list[ProcedureStep] = Field(default_factory=list)
    slots: dict[str, str] = Field(default_factory=dict)  # slot name -> the example value the steps hold
    summary_hash: str | None = None  # the hash of the summary as last generated (a different summary is a person's)
    TYPE: ClassVar[str] = "procedure"
    DEFAULT_TTL: ClassVar[str] = "45d"

    @model_validator(mode="after")
    def _scope(self) -> Procedure:
        if self.scope not in PROCEDURE_SCOPES:
            self.scope = "app" if self.app_id else "device"
        return self

    def slot_values(self, goal: str) -> dict[str, str]:
        """Each slot's value for a goal: what the goal gives where the example's value stood, else ``{name}``."""
        given = fill(self.goal_examples, self.slots, goal)
        return {name: given.get(name, slot_mark(name)) for name in self.slots}

    def goal_shapes(self) -> list[str]:
        """Its goal examples with the goals' own values masked (``…``): the kind of goal it is for, whatever the
        values (what a new goal is compared with, so a value two tasks share does not make them alike)."""
        out = []
        for example in self.goal_examples:
            values = {v for name, v in self.slot_values(example).items() if v != slot_mark(name)}
            out.append(mask_values(example, values | set(self.slots.values())))
        return out

    def steps_for_goal(self, goal: str) -> list[ProcedureStep]:
        """The steps with a goal's values in place of the example's (``{name}`` where the goal gives none),
        so a procedure never asks for another task's text; its stored steps are left as they are."""
        if not self.slots:
            return [s.model_copy() for s in self.steps]
        values = self.slot_values(goal)
        swap = {self.slots[name]: new for name, new in values.items() if self.slots.get(name)}
        out = []
        for s in self.steps:
            fields = ("text", "target_label", "description", "page_name", "outcome_note", "narration")
            out.append(s.model_copy(update={f: substitute(getattr(s, f), swap) for f in fields}))
        return out

    @field_validator("steps", mode="before")
    @classmethod
    def _steps(cls, v: Any) -> Any:
        return [{"tool": PROSE_STEP, "description": s} if isinstance(s, str) else s for s in as_list(v)]

    def path_tools(self) -> str:
        """A digest of its steps' tools, in order: a path of other tools, or of another length, is another path."""
        return tools_digest(str(s.tool) for s in self.steps)

    def required_tools(self) -> list[str]:
        """The distinct tools of the steps, in order (a step written as prose names none)."""
        return list(dict.fromkeys(s.tool for s in self.steps if s.tool and s.tool != PROSE_STEP))

    def body(self) -> str:
        """The procedure's line: its ``summary`` when a person wrote it, else the one made from its goals and steps."""
        written = self.written_summary()
        if written is None:
            return self.generated_body()
        # A person's words do not hide that the path's success was never confirmed.
        return f"UNVERIFIED path: {written}" if (self.model_extra or {}).get("verified") is False else written

    def written_summary(self) -> str | None:
        """The ``summary`` a person wrote (edited the file), None when it is the generated one or there is none.

        A generated summary is recorded with its hash (``summary_hash``): a summary that no longer matches it was
        changed by hand. A file from before the hash was kept counts the summary as written when it differs from
        what would be generated now."""
        text = (self.summary or "").strip()
        if not text:
            return None
        if self.summary_hash is not None:
            return None if self.summary_hash == content_hash(text) else text
        return None if " ".join(text.split()) == " ".join(self.generated_body().split()) else text

    def refresh_summary(self) -> None:
        """The generated summary rebuilt after a change, with its hash; a summary a person wrote is kept."""
        if self.written_summary() is not None:
            return
        self.summary = self.generated_body()
        self.summary_hash = content_hash(self.summary.strip())

    def generated_body(self) -> str:
        """When goal is …, prefer this path (made from the goal examples and the steps)."""
        goal = self.goal_examples[-1] if self.goal_examples else (self.goal_pattern or "")
        path = " → ".join(s.tool for s in self.steps[:8])
        # Taught by a success nothing confirmed (no verifier, no completion reason, the goal not on the last
        # screen): said so wherever the procedure is shown.
        kind = "UNVERIFIED path (its success was not confirmed)" if (self.model_extra or {}).get(
            "verified") is False else "verified path"
        return f"When goal is like {goal!r}: {kind} {path} ({len(self.steps)} steps)"


class Navigation(DeviceItem):
    """A page transition rule: from App/Page, this action leads to App/Page. Tool, button, label, coordinates
    and text are all of one step (the latest that made the transition with this action)."""

    from_app: str | None = None
    from_page: str | None = None
    to_app: str | None = None
    to_page: str | None = None
    tool: str | None = None
    action: str | None = None  # the button, key or direction the tool was given (back, home, up)
    label: str | None = None  # what the phone showed at the target
    coords: str | None = None
    text: str | None = None
    description: str | None = None
    TYPE: ClassVar[str] = "navigation"
    DEFAULT_TTL: ClassVar[str] = "30d"

    def how(self) -> str:
        """The action whole: ``tap('Done' @x=..,y=..)``, ``system_button(back)``, ``keyboard_text("…")``."""
        args = []
        if self.action:
            args.append(_bounded(self.action, 40))
        if self.label:
            args.append(repr(_bounded(self.label, 60)))
        if self.coords:
            args.append(f"@{self.coords}")
        if self.text and not self.label:
            args.append(f'"{_bounded(self.text, 30)}"')
        return f"{self.tool or '?'}({' '.join(args)})" if args else (self.tool or "?")

    def body(self) -> str:
        """``A/P1 → A/P2 via tool(…)``; a rule stored before labels were kept names its description after it."""
        desc = self.description if self.description and self.description != self.label else None
        tail = f" — {_bounded(desc, 60)}" if desc else ""
        return f"{self.from_app}/{self.from_page} → {self.to_app}/{self.to_page} via {self.how()}{tail}"

    def required_tools(self) -> list[str]:
        """The tool of the transition."""
        return [self.tool] if self.tool else []


class Calibration(DeviceItem):
    """Verified geometry and timing: coordinate space, screenshot size, waits."""

    coord_space: str | None = None
    screenshot_width: int | None = None
    screenshot_height: int | None = None
    waits: dict[str, float] = Field(default_factory=dict)
    notes: StrList = Field(default_factory=list)
    TYPE: ClassVar[str] = "calibration"
    DEFAULT_TTL: ClassVar[str] = "30d"

    def body(self) -> str:
        """Calibration summary line."""
        parts = []
        if self.screenshot_width and self.screenshot_height:
            parts.append(f"screenshots are {self.screenshot_width}x{self.screenshot_height}")
        if self.coord_space:
            parts.append(f"tap coordinates are {self.coord_space}")
        if self.waits:
            parts.append("waits: " + ", ".join(f"{k} {v:g}s" for k, v in list(self.waits.items())[:4]))
        parts.extend(self.notes[-2:])
        return "; ".join(parts) or (self.summary or self.id)


class Failure(DeviceItem):
    """A known failure mode: what triggers it and what to do instead.

    A mode is its cause (``cause``: the app and page, the symptom the events showed and what identifies it there:
    the dialog, the field, the label and tool), whatever goal met it: ``occurrences`` counts the times it was met,
    ``goals`` and ``goal_groups`` the goals it was met in and their groups, ``reasons`` and ``phases`` the
    runtime's own words for it (examples, never part of what it is).
    """

    failure_mode: str | None = None
    failure_phase: str | None = None
    trigger: dict[str, Any] = Field(default_factory=dict)
    cause: dict[str, Any] = Field(default_factory=dict)
    lesson: str | None = None
    goal_pattern: str | None = None  # the goal group it was first met in
    goals: StrList = Field(default_factory=list)
    goal_groups: StrList = Field(default_factory=list)
    reasons: StrList = Field(default_factory=list)
    occurrences: int = 0
    TYPE: ClassVar[str] = "failure"
    DEFAULT_TTL: ClassVar[str] = "60d"

    def met_in(self, goal: str | None, group: str | None, reason: str | None) -> None:
        """Note a goal, its group and the runtime's reason this failure was met with (each list bounded)."""
        self.goals = merge_unique(self.goals, [" ".join(goal.split())[:160]] if goal else [], "goals")
        self.goal_groups = merge_unique(self.goal_groups, [group] if group else [], "goal_groups")
        self.reasons = merge_unique(self.reasons, [" ".join(reason.split())[:200]] if reason else [], "reasons")

    def led_by(self) -> list[str]:
        """The procedures this failure was met on by following them (``led_by``, kept beside the fields)."""
        prev = (self.model_extra or {}).get("led_by")
        return [str(x) for x in prev] if isinstance(prev, list) else []

    def body(self) -> str:
        """``Trigger: … Avoid/verify: …`` and, once met in goals, how often and in which."""
        trig = ", ".join(f"{k}={v}" for k, v in self.trigger.items()) or "?"
        out = f"Trigger: {trig}. Avoid/verify: {self.lesson or self.summary or self.failure_mode}"
        if self.goals:
            out += f" (met {self.occurrences}x, in: " + "; ".join(repr(g[:60]) for g in self.goals[-3:]) + ")"
        return out


class AnchorPoint(BaseModel):
    """Running statistics of normalised tap positions (Welford)."""

    model_config = ConfigDict(defer_build=True, extra="allow")

    count: int = 0
    nx: float = 0.0
    ny: float = 0.0
    m2x: float = 0.0
    m2y: float = 0.0

    def add(self, nx: float, ny: float) -> None:
        """Fold one normalised point into the mean and variance."""
        self.count += 1
        dx, dy = nx - self.nx, ny - self.ny
        self.nx += dx / self.count
        self.ny += dy / self.count
        self.m2x += dx * (nx - self.nx)
        self.m2y += dy * (ny - self.ny)

    def spread(self) -> float:
        """Standard deviation of the points (normalised units)."""
        if self.count < 2:
            return 0.0
        return float(((self.m2x + self.m2y) / (2 * (self.count - 1))) ** 0.5)


class UiAnchor(DeviceItem):
    """Where an element usually is, in normalised coordinates, so a new resolution can reuse it."""

    label: str | None = None
    point: AnchorPoint = Field(default_factory=AnchorPoint)
    screens: StrList = Field(default_factory=list)
    last_coords: str | None = None
    TYPE: ClassVar[str] = "ui_anchor"
    DEFAULT_TTL: ClassVar[str] = "30d"

    def body(self) -> str:
        """``'Label' on App/Page at (0.50, 0.71) of the screen``."""
        return (f"{self.label!r} on {self.app_name}/{self.page_name} at ({self.point.nx:.3f}, {self.point.ny:.3f}) "
                f"of the screen (normalised; n={self.point.count}, spread {self.point.spread():.3f})")


ITEM_TYPES: dict[str, type[DeviceItem]] = {
    "device_profile": DeviceProfile, "app_profile": AppProfile, "procedure": Procedure, "navigation": Navigation,
    "calibration": Calibration, "failure": Failure, "ui_anchor": UiAnchor,
}
ID_PREFIX: dict[str, str] = {
    "device_": "device_profile", "app_": "app_profile", "proc_": "procedure", "nav_": "navigation",
    "cal_": "calibration", "fail_": "failure", "ui_": "ui_anchor",
}
FOLDER: dict[str, str] = {
    "app_profile": "apps", "procedure": "procedures", "navigation": "navigation", "calibration": "calibration",
    "failure": "failures", "ui_anchor": "ui_anchors",
}


def type_of_id(item_id: str) -> str | None:
    """The memory type an id's prefix names (``proc_…`` -> procedure)."""
    for prefix, t in ID_PREFIX.items():
        if item_id.startswith(prefix):
            return t
    return None


def tools_digest(tools: Iterable[str]) -> str:
    """A digest of a path's tools in order (``Procedure.path_tools``): equal for the same tools."""
    return content_hash("path_tools", *tools)
