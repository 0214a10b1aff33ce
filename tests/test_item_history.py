"""Every change of a device memory can be seen (`device history`) and undone (`device revert --to N`)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane
from memory_plane.cli import main as cli
from memory_plane.device_memory import HISTORY_LIMIT, Procedure, change_cause
from memory_plane.lifecycle import TombstoneLog, UsageError

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def _plane(root: Path) -> MemoryPlane:
    return MemoryPlane.open(root)


def _procedure(plane: MemoryPlane, item_id: str = "proc_pay") -> Procedure:
    coll = plane.device.collection("procedure")
    item = plane.device.new_item(Procedure, item_id, title="Pay", app_id="alipay", goal_pattern="pay {x}",
                                 steps=[{"tool": "tap", "target_label": "Pay"}])
    coll.save(item)
    return item


def _set(**fields: Any) -> Any:
    def change(cur: Any) -> Any:
        for k, v in fields.items():
            setattr(cur, k, v)
        return cur

    return change


def _fields(item: Any) -> dict[str, Any]:
    data = item.to_yaml_dict()
    data.pop("updated_at", None)  # every write stamps it; a revert is a write of its own
    return data


def test_each_write_is_a_revision_with_field_old_new_cause_and_time(tmp_path: Path) -> None:
    with freeze_time(T0):
        plane = _plane(tmp_path / "m")
        _procedure(plane)
    with freeze_time(T0 + timedelta(minutes=5)), change_cause("blamed_by_failure", episode="ep_1"):
        plane.device.upsert("procedure", "proc_pay", _set(status="conflicted", confidence=0.3))
    revs = plane.device.history("proc_pay")
    assert [r.rev for r in revs] == [1, 2]
    assert revs[0].rule == "created" and {"field": "title", "new": "Pay"} in revs[0].changes
    assert revs[1].at == "2026-03-01T09:05:00Z"
    assert revs[1].rule == "blamed_by_failure" and revs[1].episode == "ep_1"
    assert {"field": "status", "old": "active", "new": "conflicted"} in revs[1].changes
    assert {"field": "confidence", "old": 0.5, "new": 0.3} in revs[1].changes
    # Beside the item, as plain text a person can read; never taken for an item.
    hist = tmp_path / "m" / "device" / "procedures" / ".history" / "proc_pay.jsonl"
    assert [json.loads(line)["rev"] for line in hist.read_text("utf-8").splitlines()] == [1, 2]
    assert [e["id"] for e in plane.device.entries("procedure")] == ["proc_pay"]
    assert plane.verify().problems == []
    plane.close()


def test_a_lesson_names_the_episode_that_caused_it(tmp_path: Path) -> None:
    from helpers import tree_with_one_task

    root = tree_with_one_task(tmp_path / "m")
    with MemoryPlane.open(root) as plane:
        ep_id = plane.episodes.entries()[0]["id"]
        app = next(e["id"] for e in plane.device.entries("app_profile"))
        revs = plane.device.history(app)
    assert revs and revs[0].episode == ep_id


def test_revert_restores_a_revision_as_a_change_of_its_own(tmp_path: Path) -> None:
    with freeze_time(T0):
        plane = _plane(tmp_path / "m")
        _procedure(plane)
        first = _fields(plane.device.get("proc_pay"))
    with freeze_time(T0 + timedelta(hours=1)):
        plane.device.upsert("procedure", "proc_pay", _set(status="conflicted", title="Pay (wrong)"))
    with freeze_time(T0 + timedelta(hours=2)):
        back = plane.device.revert("proc_pay", 1)
    assert _fields(back) == first
    assert _fields(plane.device.get("proc_pay")) == first
    revs = plane.device.history("proc_pay")
    assert revs[-1].rev == 3 and revs[-1].rule == "revert" and revs[-1].at == "2026-03-01T11:00:00Z"
    assert {"field": "status", "old": "conflicted", "new": "active"} in revs[-1].changes
    assert plane.device.entries("procedure")[0]["status"] == "active"  # the index line follows
    # The revert can be reverted in turn.
    plane.device.revert("proc_pay", 2)
    assert plane.device.get("proc_pay").title == "Pay (wrong)"  # type: ignore[union-attr]
    plane.close()


def test_hand_edits_keep_working_and_a_revert_keeps_fields_no_change_touched(tmp_path: Path) -> None:
    plane = _plane(tmp_path / "m")
    path = plane.device.collection("procedure").path_of(_procedure(plane).id)
    plane.device.upsert("procedure", "proc_pay", _set(confidence=0.9))
    text = path.read_text("utf-8").replace("title: Pay", "title: Pay with Alipay  # said by me")
    path.write_text(text, "utf-8")
    plane.device.revert("proc_pay", 1)
    item = plane.device.get("proc_pay")
    assert item.confidence == 0.5 and item.title == "Pay with Alipay"  # type: ignore[union-attr]
    assert "# said by me" in path.read_text("utf-8")
    plane.close()


def test_unknown_id_or_revision_is_a_usage_error(tmp_path: Path) -> None:
    plane = _plane(tmp_path / "m")
    _procedure(plane)
    with pytest.raises(UsageError, match="no device memory proc_nope"):
        plane.device.history("proc_nope")
    with pytest.raises(UsageError, match="no revision 7"):
        plane.device.revert("proc_pay", 7)
    with pytest.raises(UsageError, match="no device memory"):
        plane.device.revert("../x", 1)
    plane.close()


def test_forget_takes_the_history_with_it(tmp_path: Path) -> None:
    plane = _plane(tmp_path / "m")
    _procedure(plane)
    hist = tmp_path / "m" / "device" / "procedures" / ".history" / "proc_pay.jsonl"
    assert hist.exists()
    assert plane.forget("proc_pay")
    assert not hist.exists()
    plane.close()


def test_gc_removes_a_history_left_without_its_item(tmp_path: Path) -> None:
    # A GC killed between removing an item and its history (or an item file deleted by hand) leaves a history
    # whose item is gone: the next GC removes it (a dry run names it only); a live item's history stays.
    plane = _plane(tmp_path / "m")
    _procedure(plane, "proc_gone")
    _procedure(plane, "proc_kept")
    _procedure(plane, "proc_quarantined")
    folder = tmp_path / "m" / "device" / "procedures"
    # proc_gone: tombstoned and its file removed, as a GC killed before the history leaves it.
    TombstoneLog(tmp_path / "m").add("procedure", "proc_gone", reason="gc")
    (folder / "proc_gone.yaml").unlink()
    # proc_quarantined: moved out for a person to look at, no tombstone; restoring it keeps its history.
    (folder / "proc_quarantined.yaml").write_text("title: [unclosed\n")
    assert plane.verify(fix=True).fixed
    plane.device.collection("procedure").rebuild_index()
    dry = plane.gc(dry_run=True)
    assert "device/procedures/.history/proc_gone.jsonl" in [r["path"] for r in dry.removed]
    assert (folder / ".history" / "proc_gone.jsonl").exists()
    rep = plane.gc()
    assert [r["path"] for r in rep.removed if ".history" in r["path"]] == ["device/procedures/.history/proc_gone.jsonl"]
    assert not (folder / ".history" / "proc_gone.jsonl").exists()
    assert (folder / ".history" / "proc_kept.jsonl").exists()
    assert (folder / ".history" / "proc_quarantined.jsonl").exists()
    assert [r["path"] for r in plane.gc().removed if ".history" in r["path"]] == []
    plane.close()


def test_device_profiles_have_a_history_too(tmp_path: Path) -> None:
    plane = _plane(tmp_path / "m")
    from memory_plane.device_memory import DeviceProfile

    plane.device.profiles.update("pixel", lambda cur: plane.device.new_item(
        DeviceProfile, "device_pixel", device_id="pixel", language="en-US"))
    plane.device.profiles.update("pixel", _set(language="zh-CN"))
    plane.device.revert("device_pixel", 1)
    assert plane.device.get("device_pixel").language == "en-US"  # type: ignore[union-attr]
    assert [r.rule for r in plane.device.history("device_pixel")] == ["created", None, "revert"]
    plane.close()


def test_the_cli_shows_and_reverts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "m"
    with _plane(root) as plane:
        _procedure(plane)
        plane.device.upsert("procedure", "proc_pay", _set(title="Pay twice"))
    assert cli(["--root", str(root), "device", "history", "proc_pay"]) == 0
    out = capsys.readouterr().out
    assert "#2" in out and 'title: "Pay" → "Pay twice"' in out
    assert cli(["--root", str(root), "device", "revert", "proc_pay", "--to", "1", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["revision"]["rev"] == 3 and rec["revision"]["rule"] == "revert"
    assert cli(["--root", str(root), "device", "history", "proc_pay", "--json"]) == 0
    assert [r["rev"] for r in json.loads(capsys.readouterr().out)["revisions"]] == [1, 2, 3]
    # Unknown id, unknown revision: exit 2, one JSON line with --json.
    assert cli(["--root", str(root), "device", "history", "proc_nope", "--json"]) == 2
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["error"] == "no device memory proc_nope"
    assert cli(["--root", str(root), "device", "revert", "proc_pay", "--to", "40"]) == 2
    assert "no revision 40" in capsys.readouterr().err


FIELD_VALUES = st.fixed_dictionaries({}, optional={
    "title": st.text(min_size=1, max_size=12),
    "confidence": st.floats(0, 1, allow_nan=False).map(lambda x: round(x, 3)),
    "status": st.sampled_from(["active", "conflicted", "expired", "inactive"]),
    "success_count": st.integers(0, 50),
    "tags": st.lists(st.sampled_from(["a", "b", "页面", "d"]), max_size=3),
    "summary": st.one_of(st.none(), st.text(max_size=20)),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(updates=st.lists(FIELD_VALUES, min_size=1, max_size=HISTORY_LIMIT + 6), data=st.data())
def test_revert_to_any_kept_revision_gives_back_its_fields(tmp_path_factory: pytest.TempPathFactory,
                                                            updates: list[dict[str, Any]], data: st.DataObject) -> None:
    plane = _plane(tmp_path_factory.mktemp("h") / "m")
    _procedure(plane)
    states = {1: _fields(plane.device.get("proc_pay"))}
    written = 1  # revisions made: the creation, then every update that changed a recorded field
    for fields in updates:
        before = _fields(plane.device.get("proc_pay"))
        plane.device.upsert("procedure", "proc_pay", _set(**fields))
        revs = plane.device.history("proc_pay")
        states[revs[-1].rev] = after = _fields(plane.device.get("proc_pay"))
        written += after != before
    revs = plane.device.history("proc_pay")
    assert len(revs) == min(written, HISTORY_LIMIT) and revs[-1].rev == written
    assert [r.rev for r in revs] == list(range(revs[0].rev, revs[-1].rev + 1))
    to = data.draw(st.sampled_from([r.rev for r in revs]))
    plane.device.revert("proc_pay", to)
    assert _fields(plane.device.get("proc_pay")) == states[to]
    assert len(plane.device.history("proc_pay")) <= HISTORY_LIMIT
    dropped = revs[0].rev - 1
    if dropped:
        with pytest.raises(UsageError):
            plane.device.revert("proc_pay", dropped)
    plane.close()


def test_verify_names_a_history_folder_that_is_a_file_and_a_line_that_is_no_revision(tmp_path: Path) -> None:
    """A person (or a full disk) left `.history` as a file, or a line that is no revision: verify names each with
    its file (and line); the items are untouched."""
    from memory_plane.lifecycle import atomic_write

    with MemoryPlane.open(tmp_path / "m") as plane:
        item = plane.device.new_item(Procedure, "proc_h", title="Pay", steps=[{"tool": "tap", "target_label": "Pay"}])
        coll = plane.device.collection("procedure")
        coll.save(item)
        hist = coll.history.path_of("proc_h")
        atomic_write(hist, hist.read_text("utf-8") + "not json\n", root=plane.root)
        report = plane.verify()
        assert [(p.path, p.line) for p in report.problems if p.category == "jsonl"] == [
            ("device/procedures/.history/proc_h.jsonl", 2)]
        cal = plane.root / "device" / "calibration" / ".history"
        if cal.exists():
            import shutil
            shutil.rmtree(cal)
        cal.write_text("")
        report = plane.verify()
        assert any(p.category == "shape" and p.path == "device/calibration/.history" for p in report.problems)
        assert plane.device.get("proc_h") is not None


def test_a_ui_language_going_back_and_forth_does_not_push_real_changes_out_of_the_history(tmp_path: Path) -> None:
    """Each switch of the UI language sets aside what was learned under the other one and brings it back when
    the language returns: that round trip is one counted line of the history, however often it happens, so the
    item's own changes stay in its bounded history with their numbers."""
    with MemoryPlane.open(tmp_path / "m") as plane:
        item = plane.device.new_item(Procedure, "proc_lang", title="Pay", applicability={"language": "en"},
                                     steps=[{"tool": "tap", "target_label": "Pay"}])
        coll = plane.device.collection("procedure")
        coll.save(item)
        coll.update("proc_lang", lambda cur: cur.model_copy(update={"confidence": 0.9}) if cur else None)
        for _ in range(HISTORY_LIMIT + 5):
            plane.device.mark_environment_change("default", "language", "en", "zh-CN")
            plane.device.mark_environment_change("default", "language", "zh-CN", "en")
        revs = plane.device.history("proc_lang")
        assert [r.rule for r in revs] == ["created", None, "environment_round_trip"]
        assert revs[-1].extra["times"] == HISTORY_LIMIT + 5 and revs[-1].changes == []
        assert [r.rev for r in revs] == sorted({r.rev for r in revs})  # numbers only grow
        plane.device.mark_environment_change("default", "language", "en", "zh-CN")  # set aside, and left so
        last = plane.device.history("proc_lang")[-1]
        assert last.rule == "environment_changed" and last.rev > revs[-1].rev
        assert plane.device.get("proc_lang").status == "conflicted"  # type: ignore[union-attr]
