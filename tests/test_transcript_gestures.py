"""Swipes and multi-point gestures in the transcript: every shape of points a runtime sends, and the label
the step is known by (its first point's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.episodes.transcript import OfflineVisualLens, StepRecord

from helpers import episode_ledger

ELEMENTS = [{"label": "Photo 1", "bounds": [0, 0, 100, 100]}, {"label": "Trash", "bounds": [0, 900, 100, 1000]}]


def _shapes(p: tuple[int, int], q: tuple[int, int]) -> list[dict[str, Any]]:
    """The same two-point gesture in every shape runtimes send it."""
    (x0, y0), (x1, y1) = p, q
    return [
        {"start": [x0, y0], "end": [x1, y1]},
        {"start": {"x": x0, "y": y0}, "end": {"x": x1, "y": y1}},
        {"from": (x0, y0), "to": {"x": x1, "y": y1}},
        {"x1": x0, "y1": y0, "x2": x1, "y2": y1},
        {"start_x": x0, "start_y": y0, "end_x": x1, "end_y": y1},
        {"startX": x0, "startY": y0, "endX": x1, "endY": y1},  # UiAutomator's and Appium's names
        {"fromX": x0, "fromY": y0, "toX": x1, "toY": y1},
        {"points": [[x0, y0], [x1, y1]]},
        {"coordinates": [[x0, y0], {"x": x1, "y": y1}]},
        {"coordinates": [{"x": x0, "y": y0}, {"x": x1, "y": y1}], "duration_ms": 300},
    ]


coord = st.integers(min_value=0, max_value=4000)


@settings(max_examples=60, deadline=None)
@given(p=st.tuples(coord, coord), q=st.tuples(coord, coord))
def test_every_point_shape_gives_the_same_line(p: tuple[int, int], q: tuple[int, int]) -> None:
    lines = {StepRecord(step_id="s", step=1, ts="t", t="T+00:00", action={"name": "swipe", "args": args}).action_line()
             for args in _shapes(p, q)}
    assert lines == {f"swipe({p[0]},{p[1]}→{q[0]},{q[1]})"}


def test_a_gesture_of_many_points_keeps_its_ends() -> None:
    args = {"coordinates": [{"x": 1, "y": 2}, [3, 4], {"x": 5, "y": 6}]}
    rec = StepRecord(step_id="s", step=1, ts="t", t="T+00:00", action={"name": "gesture", "args": args})
    assert rec.action_line() == "gesture(3 points 1,2→5,6)"


def test_a_swipe_is_named_by_its_first_point(tmp_path: Path) -> None:
    led, _ep = episode_ledger(tmp_path, lens=OfflineVisualLens())
    for args in _shapes((50, 50), (50, 950)):
        led.stage(package="com.a", elements=ELEMENTS)
        rec = led.commit(action="swipe", args=args)
        assert rec.target_label == "Photo 1" and rec.target_label_source == "hit_test", args
        assert rec.point_labels == ["Photo 1", "Trash"]
        assert "['Photo 1'→'Trash']" in rec.action_line()


def test_a_swipe_from_an_unlabelled_point_has_no_main_label(tmp_path: Path) -> None:
    led, _ep = episode_ledger(tmp_path, lens=OfflineVisualLens())
    led.stage(package="com.a", elements=ELEMENTS)
    rec = led.commit(action="swipe", args={"start": {"x": 500, "y": 500}, "end": {"x": 50, "y": 950}})
    assert rec.target_label is None and rec.point_labels == [None, "Trash"]
    assert "[?→'Trash']" in rec.action_line()


def test_a_label_the_model_named_stays_the_main_label(tmp_path: Path) -> None:
    led, _ep = episode_ledger(tmp_path, lens=OfflineVisualLens())
    led.stage(package="com.a", elements=ELEMENTS)
    rec = led.commit(action="swipe", args={"start": [50, 50], "end": [50, 950], "target_label": "gallery"})
    assert rec.target_label == "gallery" and rec.target_label_source == "index"
