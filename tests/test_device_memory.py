"""Lesson extraction into device memory (our versions of the Go tests, plus dedupe, caps, tombstones)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from memory_plane.device_memory import (
    CAPS,
    AppCatalog,
    AppInfo,
    AppProfile,
    DeviceMemory,
    Failure,
    Navigation,
    Procedure,
    shipped_catalog,
)
from memory_plane.episodes import EpisodeRecorder, LessonExtractor, OutcomeUpdater, TaskEpisodeStore, TaskEpisodeWriter
from memory_plane.lifecycle import is_safe_id, load_yaml, read_jsonl


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = TaskEpisodeStore(root)
        self.device = DeviceMemory(root)
        self.extract = LessonExtractor(self.device, self.store)
        self.outcomes = OutcomeUpdater(self.device, self.store)
        self.writer = TaskEpisodeWriter(self.store)

    def run(self, goal: str, steps: list[tuple], *, success: bool = True, app: str | None = None,
            device_id: str = "default", language: str = "zh-CN", screen: str | None = "1080x2400",
            refs: tuple[str, ...] = (), intent: str | None = None, target: str | None = None, **finish):
        rec = EpisodeRecorder(self.store, goal, device_id=device_id, language=language, screen=screen,
                              normalized_goal={"app": app, "intent": intent, "target": target}, retrieved_refs=refs)
        for tool, tool_input, content, obs_after, *rest in steps:
            rec.tool_call(tool, tool_input, content=content, target_label=content)
            err = rest[0] if rest else None
            rec.tool_result(tool, is_error=bool(err), error=err, observed_state=obs_after)
        ep = rec.finish(success=success, **finish)
        self.writer.commit(ep)
        self.outcomes(ep)
        return ep, self.extract(ep)


MEITUAN = [
    ("launch_app", {"app": "Meituan"}, "open Meituan", {"app": "Meituan", "page": "Home"}),
    ("touch_gesture", {"__arg1": '{"x": 500, "y": "850"}'}, "tap the cart tab", {"app": "Meituan", "page": "Cart"}),
    ("touch_gesture", {"x": 300, "y": 1900}, "tap checkout", {"app": "Meituan", "page": "Checkout"}),
]


@pytest.fixture
def world(root: Path) -> World:
    return World(root)


def test_procedure_keeps_steps_coords_pages(world: World) -> None:
    ep, res = world.run("在美团点一杯蜜雪冰城", MEITUAN, app="美团")
    procs = world.device.entries("procedure")
    assert len(procs) == 1 and res.created["procedure"] == 1
    proc = world.device.get(procs[0]["id"])
    assert isinstance(proc, Procedure)
    assert proc.steps[1].coords == "x=500,y=850" and proc.steps[1].narration == "tap the cart tab"
    assert proc.steps[1].page_name == "Home" and proc.steps[1].outcome_note == "page=Meituan/Cart"
    assert "Cart" in proc.entities and "Home" in proc.entities
    assert proc.app_id == "meituan" and proc.evidence_refs[0].id == ep.id
    assert proc.applicability == {"device_id": "default", "language": "zh-CN", "screen": "1080x2400",
                                  "app": "meituan"}


def test_navigation_records_transition(world: World) -> None:
    world.run("order coffee", MEITUAN, app="Meituan")
    navs = [world.device.get(e["id"]) for e in world.device.entries("navigation")]
    home_cart = [n for n in navs if isinstance(n, Navigation) and n.from_page == "Home" and n.to_page == "Cart"]
    assert len(home_cart) == 1
    assert home_cart[0].tool == "touch_gesture" and home_cart[0].coords == "x=500,y=850"
    # A rule is keyed by its action too: its title names the action (tool and label) after the two pages.
    assert home_cart[0].title == "Meituan/Home → Meituan/Cart via touch_gesture('tap the cart tab' @x=500,y=850)"


def test_app_profile_is_cumulative(world: World) -> None:
    world.run("order coffee", MEITUAN, app="Meituan")
    world.run("order tea", [*MEITUAN[:2], ("swipe", {"start": [1, 2], "end": [3, 4]}, "scroll",
                                           {"app": "Meituan", "page": "Shop"})], app="Meituan")
    p = world.device.get("app_meituan")
    assert isinstance(p, AppProfile)
    assert p.success_count == 2
    assert set(p.pages_seen) >= {"Home", "Cart", "Checkout", "Shop"}
    assert set(p.tools_used) >= {"launch_app", "touch_gesture", "swipe"}
    assert p.open_methods[0].method == "launch_app" and p.open_methods[0].success_count == 2
    text = (world.root / "device" / "apps" / "app_meituan.yaml").read_text()
    assert "success_count: 2" in text


def test_failed_episode_records_known_issue_and_failure(world: World) -> None:
    _ep, res = world.run("order coffee", MEITUAN[:2], app="Meituan", success=False, failure_phase="state_mismatch",
                        failure_reason="cart stayed empty")
    p = world.device.get("app_meituan")
    assert isinstance(p, AppProfile) and p.failure_count == 1 and p.known_issues == ["cart stayed empty"]
    assert "procedure" not in res.created
    fails = [world.device.get(e["id"]) for e in world.device.entries("failure")]
    assert len(fails) == 1 and isinstance(fails[0], Failure)
    assert fails[0].trigger["page"] == "Home" and fails[0].evidence_refs[0].event_ids


def test_non_ascii_typing_failure_is_learned(world: World) -> None:
    steps = [("keyboard_text", {"text": "微信"}, "type the app name", {"app": "Launcher", "page": "Search"}, "IME")]
    world.run("打开微信", steps, app="微信", success=False, failure_phase="tool_error", failure_reason="no input")
    fails = [world.device.get(e["id"]) for e in world.device.entries("failure")]
    modes = {f.failure_mode for f in fails if isinstance(f, Failure)}
    assert "keyboard_text_cannot_input_non_ascii" in modes
    f = next(f for f in fails if isinstance(f, Failure) and f.failure_mode == "keyboard_text_cannot_input_non_ascii")
    assert f.trigger == {"tool": "keyboard_text", "input_contains_non_ascii": True}


def test_same_lesson_updates_instead_of_twin(world: World) -> None:
    # Similar goals (same intent, another target) teach the same procedure.
    world.run("order coffee", MEITUAN, app="Meituan", intent="order", target="coffee")
    _, res = world.run("order tea", MEITUAN, app="Meituan", intent="order", target="tea")
    assert res.duplicates_avoided >= 3 and "procedure" not in res.created
    procs = world.device.entries("procedure")
    assert len(procs) == 1
    proc = world.device.get(procs[0]["id"])
    assert isinstance(proc, Procedure) and proc.success_count == 2 and len(proc.goal_examples) == 2
    assert proc.targets == ["coffee", "tea"]


def test_untargeted_goals_of_one_intent_stay_separate_lessons(world: World) -> None:
    world.run("turn on dark mode", MEITUAN, app="Meituan", intent="toggle_setting")
    world.run("make the font larger", MEITUAN, app="Meituan", intent="toggle_setting")
    assert len(world.device.entries("procedure")) == 2


def test_effective_path_cuts_detours() -> None:
    from memory_plane.episodes import effective_path, pair_steps

    def ev(n, kind, tool, page, obs_page=None, **kw):
        e = {"event_id": f"evt_{n}", "type": kind, "tool_name": tool, **kw}
        if obs_page:
            e["observed_state"] = {"app": "A", "page": obs_page}
        return e

    events = [ev(1, "tool_result", "start", None, "Home"),
              ev(2, "tool_call", "tap", None, content="Alice"), ev(3, "tool_result", "tap", None, "Chat:Alice"),
              ev(4, "tool_call", "back", None), ev(5, "tool_result", "back", None, "Home"),
              ev(6, "tool_call", "tap", None, content="Contacts"), ev(7, "tool_result", "tap", None, "Contacts"),
              ev(8, "tool_call", "tap", None, content="More"), ev(9, "tool_result", "tap", None, "Contacts"),
              ev(10, "tool_call", "tap", None, content="Bob"), ev(11, "tool_result", "tap", None, "Chat:Bob")]
    path = effective_path(pair_steps(events))
    assert [s.content for s in path] == ["Contacts", "Bob"]


def test_retried_job_applies_once(world: World) -> None:
    ep, _ = world.run("order coffee", MEITUAN, app="Meituan")
    world.extract(ep)  # the background job ran twice
    p = world.device.get("app_meituan")
    assert isinstance(p, AppProfile) and p.success_count == 1


def test_two_devices_keep_two_profiles(world: World) -> None:
    world.run("order", MEITUAN, app="Meituan", device_id="default", screen="640x1200")
    world.run("order", MEITUAN, app="Meituan", device_id="Pixel 8", screen="1080x2400", language="en-US")
    a = world.device.profiles.get("default")
    b = world.device.profiles.get("Pixel 8")
    assert a is not None and b is not None and a.screen.screenshot_width == 640
    assert b.screen.screenshot_width == 1080 and b.language == "en-US"
    assert (world.root / "device" / "profile.yaml").exists()
    assert len(list((world.root / "device" / "profiles").glob("*.yaml"))) == 1


def test_tombstoned_lesson_not_relearned(world: World) -> None:
    world.run("order coffee", MEITUAN, app="Meituan", intent="order")
    pid = world.device.entries("procedure")[0]["id"]
    assert world.device.forget(pid, reason="user said this is wrong")
    tomb = read_jsonl(world.root / "lifecycle" / "tombstones.jsonl").records
    assert tomb[-1]["ref"]["id"] == pid and "order" not in str(tomb[-1].get("content_hashes"))
    _, res = world.run("order coffee", MEITUAN, app="Meituan", intent="order")
    assert world.device.get(pid) is None and res.skipped_tombstoned >= 1


def test_chinese_app_names_give_ascii_files_and_readable_yaml(world: World) -> None:
    steps = [("launch_app", {"app": "蜜雪冰城"}, "打开蜜雪冰城", {"app": "蜜雪冰城", "page": "首页"}),
             ("tap", {"x": 10, "y": 20}, "点击购物车", {"app": "蜜雪冰城", "page": "购物车"})]
    world.run("在蜜雪冰城下单", steps, app="蜜雪冰城")
    for f in (world.root / "device").rglob("*.yaml"):
        assert (f.name.isascii() and is_safe_id(f.stem)) or f.name in ("index.yaml", "profile.yaml")
    text = "".join(p.read_text("utf-8") for p in (world.root / "device" / "apps").glob("app_*.yaml"))
    assert "蜜雪冰城" in text and "\\u" not in text


def test_every_list_field_is_capped(world: World) -> None:
    for i in range(30):
        steps = [("launch_app", {"app": "Meituan"}, None, {"app": "Meituan", "page": f"Page{i}a"}),
                 (f"tool{i}", {"x": i, "y": i}, None, {"app": "Meituan", "page": f"Page{i}b"})]
        world.run(f"goal {i}", steps, app="Meituan", success=False, failure_reason=f"reason {i}")
    p = world.device.get("app_meituan")
    assert isinstance(p, AppProfile)
    assert len(p.pages_seen) <= CAPS["pages_seen"] and len(p.known_issues) == CAPS["known_issues"]
    assert len(p.tools_used) <= CAPS["tools_used"] and len(p.evidence_refs) <= 20
    assert p.known_issues[-1] == "reason 29"


def test_empty_episode_writes_no_items(world: World) -> None:
    _, res = world.run("do nothing", [], app="Meituan")
    assert res.created == {"device_profile": 1} or set(res.created) <= {"device_profile"}
    assert world.device.entries("procedure") == [] and world.device.entries("app_profile") == []


def test_outcome_updates_success_and_repeated_failure(world: World) -> None:
    world.run("order coffee", MEITUAN, app="Meituan", intent="order")
    pid = world.device.entries("procedure")[0]["id"]
    world.run("order tea", MEITUAN, app="Meituan", intent="order", refs=(pid, pid))
    p = world.device.get(pid)
    assert isinstance(p, Procedure) and p.success_count == 2  # applied once despite a duplicate ref
    for _ in range(4):  # followed past the app's launch (which every task of the app shares) into the failure
        world.run("order", MEITUAN[:2], app="Meituan", intent="order", refs=(pid,), success=False,
                  failure_reason="checkout missing")
    p = world.device.get(pid)
    assert isinstance(p, Procedure) and p.status == "conflicted" and p.failure_count >= 3
    assert p.confidence < 0.5
    conflicts = read_jsonl(world.root / "lifecycle" / "conflicts.jsonl").records
    assert conflicts and conflicts[-1]["rule"] == "repeated_failures" and pid in conflicts[-1]["ids"]


def test_failure_memory_only_contradicted_when_trigger_passed(world: World) -> None:
    steps = [("keyboard_text", {"text": "微信"}, None, {"app": "Launcher", "page": "Search"}, "IME")]
    world.run("打开微信", steps, success=False, failure_reason="no input")
    fid = next(e["id"] for e in world.device.entries("failure"))
    # A success that typed pinyin (never passed the trigger) must not contradict it.
    ok = [("keyboard_text", {"text": "weixin"}, None, {"app": "WeChat", "page": "Home"})]
    world.run("打开微信", ok, refs=(fid,))
    f = world.device.get(fid)
    assert isinstance(f, Failure) and f.status == "active"
    # A success that did type Chinese does contradict it.
    world.run("打开微信", [("keyboard_text", {"text": "微信"}, None, {"app": "WeChat", "page": "Home"})], refs=(fid,))
    f = world.device.get(fid)
    assert isinstance(f, Failure) and f.status == "conflicted"


def test_ui_anchor_normalises_taps(world: World) -> None:
    steps = [("tap", {"x": 540, "y": 1200}, "确认", {"app": "Meituan", "page": "Pay"}),
             ("tap", {"x": 100, "y": 100}, "back", {"app": "Meituan", "page": "Home"})]
    rec_steps = [("launch_app", {"app": "Meituan"}, None, {"app": "Meituan", "page": "Cart"}), *steps]
    world.run("pay", rec_steps, app="Meituan", screen="1080x2400")
    world.run("pay", rec_steps, app="Meituan", screen="1080x2400")
    anchors = [world.device.get(e["id"]) for e in world.device.entries("ui_anchor")]
    a = next(a for a in anchors if a is not None and a.label == "确认")
    assert a.point.count == 2 and abs(a.point.nx - 0.5) < 1e-9 and abs(a.point.ny - 0.5) < 1e-9


def test_index_lines_are_greppable(world: World) -> None:
    world.run("order coffee", MEITUAN, app="美团")
    lines = (world.root / "device" / "procedures" / "index.yaml").read_text("utf-8").splitlines()
    entries = [x for x in lines if x.startswith("- {")]
    assert len(entries) == 1 and '"app": "meituan"' in entries[0]
    assert load_yaml("\n".join(lines))[0]["type"] == "procedure"


def test_catalog_knows_aliases() -> None:
    c = shipped_catalog()
    for name in ["微信", "WeChat", "weixin", "com.tencent.mm"]:
        assert c.canonical(name) == "wechat"
    assert c.find_in_text("帮我在美团上点外卖")[0][0] == "meituan"
    assert c.find_in_text("Open the Gmail app and check settings")[0][0] == "gmail"


def _one_alternation(catalog: AppCatalog, low: str) -> list[tuple[str, int]]:
    """The Latin names in a text as the catalog once found them: one alternation of all, longest first."""
    names = sorted((k for k in catalog._by_name if k.isascii() and len(k) > 2), key=len, reverse=True)
    pattern = re.compile(r"(?<![a-z0-9@.])(" + "|".join(re.escape(k).replace("\\ ", "[ _.-]?") for k in names)
                         + r")(?![a-z0-9]|\.[a-z])")
    return [(re.sub(r"[ _.-]", " ", m.group(1)), m.start()) for m in pattern.finditer(low)]


def test_latin_names_are_found_as_one_alternation_of_them_all_would() -> None:
    # Names that are prefixes and parts of others, packages, and names of other characters (a "+", a leading
    # or trailing joiner), in texts of their pieces, joiners, "@" and "." at random.
    catalog = shipped_catalog()
    odd = AppCatalog([AppInfo("x", ["google", "maps", "google maps", "map", "c++ studio", "_lead", "tail.", "abc",
                                    "abc def", "abcdef", "ab-cd-ef", "com.example.app", "example app"])])
    rng = random.Random(7)
    for cat in (catalog, odd):
        names = [k for k in cat._by_name if k.isascii() and len(k) > 2]
        pieces = [*names, *(w for k in names for w in k.split(" ")), " ", "_", ".", "-", "@", "x", "9", "é", "中"]
        for _ in range(3000):
            low = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 7))).lower()
            assert cat._long_hits(low, cat._matchers()) == _one_alternation(cat, low), low


def test_app_names_inside_addresses_do_not_count() -> None:
    c = shipped_catalog()
    assert c.find_in_text("Email agent.benchmark@gmail.com the report") == []
    assert c.find_in_text("Install com.tencent.mm.beta") == []
    assert c.find_in_text("Open Gmail.")[0][0] == "gmail"
