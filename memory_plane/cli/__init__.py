"""`memplane`: the command line and the Model Context Protocol server (``memplane mcp``)."""

from typing import Any as _Any

from ._main import main

__all__ = ["main", "mcp_resources"]


def __getattr__(name: str) -> _Any:
    # The MCP server loads on first use: the other commands pay nothing for the model's tools.
    if name == "mcp_resources":
        from ._mcp import mcp_resources

        return mcp_resources
    raise AttributeError(f"module 'memory_plane.cli' has no attribute {name!r}")
