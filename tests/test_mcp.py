"""`memplane mcp` over stdio, driven by the official `mcp` SDK's own client."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memory_plane import MemoryPlane

from helpers import record_wechat_task

mcp = pytest.importorskip("mcp")


def seed(root: Path) -> str:
    with MemoryPlane.open(root) as plane:
        record_wechat_task(plane)
        return str(plane.long_term.recall_memory("confirm paying")[0].id)


async def _session(root: Path, *extra: str):  # type: ignore[no-untyped-def]
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "memory_plane", "--root", str(root), "mcp", *extra])
    return Client(params)


@pytest.mark.anyio
async def test_tools_and_resources_over_stdio(tmp_path: Path) -> None:
    root = tmp_path / "m"
    rule_id = seed(root)
    async with await _session(root) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"recall_memory", "recall_device_memory", "inspect_episode", "recall_session_chunks"}
        res = await client.call_tool("recall_memory", {"query": "confirm paying"})
        assert not res.is_error and rule_id in res.content[0].text
        dev = await client.call_tool("recall_device_memory", {"app": "WeChat"})
        assert not dev.is_error and "app_wechat" in dev.content[0].text
        bad = await client.call_tool("inspect_episode", {"episode_id": "../../etc/passwd"})
        assert bad.is_error and "no episode" in bad.content[0].text
        refused = await client.call_tool("save_memory", {"content": "x"})
        assert refused.is_error
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"memory://device/profile", "memory://device/apps/app_wechat", "memory://long_term/profile.md"} <= uris
        text = (await client.read_resource("memory://long_term/profile.md")).contents[0]
        assert "Always confirm before paying" in text.text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_allow_write_adds_the_write_tools(tmp_path: Path) -> None:
    root = tmp_path / "m"
    seed(root)
    async with await _session(root, "--allow-write") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"save_memory", "forget_memory"} <= names
        saved = await client.call_tool("save_memory", {"content": "The user's manager is Zhang San", "type": "fact"})
        assert not saved.is_error and "saved as mem_" in saved.content[0].text
    with MemoryPlane.open(root) as plane:
        assert plane.long_term.recall_memory("manager Zhang San")


def test_a_missing_root_is_refused(tmp_path: Path) -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-m", "memory_plane", "--root", str(tmp_path / "nope"), "mcp"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 4 and "does not exist" in out.stderr


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
