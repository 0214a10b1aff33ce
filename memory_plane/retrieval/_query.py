"""Query parsing: intent, app, target, entities and the tools a goal asks for, in Chinese or English."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from memory_plane.device_memory import AppCatalog

from .._tokens import token_set

# (intent, Chinese keywords, English keywords): the first intent with a hit wins, so the more
# specific intents come first.
INTENTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("send_message", ("发消息", "发送消息", "发信息", "发微信", "回复", "发给", "告诉", "留言"),
     ("send a message", "send message", "text ", "reply", "message to", "send ")),
    ("open_contact_chat", ("聊天", "对话框", "找到", "联系人"), ("chat with", "conversation with", "contact ")),
    ("call", ("打电话", "拨打", "呼叫", "视频通话", "语音通话"), ("call ", "dial", "phone call", "video call")),
    ("order", ("点外卖", "外卖", "下单", "点一", "购买", "买一", "加入购物车", "购物车", "订餐"),
     ("order", "buy", "purchase", "add to cart", "cart", "checkout", "delivery")),
    ("pay", ("支付", "付款", "转账", "缴费", "充值", "收款"), ("pay ", "payment", "transfer money", "top up")),
    ("book", ("预订", "预定", "订票", "订酒店", "机票", "火车票", "酒店"),
     ("book", "reserve", "reservation", "hotel", "flight", "ticket")),
    ("navigate", ("导航", "路线", "怎么去", "去往", "打车"),
     ("navigate", "directions", "route to", "ride to", "take me")),
    ("set_alarm", ("闹钟", "定时", "计时", "提醒我"), ("alarm", "timer", "remind me", "stopwatch")),
    ("create_event", ("日程", "会议", "日历", "安排"), ("event", "calendar", "schedule", "meeting", "appointment")),
    ("toggle_setting", ("开启", "关闭", "切换", "蓝牙", "无线", "亮度", "深色模式", "语言", "通知", "飞行模式"),
     ("turn on", "turn off", "enable", "disable", "toggle", "wifi", "wi-fi", "bluetooth", "brightness",
      "dark mode", "language", "notification", "airplane mode")),
    ("play_media", ("播放", "听歌", "看视频", "放一首", "听"), ("play ", "watch", "listen", "song", "music", "video")),
    ("post", ("发布", "分享", "发朋友圈", "上传", "评论", "点赞", "关注"),
     ("post", "share", "publish", "upload", "comment", "like ", "follow")),
    ("take_photo", ("拍照", "拍一张", "录像"), ("take a photo", "take a picture", "photo", "selfie", "record a video")),
    ("create_note", ("笔记", "备忘", "记事", "待办"), ("note", "memo", "to-do", "todo", "task list")),
    ("search", ("搜索", "查找", "搜一下", "找一下", "查一下", "查询"), ("search", "look up", "find ", "look for")),
    ("check_info", ("查看", "看看", "显示", "多少", "是什么"),
     ("check", "view", "show", "what is", "how much", "see ")),
    ("open_app", ("打开", "启动", "进入", "开启"), ("open", "launch", "start", "go to")),
)

_QUOTE = "[\"“”「」『』‘’']"
_IN_QUOTES = _QUOTE + "([^\"“”「」『』‘’']{1,40})" + _QUOTE
_QUOTED = re.compile(_IN_QUOTES)
# A quoted span, but not an apostrophe between letters ("Bob's profile on Instagram and Alice's post").
_QUOTED_SPAN = re.compile("(?<![A-Za-z])" + _IN_QUOTES + "(?![A-Za-z])")


def _letters(upper: bool) -> str:
    """A character class of the capital (or small) letters of the Latin, Greek and Cyrillic scripts, from Unicode's
    own case of each letter: names are spelt "José", "Łukasz", "Nguyễn", "Дмитрий", not only in ASCII. Runs of
    letters are written as ranges (``A-Z``): the class compiles faster than one of single letters."""
    spans = (*range(0x41, 0x530), *range(0x1E00, 0x1F00))
    points = [c for c in spans if (chr(c).isupper() if upper else chr(c).islower())]
    runs: list[tuple[int, int]] = []
    for c in points:
        if runs and runs[-1][1] == c - 1:
            runs[-1] = (runs[-1][0], c)
        else:
            runs.append((c, c))
    return "[" + "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                         for a, b in runs) + "]"


@functools.cache
def _zh_target() -> re.Pattern[str]:
    """A Chinese name after a verb of finding or messaging (找到张三, 发给李四), compiled on the first Chinese goal:
    its class of CJK ideographs takes milliseconds to compile."""
    return re.compile(r"(?:找到|给|和|跟|联系|搜索|查找|搜|打给|发给|告诉|点一杯|点一份|买一杯|买一份|订一份)\s*"
                      r"([\u4e00-\u9fff]{2,4}?)(?:[，,。、的\s]|发|聊|说|$)")


def _has_cjk(text: str) -> bool:
    """Whether a text holds a CJK ideograph (the unified block), as a Chinese goal does."""
    return any("\u4e00" <= c <= "\u9fff" for c in text)


@functools.cache
def _name_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The two patterns of a capitalised name (a target after a verb, and a recipient), compiled on first use:
    their classes of every capital and small letter cost more to compile than the rest of the module, and a
    goal with no capital letter names no one (``_has_capital``)."""
    up, lo = _letters(True), _letters(False)
    # A capitalised name word: "Bob", "José", "O'Brien", "McDonald", "Jean-Luc" (never "SMS", "iPhone").
    name_word = rf"{up}(?:['’]{up})?{lo}+(?:(?:['’-]?{up}){lo}+)*(?!\w)"
    target = re.compile(
        r"\b(?i:to|with|for|find|call|message|text|order|buy)\s+(?i:an?\s+|some\s+)?"
        rf"({up}(?:{up}|{lo}|['’-](?={up}))+(?!\w)(?:\s+{name_word})?)")
    # A recipient named right after a verb of messaging, before what is sent: "send Zhang San a message", "tell
    # Bob ...", "remind Mom to ...". Names are capitalised words; what follows must not be another capitalised word.
    recipient = re.compile(
        r"\b(?i:send|tell|ask|remind|text|message|email|e-mail|write|wish|call)\s+"
        rf"({name_word}(?:\s+{name_word})?)"
        r"(?=\s+(?:a|an|the|that|to|on|in|via|about|my|his|her|it|me|some)\b|[,.;:!?]|$)")
    return target, recipient


