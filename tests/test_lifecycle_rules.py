"""TTL and renewal (freezegun), expiry vs deletion, conflicts and their handling, verify and GC safety.

It reaches inside `lifecycle._gc` to kill GC at its removal step.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from freezegun import freeze_time

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest
from memory_plane.cli import main as cli
from memory_plane.device_memory import Failure, Navigation, Procedure
from memory_plane.lifecycle import ConfigError, GcReport, Removal, apply_plan, load_retention, parse_ts, read_jsonl

from helpers import screenshot

T0 = datetime(2026, 6, 1, tzinfo=timezone.utc)
ZH = CurrentEnvironmentHints(language="zh-CN", screen_width=640, screen_height=1200)
REPO = Path(__file__).resolve().parent.parent

PATH = [
    ("launch_app", {"app": "Meituan"}, "open", {"app": "Meituan", "page": "Home"}),
    ("tap", {"x": 100, "y": 100}, "cart tab", {"app": "Meituan", "page": "Cart"}),
]


def run(plane: MemoryPlane, goal: str, steps, *, success=True, hints=ZH, refs=None, **finish):
    req = MemoryRetrieveRequest(input=goal, current_hints=hints)
    rec = plane.new_episode_recorder(req)
    if refs is not None:
        rec.episode.retrieved_memory_refs = list(refs)
    for tool, ti, content, obs, *err in steps:
        rec.tool_call(tool, ti, content=content, target_label=content)
        shot = screenshot(str((obs or {}).get("page", "none")), (640, 1200)) if obs else None
        rec.tool_result(tool, is_error=bool(err), error=err[0] if err else None, observed_state=obs, screenshot=shot)
    ep = rec.finish(success=success, **finish)
    plane.commit_episode(ep)
    plane.flush(10)
    return ep


def items(plane: MemoryPlane, kind: str):
    return [plane.device.get(e["id"]) for e in plane.device.entries(kind)]


def ttl_days(item) -> float:
    return (item.expires_at - item.last_validated_at).total_seconds() / 86400


# -- TTL and renewal -------------------------------------------------------------------


def test_default_ttl_per_type(root: Path) -> None:
    with freeze_time(T0), MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", [*PATH, ("keyboard_text", {"text": "咖啡"}, None,
                                                       {"app": "Meituan", "page": "Cart"}, "IME")],
            success=False, failure_reason="no text")
        run(plane, "order coffee on Meituan", PATH)
        got = {k: ttl_days(items(plane, k)[0]) for k in ("app_profile", "procedure", "navigation", "calibration",
                                                          "failure", "ui_anchor")}
        prof = plane.device.profiles.get("default")
        assert prof is not None and ttl_days(prof) == 90
    assert got == {"app_profile": 30, "procedure": 45, "navigation": 30, "calibration": 30, "failure": 60,
                   "ui_anchor": 30}


def test_long_term_ttls(root: Path) -> None:
    with freeze_time(T0), MemoryPlane.open(root) as plane:
        fact = plane.long_term.get(plane.long_term.save_memory(type="fact", content="wifi is Acme-5G").id)
        rule = plane.long_term.get(plane.long_term.save_memory(type="rule", content="never pay without asking").id)
    assert fact is not None and fact.expires_at == T0 + timedelta(days=180)
    assert rule is not None and rule.expires_at is None


def test_procedure_renewed_by_success_not_by_failure(root: Path) -> None:
    with freeze_time(T0) as ft, MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", PATH)
        pid = plane.device.entries("procedure")[0]["id"]
        ft.move_to(T0 + timedelta(days=40))
        run(plane, "order coffee on Meituan", PATH[:1], refs=[pid], success=False, failure_reason="x")
        p = plane.device.get(pid)
        assert isinstance(p, Procedure) and p.expires_at == T0 + timedelta(days=45)
        run(plane, "order coffee on Meituan", PATH, refs=[pid])
        p = plane.device.get(pid)
        assert isinstance(p, Procedure) and p.expires_at == T0 + timedelta(days=85)


def test_failure_renewed_only_when_it_happens_again(root: Path) -> None:
    bad = [("keyboard_text", {"text": "微信"}, None, {"app": "Launcher", "page": "Search"}, "IME")]
    good = [("keyboard_text", {"text": "weixin"}, None, {"app": "WeChat", "page": "Home"})]
    with freeze_time(T0) as ft, MemoryPlane.open(root) as plane:
        run(plane, "打开微信", bad, success=False, failure_reason="no text")
        fid = next(e["id"] for e in plane.device.entries("failure") if "non_ascii" in str(e.get("title")))
        ft.move_to(T0 + timedelta(days=30))
        run(plane, "打开微信", good, refs=[fid])  # heeded: not a renewal
        f = plane.device.get(fid)
        assert isinstance(f, Failure) and f.expires_at == T0 + timedelta(days=60)
        run(plane, "打开微信", bad, success=False, failure_reason="no text")  # happened again
        f = plane.device.get(fid)
        assert isinstance(f, Failure) and f.expires_at == T0 + timedelta(days=90) and f.occurrences == 2


def test_gc_keeps_an_item_renewed_after_its_scan(root: Path, monkeypatch) -> None:
    # The agent renews a memory between GC's scan and GC taking the collection's lock: it stays.
    with freeze_time(T0) as ft, MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", PATH)
        coll = plane.device.collections["procedure"]
        pid = coll.entries()[0]["id"]
        ft.move_to(T0 + timedelta(days=46 + 15))
        real_lock = coll.lock

        def renew_then_lock():  # type: ignore[no-untyped-def]
            monkeypatch.setattr(coll, "lock", real_lock)  # once, as the agent would
            rec = coll.get(pid)
            assert rec is not None
            rec.status, rec.expires_at = "active", T0 + timedelta(days=120)
            coll.save(rec)
            return real_lock()

        monkeypatch.setattr(coll, "lock", renew_then_lock)
        gc = plane.gc()
        assert pid not in str(gc.removed) and gc.kept.get("renewed_since_scan") == 1
        assert (root / "device" / "procedures" / f"{pid}.yaml").exists()


def test_app_profile_and_calibration_renewed_when_reverified(root: Path) -> None:
    with freeze_time(T0) as ft, MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", PATH)
        ft.move_to(T0 + timedelta(days=20))
        run(plane, "order tea on Meituan", PATH)
        app = plane.device.get("app_meituan")
        cal = items(plane, "calibration")[0]
        assert app is not None and app.expires_at == T0 + timedelta(days=50)
        assert cal is not None and cal.expires_at == T0 + timedelta(days=50)


def test_expired_is_hidden_then_marked_then_collected(root: Path) -> None:
    with freeze_time(T0) as ft, MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", PATH)
        pid = plane.device.entries("procedure")[0]["id"]
        path = root / "device" / "procedures" / f"{pid}.yaml"
        ft.move_to(T0 + timedelta(days=46))
        ctx = plane.retrieve(MemoryRetrieveRequest(input="order coffee on Meituan", current_hints=ZH))
        assert pid not in ctx.refs() and path.exists()
        rep = plane.verify()
        assert pid in rep.stats["expired_marked"]
        assert plane.device.get(pid).status == "expired"  # type: ignore[union-attr]
        assert plane.gc().removed == [] or pid not in str(plane.gc().removed)
        ft.move_to(T0 + timedelta(days=46 + 15))
        gc = plane.gc()
        assert any(pid in r["path"] and r["reason"] == "expired_past_grace" for r in gc.removed)
        assert not path.exists() and pid not in [e["id"] for e in plane.device.entries("procedure")]
    tombs = read_jsonl(root / "lifecycle" / "tombstones.jsonl").records
    assert any(t["ref"]["id"] == pid and t["reason"] == "gc" for t in tombs)
    with freeze_time(T0 + timedelta(days=70)), MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", PATH)  # a GC'd lesson may be learned again
        assert plane.device.get(pid) is not None


def test_retention_overrides_and_bad_values(root: Path) -> None:
    cfg = root / "lifecycle" / "retention.yaml"
    cfg.write_text("ttl:\n  procedure: 10d\ngrace:\n  expired: 1d\n")
    with freeze_time(T0), MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", PATH)
        assert ttl_days(items(plane, "procedure")[0]) == 10
        assert ttl_days(items(plane, "navigation")[0]) == 30  # missing key: default
    cfg.write_text("ttl:\n  procedure: 10d\n  failure: soon\n")
    with pytest.raises(ConfigError) as ei:
        load_retention(cfg)
    assert ei.value.line == 3 and "failure" in str(ei.value)
    with MemoryPlane.open(root) as plane:
        rep = plane.verify()
        assert any(p.category == "config" and p.line == 3 for p in rep.problems)
    assert cli(["--root", str(root), "lifecycle", "gc"]) == 1


def test_unparsable_expiry_counts_as_expired_and_is_reported(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", PATH)
        pid = plane.device.entries("procedure")[0]["id"]
        path = root / "device" / "procedures" / f"{pid}.yaml"
        text = path.read_text()
        import re

        path.write_text(re.sub(r"expires_at: .*", "expires_at: next tuesday", text))
        rep = plane.verify()
        assert pid in rep.stats["expired_marked"]


def test_episode_trace_and_summary_ttl_and_referenced_evidence(root: Path) -> None:
    with freeze_time(T0) as ft, MemoryPlane.open(root) as plane:
        kept = run(plane, "order coffee on Meituan", PATH)  # evidence for the procedure
        # A user rule that cites it keeps it for as long as the rule lives (rules never expire).
        plane.long_term.save_memory(type="rule", content="order coffee on Meituan, never on Taobao",
                                    source_refs=[kept.id])
        loose = run(plane, "check the weather", [("tap", {"x": 1, "y": 2}, None, None)], success=False,
                    failure_phase="state_mismatch", failure_reason="nothing")
        fail_ids = [e["id"] for e in plane.device.entries("failure")]
        for fid in fail_ids:  # make the loose episode unreferenced
            plane.device.forget(fid, reason="test")
        for app in plane.device.entries("app_profile"):
            plane.device.forget(app["id"], reason="test")
        loose_dir = plane.episodes.episode_dir(loose.id)
        kept_dir = plane.episodes.episode_dir(kept.id)
        ft.move_to(T0 + timedelta(days=31))
        gc = plane.gc(dry_run=True)
        assert any(r["reason"] == "episode_trace_ttl" for r in gc.removed) and (loose_dir / "events.jsonl").exists()
        plane.gc()
        assert not (loose_dir / "events.jsonl").exists() and (loose_dir / "episode.yaml").exists()
        # The cited episode keeps an excerpt (the steps its memories cite), not its whole trace.
        assert (kept_dir / "excerpt.jsonl").exists() and not (kept_dir / "events.jsonl").exists()
        ep = plane.episodes.get(loose.id)
        assert ep is not None and ep.traceability == "summary_only"
        assert plane.verify(fix=True) is not None and plane.verify().ok
        ft.move_to(T0 + timedelta(days=181))
        plane.gc()
        assert not loose_dir.exists() and loose.id not in [e["id"] for e in plane.episodes.entries()]
        assert kept_dir.exists()


# -- conflicts ---------------------------------------------------------------------------


def nav_to(page: str, x: int = 100):
    return [PATH[0], ("tap", {"x": x, "y": 100}, "cart tab", {"app": "Meituan", "page": page})]


def test_contradicting_navigation_supersedes_weak_rule(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        run(plane, "open the cart on Meituan", nav_to("Cart"))
        run(plane, "open the cart on Meituan", nav_to("Orders", x=104))
        navs = {n.to_page: n for n in items(plane, "navigation") if isinstance(n, Navigation) and n.from_page == "Home"}
        assert navs["Cart"].status == "replaced" and navs["Cart"].superseded_by == navs["Orders"].id
        assert navs["Orders"].supersedes == navs["Cart"].id and navs["Orders"].status == "active"
        log = read_jsonl(root / "lifecycle" / "conflicts.jsonl").records
        assert log[-1]["rule"] == "navigation_contradicted" and log[-1]["decision"] == "superseded"


def test_contradicting_navigation_with_strong_rule_conflicts_both(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        for _ in range(3):
            run(plane, "open the cart on Meituan", nav_to("Cart"))
        run(plane, "open the cart on Meituan", nav_to("Orders", x=98))
        navs = {n.to_page: n for n in items(plane, "navigation") if isinstance(n, Navigation) and n.from_page == "Home"}
        assert navs["Cart"].status == "conflicted" and navs["Orders"].status == "conflicted"
        ctx = plane.retrieve(MemoryRetrieveRequest(input="open the cart on Meituan", current_hints=ZH))
        normal = [h.id for h in ctx.common.navigation]
        assert navs["Cart"].id not in normal and navs["Orders"].id not in normal
        assert {navs["Cart"].id, navs["Orders"].id} & {h.id for h in ctx.common.conflicts}


def test_success_and_failure_on_same_path_negate(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", PATH, )
        run(plane, "order coffee on Meituan", PATH, success=False, failure_phase="state_mismatch",
            failure_reason="cart empty")
        proc = items(plane, "procedure")[0]
        fails = [f for f in items(plane, "failure") if isinstance(f, Failure) and f.goal_pattern]
        # The path is in doubt; the failure that just happened is not (the line names what it
        # demoted, and what it conflicts with beside it).
        assert proc.status == "conflicted" and fails and fails[0].status == "active"
        log = read_jsonl(root / "lifecycle" / "conflicts.jsonl").records
        assert any(r["rule"] == "success_failure_negate" and r["decision"] == "undecided" and r["ids"] == [proc.id]
                   and fails[0].id in r["evidence"]["against"] for r in log)
        # New success evidence resolves it for the path.
        for _ in range(2):
            run(plane, "order coffee on Meituan", PATH)
        proc = plane.device.get(proc.id)
        assert proc is not None and proc.status == "active"
        assert any(r["rule"] == "resolved_by_new_evidence" for r in read_jsonl(root / "lifecycle" /
                                                                               "conflicts.jsonl").records)


def test_language_change_demotes_then_restores(root: Path) -> None:
    en = CurrentEnvironmentHints(language="en-US", screen_width=640, screen_height=1200)
    with MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", PATH)
        pid = plane.device.entries("procedure")[0]["id"]
        run(plane, "check Settings", [("tap", {"x": 5, "y": 5}, None, {"app": "Settings", "page": "Main"})], hints=en)
        p = plane.device.get(pid)
        assert p is not None and p.status == "conflicted" and "language" in str(p.model_extra)
        nohint = plane.retrieve(MemoryRetrieveRequest(input="order coffee on Meituan"))
        assert pid not in [h.id for h in nohint.common.procedures]
        en_ctx = plane.retrieve(MemoryRetrieveRequest(input="order coffee on Meituan", current_hints=en))
        assert pid not in en_ctx.refs()
        # The request's own hints say zh-CN again: fresher than the profile, so the path applies.
        zh_ctx = plane.retrieve(MemoryRetrieveRequest(input="order coffee on Meituan", current_hints=ZH))
        assert pid in [h.id for h in zh_ctx.common.procedures]
        run(plane, "check Settings", [("tap", {"x": 5, "y": 5}, None, {"app": "Settings", "page": "Main"})])
        p = plane.device.get(pid)
        assert p is not None and p.status == "active"
        assert pid in [h.id for h in plane.retrieve(MemoryRetrieveRequest(
            input="order coffee on Meituan", current_hints=ZH)).common.procedures]


def test_superseded_chain_in_long_term(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        lt = plane.long_term
        a = lt.save_memory(type="fact", content="office wifi password is on the fridge")
        b = lt.save_memory(type="fact", content="office wifi password is on the fridge door")
        c = lt.save_memory(type="fact", content="office wifi password is on the fridge door, top left")
        assert (b.status, c.status) == ("superseded", "superseded")
        assert lt.get(a.id).superseded_by == b.id and lt.get(b.id).superseded_by == c.id  # type: ignore[union-attr]
        assert lt.get(c.id).supersedes == b.id  # type: ignore[union-attr]
        assert [h.id for h in lt.recall_memory("wifi password fridge")] == [c.id]


# -- verify and GC safety ---------------------------------------------------------------------


def test_verify_fix_verify_is_clean(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        ep = run(plane, "order coffee on Meituan", PATH)
        d = root / "device" / "procedures"
        (d / "proc_broken.yaml").write_text("id: [oops\n")
        (d / "index.yaml").write_text("- {\"id\": \"x\"\n")
        (root / "long_term" / "memories" / "mem_bad.md").write_text("no frontmatter\n")
        with open(plane.episodes.episode_dir(ep.id) / "events.jsonl", "ab") as fh:
            fh.write(b'{"torn')
        rep = plane.verify()
        cats = {p.category for p in rep.problems}
        assert {"parse", "index", "torn_jsonl"} <= cats and not rep.ok
        fixed = plane.verify(fix=True)
        assert fixed.fixed
        again = plane.verify()
        assert again.ok, [str(p) for p in again.problems]
    assert cli(["--root", str(root), "lifecycle", "verify"]) == 0


def test_gc_never_follows_or_removes_symlinks(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "precious.txt"
    secret.write_text("keep me")
    with freeze_time(T0) as ft, MemoryPlane.open(root) as plane:
        ep = run(plane, "check the weather", [("tap", {"x": 1, "y": 2}, None, None)], success=False,
                 failure_phase="state_mismatch", failure_reason="nothing")
        for e in plane.device.entries("failure") + plane.device.entries("app_profile"):
            plane.device.forget(e["id"], reason="test")
        d = plane.episodes.episode_dir(ep.id)
        (d / "artifacts" / "link.png").symlink_to(secret)
        (d / "dirlink").symlink_to(outside)
        (root / "device" / "procedures" / "proc_link.yaml").symlink_to(secret)
        (root / "lifecycle" / "quarantine" / "qlink").symlink_to(outside)
        ft.move_to(T0 + timedelta(days=400))
        rep = plane.gc()
        assert secret.read_text() == "keep me" and outside.is_dir()
        assert (d / "artifacts" / "link.png").is_symlink() and (d / "dirlink").is_symlink()
        assert (root / "device" / "procedures" / "proc_link.yaml").is_symlink()
        assert rep.skipped_symlinks
        v = plane.verify()
        assert any(p.category == "symlink" for p in v.problems)


def test_gc_dry_run_changes_nothing(root: Path) -> None:
    with freeze_time(T0) as ft, MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", PATH)
        def snapshot() -> list[tuple[str, int]]:
            return sorted((str(p), p.stat().st_size if p.is_file() else 0) for p in root.rglob("*")
                          if p.name != ".lock")  # lock files are created by locking, never content

        before = snapshot()
        ft.move_to(T0 + timedelta(days=500))
        rep = plane.gc(dry_run=True)
        assert rep.removed and snapshot() == before


def test_gc_beside_a_committing_process_loses_nothing(root: Path) -> None:
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO / 'tests')!r})
        from memory_plane import MemoryPlane, MemoryRetrieveRequest
        with MemoryPlane.open({str(root)!r}) as plane:
            for i in range(25):
                rec = plane.new_episode_recorder(MemoryRetrieveRequest(input=f"task {{i}} on Meituan"))
                rec.tool_call("tap", {{"x": i, "y": 1}})
                rec.tool_result("tap", observed_state={{"app": "Meituan", "page": f"P{{i % 3}}"}})
                plane.commit_episode(rec.finish(success=True))
                print(rec.id, flush=True)
    """)
    with MemoryPlane.open(root) as plane:
        with freeze_time(T0 - timedelta(days=400)):
            for i in range(5):
                run(plane, f"old task {i}", [("tap", {"x": 1, "y": 1}, None, None)])
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        rounds = 0
        while proc.poll() is None or rounds < 2:
            plane.gc()
            plane.verify()
            rounds += 1
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        ids = out.split()
        assert len(ids) == 25
        indexed = {e["id"] for e in plane.episodes.entries()}
        for eid in ids:
            assert eid in indexed and plane.episodes.get(eid) is not None


