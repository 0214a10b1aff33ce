"""`fleet export`: a phone's tree as Hive-partitioned gzip JSON tables and a manifest written last, to a folder or
to S3 (a real S3 server, moto's, on 127.0.0.1); nothing new writes nothing; a killed export is redone whole; what
must never leave the phone does not."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_plane import MemoryPlane
from memory_plane.fleet import FleetDest, FleetSource, TreeExport, export_tree

from helpers import memplane_env, run_memplane, sim_phone_tree

pytest.importorskip("duckdb")
pytest.importorskip("fsspec")


@pytest.fixture(scope="module")
def phone_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One simulated phone's tree, built once for the module (tests copy it before changing it)."""
    return sim_phone_tree(tmp_path_factory.mktemp("phone") / "memory")


@pytest.fixture
def tree(phone_tree: Path, tmp_path: Path) -> Path:
    """A copy of the phone's tree this test may change."""
    return Path(shutil.copytree(phone_tree, tmp_path / "memory", symlinks=True))


def _export(root: Path, dest: str, device: str = "phone-a", **kw: object):  # type: ignore[no-untyped-def]
    with MemoryPlane.open(root) as plane:
        return export_tree(TreeExport(plane.device, plane.episodes, plane.clock, **kw), dest, device)  # type: ignore[arg-type]