def _has_capital(text: str) -> bool:
    """Whether a text holds a capital letter, the first letter of every name the name patterns match."""
    return any(c.isupper() for c in text)


# A tool the goal asks for, read off the goal's shape rather than a list of tools: an identifier written as code
# (``keyboard_text``, ``launch_app()``), or a name beside the word "tool" in the goal's language ("the search
# tool", "用截图工具", "con la herramienta X").
_CODE_NAME = re.compile(r"(?<![\w./@-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z][a-z0-9_]*(?=\())(?![\w./@-])")
_TOOL_BEFORE = re.compile(r"(?i)\b([a-z][\w-]{1,30})\s+tools?\b")  # English: "the search tool"
# Where the name follows: Spanish, French, German ("la herramienta buscador"), or English when the goal says so
# ("the tool called search", 'the tool "search"').
_TOOL_AFTER = re.compile(r"(?i)\b(?:(?:herramienta|outil|werkzeug)\s+(?:de\s+|del\s+|du\s+)?"
                         r"|tools?\s+(?:called|named)\s+|tools?\s+(?=[\"“'‘«]))[\"“'‘«]?([a-z][\w-]{1,30})")
_TOOL_CJK = re.compile(r"(?:用|使用|通过|借助|利用)\s*([^\s，。、,.;；]{1,12}?)\s*(?:工具|ツール)")
_NOT_TOOL_WORDS = frozenset({"the", "a", "an", "this", "that", "any", "some", "no", "other", "same", "right", "wrong",
                             "which", "what", "each", "every", "my", "your", "to", "use", "using", "with", "is", "are",
                             "best", "good", "new", "one", "power", "of", "for", "and", "or"})
_NOT_NAMES = frozenset({"i", "me", "my", "the", "a", "an", "it", "this", "that", "all", "everyone", "somebody"})
_NUMBER = re.compile(r"\d+(?:[.:]\d+)?")
_ZH_VERBS = ("打开", "使用", "登录", "进入", "处理", "关于", "在")


@dataclass
class ParsedQuery:
    """What a goal asks for, as retrieval and the episode use it."""

    text: str
    intent: str = "unknown"
    app: str | None = None
    app_name: str | None = None
    target: str | None = None
    entities: list[str] = field(default_factory=list)
    apps: list[str] = field(default_factory=list)
    app_generic: bool = False
    # The words of the name the goal itself calls its app by, as written; empty when the text names no
    # specific app (the app came from the foreground hint, the name is a generic word, or it stands in quotes).
    app_words: frozenset[str] = frozenset()
    intents: frozenset[str] = frozenset()  # every intent the goal's keywords name (``intent`` is the first)
    tokens: frozenset[str] = frozenset()
    language: str = "en"
    tools: tuple[str, ...] = ()  # the tools the goal asks to be used, in the order it names them (``goal_tools``)

    def to_dict(self) -> dict[str, object]:
        """JSON form for ``--explain``."""
        return {"intent": self.intent, "intents": sorted(self.intents), "app": self.app, "app_name": self.app_name,
                "app_generic": self.app_generic, "app_words": sorted(self.app_words),
                "target": self.target,
                "entities": self.entities, "apps": self.apps, "language": self.language, "tools": list(self.tools)}


