"""`memplane`: the command line and the Model Context Protocol server (``memplane mcp``)."""

from ._main import main

__all__ = ["main"]
