"""Small builders shared by tests: screenshots, a hand-made procedure, a transcript ledger, a read-only tree."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PIL import Image, ImageDraw

from memory_plane import MemoryPlane, MemoryRetrieveRequest

if TYPE_CHECKING:  # the transcript engine is imported when a test builds a ledger, not by every test
    from memory_plane.episodes.transcript import TranscriptLedger


def screenshot(label: str = "home", size: tuple[int, int] = (640, 1200), fmt: str = "JPEG") -> bytes:
    """A real encoded image whose content depends on label."""
    img = Image.new("RGB", size, (240, 240, 240))
    d = ImageDraw.Draw(img)
    seed = sum(label.encode())
    for i in range(12):
        x = (seed * (i + 3) * 37) % size[0]
        y = (seed * (i + 7) * 53) % size[1]
        d.rectangle([x, y, x + 120, y + 60], fill=((seed * i) % 255, (seed * 3 + i * 40) % 255, 120))
    d.text((20, 20), label, fill=(0, 0, 0))
    buf = io.BytesIO()
    img.save(buf, format=fmt, quality=70) if fmt == "JPEG" else img.save(buf, format=fmt)
    return buf.getvalue()


def manual_procedure(plane: MemoryPlane, item_id: str = "proc_manual") -> Path:
    """Save a one-step "Pay with Alipay" procedure as a person would write it; return its file."""
    coll = plane.device.collection("procedure")
    item = plane.device.new_item(coll.model, item_id, title="Pay with Alipay", app_id="alipay", intent="pay",
                                 steps=[{"tool": "tap", "target_label": "Pay"}])
    return coll.save(item)


def episode_ledger(tmp_path: Path, **kwargs: Any) -> tuple[TranscriptLedger, Path]:
    """A transcript ledger (``kwargs`` as TranscriptLedger takes them) in a fresh episode folder ``tmp_path/ep``
    with its artifacts folder, and that episode folder."""
    from memory_plane.episodes.transcript import TranscriptLedger

    ep = tmp_path / "ep"
    (ep / "artifacts").mkdir(parents=True, exist_ok=True)
    return TranscriptLedger(ep / "transcript", **kwargs), ep


def read_only(monkeypatch, root) -> None:  # type: ignore[no-untyped-def]
    """Make every write under root fail with EROFS, as a tree mounted read-only does (tests run as root,
    where file modes would not stop a write)."""
    import builtins
    import errno
    import os

    base = os.path.realpath(root)

    def inside(path, dir_fd=None) -> bool:  # type: ignore[no-untyped-def]
        if isinstance(path, int):
            return False
        if dir_fd is not None:  # relative to an open folder (the guarded writes): where that folder is
            path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), os.fsdecode(path))
        p = os.path.realpath(os.fsdecode(path))
        return p == base or p.startswith(base + os.sep)

    def refuse(path) -> None:  # type: ignore[no-untyped-def]
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))

    writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    real_open, real_builtin_open = os.open, builtins.open

    def guarded_open(path, flags, *args, **kwargs):  # type: ignore[no-untyped-def]
        if flags & writes and inside(path, kwargs.get("dir_fd")):
            refuse(path)
        return real_open(path, flags, *args, **kwargs)

    def guarded_builtin_open(file, mode="r", *args, **kwargs):  # type: ignore[no-untyped-def]
        if any(c in mode for c in "wax+") and inside(file):
            refuse(file)
        return real_builtin_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)
    monkeypatch.setattr(builtins, "open", guarded_builtin_open)
    monkeypatch.setattr(io, "open", guarded_builtin_open)
    for name in ("mkdir", "rmdir", "unlink", "remove", "utime", "chmod"):
        real = getattr(os, name)

        def guarded(path, *args, _real=real, **kwargs):  # type: ignore[no-untyped-def]
            if inside(path, kwargs.get("dir_fd")):
                refuse(path)
            return _real(path, *args, **kwargs)

        monkeypatch.setattr(os, name, guarded)
    for name in ("rename", "replace", "link", "symlink"):
        real2 = getattr(os, name)

        def guarded2(src, dst, *args, _real=real2, **kwargs):  # type: ignore[no-untyped-def]
            if inside(src, kwargs.get("src_dir_fd")) or inside(dst, kwargs.get("dst_dir_fd")):
                refuse(dst)
            return _real(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, name, guarded2)
    monkeypatch.setattr(os, "access", lambda path, mode, *a, **k: not (mode & os.W_OK and inside(path))
                        and os.path.exists(path))


def tree_files(root: Path) -> Iterator[tuple[Path, bytes]]:
    """Every regular file under ``root`` with its bytes (a ``.gz`` decompressed), links left out: what
    `grep -r` over the tree reads."""
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.is_symlink():
            continue
        data = p.read_bytes()
        yield p, gzip.decompress(data) if p.suffix == ".gz" else data


def tree_state(folder: Path) -> dict[str, str]:
    """Every entry under a folder (links as links, never followed) with a hash of what it holds."""
    import hashlib

    out: dict[str, str] = {}
    for dirpath, dirnames, files in os.walk(folder, followlinks=False):
        for name in dirnames + files:
            p = Path(dirpath) / name
            rel = str(p.relative_to(folder))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = "dir"
    return out


def built_once(factory):  # type: ignore[no-untyped-def]
    """A getter of one object built on its first use, and a module-scoped autouse fixture that closes it at the
    module's end (bind it to a module name, e.g. ``fixture, _cleanup = built_once(Fixture)``)."""
    import pytest

    held: list = []  # type: ignore[type-arg]

    def get():  # type: ignore[no-untyped-def]
        if not held:
            held.append(factory())
        return held[0]

    @pytest.fixture(scope="module", autouse=True)
    def cleanup():  # type: ignore[no-untyped-def]
        yield
        while held:
            held.pop().close()

    return get, cleanup


