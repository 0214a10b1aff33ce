"""`fleet pack` and `fleet pull`: lessons verified on enough phones, none forgotten on any, added to a phone as from
the fleet: weighed below its own evidence, shown as from the fleet, below the user's rules, demoted by local
failures, never bringing back what was forgotten here; pulling twice changes nothing."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.fleet import (
    FLEET_CONFIDENCE,
    FleetSource,
    TreeExport,
    build_pack,
    export_tree,
    fleet_report,
    pull_pack,
)
from memory_plane.lifecycle import init_tree
from memory_plane.sim import ScriptedAgent, SimPhone, tasks_for

from helpers import run_memplane, sim_phone_tree

pytest.importorskip("duckdb")
pytest.importorskip("fsspec")
NOW = datetime(2026, 12, 6, tzinfo=timezone.utc)
CHAT = "打开微信，找到周八，准备发消息"


def _export(tree: Path, dest: Path, device: str) -> None:
    with MemoryPlane.open(tree) as plane:
        export_tree(TreeExport(plane.device, plane.episodes, plane.clock), str(dest), device)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three phones that did the same tasks; the third forgot its WeChat chat procedure after one export."""
    base = tmp_path_factory.mktemp("fleet")
    a = sim_phone_tree(base / "a", device_id="phone")
    for name in ("b", "c"):
        shutil.copytree(a, base / name, symlinks=True)
    dest = base / "out"
    for name in ("a", "b", "c"):
        _export(base / name, dest, f"phone-{name}")
    with MemoryPlane.open(base / "c") as plane:
        forgotten = next(e["id"] for e in plane.device.entries("procedure") if e.get("intent") == "send_message")
        plane.forget(forgotten, reason="the user asked")
    _export(base / "c", dest, "phone-c")
    return {"base": base, "dest": dest, "forgotten": forgotten}


@pytest.fixture(scope="module")
def pack(fleet: dict[str, Any]) -> dict[str, Any]:
    with FleetSource.open(str(fleet["dest"])) as src:
        return build_pack(src, min_devices=2, now=NOW)


def _new_phone(tmp_path: Path) -> Path:
    root = tmp_path / "new"
    init_tree(root)
    return root


def _device_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "device").rglob("*")) if p.is_file()}


def test_a_pack_holds_only_lessons_on_enough_devices_and_none_forgotten_on_any(fleet: dict[str, Any],
                                                                              pack: dict[str, Any]) -> None:
    with FleetSource.open(str(fleet["dest"])) as src:
        rows = src.rows("lessons")
        key = next(r["lesson_key"] for r in rows if r["id"] == fleet["forgotten"])
        assert build_pack(src, min_devices=4, now=NOW)["lessons"] == []
    assert pack["lessons"] and all(x["devices"] >= 2 for x in pack["lessons"])
    for lesson in pack["lessons"]:
        holders = {r["device"] for r in rows if r["lesson_key"] == lesson["lesson_key"] and r["status"] == "active"}
        assert len(holders) >= 2
    # Held on two phones still, but forgotten on the third: a wrong or unwanted lesson is not shared.
    assert key not in {x["lesson_key"] for x in pack["lessons"]}


def test_a_pack_holds_one_path_per_goal_the_one_on_most_phones_then_the_shortest(fleet: dict[str, Any],
                                                                                 pack: dict[str, Any]) -> None:
    procs = [x for x in pack["lessons"] if x["type"] == "procedure"]
    groups = [(x["item"]["app_id"], x["item"]["goal_pattern"], json.dumps(x["applicability"], sort_keys=True))
              for x in procs]
    assert procs and len(groups) == len(set(groups))
    with FleetSource.open(str(fleet["dest"])) as src:
        rows = [r for r in src.rows("lessons") if r["type"] == "procedure" and r["status"] == "active"]
    for x in procs:
        rivals = [r for r in rows if r["item"].get("goal_pattern") == x["item"]["goal_pattern"]
                  and r["app"] == x["item"]["app_id"] and r["language"] == x["applicability"].get("language")]
        assert all(len(r["item"]["steps"]) >= len(x["item"]["steps"]) for r in rivals
                   if len({q["device"] for q in rows if q["lesson_key"] == r["lesson_key"]}) >= x["devices"])


def test_a_pulled_lesson_is_from_the_fleet_below_the_phones_own_evidence(pack: dict[str, Any],
                                                                         tmp_path: Path) -> None:
    root = _new_phone(tmp_path)
    with MemoryPlane.open(root) as plane:
        res = pull_pack(plane.device, pack, "phone-new", plane.episodes)
        assert res.added and not res.invalid
        for item_id in res.added:
            item = plane.device.get(item_id)
            assert item is not None and (item.model_extra or {}).get("source") == "fleet"
            assert item.confidence <= FLEET_CONFIDENCE and item.success_count == 0
            assert item.applicability.get("device_id") == "phone-new"
        plane.save_rule("微信里发消息前先确认联系人")
        memory = plane.retrieve(MemoryRetrieveRequest(input=CHAT, device_id="phone-new",
                                                      current_hints={"language": "zh-CN"}))
    fleet_hits = [h for h in memory.hits() if "fleet_" in h.id]
    assert fleet_hits and all(h.text.startswith("From the fleet (verified on") for h in fleet_hits)
    assert all(h.factors["conflict_or_stale_penalty"] > 0 for h in fleet_hits)
    block = memory.render()
    assert block.index("发消息前先确认联系人") < block.index("From the fleet")  # never above the user's rules