# The catch-all intents at the end of INTENTS: nearly every goal also searches, checks or opens something.
BROAD_INTENTS = frozenset(("search", "check_info", "open_app"))
# An English keyword starts a word ("book" is not in "Facebook", "play " is in "play the song").
_EN_INTENT_WORDS = [(intent, re.compile("(?<![a-z0-9])(?:" + "|".join(map(re.escape, en)) + ")"), zh)
                    for intent, zh, en in INTENTS]


# Quoted text is a value the task types or looks for ("question 'What is the capital of France?'"), never what
# the goal asks: it is left out before intents are read. An apostrophe between letters (Bob's) quotes nothing.
_QUOTED_VALUE = re.compile("(?<![A-Za-z])" + _QUOTE + "[^\"“”「」『』‘’']{1,300}" + _QUOTE + "(?![A-Za-z])")
# Words a request may open with before its verb ("please", "帮我"): the verb that follows still leads.
_LEAD_IN = re.compile(r"^(?:\s|[^\w\s])*(?:(?:please|kindly|can you|could you|help me(?: to)?|i want to|"
                      r"i would like to|i'd like to|let's|let me|请|帮我|麻烦|给我|我要|我想|我需要|你)\s*,?\s*)*",
                      re.IGNORECASE)


def without_quotes(text: str) -> str:
    """A goal with its quoted values left out (ASCII and CJK quotes; not an apostrophe between letters)."""
    return _QUOTED_VALUE.sub(" ", text)


def detect_intent(text: str) -> str:
    """The intent of a goal from a small keyword vocabulary (``unknown`` when nothing matches; an English keyword
    only where a word starts: "Review" is no "view"; quoted text never counts): the goal's leading verb when it
    names a specific intent ("Play the video of the meeting" plays, whatever else its words name), else the most
    specific intent found."""
    lead = leading_intent(text)
    if lead is not None:
        return lead
    found = detect_intents(text)
    return next((intent for intent, _, _ in INTENTS if intent in found), "unknown")


@functools.lru_cache(maxsize=1 << 14)
def detect_intents(text: str) -> frozenset[str]:
    """Every intent the vocabulary finds in a text outside quotes, an English keyword only where a word starts:
    a goal of several steps asks for several things."""
    text = without_quotes(text)
    low = " " + text.lower() + " "
    return frozenset(intent for intent, en, zh in _EN_INTENT_WORDS
                     if any(k in text for k in zh) or en.search(low))


@functools.lru_cache(maxsize=1 << 14)
def leading_intent(text: str) -> str | None:
    """The specific intent the goal's first word names (after a lead-in such as "please" or "帮我"), or None: a
    broad one (open, check, search) leads nearly every goal and yields to a specific intent named later."""
    rest = without_quotes(text)
    rest = rest[_LEAD_IN.match(rest).end():]  # type: ignore[union-attr]  # the pattern matches the empty string
    low = " " + rest.lower()
    for intent, en, zh in _EN_INTENT_WORDS:
        if intent in BROAD_INTENTS:
            continue
        hit = en.match(low, 1)
        if (hit is not None and hit.start() == 1) or any(rest.startswith(k) for k in zh):
            return intent
    return None


MAX_GOAL_CHARS = 2000


