"""The exceptions memory-plane raises; every one derives from MemoryPlaneError.

MemoryPlaneError
├── UsageError          a caller passed something the API does not accept
├── UnsafePathError     a name or path that would leave the memory root
├── ParseError          a file that is not valid in its format (path, line)
│   ├── YamlBombError   a YAML document whose aliases expand past the budget
│   └── OversizeError   an item file over MAX_ITEM_BYTES (not loaded)
├── ValidationError     a parsed file whose fields are wrong (path, line, field)
├── LockTimeout         a collection lock not acquired in time (lock_path)
├── StorageError        an I/O failure while writing (path)
├── NotAFileError       something other than a file where a file belongs: a folder, a pipe, a socket, a
│                       symlink, a file on the way (path; a FileNotFoundError: to a reader, no file is there)
├── ConfigError         a bad configuration value (path, line, key)
├── NoRootError         the memory root does not exist or is not a folder (path)
└── ClockError          a clock GC will not act on: unset, behind the tree, or far ahead of it (reason)
"""

from __future__ import annotations

from pathlib import Path


class MemoryPlaneError(Exception):
    """Root of every error memory-plane raises on purpose."""


class UsageError(MemoryPlaneError, ValueError):
    """A caller passed an argument the API does not accept."""


class UnsafePathError(MemoryPlaneError, ValueError):
    """A name or path that is not allowed: it would escape the root or is not a safe id."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(name, reason)
        self.name = name
        self.reason = reason

    def __str__(self) -> str:
        return f"unsafe name {self.name!r}: {self.reason}"


class FileProblemError(MemoryPlaneError):
    """Base for errors about one file: carries ``path`` and ``line`` (1-based, or None)."""

    def __init__(self, path: str | Path | None, line: int | None, message: str) -> None:
        super().__init__(str(path) if path is not None else None, line, message)
        self.path = str(path) if path is not None else None
        self.line = line
        self.message = message

    def __str__(self) -> str:
        where = self.path or "<text>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.message}"


class ParseError(FileProblemError):
    """A file that cannot be parsed as its format."""


class YamlBombError(ParseError):
    """A YAML document whose alias expansion exceeds the node budget."""


class OversizeError(ParseError):
    """An item file larger than any memory is (MAX_ITEM_BYTES): not loaded, named by verify."""


class ValidationError(FileProblemError):
    """A parsed file whose fields do not match the schema."""


class ConfigError(FileProblemError):
    """A configuration value that is missing or wrong."""


class LockTimeout(MemoryPlaneError, TimeoutError):
    """A collection lock that was not acquired before the timeout."""

    def __init__(self, lock_path: str | Path, timeout: float) -> None:
        super().__init__(str(lock_path), timeout)
        self.lock_path = str(lock_path)
        self.timeout = timeout

    def __str__(self) -> str:
        return f"could not acquire lock {self.lock_path} within {self.timeout:g}s"


class _AtPath(MemoryPlaneError):
    """An error about one path, told as ``path: message``."""

    def __init__(self, path: str | Path, message: str) -> None:
        super().__init__(str(path), message)
        self.path = str(path)
        self.message = message

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class StorageError(_AtPath, OSError):
    """An I/O failure while writing a memory file."""


class NotAFileError(_AtPath, FileNotFoundError):
    """Where a file belongs there is a folder, a pipe, a socket or a symlink, or a file stands on the way.

    A FileNotFoundError because, to a reader, no file is there: each reader treats it as a missing
    file, and verify names what is there instead (a hand edit, a sync tool, a full disk).
    """


class NoRootError(_AtPath, FileNotFoundError):
    """The memory root is missing or not a folder (an unmounted path, a typo): nothing is created there."""

    @property
    def reason(self) -> str:
        """Why the path is not a memory root."""
        return self.message


ABSENT: tuple[type[OSError], ...] = (FileNotFoundError, NotADirectoryError)
"""What a reader takes for a missing file or folder: nothing there, or a file where a folder of the path
belongs (nothing can be below a file). NotAFileError, from reading something that is not a file, is one too."""


class ClockError(MemoryPlaneError):
    """A clock that removing things by age cannot believe: before the build date, earlier than the newest write in
    the tree, or far past it. Nothing was removed; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return (f"{self.reason}; nothing is removed by age on a clock that cannot be believed: set the clock, "
                "or give the time with --now TIMESTAMP")
