"""The record envelope, YAML collections, init and verify."""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from freezegun import freeze_time

from memory_plane.lifecycle import (
    EvidenceRef,
    LockTimeout,
    ParseError,
    Record,
    ValidationError,
    YamlCollection,
    field_problems,
    init_tree,
    repair_findings,
    template_files,
    verify_collections,
)


def coll(root: Path) -> YamlCollection[Record]:
    return YamlCollection(root, "device/procedures", Record)


def test_init_is_idempotent_and_keeps_edits(tmp_path: Path) -> None:
    r = tmp_path / "m"
    created = init_tree(r)
    assert "lifecycle/retention.yaml" in created and (r / "device" / "apps" / "index.yaml").exists()
    (r / "lifecycle" / "retention.yaml").write_text("# mine\n")
    (r / "device" / "apps" / "index.yaml").unlink()
    (r / "lifecycle" / "tombstones.jsonl").unlink()
    again = init_tree(r)
    # A missing index is not put back empty (it is rebuilt from the items when needed); the rest is.
    assert again == ["lifecycle/tombstones.jsonl"]
    assert (r / "lifecycle" / "retention.yaml").read_text() == "# mine\n"


def test_template_has_the_whole_design_tree() -> None:
    names = {rel for rel, _ in template_files()}
    for must in ["README.md", "lifecycle/retention.yaml", "lifecycle/tombstones.jsonl",
                 "lifecycle/conflicts.jsonl", "episodes/index.yaml", "long_term/index.yaml",
                 "device/profile.yaml", *(f"device/{c}/index.yaml" for c in
                 ("apps", "procedures", "navigation", "calibration", "failures", "ui_anchors"))]:
        assert must in names
    retention = dict(template_files())["lifecycle/retention.yaml"].decode()
    for key in ["device_profile: 90d", "app_profile: 30d", "procedure: 45d", "calibration: 30d",
                "failure: 60d", "episode_trace: 30d", "episode_summary: 180d"]:
        assert key in retention


def test_envelope_roundtrip_keeps_unknown_fields(root: Path) -> None:
    c = coll(root)
    rec = Record(id="proc_a", type="procedure", title="Open 微信", ttl="45d")
    c.save(rec)
    path = c.item_path("proc_a")
    path.write_text(path.read_text() + "# a person's note\nowner_note: checked on my phone\n")
    loaded = c.get("proc_a")
    assert loaded is not None and loaded.model_extra == {"owner_note": "checked on my phone"}
    loaded.confidence = 0.9
    c.save(loaded)
    text = path.read_text()
    assert "owner_note: checked on my phone" in text and "# a person's note" in text
    assert "Open 微信" in text


def test_envelope_validation_errors_name_line(root: Path) -> None:
    c = coll(root)
    # A status nobody defined keeps the memory off (inactive) and is named with its line.
    c.item_path("proc_bad").write_text("id: proc_bad\ntype: procedure\nstatus: maybe\n")
    rec = c.get("proc_bad")
    assert rec is not None and rec.status == "inactive"
    (prob,) = field_problems(rec)
    assert prob.line == 3 and "status" in prob.message and "inactive" in prob.message
    # Without an id there is no item: that still fails, with the line.
    c.item_path("proc_noid").write_text("type: procedure\nid: [1, 2]\n")
    with pytest.raises(ValidationError) as ei:
        c.get("proc_noid")
    assert ei.value.line == 2 and "id" in ei.value.message


def test_unparsable_expiry_counts_as_expired_and_is_kept() -> None:
    r = Record(id="x", type="procedure", expires_at="next tuesday")
    assert r.is_expired(datetime.now(timezone.utc))
    assert r.to_yaml_dict()["expires_at"] == "next tuesday"


@freeze_time("2026-06-01T00:00:00Z")
def test_renew_pushes_expiry_by_ttl() -> None:
    r = Record(id="x", type="procedure", ttl="45d")
    now = datetime.now(timezone.utc)
    r.renew(now)
    assert r.expires_at == now + timedelta(days=45)
    assert not r.is_expired(now + timedelta(days=44))
    assert r.is_expired(now + timedelta(days=45))


def test_evidence_is_capped_and_merged() -> None:
    r = Record(id="x", type="procedure")
    for i in range(30):
        r.add_evidence(EvidenceRef(id=f"ep_{i}", event_ids=["e1"]))
    r.add_evidence(EvidenceRef(id="ep_29", event_ids=["e2"]))
    assert len(r.evidence_refs) == 20 and r.evidence_refs[-1].event_ids == ["e1", "e2"]


def test_rebuild_of_deleted_index_equals_original(root: Path) -> None:
    c = coll(root)
    for i in range(20):
        c.save(Record(id=f"proc_{i:02d}", type="procedure", title=f"t{i}"))
    original = (c.dir / "index.yaml").read_text()
    (c.dir / "index.yaml").unlink()
    assert c.rebuild_index()
    assert (c.dir / "index.yaml").read_text() == original
    assert not c.rebuild_index()  # idempotent


