"""Active before conflicted: a tool answer that lists device memories puts the active ones first and says how many
the limit left out."""

from __future__ import annotations

from memory_plane import MemoryPlane


def procedure(plane: MemoryPlane, item_id: str, title: str, status: str) -> None:
    coll = plane.device.collection("procedure")
    item = plane.device.new_item(coll.model, item_id, title=title, summary=title, app_id="meituan", intent="order",
                                 steps=[{"tool": "tap", "target_label": "外卖"}], status=status)
    coll.save(item)


def test_the_active_procedure_comes_before_conflicted_ones(plane: MemoryPlane) -> None:
    procedure(plane, "proc_a_old", "Order takeout the old way", "conflicted")
    procedure(plane, "proc_b_old", "Order takeout another old way", "conflicted")
    procedure(plane, "proc_c_now", "Order takeout", "active")
    res = plane.tools.call("recall_device_memory", {"app": "Meituan", "type": "procedure", "limit": 2})
    assert not res.is_error, res.text
    lines = [ln for ln in res.text.splitlines() if ln.startswith("[")]
    assert lines[0].startswith("[proc_c_now ") and "CAUTION" not in lines[0]
    assert len(lines) == 2 and "CAUTION: conflicted" in lines[1]
    assert "1 more match: recall_device_memory offset=2" in res.text
    rest = plane.tools.call("recall_device_memory", {"app": "Meituan", "type": "procedure", "limit": 2, "offset": 2})
    assert "CAUTION: conflicted" in rest.text and "more match" not in rest.text


def test_a_query_keeps_active_first_too(plane: MemoryPlane) -> None:
    procedure(plane, "proc_a_old", "Order takeout takeout the old way", "conflicted")
    procedure(plane, "proc_c_now", "Order food", "active")
    res = plane.tools.call("recall_device_memory", {"app": "Meituan", "query": "order takeout", "limit": 1})
    lines = [ln for ln in res.text.splitlines() if ln.startswith("[")]
    assert lines[0].startswith("[proc_c_now "), res.text
    assert "1 more match" in res.text