def _rows(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def _all_bytes(dest: Path) -> str:
    out = []
    for p in dest.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            out.append(gzip.decompress(data).decode() if p.suffix == ".gz" else data.decode())
    return "\n".join(out)


def test_an_export_writes_hive_partitioned_tables_and_a_manifest_naming_them(tree: Path, tmp_path: Path) -> None:
    dest = tmp_path / "fleet"
    res = _export(tree, str(dest))
    with MemoryPlane.open(tree) as plane:
        episodes = [e for e in plane.episodes.iter_items() if e.record and e.record.status == "active"]
    assert res.rows["episodes"] == len(episodes) == 6 and res.rows["lessons"] > 0
    manifest = json.loads((dest / res.manifest).read_text())
    assert res.manifest.startswith("manifests/device=phone-a/")
    for entry in manifest["files"]:
        path = dest / entry["path"]
        assert entry["path"].startswith(f"{entry['table']}/device=phone-a/")
        assert len(_rows(path)) == entry["rows"]
        import hashlib
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
    ep_files = [e["path"] for e in manifest["files"] if e["table"] == "episodes"]
    assert all("/date=20" in p and p.endswith(f"part-{res.export_id}.jsonl.gz") for p in ep_files)
    row = _rows(dest / ep_files[0])[0]
    assert {"episode_id", "device", "started_at", "ended_at", "app", "intent", "goal_key", "outcome",
            "failure_phase", "steps", "language", "screen", "memory_shown", "memory_followed",
            "lessons_written"} <= set(row)
    assert row["outcome"] in ("success", "failure", "interrupted") and row["app"] in ("wechat", "meituan", "settings")
    lesson = _rows(dest / next(e["path"] for e in manifest["files"] if e["table"] == "lessons"))[0]
    assert {"id", "type", "app", "lesson_key", "status", "confidence", "success_count", "failure_count",
            "evidence_count", "applicability", "item"} <= set(lesson)


def test_a_second_export_with_nothing_new_writes_nothing(tree: Path, tmp_path: Path) -> None:
    dest = tmp_path / "fleet"
    _export(tree, str(dest))
    before = sorted(p for p in dest.rglob("*"))
    again = _export(tree, str(dest))
    assert again.manifest is None and again.rows == {} and sorted(dest.rglob("*")) == before


def test_the_manifest_is_written_last(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    real = FleetDest.write
    monkeypatch.setattr(FleetDest, "write", lambda self, rel, data: (order.append(rel), real(self, rel, data))[1])
    _export(tree, str(tmp_path / "fleet"))
    assert order[-1].startswith("manifests/") and not any(p.startswith("manifests/") for p in order[:-1])


def test_a_killed_export_leaves_no_manifest_and_the_next_redoes_it_whole(tree: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    dest = tmp_path / "fleet"
    real = FleetDest.write

    def killed(self: FleetDest, rel: str, data: bytes) -> None:
        if rel.startswith("manifests/"):
            raise KeyboardInterrupt  # the process dies before its manifest
        real(self, rel, data)

    monkeypatch.setattr(FleetDest, "write", killed)
    with pytest.raises(KeyboardInterrupt):
        _export(tree, str(dest))
    assert not (dest / "manifests").exists() and list(dest.rglob("part-*.jsonl.gz"))
    with FleetSource.open(str(dest)) as src:
        assert src.rows("episodes") == []  # a part file no manifest names is not read
    monkeypatch.setattr(FleetDest, "write", real)
    redo = _export(tree, str(dest))
    assert redo.rows["episodes"] == 6
    with FleetSource.open(str(dest)) as src:
        ids = [r["episode_id"] for r in src.rows("episodes")]
    assert len(ids) == len(set(ids)) == 6


def test_a_changed_lesson_is_exported_again_and_only_it(tree: Path, tmp_path: Path) -> None:
    dest = tmp_path / "fleet"
    _export(tree, str(dest))
    with MemoryPlane.open(tree) as plane:
        proc = plane.device.entries("procedure")[0]["id"]
        plane.device.collection("procedure").update(proc, lambda cur: cur.model_copy(update={"confidence": 0.91}))
    res = _export(tree, str(dest))
    assert res.rows == {"lessons": 1}
    with FleetSource.open(str(dest)) as src:
        assert [r["id"] for r in src.rows("lessons")].count(proc) == 2


def test_never_exported_forgotten_lessons_screenshots_goal_text_and_long_term(tree: Path, tmp_path: Path) -> None:
    with MemoryPlane.open(tree) as plane:
        proc = next(e["id"] for e in plane.device.entries("procedure") if e.get("app") == "wechat")
        plane.forget(proc, reason="test")
        plane.save_rule("Never order coffee after 6pm")
        goals = [e.record.user_goal for e in plane.episodes.iter_items() if e.record]
    dest = tmp_path / "fleet"
    res = _export(tree, str(dest))
    text = _all_bytes(dest)
    assert not list(dest.rglob("*.jpg")) and not list(dest.rglob("*.png"))
    assert '"type": "screenshot"' not in text and "base64" not in text
    for goal in goals:
        assert goal not in text
    assert "张三" not in text and "李四" not in text  # the contacts the tasks named
    assert "coffee after 6pm" not in text and "long_term" not in res.rows
    with FleetSource.open(str(dest)) as src:
        assert proc not in {r["id"] for r in src.rows("lessons")}
        assert proc in {r["id"] for r in src.rows("tombstones")}


def test_goal_text_and_long_term_memories_only_when_asked(tree: Path, tmp_path: Path) -> None:
    with MemoryPlane.open(tree) as plane:
        plane.save_rule("Never order coffee after 6pm")
        tree_export = TreeExport(plane.device, plane.episodes, plane.clock, long_term=plane.long_term,
                                 include_text=True)
        export_tree(tree_export, str(tmp_path / "fleet"), "phone-a")
    text = _all_bytes(tmp_path / "fleet")
    assert "coffee after 6pm" in text and "张三" in text


def test_the_cli_exports_and_says_so_in_json(tree: Path, tmp_path: Path) -> None:
    out = run_memplane("--root", str(tree), "fleet", "export", str(tmp_path / "fleet"), "--device", "lab 7",
                       "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    # A device id as a partition value: safe in a path and an object key (changed ids keep a hash of the given one)
    assert data["device"].startswith("lab-7") and data["manifest"].startswith(f"manifests/device={data['device']}/")
    again = run_memplane("--root", str(tree), "fleet", "export", str(tmp_path / "fleet"), "--device", "lab 7",
                         "--json")
    assert json.loads(again.stdout)["manifest"] is None


def test_the_phone_runtime_imports_no_fleet_library(tree: Path) -> None:
    code = ("import sys; from memory_plane import MemoryPlane, MemoryRetrieveRequest\n"
            f"p = MemoryPlane.open({str(tree)!r})\n"
            "p.retrieve(MemoryRetrieveRequest(input='打开微信，找到张三')); p.close()\n"
            "libs = ('duckdb', 'pyspark', 's3fs', 'fsspec', 'boto3', 'botocore')\n"
            "print(sorted(m for m in libs if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=memplane_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# -- S3: a real S3-compatible server (moto's) on 127.0.0.1, nothing else on the network ------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_server() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 with one bucket; AWS_ENDPOINT_URL and test credentials point at it."""
    moto_server = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=_free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    s3fs.S3FileSystem().mkdir("fleet-bucket")
    try:
        yield "s3://fleet-bucket/phones"
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def test_an_export_to_s3_reads_back_as_the_same_tables(tree: Path, tmp_path: Path, s3_server: str) -> None:
    first = _export(tree, s3_server)
    assert first.manifest and first.rows["episodes"] == 6
    assert _export(tree, s3_server).manifest is None  # nothing new: nothing written
    _export(tree, str(tmp_path / "local"))
    with FleetSource.open(s3_server) as remote, FleetSource.open(str(tmp_path / "local")) as local:
        for table in ("episodes", "lessons"):
            strip = lambda rows: sorted(json.dumps({k: v for k, v in r.items() if k != "export_id"},  # noqa: E731
                                                   sort_keys=True) for r in rows)
            assert strip(remote.rows(table)) == strip(local.rows(table))


def test_an_export_sigkilled_before_its_manifest_is_redone_whole(tree: Path, tmp_path: Path) -> None:
    """A real SIGKILL of the exporting process, right before its manifest would be written."""
    dest = tmp_path / "fleet"
    code = ("import os, signal\n"
            "from memory_plane import MemoryPlane\n"
            "from memory_plane.fleet import FleetDest, TreeExport, export_tree\n"
            "real = FleetDest.write\n"
            "def write(self, rel, data):\n"
            "    if rel.startswith('manifests/'):\n"
            "        os.kill(os.getpid(), signal.SIGKILL)\n"
            "    real(self, rel, data)\n"
            "FleetDest.write = write\n"
            f"p = MemoryPlane.open({str(tree)!r})\n"
            f"export_tree(TreeExport(p.device, p.episodes, p.clock), {str(dest)!r}, 'phone-a')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=memplane_env(), timeout=120)
    assert out.returncode == -9, out.stderr
    assert list(dest.rglob("part-*.jsonl.gz")) and not (dest / "manifests").exists()
    redo = _export(tree, str(dest))
    assert redo.rows["episodes"] == 6 and redo.manifest
    with FleetSource.open(str(dest)) as src:
        assert len({r["episode_id"] for r in src.rows("episodes")}) == len(src.rows("episodes")) == 6
