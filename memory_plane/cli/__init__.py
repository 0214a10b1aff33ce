"""`memplane`: the command line and the Model Context Protocol server (``memplane mcp``)."""

from ._main import main
from ._mcp import mcp_resources

__all__ = ["main", "mcp_resources"]
