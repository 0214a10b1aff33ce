"""The entry point's old address: a `memplane` script installed before the CLI moved to cli/ still runs."""

from .cli import main

__all__ = ["main"]
