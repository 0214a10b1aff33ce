"""A page or app name of any length never makes a memory file unparseable: keys are bounded before they reach
YAML, and a key the emitter still finds too long is written as an explicit key."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.lifecycle import dump_yaml, load_yaml

GOAL = "open wifi settings in Settings"


def _episode(plane: MemoryPlane, app: str, landing: str, then: str) -> None:
    req = MemoryRetrieveRequest(input=GOAL, current_hints=CurrentEnvironmentHints(app="Settings", page="Home"))
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "com.android.settings"}, content="open Settings")
    rec.tool_result("launch_app", observed_state={"app": app, "page": landing, "package": "com.android.settings"})
    rec.tool_call("tap", {"x": 300, "y": 400}, content="Wi-Fi")
    rec.tool_result("tap", observed_state={"app": app, "page": then})
    plane.commit_episode(rec.finish(success=True))
    plane.flush()


_LONG = st.text(min_size=1030, max_size=2400) | st.text(alphabet="Pa 设置:#-'\"", min_size=1030, max_size=1300)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page=_LONG, long_app=st.booleans())
def test_a_long_page_or_app_name_leaves_the_tree_parseable_and_the_apps_lessons_shown(page: str,
                                                                                       long_app: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "m"
        with MemoryPlane.open(root) as plane:
            _episode(plane, "Settings", "Home", "Wi-Fi")
            _episode(plane, page if long_app else "Settings", page, page)
            problems = plane.verify().problems
            assert not problems, problems
            profile = plane.device.get("app_settings")
            assert profile is not None and "Home" in profile.known_entries
            assert all(len(k) <= 200 for k in profile.known_entries)
            block = plane.retrieve(MemoryRetrieveRequest(input=GOAL)).render()
        assert "[app_settings type=app_profile" in block
        assert "Settings/Home → Settings/Wi-Fi" in block or "page=Settings/Wi-Fi" in block


def test_the_reproduction_a_1030_character_landing_page(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        _episode(plane, "Settings", "Home", "Wi-Fi")
        _episode(plane, "Settings", "P" * 1030, "Wi-Fi")
        assert not plane.verify().problems
        text = (tmp_path / "m" / "device" / "apps" / "app_settings.yaml").read_text()
        assert load_yaml(text)["known_entries"].keys() >= {"Home"}
        assert "[app_settings type=app_profile" in plane.retrieve(MemoryRetrieveRequest(input=GOAL)).render()


_KEYS = st.text(min_size=1, max_size=1500) | st.text(alphabet="Pa é:#-\"", min_size=990, max_size=1100)
_VALUES = st.recursive(st.none() | st.integers() | st.text(max_size=20),
                       lambda c: st.lists(c, max_size=3) | st.dictionaries(_KEYS, c, max_size=3), max_leaves=6)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(data=st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=4))
def test_any_mapping_key_is_written_as_yaml_that_reads_back(data: dict[str, object]) -> None:
    assert load_yaml(dump_yaml(data)) == data
