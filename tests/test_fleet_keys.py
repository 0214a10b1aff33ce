"""The fleet's lesson key and what a shared lesson keeps: the same lesson on any phone has one key, whatever the
phone's id, screen coordinates or the values of its tasks; no value of the user's tasks is in a shared row."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from memory_plane.device_memory import Navigation, Procedure
from memory_plane.fleet import fleet_key, lesson_row, screen_class, shareable

DEVICE = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)
COORD = st.integers(0, 3000).map(str)
# A value of the user's task (a contact, a shop): CJK characters none of the fixed words of the lesson has, so
# finding one in a row can only mean the value leaked.
_FIXED = set("微信首页搜索发消息聊天打开给")
VALUE = st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF).filter(lambda c: c not in _FIXED),
                min_size=2, max_size=8)


def _chat(device: str, x: str, y: str, who: str) -> Procedure:
    return Procedure.model_validate({
        "id": f"proc_{device.replace('-', '')[:20]}x", "type": "procedure", "device_id": device, "app_id": "wechat",
        "goal_pattern": "send_message", "intent": "send_message", "title": f"微信: 发消息给{who}",
        "goal_examples": [f"打开微信，给{who}发消息"], "targets": [who], "slots": {"contact": who},
        "applicability": {"device_id": device, "language": "zh-CN", "screen": f"{x}x{y}"},
        "steps": [{"tool": "mouse_click", "coords": f"{x},{y}", "target_label": "搜索", "page_name": "微信首页"},
                  {"tool": "keyboard_text", "text": who, "slot": "contact", "page_name": "搜索"},
                  {"tool": "mouse_click", "coords": f"{y},{x}", "target_label": "发消息",
                   "page_name": f"聊天:{who}"}]})


@given(DEVICE, DEVICE, COORD, COORD, COORD, COORD, VALUE, VALUE)
def test_one_lesson_has_one_key_on_every_phone(d1: str, d2: str, x1: str, y1: str, x2: str, y2: str, who1: str,
                                                who2: str) -> None:
    a, b = _chat(d1, x1, y1, who1), _chat(d2, x2, y2, who2)
    assert fleet_key(shareable(a, frozenset({who1}))) == fleet_key(shareable(b, frozenset({who2})))


@given(DEVICE, COORD, COORD, VALUE)
def test_a_shared_row_holds_no_value_of_the_users_tasks(device: str, x: str, y: str, who: str) -> None:
    row = lesson_row(_chat(device, x, y, who), "phone", "e1", personal=frozenset({who}), include_text=False)
    assert who not in json.dumps(row, ensure_ascii=False)
    assert row["item"]["steps"][1]["text"] == "{contact}"  # another phone fills the slot from its own goal


@given(DEVICE, VALUE, VALUE)
def test_different_transitions_are_different_lessons(device: str, p1: str, p2: str) -> None:
    def nav(page: str) -> Navigation:
        return Navigation.model_validate({"id": "nav_x", "type": "navigation", "device_id": device, "app_id": "w",
                                          "from_page": "home", "to_page": page, "tool": "mouse_click"})
    assert (fleet_key(nav(p1)) == fleet_key(nav(p2))) == (p1 == p2)


@given(st.integers(100, 5000), st.integers(100, 5000))
def test_a_screen_has_one_class_whichever_way_it_is_held(w: int, h: int) -> None:
    cls = screen_class(f"{w}x{h}")
    assert cls == screen_class(f"{h}x{w}") and cls in ("compact", "medium", "expanded")
    assert (cls == "compact") == (min(w, h) < 720)


def test_a_screen_that_is_no_size_has_no_class() -> None:
    assert screen_class(None) is None and screen_class("big") is None and screen_class("640 by 1200") is None
