"""Goal texts for benchmarks: the real task data when present, templates otherwise (deterministic)."""

from __future__ import annotations

import csv
import json
import random
import re
from pathlib import Path
from typing import Any

ZH_TEMPLATES = ["打开{app}，找到{who}，准备发消息", "在{app}上搜索{thing}", "用{app}给{who}发消息说{thing}",
                "在{app}点一杯{thing}", "打开{app}查看{thing}", "在{app}里关注{who}", "用{app}导航到{thing}"]
EN_TEMPLATES = ["Open {app} and send {who} a message", "Search for {thing} in {app}", "Order {thing} on {app}",
                "Turn on {thing} in Settings", "Find {who} in {app} and call", "Play {thing} on {app}"]
ZH_APPS = ["微信", "美团", "淘宝", "支付宝", "京东", "抖音", "小红书", "高德地图", "哔哩哔哩", "知乎"]
EN_APPS = ["WeChat", "Gmail", "Chrome", "Spotify", "Amazon", "YouTube", "Google Maps", "Settings", "Instagram"]
WHO = ["张三", "李四", "王五", "Alice", "Bob", "Zhang San", "妈妈", "老板"]
THINGS = ["蜜雪冰城", "咖啡", "游戏解说", "wifi", "dark mode", "pizza", "汇率换算", "weather", "天气", "机场"]


def real_tasks(data: Path | None) -> list[dict[str, Any]]:
    """Tasks with goal, app (canonical-ish), language and category from ../shared/data."""
    out: list[dict[str, Any]] = []
    if data is None:
        return out
    for name, lang in (("single-app-ENG.csv", "en"), ("single-app-CHN.csv", "zh")):
        p = data / "spa-bench" / name
        if p.is_file():
            with open(p, encoding="utf-8-sig") as fh:
                for row in csv.DictReader(fh):
                    out.append({"id": row["task_identifier"], "goal": row["task_description"].strip(),
                                "app": row["task_app"].strip().lower(), "package": row.get("adb_app"),
                                "lang": lang, "source": f"spa-{lang}", "category": None})
    cfg = data / "android-lab" / "config"
    if cfg.is_dir():
        from memory_plane.lifecycle import load_yaml_file

        for p in sorted(cfg.glob("*.yaml")):
            doc = load_yaml_file(p) or {}
            app = str(doc.get("APP", p.stem)).lower()
            for t in doc.get("tasks", []) or []:
                out.append({"id": t.get("task_id"), "goal": str(t.get("task", "")).strip(), "app": app,
                            "package": doc.get("package"), "lang": "en", "source": "android-lab",
                            "category": t.get("category")})
    return [t for t in out if t["goal"]]


def labelled_sets(data: Path | None) -> dict[str, list[dict[str, Any]]]:
    """Every shared task set whose goals carry their app, one list per set (goal, app name, package)."""
    sets: dict[str, list[dict[str, Any]]] = {}
    if data is None:
        return sets
    for name, label, col in (("single-app-ENG.csv", "spa-bench-eng", "task_app"),
                             ("single-app-CHN.csv", "spa-bench-chn", "task_app_CHN")):
        p = data / "spa-bench" / name
        if p.is_file():
            with open(p, encoding="utf-8-sig") as fh:
                sets[label] = [{"goal": row["task_description"].strip(),
                                "app": (row.get(col) or row["task_app"]).strip(),
                                "package": (row.get("adb_app") or "").strip() or None}
                               for row in csv.DictReader(fh) if row.get("task_description", "").strip()]
    lab = [{"goal": t["goal"], "app": t["app"], "package": t["package"]} for t in real_tasks(data)
           if t["source"] == "android-lab"]
    if lab:
        sets["android-lab"] = lab
    p = data / "mobiagent" / "tasks_zh.tsv"
    if p.is_file():
        rows = []
        for line in p.read_text("utf-8").splitlines():
            app, sep, goal = line.partition("\t")
            if sep and goal.strip():
                rows.append({"goal": goal.strip(), "app": app.strip(), "package": None})
        sets["mobiagent-zh"] = rows
    ac = androidcontrol_app_tasks(data)
    if ac:
        sets["androidcontrol"] = ac
    return sets


def androidcontrol_app_tasks(data: Path) -> list[dict[str, Any]]:
    """The AndroidControl episodes that open an app, as tasks about that app (the first ``open`` action's name)."""
    p = data / "androidcontrol" / "android_control_evaluation_std.jsonl"
    if not p.is_file():
        return []
    out: list[dict[str, Any]] = []
    with open(p, encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
                opened = [s["action_content"].get("text") for s in row["steps"]
                          if s["action_content"].get("action") == "open"]
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            goal = " ".join(str(row.get("goal", "")).split())
            if goal and opened and isinstance(opened[0], str) and opened[0].strip():
                out.append({"goal": goal, "app": opened[0].strip(), "package": None})
    return out


def androidcontrol_goals(data: Path | None) -> list[str]:
    """Goals of the AndroidControl episodes."""
    if data is None:
        return []
    p = data / "androidcontrol" / "android_control_evaluation_std.jsonl"
    if not p.is_file():
        return []
    goals = []
    with open(p, encoding="utf-8") as fh:
        for line in fh:
            try:
                goals.append(json.loads(line)["goal"])
            except (ValueError, KeyError):
                continue
    return goals


def synthetic_goals(n: int, seed: int = 1, data: Path | None = None) -> list[tuple[str, str | None]]:
    """n (goal, app display name) pairs: real goals with variations, plus templates."""
    rng = random.Random(seed)
    base: list[tuple[str, str | None]] = [(t["goal"], t["app"]) for t in real_tasks(data)]
    base += [(g, None) for g in androidcontrol_goals(data)]
    out: list[tuple[str, str | None]] = []
    while len(out) < n:
        if base and rng.random() < 0.6:
            g, app = rng.choice(base)
            g = re.sub(r"\d+", lambda m: str(int(m.group()) + rng.randint(1, 9)), g)
            out.append((g, app))
        elif rng.random() < 0.5:
            app = rng.choice(ZH_APPS)
            out.append((rng.choice(ZH_TEMPLATES).format(app=app, who=rng.choice(WHO), thing=rng.choice(THINGS)), app))
        else:
            app = rng.choice(EN_APPS)
            out.append((rng.choice(EN_TEMPLATES).format(app=app, who=rng.choice(WHO), thing=rng.choice(THINGS)), app))
    return out