def goal_tools(text: str, tool_names: Iterable[str] = ()) -> tuple[str, ...]:
    """The tools a goal asks to be used: the agent's own tool names (``tool_names``) of more than a plain word
    that the goal writes (``keyboard_text``, or "keyboard text"), identifiers written as code (``keyboard_text``,
    ``swipe()``), and names beside the word "tool" in English, Spanish, French, German, Chinese or Japanese
    ("with the search tool", "用截图工具"). A name the agent has a tool of is given as that tool's name; the
    others as written, lowercase."""
    known = {t.lower(): t for t in tool_names if isinstance(t, str) and t.strip()}
    low = text.lower()
    found: list[tuple[int, str]] = []
    for name, tool in known.items():
        if name.isalpha():
            continue  # a tool named by a plain word ("tap", "open") is a verb of most goals: asked for only as a tool
        for m in re.finditer(r"(?<![\w])" + re.escape(name) + r"(?![\w])", low):
            found.append((m.start(), tool))
        spaced = name.replace("_", " ")
        if spaced != name:
            found.extend((m.start(), tool) for m in re.finditer(r"\b" + re.escape(spaced) + r"\b", low))
    for pattern in (_CODE_NAME, _TOOL_BEFORE, _TOOL_AFTER, _TOOL_CJK):
        source = text if pattern is _TOOL_CJK else low
        for m in pattern.finditer(source):
            word = m.group(1).strip().lower()
            if word and word not in _NOT_TOOL_WORDS:
                found.append((m.start(1), known.get(word, word)))
    return tuple(dict.fromkeys(name for _, name in sorted(found)))[:8]


def parse_query(text: str, catalog: AppCatalog, *, app_hint: str | None = None,
                tool_names: Iterable[str] = ()) -> ParsedQuery:
    """Parse a goal: intent, canonical app (from the text, else the hint), target and entities.

    Only the first MAX_GOAL_CHARS characters are matched: a goal pasted with a whole document still
    retrieves in milliseconds (the recorder keeps the same head, with a count of what it left out).
    """
    clean = " ".join((text or "")[: MAX_GOAL_CHARS * 2].split())[:MAX_GOAL_CHARS]
    q = ParsedQuery(text=clean, tokens=token_set(clean))
    q.language = "zh" if _has_cjk(clean) else "en"
    q.intent = detect_intent(clean)
    q.intents = detect_intents(clean)
    q.tools = goal_tools(clean, tool_names)
    found = catalog.find_in_text(clean)
    spelled = ""
    q.apps = [a for a, _, _ in found]
    if found:
        q.app, at, q.app_name = found[0]
        from memory_plane.device_memory import GENERIC_NAMES

        # "信息" or "settings" may name an app or just be a word: a weaker signal than "微信".
        q.app_generic = q.app_name.lower() in GENERIC_NAMES
        # A name inside quotes is text to type or look for (搜索“周末去哪儿玩”), not where the task is done.
        quoted = any(m.start() < at < m.end() for m in _QUOTED_SPAN.finditer(clean))
        spelled = "" if quoted else q.app_name
    elif app_hint:
        q.app = catalog.app_id_for(app_hint)
        q.app_name = app_hint
    if q.app and q.app_name:
        info = catalog.get(q.app)
        q.app_name = info.display if info else q.app_name
        if spelled and not q.app_generic:
            q.app_words = token_set(spelled)
    entities: list[str] = []
    entities += [m.group(1).strip() for m in _QUOTED.finditer(clean)]
    m = _zh_target().search(clean) if q.language == "zh" else None  # the name it takes is CJK ideographs
    if m and catalog.canonical(m.group(1)) is None:
        entities.append(m.group(1))
    named_by = _name_patterns() if _has_capital(clean) else ()
    said = (x for x in (pattern.search(clean) for pattern in named_by) if x)
    for m in sorted(said, key=lambda x: x.start(1)):  # the one said first leads
        name = m.group(1)
        if catalog.canonical(name) is None and name.lower() not in _NOT_NAMES:
            entities.append(name)
    entities += _NUMBER.findall(clean)
    for verb in _ZH_VERBS:
        i = clean.find(verb)
        if i >= 0:
            tail = re.match(r"[\u4e00-\u9fffA-Za-z0-9]{2,4}", clean[i + len(verb):])
            if not tail or tail.group(0) in entities:
                continue
            if any(pos == 0 for _, pos, _ in catalog.find_in_text(tail.group(0))):
                continue  # "打开微信": the app, not an entity
            if detect_intent(tail.group(0)) == "unknown":
                entities.append(tail.group(0))
    q.entities = list(dict.fromkeys(e for e in entities if e and e.lower() not in ("app", "me", "my", "you")))[:10]
    named = [e for e in q.entities if not _NUMBER.fullmatch(e)]
    q.target = named[0] if named else None
    return q


def goal_facts(q: ParsedQuery, catalog: AppCatalog) -> dict[str, object]:
    """The normalized goal an episode records: intent, the app the goal names (its catalog id, and every other
    name the catalog knows it by, so the phone's own name for it is recognised: 美团 for meituan) and target."""
    names = [n for n in catalog.names_of(q.app) if n != q.app][:12] if q.app else []
    return {"intent": q.intent, "app": q.app, "app_names": names or None, "target": q.target,
            "tools": list(q.tools) or None}

