"""App identity: one canonical id per app, found from display names, aliases, pinyin or packages."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import NamedTuple

from memory_plane.lifecycle import load_yaml, nfkc, slug_id

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


_SEPARATORS = re.compile(r"[\s_\-.·]+")
_NAME_SEPARATOR = re.compile(r"[ _.-]")
_RUN = re.compile(r"[a-z0-9]+")
# A Latin name is not matched inside an e-mail address, a domain or a package (agent@gmail.com is not Gmail).
_LONG_BEFORE, _LONG_AFTER = r"(?<![a-z0-9@.])(", r")(?![a-z0-9]|\.[a-z])"
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_NOT_BEFORE = _ALNUM | {"@", "."}
_JOINERS = frozenset(" _.-")  # what may stand between the words of a name (or nothing)


def _norm(text: str) -> str:
    # NFKC: "ＷｅＣｈａｔ" is WeChat, and a name composed or decomposed is one name.
    return _SEPARATORS.sub(" ", nfkc(text).strip().lower())


def _long_pattern(name: str) -> re.Pattern[str]:
    """One Latin name as a pattern: its words joined by at most one of " _.-" each, with the lookarounds."""
    return re.compile(_LONG_BEFORE + re.escape(name).replace("\\ ", "[ _.-]?") + _LONG_AFTER)


def _plain_end(low: str, p: int, words: list[str]) -> int:
    """Where ``_long_pattern`` of a name of these words (each of letters and digits) matches from ``p`` to, or -1.

    A word never starts with a joiner, so at each gap either the joiner or no joiner can be followed by the
    next word, never both: the one way the regular expression would try is the only one."""
    if p and low[p - 1] in _NOT_BEFORE:
        return -1
    e = p + len(words[0])
    for w in words[1:]:
        if e < len(low) and low[e] in _JOINERS:
            e += 1
        if not low.startswith(w, e):
            return -1
        e += len(w)
    if e < len(low) and (low[e] in _ALNUM or (low[e] == "." and e + 1 < len(low) and "a" <= low[e + 1] <= "z")):
        return -1
    return e


class _Matchers(NamedTuple):
    """What find_in_text matches with, made once per catalog version."""

    long_names: list[str]  # Latin names longer than two letters, longest first (the order they are tried in)
    words: dict[str, int]  # the one-word ones of letters and digits, by their place in long_names
    others: list[tuple[str, int, list[str]]]  # the rest: longest word, place, words
    short_re: re.Pattern[str] | None
    cjk: list[tuple[str, str]]
    odd: dict[int, re.Pattern[str]]  # patterns of names not of plain words (compiled when a text may hold one)


class AppCatalog:
    """The shipped alias table plus names learned on the device; thread-safe."""

    def __init__(self, apps: Iterable[AppInfo] = ()) -> None:
        self._lock = threading.Lock()
        self._apps: dict[str, AppInfo] = {}
        self._by_name: dict[str, str] = {}
        self._compiled: tuple[int, _Matchers] | None = None
        self._ids: dict[str, str] = {}  # app_id_for answers; retrieval asks for the same few names all the time
        for app in apps:
            self.add(app)

    @classmethod
    def shipped(cls) -> AppCatalog:
        """The catalog of the alias table shipped with the package."""
        text = resources.files("memory_plane.device_memory").joinpath("data/apps.yaml").read_text("utf-8")
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

    def fingerprint(self) -> str:
        """A digest of every name the catalog knows and the app it names: what a text names depends on nothing else."""
        with self._lock:
            names = sorted(self._by_name.items())
        return hashlib.blake2b("\n".join(f"{k}\t{v}" for k, v in names).encode("utf-8"), digest_size=16).hexdigest()

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

    def names_of(self, app_id: str) -> list[str]:
        """Every name the catalog knows an app by: its id, display names, aliases and packages."""
        info = self._apps.get(app_id)
        return [app_id] if info is None else list(dict.fromkeys([app_id, *info.names, *info.aliases, *info.packages]))

    def same_app(self, a: str | None, b: str | None) -> bool:
        """Whether two names (display names, aliases, packages or ids, in any script) name one app: 美团 is
        meituan, com.tencent.mm is 微信; a name the catalog does not know is only itself."""
        if not a or not b:
            return False
        return _norm(a) == _norm(b) or self.app_id_for(a) == self.app_id_for(b)

    def app_id_for(self, name: str) -> str:
        """Canonical id of a known app, else a safe slug id of the name (e.g. ``微信`` -> hash)."""
        ids = self._ids
        app_id = ids.get(name)
        if app_id is None:
            app_id = self.canonical(name) or slug_id(name)
            if len(ids) < 4096:
                ids[name] = app_id
        return app_id

    def _matchers(self) -> _Matchers:
        with self._lock:
            if self._compiled is not None and self._compiled[0] == len(self._by_name):
                return self._compiled[1]
            names = list(self._by_name.items())
        long_names = sorted((k for k, _ in names if k.isascii() and len(k) > 2), key=len, reverse=True)
        ascii_short = sorted({k.upper() for k, _ in names if k.isascii() and len(k) <= 2}, key=len, reverse=True)
        # Two-letter names (QQ, JD) count only when written in capitals.
        short_re = (re.compile(r"(?<![A-Za-z0-9])(" + "|".join(map(re.escape, ascii_short)) + r")(?![A-Za-z0-9])")
                    if ascii_short else None)
        cjk = [(k, a) for k, a in names if not k.isascii()]
        words = {k: n for n, k in enumerate(long_names) if _RUN.fullmatch(k)}
        others = [(max(k.split(" "), key=len), n, k.split(" ")) for n, k in enumerate(long_names) if k not in words]
        compiled = _Matchers(long_names, words, others, short_re, cjk, {})
        with self._lock:
            self._compiled = (len(self._by_name), compiled)
        return compiled

    def _long_hits(self, low: str, m: _Matchers) -> list[tuple[str, int]]:
        """The Latin names in ``low`` as one alternation of them all, longest first, would find them (finditer)."""
        # That alternation (230 names) cost a fresh process 11 ms to compile. A name that cannot match anywhere
        # in the text is left out first: one word of letters and digits matches a whole run of them (the
        # lookarounds see to it), any other only where all its words are. Where each name left matches is then
        # found without compiling (or, for a name not of plain words, with its own pattern), and the scan is
        # replayed: from left to right, the first name in order that matches at a position wins, and the next
        # match starts after it.
        held = {m.words[w] for w in _RUN.findall(low) if w in m.words}
        held.update(n for key, n, words in [x for x in m.others if x[0] in low] if all(w in low for w in words))
        found: list[tuple[int, int, int]] = []  # (position, place of the name, end)
        for n in held:
            name = m.long_names[n]
            words = name.split(" ")
            if all(map(_RUN.fullmatch, words)):
                p = low.find(words[0])
                while p >= 0:
                    e = _plain_end(low, p, words)
                    if e >= 0:
                        found.append((p, n, e))
                    p = low.find(words[0], p + 1)
                continue
            pattern = m.odd.get(n)
            if pattern is None:
                pattern = m.odd[n] = _long_pattern(name)
            hit = pattern.search(low)
            while hit is not None:
                found.append((hit.start(), n, hit.end()))
                hit = pattern.search(low, hit.start() + 1)
        hits: list[tuple[str, int]] = []
        after = 0
        for p, _, e in sorted(found):
            if p >= after:
                hits.append((_NAME_SEPARATOR.sub(" ", low[p:e]), p))
                after = e
        return hits

    def find_in_text(self, text: str) -> list[tuple[str, int, str]]:
        """Apps named in free text as (app_id, position, matched name), most specific first."""
        low = text.lower()
        m = self._matchers()
        hits = self._long_hits(low, m)
        if m.short_re is not None:
            hits += [(x.group(1).lower(), x.start()) for x in m.short_re.finditer(text)]
        if not low.isascii():  # the names in other scripts are not
            for key, _ in m.cjk:
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
