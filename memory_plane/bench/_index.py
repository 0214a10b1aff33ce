"""`bench index`: loading, appending to and rebuilding a large index.yaml, beside ruamel's safe loader."""

from __future__ import annotations

import argparse
import io
import statistics
import time
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from memory_plane.lifecycle import (
    IndexFile,
    Record,
    YamlCollection,
    collection_lock,
    forget_loaded_indexes,
    format_entry,
)

from ._util import median_ms, r, temp_root

APPS = [("wechat", "微信"), ("meituan", "美团"), ("settings", "设置"), ("gmail", "Gmail"), ("taobao", "淘宝")]


def _entry(i: int) -> dict[str, Any]:
    app, name = APPS[i % len(APPS)]
    return {"id": f"proc_{i:012x}", "type": "procedure", "status": "active", "title": f"{name}: open the chat {i}",
            "app": app, "app_name": name, "page": "Home", "device_id": "default",
            "applicability": {"device_id": "default", "language": "zh-CN", "screen": "640x1200"},
            "confidence": 0.8, "success_count": 3, "evidence": 2, "expires_at": "2026-12-01T00:00:00Z",
            "updated_at": "2026-10-01T00:00:00Z", "summary": f"When goal is like 打开{name}找到联系人{i}: tap search",
            "path": f"proc_{i:012x}.yaml"}


def _item_yaml(e: dict[str, Any]) -> str:
    return (f"id: {e['id']}\ntype: procedure\nstatus: active\ntitle: '{e['title']}'\napp_id: {e['app']}\n"
            f"app_name: {e['app_name']}\npage_name: Home\ndevice_id: default\nsummary: '{e['summary']}'\n"
            "applicability:\n  device_id: default\n  language: zh-CN\n  screen: 640x1200\nconfidence: 0.8\n"
            "ttl: 45d\nexpires_at: '2026-12-01T00:00:00Z'\nsuccess_count: 3\nevidence_refs:\n  - type: episode\n"
            "    id: ep_20261001_aaaaaaaaaa\n")


def _append_ms(directory: Path, n: int, trials: int = 40) -> float:
    idx = IndexFile(directory / "index.yaml")
    with collection_lock(directory):
        idx.write(_entry(i) for i in range(n))
    times = []
    for t in range(trials):
        e = _entry(n + t)
        t0 = time.perf_counter()
        with collection_lock(directory):
            idx.append(e)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure index load/append/rebuild at ``--entries`` entries, ruamel safe load of the same file."""
    n = 1000 if getattr(args, "short", False) else int(args.entries)
    with temp_root() as root:
        d = root / "device" / "procedures"
        entries = [_entry(i) for i in range(n)]
        idx = IndexFile(d / "index.yaml")
        idx.write(entries)
        text = (d / "index.yaml").read_text("utf-8")

        def cold_load() -> None:
            forget_loaded_indexes()
            got = idx.read()
            assert len(got.entries) == n

        load = median_ms(cold_load, 5)
        y = YAML(typ="safe")
        ruamel = median_ms(lambda: y.load(io.StringIO(text)), 1 if n >= 5000 else 3)
        warm = median_ms(idx.read, 50)
        a_small = _append_ms(root / "device" / "apps", 100)
        a_large = _append_ms(root / "device" / "navigation", n)
        for e in entries:  # fixture only: item files written plainly, they are not what is measured
            (d / e["path"]).write_text(_item_yaml(e), "utf-8")
        coll = YamlCollection(root, "device/procedures", Record)
        (d / "index.yaml").unlink()
        t0 = time.perf_counter()
        coll.rebuild_index()
        rebuild = (time.perf_counter() - t0) * 1000
        line_bytes = len(text.encode()) / max(1, n)
    return {
        "entries": n,
        "bytes_per_entry": r(line_bytes, 0),
        "load_ms": r(load, 2),
        "warm_load_ms": r(warm, 4),
        "append_ms": r(a_large, 3),
        "append_ms_at_100": r(a_small, 3),
        f"append_ms_at_{n}": r(a_large, 3),
        "rebuild_ms": r(rebuild, 1),
        "ruamel_safe_load_ms": r(ruamel, 1),
        "load_speedup_vs_ruamel": r(ruamel / load, 1),
        "format_sample": format_entry(entries[0])[:120],
    }
