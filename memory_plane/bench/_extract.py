"""`bench extract`: import every AndroidControl episode into a fresh root and extract lessons."""

from __future__ import annotations

import argparse
from typing import Any

from ._util import data_dir, no_data, r, temp_root, tree_bytes


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Episodes/s, device items written by type, duplicates avoided and the tree size on disk."""
    from .._androidcontrol import import_androidcontrol
    from .._plane import MemoryPlane

    data = data_dir(args)
    src = data / "androidcontrol" / "android_control_evaluation_std.jsonl" if data else None
    if src is None or not src.is_file():
        return no_data("AndroidControl export (androidcontrol/android_control_evaluation_std.jsonl)")
    limit = 300 if getattr(args, "short", False) else None
    with temp_root() as root:
        with MemoryPlane.open(root) as plane:
            rep = import_androidcontrol(plane, src, limit=limit)
            items = {t: len(plane.device.entries(t)) for t in
                     ("app_profile", "procedure", "navigation", "calibration", "failure", "ui_anchor")}
            items["device_profile"] = len(plane.device.profiles.all())
            verify = plane.verify()
        size = tree_bytes(root)
    d = rep.to_dict()
    return {
        "episodes": rep.episodes,
        "steps": rep.steps,
        "empty_or_unparsable_actions_skipped": rep.skipped_actions,
        "seconds": d["seconds"],
        "episodes_per_s": d["episodes_per_s"],
        "items_by_type": items,
        "items_created": rep.items_created,
        "duplicates_avoided": d["duplicates_avoided"],
        "tree_bytes": size,
        "tree_mb": r(size / 1e6, 2),
        "verify_problems_after": len(verify.problems),
    }
