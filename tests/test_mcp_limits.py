"""`memplane mcp` at the transport: hostile arguments get a quick error answer, and a read-only server never writes."""

from __future__ import annotations

import hashlib
import json
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memory_plane import MemoryPlane

from helpers import record_wechat_task

mcp = pytest.importorskip("mcp")


def seed(root: Path) -> str:
    with MemoryPlane.open(root) as plane:
        episode_id = record_wechat_task(plane)
        plane.long_term.save_memory(content="The user's manager is Zhang San", type="fact")
        return episode_id


class RawServer:
    """`memplane mcp` spoken to line by line, as any client (or attacker) on its stdin would."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "memory_plane", "--root", str(root), "mcp"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.request({"method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                                         "clientInfo": {"name": "test", "version": "1"}}}, 1)
        self.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return json.loads(self.proc.stdout.readline()) if ready else None

    def request(self, msg: dict[str, Any], rid: int, timeout: float = 30) -> dict[str, Any] | None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": rid, **msg}))
        return self.answer(timeout)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def tool_text(answer: dict[str, Any] | None) -> tuple[bool, str]:
    assert answer is not None, "no answer"
    result = answer["result"]
    return bool(result.get("isError")), result["content"][0]["text"]


def test_arguments_nested_fifty_thousand_deep_are_answered_with_an_error(tmp_path: Path) -> None:
    root = tmp_path / "m"
    seed(root)
    server = RawServer(root)
    try:
        n = 50_000
        line = ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall_memory","arguments":'
                '{"query":' + "[" * n + "]" * n + "}}}")
        t0 = time.monotonic()
        server.send(line)
        answer = server.answer(timeout=20)
        assert answer is not None and answer["id"] == 2, "the SDK gave no answer to a deeply nested request"
        is_error, text = tool_text(answer)
        assert is_error and "nest deeper than" in text and time.monotonic() - t0 < 10
        # The server goes on answering.
        is_error, text = tool_text(server.request({"method": "tools/call", "params": {
            "name": "recall_memory", "arguments": {"query": "confirm paying"}}}, 3))
        assert not is_error and "confirm" in text
    finally:
        server.close()


@pytest.mark.anyio
async def test_fifty_thousand_ids_over_the_sdk_client_are_refused_quickly(tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    root = tmp_path / "m"
    seed(root)
    params = StdioServerParameters(command=sys.executable, args=["-m", "memory_plane", "--root", str(root), "mcp"])
    async with Client(params) as client:
        t0 = time.monotonic()
        res = await client.call_tool("recall_device_memory", {"ids": [f"proc_{i:05d}" for i in range(50_000)]})
        assert res.is_error and "at most 50" in res.content[0].text  # type: ignore[union-attr]
        assert time.monotonic() - t0 < 5


def snapshot(root: Path) -> dict[str, tuple[int, str | None]]:
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else None
        out[str(p.relative_to(root))] = (st.st_mtime_ns, digest)
    out["."] = (root.lstat().st_mtime_ns, None)
    return out


@pytest.mark.anyio
async def test_a_read_only_server_over_a_stale_tree_writes_nothing(tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    root = tmp_path / "m"
    ep = seed(root)
    # Every derived file stale or gone: the indexes, the persisted postings, the user's profile.md.
    for index in root.rglob("index.yaml"):
        index.unlink()
    shutil.rmtree(root / ".cache", ignore_errors=True)
    (root / "long_term" / "profile.md").unlink()
    time.sleep(0.05)
    before = snapshot(root)
    params = StdioServerParameters(command=sys.executable, args=["-m", "memory_plane", "--root", str(root), "mcp"])
    async with Client(params) as client:
        answers = [await client.call_tool(name, args) for name, args in [
            ("recall_memory", {"query": "confirm paying"}), ("recall_memory", {"types": ["rule"]}),
            ("recall_device_memory", {"app": "WeChat"}), ("recall_device_memory", {"query": "微信"}),
            ("inspect_episode", {"episode_id": ep}), ("recall_session_chunks", {"query": "Zhang San"})]]
        assert "Always confirm before paying" in answers[0].content[0].text  # type: ignore[union-attr]
        assert "app_wechat" in answers[2].content[0].text  # type: ignore[union-attr]
        for r in (await client.list_resources()).resources:
            await client.read_resource(str(r.uri))
    time.sleep(0.2)
    assert snapshot(root) == before


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