def test_entries_rebuild_missing_index_on_read(root: Path) -> None:
    c = coll(root)
    c.save(Record(id="proc_a", type="procedure"))
    (c.dir / "index.yaml").unlink()
    assert [e["id"] for e in c.entries()] == ["proc_a"]


def test_verify_reports_bad_files_and_fix_quarantines(root: Path) -> None:
    c = coll(root)
    c.save(Record(id="proc_good", type="procedure"))
    bomb = "a: &a [1,1,1,1,1,1,1,1,1,1]\n"
    for prev, name in zip("abcd", "bcde"):
        bomb += f"{name}: &{name} [{','.join(['*' + prev] * 10)}]\n"
    (c.dir / "proc_bomb.yaml").write_text(bomb)
    (c.dir / "proc_broken.yaml").write_text("id: proc_broken\ntitle: [x\n")
    (c.dir / "proc_latin.yaml").write_bytes(b"id: proc_latin\ntitle: caf\xe9\n")
    with open(c.dir / "index.yaml", "a") as fh:
        fh.write('- {"id": "mangled\n')
    rep = verify_collections(root, [c])
    cats = sorted(p.category for p in rep.problems)
    assert cats == ["index", "parse", "parse", "yamlbomb"]
    assert all(p.path.startswith("device/procedures/") for p in rep.problems)
    assert [e["id"] for e in c.entries()] == ["proc_good"]
    rep = verify_collections(root, [c])
    assert [p.repair.what for p in rep.problems if p.repair] == ["quarantine"] * 3  # found, nothing changed yet
    assert not any((root / "lifecycle" / "quarantine").glob("*"))
    repair_findings(rep)
    assert len(rep.fixed) == 3
    assert len(list((root / "lifecycle" / "quarantine").iterdir())) == 3
    assert verify_collections(root, [c]).ok


def test_collection_refuses_hostile_ids(root: Path) -> None:
    c = coll(root)
    for bad in ["../../etc/passwd", "/etc/passwd", "a/b", "x" * 300, "微信"]:
        with pytest.raises(Exception):  # noqa: B017 - either UnsafePathError or a pydantic error
            c.item_path(bad)
        with pytest.raises(Exception):  # noqa: B017
            c.save(Record(id=bad, type="procedure"))


def test_update_is_read_modify_write_under_lock(root: Path) -> None:
    import threading

    c = coll(root)
    c.save(Record(id="proc_n", type="procedure"))

    def bump() -> None:
        for _ in range(25):
            def change(r: Record | None) -> Record:
                assert r is not None
                r.success_count += 1
                return r
            c.update("proc_n", change)

    ts = [threading.Thread(target=bump) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    got = c.get("proc_n")
    assert got is not None and got.success_count == 100


def test_errors_pickle_and_carry_path() -> None:
    for exc in [ParseError("/a/b.yaml", 3, "bad"), LockTimeout("/a/.lock", 1.5)]:
        again = pickle.loads(pickle.dumps(exc))
        assert str(again) == str(exc)
    assert str(ParseError("/a/b.yaml", 3, "bad")) == "/a/b.yaml:3: bad"


def test_rebuild_with_stale_parse_keeps_items_written_since(root: Path) -> None:
    c = coll(root)
    c.save(Record(id="proc_a", type="procedure", title="a"))
    parsed = list(c.iter_items())
    c.save(Record(id="proc_b", type="procedure", title="b"))  # written after the verify pass parsed
    c.save(Record(id="proc_a", type="procedure", title="a2"))
    c.rebuild_index(items=parsed)
    by_id = {e["id"]: e for e in c.entries()}
    assert set(by_id) == {"proc_a", "proc_b"} and by_id["proc_a"]["title"] == "a2"


@pytest.mark.parametrize("kind", ["procedure", "navigation", "failure", "ui_anchor", "app_profile", "calibration",
                                  "device_profile"])
def test_a_record_loaded_without_its_lists_gets_fresh_empty_ones_made_not_copied(kind: str) -> None:
    # A parse of every memory file (verify, GC) made a deep copy of each empty default list and mapping; made by a
    # factory, each is new and nothing is copied.
    from memory_plane.device_memory import ITEM_TYPES

    model = ITEM_TYPES[kind]
    data = {"id": f"x_{kind}", "type": kind, "status": "active", "app_id": "wechat", "title": "t"}
    a, b = model.model_validate(data), model.model_validate(data)
    mutable = [name for name, f in model.model_fields.items() if isinstance(f.get_default(call_default_factory=True),
                                                                           (list, dict))]
    assert len(mutable) >= 3
    for name in mutable:
        assert model.model_fields[name].default_factory is not None, name
        assert getattr(a, name) == type(getattr(a, name))() and getattr(a, name) is not getattr(b, name), name
