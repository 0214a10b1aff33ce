"""Hand edits, faults and odd input never lose or hide memory (what people and the phone do to the tree)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from freezegun import freeze_time

from lifecycle import QUARANTINE_DIR
from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane._cli import main as cli


def record(plane: MemoryPlane, goal: str, obs: dict, *, success: bool = True) -> str:
    """One task through the runtime's path: retrieve, record one tool call, commit."""
    req = MemoryRetrieveRequest(input=goal)
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "x"})
    rec.tool_result("launch_app", output="ok", observed_state=obs)
    ep = rec.finish(success=success)
    assert plane.commit_episode(ep)
    plane.flush()
    return ep.id


# -- point 1: what the recorder accepts always validates; verify and GC keep the evidence ------------------


def test_odd_observed_state_is_normalised_and_the_episode_stays_visible(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        ep_id = record(plane, "open wechat", {"app": 5, "page": ["Home", "x"], "package": {"name": "com.x"}})
        ep = plane.episodes.get(ep_id)
        assert ep is not None and ep.initial_state.app == "5" and ep.initial_state.page == "Home"
        events = plane.episodes.events(ep_id).records
        obs = next(e["observed_state"] for e in events if e["type"] == "tool_result")
        assert obs["package_raw"] == {"name": "com.x"}  # kept aside, not lost
        report = plane.verify(fix=True)
        assert report.ok, report.problems
        assert [e["id"] for e in plane.episodes.entries()] == [ep_id]


def test_a_hand_edit_of_the_wrong_shape_never_hides_an_episode(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        ep_id = record(plane, "open wechat", {"app": "WeChat"})
        path = plane.episodes.episode_dir(ep_id) / "episode.yaml"
        text = path.read_text().replace("tool_steps: 1", "tool_steps: many", 1)
        path.write_text(text.replace("outcome:\n", "outcome:\n  final_state: [done]\n", 1))
        (root / "episodes" / "index.yaml").unlink()
        report = plane.verify(fix=True)
        fields = [p for p in report.problems if p.category == "field"]
        assert fields and all(p.path.endswith("episode.yaml") and p.line for p in fields)
        assert not any("quarantined" in f for f in report.fixed)
        assert [e["id"] for e in plane.episodes.entries()] == [ep_id]
        ep = plane.episodes.get(ep_id)
        assert ep is not None and ep.outcome.final_state == "done" and ep.metrics.tool_steps == 0
        assert path.exists()


def test_gc_keeps_the_evidence_of_a_quarantined_episode(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        ep_id = record(plane, "open wechat", {"app": "WeChat"})
        d = plane.episodes.episode_dir(ep_id)
        (d / "episode.yaml").write_text("id: [not, an, id]\n")  # beyond repair: quarantined by --fix
        report = plane.verify(fix=True)
        assert any("quarantined" in f for f in report.fixed)
        old = datetime.now(timezone.utc) - timedelta(days=2)
        os.utime(d, (old.timestamp(), old.timestamp()))
        gc = plane.gc()
        assert (d / "events.jsonl").exists(), gc.removed
        assert gc.kept.get("quarantined_episode_evidence") == 1
        assert list((root / QUARANTINE_DIR).iterdir())


# -- point 12: hand-editing rules people can rely on ----------------------------------------------------


def _procedure(plane: MemoryPlane, item_id: str = "proc_manual") -> Path:
    item = plane.device.new_item(plane.device.collection("procedure").model, item_id, title="Pay with Alipay",
                                 app_id="alipay", intent="pay", steps=[{"tool": "tap", "target_label": "Pay"}])
    return plane.device.collection("procedure").save(item)


def test_documented_statuses_set_by_hand_work(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        path = _procedure(plane)
        assert "proc_manual" in plane.retrieve("用支付宝付款 pay with alipay").refs()
        path.write_text(path.read_text().replace("status: active", "status: inactive"))
        assert plane.verify().ok
        assert "proc_manual" not in plane.retrieve("用支付宝付款 pay with alipay").refs()
        path.write_text(path.read_text().replace("status: inactive", "status: Switched Off"))
        report = plane.verify(fix=True)
        assert [p.category for p in report.problems] == ["field"] and "inactive" in report.problems[0].message
        assert "proc_manual" not in plane.retrieve("用支付宝付款 pay with alipay").refs()
        assert path.exists() and plane.gc().removed == []  # a person's switch-off is never collected


def test_a_field_of_the_wrong_shape_is_named_and_treated_as_absent(tmp_path: Path, capsys) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        path = _procedure(plane)
        path.write_text(path.read_text().replace("confidence: 0.5", "confidence: high"))
        item = plane.device.get("proc_manual")
        assert item is not None and item.confidence == 0.5
        report = plane.verify(fix=True)
        (prob,) = report.problems
        line = path.read_text().split("\n").index("confidence: high") + 1
        assert prob.category == "field" and prob.path.endswith("proc_manual.yaml") and prob.line == line
        assert path.exists() and not list((root / QUARANTINE_DIR).iterdir())
        assert "proc_manual" in plane.retrieve("用支付宝付款 pay with alipay").refs()
    assert cli(["--root", str(root), "lifecycle", "verify", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["problem_counts"] == {"field": 1}


@freeze_time("2026-06-01T00:00:00Z")
def test_unknown_status_in_an_index_line_is_not_served(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        _procedure(plane)
        idx = plane.device.collection("procedure").index.path
        idx.write_text(idx.read_text().replace('"status": "active"', '"status": "Disabled"'))
        ctx = plane.retrieve("用支付宝付款 pay with alipay")
        assert "proc_manual" not in ctx.refs() and ctx.dropped.get("inactive")