def test_pulling_twice_changes_nothing(pack: dict[str, Any], tmp_path: Path) -> None:
    root = _new_phone(tmp_path)
    with MemoryPlane.open(root) as plane:
        first = pull_pack(plane.device, pack, "phone-new", plane.episodes)
        before = _device_files(root)
        again = pull_pack(plane.device, pack, "phone-new", plane.episodes)
    assert again.added == [] and again.already_here == len(first.added)
    assert _device_files(root) == before


def test_a_lesson_forgotten_here_never_comes_back_from_a_pack(pack: dict[str, Any], tmp_path: Path) -> None:
    root = _new_phone(tmp_path)
    with MemoryPlane.open(root) as plane:
        added = pull_pack(plane.device, pack, "phone-new", plane.episodes).added
        gone = [i for i in added if i.startswith("proc_")][:2]
        for item_id in gone:
            plane.forget(item_id, reason="not for this phone")
        plane.gc()
        again = pull_pack(plane.device, pack, "phone-new", plane.episodes)
        assert again.forgotten == len(gone) and not set(gone) & set(again.added)
        assert all(plane.device.get(i) is None for i in gone)


def test_a_lesson_the_phone_learned_itself_is_not_copied(fleet: dict[str, Any], pack: dict[str, Any],
                                                         tmp_path: Path) -> None:
    own = Path(shutil.copytree(fleet["base"] / "a", tmp_path / "own", symlinks=True))
    with MemoryPlane.open(own) as plane:
        res = pull_pack(plane.device, pack, "phone", plane.episodes)
    assert res.own_lesson > 0 and len(res.added) < len(pack["lessons"])


class _SoldOut(SimPhone):
    """A phone whose Meituan adds nothing to the cart: an order fails there whatever memory says."""

    def _tap(self, e: Any) -> None:
        if not (self.page == "mt_shop" and e.key == "add"):
            super()._tap(e)


def test_local_failures_demote_a_fleet_lesson_like_any_lesson(pack: dict[str, Any], tmp_path: Path) -> None:
    root = _new_phone(tmp_path)
    with MemoryPlane.open(root) as plane:
        pull_pack(plane.device, pack, "phone-new", plane.episodes)
        agent = ScriptedAgent(_SoldOut(), plane, device_id="phone-new", step_limit=15)
        order = next(t for t in tasks_for("zh-CN", 1, 3) if t.app == "meituan")
        runs = [agent.run(order) for _ in range(2)]
        used = {r for run in runs for r in run.used_refs if r.startswith("proc_fleet_")}
        assert used and not any(run.true_success for run in runs)
        followed = [plane.device.get(i) for i in sorted(used)]
        # The fleet's path the phone followed into the failure lost its trust and was demoted, as its own lesson
        # would be (the next run was shown another path).
        assert any(p is not None and p.failure_count >= 1 and p.status == "conflicted" for p in followed)


def test_a_phone_with_the_pack_takes_fewer_steps_on_the_fleets_tasks(pack: dict[str, Any], tmp_path: Path) -> None:
    steps = {}
    for with_pack in (False, True):
        root = tmp_path / f"phone-{with_pack}"
        with MemoryPlane.open(root) as plane:
            if with_pack:
                pull_pack(plane.device, pack, "phone-new", plane.episodes)
            agent = ScriptedAgent(SimPhone(), plane, device_id="phone-new", step_limit=25)
            runs = [agent.run(t) for t in tasks_for("zh-CN", 5, 3, seed=2)]
        assert all(r.true_success for r in runs)
        steps[with_pack] = sum(r.steps for r in runs)
    assert steps[True] < steps[False]


def test_the_cli_packs_and_pulls(fleet: dict[str, Any], tmp_path: Path) -> None:
    pack_file = tmp_path / "pack.json"
    out = run_memplane("fleet", "pack", str(fleet["dest"]), str(pack_file), "--min-devices", "2", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["lessons"] == len(json.loads(pack_file.read_text())["lessons"]) > 0
    root = _new_phone(tmp_path)
    first = run_memplane("--root", str(root), "fleet", "pull", str(pack_file), "--json")
    assert first.returncode == 0, first.stderr and json.loads(first.stdout)["added"]
    second = json.loads(run_memplane("--root", str(root), "fleet", "pull", str(pack_file), "--json").stdout)
    assert second["added"] == []
    pack_file.write_text("not a pack")
    bad = run_memplane("--root", str(root), "fleet", "pull", str(pack_file), "--json")
    assert bad.returncode == 2 and str(pack_file) in json.loads(bad.stdout)["error"]


def test_a_lesson_a_phone_only_pulled_is_no_evidence_for_it(fleet: dict[str, Any], pack: dict[str, Any],
                                                            tmp_path: Path) -> None:
    dest = Path(shutil.copytree(fleet["dest"], tmp_path / "fleet"))
    root = _new_phone(tmp_path)
    with MemoryPlane.open(root) as plane:
        assert pull_pack(plane.device, pack, "phone-d", plane.episodes).added
    _export(root, dest, "phone-d")
    with FleetSource.open(str(dest)) as src:
        assert any(r["source"] == "fleet" for r in src.rows("lessons"))
        assert build_pack(src, min_devices=4, now=NOW)["lessons"] == []  # three phones learned them, not four
        report = fleet_report(src, min_devices=4)
    assert sum(r["verified_lessons"] for r in report["apps"].values()) == 0