def test_cli_exit_codes_and_help(root: Path, capsys) -> None:
    assert cli(["--root", str(root), "lifecycle", "gc", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dry_run"] is True
    assert cli(["--root", str(root), "bogus"]) == 2
    assert cli(["--root", str(root), "retrieve", "x", "--screen", "big"]) == 2
    for cmd in ["init", "retrieve", "episodes", "device", "memory", "lifecycle", "import", "bench", "demo"]:
        assert cli([cmd, "--help"]) == 0
    assert parse_ts("2026-01-01T00:00:00Z").year == 2026


def test_the_gc_report_records_and_apply_plan_removes(tmp_path: Path) -> None:
    old = tmp_path / "session_archive" / "old"
    old.mkdir(parents=True)
    (old / "events.jsonl").write_text("{}\n")
    rep = GcReport()
    rep.discard(tmp_path, old, "session_archive_past_grace")
    assert old.exists()  # noted and planned, not removed
    assert rep.removed == [{"path": "session_archive/old", "reason": "session_archive_past_grace", "bytes": 3}]
    assert rep.plan == [Removal(old, "session_archive_past_grace")]
    apply_plan(tmp_path, rep)
    assert not old.exists() and rep.plan == [] and rep.bytes_freed == 3
    # A dry run's report is its plan: applying it removes nothing.
    kept = tmp_path / "session_archive" / "kept.jsonl"
    kept.write_text("{}\n")
    dry = GcReport(dry_run=True)
    dry.discard(tmp_path, kept, "session_archive_past_grace")
    apply_plan(tmp_path, dry)
    assert kept.exists() and dry.plan == [] and [r["path"] for r in dry.removed] == ["session_archive/kept.jsonl"]


def test_gc_resumes_after_a_crash(root: Path, monkeypatch) -> None:
    import memory_plane.lifecycle._gc as maint  # every GC removal goes through its remove_path

    with freeze_time(T0) as ft, MemoryPlane.open(root) as plane:
        for i in range(3):
            run(plane, f"order item {i} on Meituan", PATH)
        ft.move_to(T0 + timedelta(days=400))
        calls = {"n": 0}
        real = maint.remove_path

        def dying(root_: Path, path: Path, **kw: object):
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt("power cut")  # stands in for a kill mid-GC
            return real(root_, path, **kw)

        monkeypatch.setattr(maint, "remove_path", dying)
        with pytest.raises(KeyboardInterrupt):
            plane.gc()
        monkeypatch.setattr(maint, "remove_path", real)
        plane.verify()  # may re-index orphans the crash left; GC then finishes the job
        plane.gc()
        assert plane.device.entries("procedure") == [] and plane.episodes.entries() == []
        assert not list((root / "device" / "procedures").glob("proc_*.yaml"))
        assert plane.verify().ok


def test_user_rule_overrides_automatic_experience(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        run(plane, "order coffee on Meituan", PATH)
        pid = plane.device.entries("procedure")[0]["id"]
        r = plane.save_rule("Never order through the Meituan cart tab; use the shop page", overrides=[pid])
        p = plane.device.get(pid)
        assert p is not None and p.status == "conflicted" and r.id in p.conflicts_with
        ctx = plane.retrieve(MemoryRetrieveRequest(input="order coffee on Meituan", current_hints=ZH))
        assert pid not in [h.id for h in ctx.common.procedures] and pid in [h.id for h in ctx.common.conflicts]
        assert r.id in [h.id for h in ctx.common.long_term]
        log = read_jsonl(root / "lifecycle" / "conflicts.jsonl").records
        assert log[-1]["rule"] == "user_rule_overrides" and log[-1]["ids"] == [pid, r.id]
        for _ in range(3):  # new automatic successes do not undo the user's rule
            run(plane, "order coffee on Meituan", PATH)
        assert plane.device.get(pid).status == "conflicted"  # type: ignore[union-attr]
    assert cli(["--root", str(root), "memory", "save", "x", "--type", "fact", "--overrides", pid]) == 2


def test_gc_removes_old_commit_debris_in_the_staging_folder(root: Path) -> None:
    import os
    import time

    stage = root / "episodes" / ".staging"
    stage.mkdir(parents=True)
    old = stage / f".episode.yaml.tmp.{time.time_ns()}.1.0"
    fresh = stage / f".episode.yaml.tmp.{time.time_ns()}.1.1"
    for p in (old, fresh):
        p.write_text("id: ep_x\n")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    with MemoryPlane.open(root) as plane:
        rep = plane.gc()
        assert not old.exists() and fresh.exists()
        assert any(".staging" in str(r) for r in rep.removed)
        assert plane.verify().ok


def test_forget_takes_the_superseded_chain_and_reads_only_its_memories(root: Path,
                                                                       request: pytest.FixtureRequest) -> None:
    with MemoryPlane.open(root) as plane:
        lt = plane.long_term
        for k in range(30):
            lt.save_memory(type="fact", content=f"the locker {k} code is written on card {k * 7}")
        a = lt.save_memory(type="fact", content="office wifi password is on the fridge")
        b = lt.save_memory(type="fact", content="office wifi password is on the fridge door")
        c = lt.save_memory(type="fact", content="office wifi password is on the fridge door, top left")
        loaded: list[Path] = request.getfixturevalue("memory_loads")  # from here on: what the forget reads
        assert plane.forget(c.id)
        assert all(lt.get(i) is None for i in (a.id, b.id, c.id))
        assert len(lt.entries()) == 30
        read = {p.name for p in loaded if p.parent == lt.mem_dir}
        assert read <= {f"{i}.md" for i in (a.id, b.id, c.id)}, sorted(read)  # not the 30 others
