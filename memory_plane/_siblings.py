"""Load the sibling packages (lifecycle, device_memory, episodes) from beside this one, not from the cwd.

A memory root has folders named ``lifecycle/`` and ``episodes/``. Run from inside one, Python's path
search (the current folder first) takes those folders for namespace packages before an editable install's
finder is asked, and ``from lifecycle import ...`` fails. When that is about to happen, the real packages
are loaded from the folder this package was installed in.
"""

from __future__ import annotations

import importlib.util
import os
import sys

SIBLINGS = ("lifecycle", "device_memory", "episodes", "prompts")


def ensure_siblings() -> list[str]:
    """Load any sibling package the current folder would shadow; return the names loaded that way."""
    base = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    loaded: list[str] = []
    for name in SIBLINGS:
        if name in sys.modules and getattr(sys.modules[name], "__file__", None):
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin not in (None, "namespace"):
            continue  # found as a regular package: nothing shadows it
        init = os.path.join(base, name, "__init__.py")
        if not os.path.isfile(init):
            continue
        real = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[os.path.dirname(init)])
        if real is None or real.loader is None:
            continue
        module = importlib.util.module_from_spec(real)
        sys.modules[name] = module
        try:
            real.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        loaded.append(name)
    return loaded
