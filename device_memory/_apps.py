"""App identity: one canonical id per app, found from display names, aliases, pinyin or packages."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from lifecycle import load_yaml, slug_id

# Names that are also ordinary words: they name the app only when nothing more specific does.
GENERIC_NAMES = frozenset({
    "settings", "setting", "clock", "calendar", "calculator", "contacts", "phone", "messages", "camera", "photos",
    "gallery", "files", "maps", "tasks", "keep", "dictionary", "booking", "alarm", "sms", "dialer", "browser",
    "设置", "系统设置", "时钟", "闹钟", "日历", "计算器", "联系人", "通讯录", "电话", "拨号", "短信", "信息",
    "相机", "相册", "图库", "文件管理", "浏览器", "应用商店", "电信", "头条", "点评", "菜鸟", "高德", "滴滴", "网易云",
})


@dataclass
class AppInfo:
    """One app: canonical id, display names, aliases and Android packages."""

    app_id: str
    names: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)

    @property
    def display(self) -> str:
        """The first display name."""
        return self.names[0] if self.names else self.app_id


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-.·]+", " ", text.strip().lower())


class AppCatalog:
    """The shipped alias table plus names learned on the device; thread-safe."""

    def __init__(self, apps: Iterable[AppInfo] = ()) -> None:
        self._lock = threading.Lock()
        self._apps: dict[str, AppInfo] = {}
        self._by_name: dict[str, str] = {}
        self._compiled: tuple[int, Any] | None = None
        self._ids: dict[str, str] = {}  # app_id_for answers; retrieval asks for the same few names all the time
        for app in apps:
            self.add(app)

    @classmethod
    def shipped(cls) -> AppCatalog:
        """The catalog of the alias table shipped with the package."""
        text = resources.files("device_memory").joinpath("data/apps.yaml").read_text("utf-8")
        data = load_yaml(text, "device_memory/data/apps.yaml") or {}
        return cls(AppInfo(str(k), [str(x) for x in v.get("names", [])], [str(x) for x in v.get("aliases", [])],
                           [str(x) for x in v.get("packages", [])]) for k, v in data.items())

    def add(self, app: AppInfo) -> None:
        """Add or merge an app's names."""
        with self._lock:
            cur = self._apps.get(app.app_id)
            if cur is None:
                cur = AppInfo(app.app_id)
                self._apps[app.app_id] = cur
            for attr in ("names", "aliases", "packages"):
                merged = list(dict.fromkeys([*getattr(cur, attr), *getattr(app, attr)]))
                setattr(cur, attr, merged)
            for name in [cur.app_id, *cur.names, *cur.aliases, *cur.packages]:
                key = _norm(name)
                if key:
                    self._by_name.setdefault(key, cur.app_id)
            self._ids = {}  # a new name can change an answer

    def learn(self, app_id: str, names: Iterable[str] = (), packages: Iterable[str] = ()) -> None:
        """Remember names and packages an app profile observed."""
        self.add(AppInfo(app_id, [n for n in names if n], [], [p for p in packages if p]))

    def get(self, app_id: str) -> AppInfo | None:
        """The app with this canonical id."""
        return self._apps.get(app_id)

    def canonical(self, name: str | None) -> str | None:
        """Canonical id of a name, alias or package; None when unknown."""
        if not name:
            return None
        return self._by_name.get(_norm(name))

    def app_id_for(self, name: str) -> str:
        """Canonical id of a known app, else a safe slug id of the name (e.g. ``微信`` -> hash)."""
        ids = self._ids
        app_id = ids.get(name)
        if app_id is None:
            app_id = self.canonical(name) or slug_id(name)
            if len(ids) < 4096:
                ids[name] = app_id
        return app_id

    def _matchers(self) -> tuple[re.Pattern[str], re.Pattern[str] | None, list[tuple[str, str]]]:
        # One compiled alternation for all Latin names (longest first) instead of a regex per name.
        with self._lock:
            if self._compiled is not None and self._compiled[0] == len(self._by_name):
                return self._compiled[1]
            names = list(self._by_name.items())
        ascii_long = sorted((k for k, _ in names if k.isascii() and len(k) > 2), key=len, reverse=True)
        ascii_short = sorted({k.upper() for k, _ in names if k.isascii() and len(k) <= 2}, key=len, reverse=True)
        # Not inside an e-mail address, a domain or a package name (agent@gmail.com is not Gmail).
        long_re = re.compile(r"(?<![a-z0-9@.])(" + "|".join(re.escape(k).replace("\\ ", "[ _.-]?")
                                                            for k in ascii_long) + r")(?![a-z0-9]|\.[a-z])")
        # Two-letter names (QQ, JD) count only when written in capitals.
        short_re = (re.compile(r"(?<![A-Za-z0-9])(" + "|".join(map(re.escape, ascii_short)) + r")(?![A-Za-z0-9])")
                    if ascii_short else None)
        cjk = [(k, a) for k, a in names if not k.isascii()]
        compiled = (long_re, short_re, cjk)
        with self._lock:
            self._compiled = (len(self._by_name), compiled)
        return compiled

    def find_in_text(self, text: str) -> list[tuple[str, int, str]]:
        """Apps named in free text as (app_id, position, matched name), most specific first."""
        low = text.lower()
        long_re, short_re, cjk = self._matchers()
        hits: list[tuple[str, int]] = []
        for m in long_re.finditer(low):
            hits.append((re.sub(r"[ _.-]", " ", m.group(1)), m.start()))
        if short_re is not None:
            hits += [(m.group(1).lower(), m.start()) for m in short_re.finditer(text)]
        for key, _ in cjk:
            pos = low.find(key)
            if pos >= 0:
                hits.append((key, pos))
        found: dict[str, tuple[int, int, str, bool]] = {}
        for key, pos in hits:
            app_id = self._by_name.get(_norm(key))
            if app_id is None:
                continue
            generic = _norm(key) in GENERIC_NAMES
            prev = found.get(app_id)
            if prev is None or (len(key), -pos) > (prev[1], -prev[0]):
                found[app_id] = (pos, len(key), key, generic)
        ranked = sorted(found.items(), key=lambda kv: (kv[1][3], kv[1][0], -kv[1][1]))
        return [(app_id, v[0], v[2]) for app_id, v in ranked]


_shipped: AppCatalog | None = None
_shipped_lock = threading.Lock()


def shipped_catalog() -> AppCatalog:
    """A process-wide copy of the shipped catalog (loaded once)."""
    global _shipped
    with _shipped_lock:
        if _shipped is None:
            _shipped = AppCatalog.shipped()
        return _shipped