def record_wechat_task(plane: MemoryPlane) -> str:
    """Record and commit one finished "open WeChat, find Zhang San" task and save a rule, as the MCP tests' tree
    holds them; return the episode's id."""
    req = MemoryRetrieveRequest(input="打开微信，找到张三", current_hints={"language": "zh-CN"})
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "com.tencent.mm"})
    rec.tool_result("launch_app", observed_state={"app": "微信", "page": "首页", "package": "com.tencent.mm"})
    plane.commit_episode(rec.finish(success=True))
    plane.flush()
    plane.save_rule("Always confirm before paying")
    return rec.id


def tree_with_one_task(root: Path) -> Path:
    """A tree holding one committed, finished "open WeChat, find Zhang San" episode (for the CLI's tests)."""
    with MemoryPlane.open(root) as plane:
        req = MemoryRetrieveRequest(input="打开微信，找到张三", current_hints={"language": "zh-CN"})
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_call("launch_app", {"app": "微信"})
        rec.tool_result("launch_app", observed_state={"app": "微信", "page": "首页"})
        plane.commit_episode(rec.finish(success=True))
        plane.flush()
    return root


def memplane_env() -> dict[str, str]:
    """The environment a `memplane` child process gets: this checkout's code, no $MEMPLANE_ROOT."""
    env = {k: v for k, v in os.environ.items() if k != "MEMPLANE_ROOT"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    return env


def run_memplane(*argv: str) -> subprocess.CompletedProcess[str]:
    """One `memplane` run in its own process, stderr apart from stdout."""
    return subprocess.run([sys.executable, "-m", "memory_plane", *argv], capture_output=True, text=True,
                          env=memplane_env(), timeout=120)



def sim_phone_tree(root: Path, *, device_id: str = "phone-a", rounds: int = 2, tasks: int = 3,
                   language: str = "zh-CN") -> Path:
    """A tree the simulated phone filled: ``rounds`` rounds of its chat, order and settings tasks, as ``device_id``
    (what a phone of a fleet exports)."""
    from memory_plane.sim import ScriptedAgent, SimPhone, tasks_for

    phone = SimPhone()
    phone.language = language
    with MemoryPlane.open(root) as plane:
        agent = ScriptedAgent(phone, plane, device_id=device_id, step_limit=25)
        for rnd in range(rounds):
            for task in tasks_for(language, rnd, tasks):
                agent.run(task)
    return root
