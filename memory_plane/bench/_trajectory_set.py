"""`bench lessons`' second set: seeded, runtime-like trajectories over fictional apps of varied shapes.

Unlike AndroidControl it has what a runtime reports: pages with element lists (labels, bounds), visible
text and dialogs; taps with the label they target; sign-ins with a password field; failures of several
causes, each met by two or more different goals; runs whose record ends mid-task; successes the agent
claimed that a person judged failed; goals that name an app the run never reaches, or a settings word
inside another app. Every app, page and text here is made up for this bench.

Each ``Trajectory`` carries its ground truth (``Truth``): the real path, the app really used, the
person's verdict, the values that came from the goal, whether the run finished. ``generate(seed)`` is
deterministic: the same seed gives the same trajectories, in the same order.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

WIDTH, HEIGHT = 1080, 2400
HELD_OUT_SHARE = 20  # percent of the success goals asked and never recorded (by a stable hash of the goal)
LAUNCHER = ("Launcher", "com.android.launcher")

# -- screens ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Screen:
    """One page as the runtime observes it: app, page, package, labelled elements with bounds, text, dialogs."""

    app: str
    page: str
    package: str
    labels: tuple[str, ...]
    extra_text: tuple[str, ...] = ()
    dialogs: tuple[str, ...] = ()

    def bounds(self, label: str) -> tuple[int, int, int, int]:
        """Where an element is: one row per element, top to bottom (a dialog's buttons are the first rows)."""
        i = self.labels.index(label)
        top = 220 + i * 150
        return (40, top, WIDTH - 40, top + 120)

    def center(self, label: str) -> dict[str, int]:
        """The tap point of an element."""
        x0, y0, x1, y1 = self.bounds(label)
        return {"x": (x0 + x1) // 2, "y": (y0 + y1) // 2}

    def observed(self) -> dict[str, Any]:
        """The observed_state a runtime reports for this screen."""
        return {"app": self.app, "page": self.page, "package": self.package,
                "elements": [{"label": lab, "bounds": list(self.bounds(lab))} for lab in self.labels],
                "visible_text": [*self.labels, *self.extra_text], "dialogs": list(self.dialogs)}

    def showing(self, *text: str) -> Screen:
        """The same page with more text on it (what was typed, a message sent)."""
        return replace(self, extra_text=(*self.extra_text, *text))


@dataclass(frozen=True)
class App:
    """A fictional app: its name on screen, the (possibly long) name a launch uses, its package."""

    name: str
    launch_name: str
    package: str

    def screen(self, page: str, *labels: str, dialogs: tuple[str, ...] = ()) -> Screen:
        """A page of this app."""
        return Screen(self.name, page, self.package, tuple(labels), dialogs=dialogs)


DAYBOOK = App("Daybook", "Daybook Journal", "org.example.daybook")
RIJI = App("小日记", "小日记", "org.example.riji")
CARDS = App("CardDeck", "CardDeck Flashcards", "org.example.carddeck")
POSTBOX = App("Postbox", "Postbox Mail", "org.example.postbox")
TRIPNEST = App("Tripnest", "Tripnest Hotels, Flights, Car Rentals and Travel Deals", "org.example.tripnest")
WAVECAST = App("Wavecast", "Wavecast Radio, Podcasts, Music, Songs, News", "org.example.wavecast")
LIAOLIAO = App("聊聊", "聊聊", "org.example.liaoliao")
CONTROLS = App("Controls", "Controls", "org.example.controls")
KONGZHI = App("控制中心", "控制中心", "org.example.kongzhi")


def launcher(*icons: str) -> Screen:
    """The home screen with app icons and the system search."""
    return Screen(*LAUNCHER[:1], "Home screen", LAUNCHER[1], ("Search", *icons))


# -- actions and truth ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Act:
    """One tool call and what the phone showed after it."""

    tool: str
    input: dict[str, Any]
    after: Screen
    label: str | None = None  # the element the call targets, as the screen labels it
    narration: str | None = None
    is_error: bool = False
    error: str | None = None
    commit: bool = False  # a confirm/save/send/log-in tap: what makes the work stick
    sensitive: bool = False

    def path_token(self) -> tuple[str, str]:
        """The (kind, label or text) token of the real path."""
        ti = self.input
        if self.tool == "keyboard_text":
            return ("type", "[secret]" if self.sensitive else str(ti["text"]))
        if self.tool == "launch_app":
            return ("open", str(ti["app"]))
        if self.tool == "system_button":
            return ("button", str(ti["button"]))
        if self.tool == "swipe":
            return ("swipe", str(ti["direction"]))
        if self.tool == "wait":
            return ("wait", "")
        return ("tap", self.label or "")


@dataclass
class Truth:
    """What really happened in a trajectory (what the bench judges the device's lessons against)."""

    task: str  # the task it is (one template: one task, whatever the phrasing and values)
    app: str | None  # the app really used (system screens excluded)
    apps_shown: list[str]  # every app the phone showed
    success: bool  # the person's verdict
    reported_success: bool  # what the agent said
    finished: bool  # False: the record ends mid-task
    ending: str  # finish | interrupted | dropped | truncated
    cause: str | None = None  # a failure's cause (the symptom), None for a success or an unfinished run
    values: dict[str, str] = field(default_factory=dict)  # slot -> value, the values that came from the goal
    quoted: list[str] = field(default_factory=list)  # the goal's quoted spans
    names_unreached_app: str | None = None  # an app the goal's words name that the run never reached


@dataclass
class Trajectory:
    """One task as a runtime would record it, and its ground truth."""

    goal: str
    language: str
    start: Screen
    acts: list[Act]
    truth: Truth
    held_out: bool = False
    failure_phase: str | None = None
    failure_reason: str | None = None

    def path(self) -> list[tuple[str, str]]:
        """The real path, as (kind, label/text) tokens."""
        return [a.path_token() for a in self.acts]

    def work(self) -> list[tuple[str, str]]:
        """The steps that entered or committed something: every typing, every commit tap."""
        return [a.path_token() for a in self.acts if a.tool == "keyboard_text" or a.commit]


class Run:
    """Builds a trajectory's actions from the screen it is on."""

    def __init__(self, start: Screen) -> None:
        self.start = self.screen = start
        self.acts: list[Act] = []

    def _add(self, act: Act) -> Run:
        self.acts.append(act)
        self.screen = act.after
        return self

    def tap(self, label: str, to: Screen | None = None, *, commit: bool = False) -> Run:
        """Tap the element labelled ``label`` on this screen (``to``: where it leads; None: it stays)."""
        return self._add(Act("tap", self.screen.center(label), to or self.screen, label, f"tap {label}",
                             commit=commit))

    def type(self, text: str, *, sensitive: bool = False, error: str | None = None) -> Run:
        """Type into the focused field; a field that rejects the input leaves the screen as it was."""
        ti: dict[str, Any] = {"text": text, **({"sensitive": True} if sensitive else {})}
        after = self.screen if error or sensitive else self.screen.showing(text)
        return self._add(Act("keyboard_text", ti, after, None, "type the text", is_error=error is not None,
                             error=error, sensitive=sensitive))

    def launch(self, app: App, to: Screen) -> Run:
        """Open an app by its launch name."""
        return self._add(Act("launch_app", {"app": app.launch_name}, to, None, f"open {app.launch_name}"))

    def button(self, name: str, to: Screen) -> Run:
        """Press a system button (back, home)."""
        return self._add(Act("system_button", {"button": name}, to, None, f"press {name}"))

    def swipe(self, direction: str) -> Run:
        """Swipe the page (nothing new appears)."""
        return self._add(Act("swipe", {"direction": direction}, self.screen, None, f"swipe {direction}"))

    def wait(self) -> Run:
        """Wait for the page."""
        return self._add(Act("wait", {"seconds": 2}, self.screen, None, "wait for the page"))


# -- values -----------------------------------------------------------------------------------------

TITLES = ["Morning run", "Gym workout", "Piano practice", "Reading hour", "Garden work", "Team lunch",
          "Evening walk", "Bike repair", "Language class", "Budget review", "Call grandma", "Yoga session"]
MOODS = ["Calm", "Happy", "Tired"]
ZH_TITLES = ["晨跑", "读书", "练琴", "买菜", "家庭聚餐", "整理房间", "学英语", "看电影", "爬山", "写周报"]
ZH_MOODS = ["开心", "平静"]
DECKS = ["Capitals", "Verbs", "Chemistry", "Anatomy", "Music theory", "Idioms", "Rivers", "Birds"]
QUESTIONS = ["What is the capital city of France?", "What is the boiling point of water?",
             "Who painted the ceiling of the chapel?", "What is the largest planet?",
             "How many bones are in the hand?", "What does a ribosome make?", "Which river is the longest?",
             "What is the past tense of go?"]
ANSWERS = ["Paris", "100 degrees", "Michelangelo", "Jupiter", "27", "Proteins", "The Nile", "Went"]
CARDS_IN_DECK = ["Card 3", "Card 7", "Card 12", "Card 15", "Card 21", "Card 30"]
IMAGES = ["photo_beach.jpg", "diagram_cell.png", "map_europe.png", "chart_sales.png"]
PEOPLE = ["ana@example.org", "li.wei@example.org", "sam@example.org", "noor@example.org", "kai@example.org",
          "eva@example.org", "omar@example.org", "mia@example.org"]
FILES = ["report_q3.pdf", "budget.xlsx", "slides_final.pptx", "notes.txt", "invoice_114.pdf", "plan.docx"]
QUERIES = ["Project", "Invoice", "Meeting", "Travel", "Payroll", "Newsletter", "Contract", "Holiday"]
SUBJECTS = ["quarterly numbers", "the offsite", "the new contract", "the team dinner", "the roadmap"]
CITIES = ["Lisbon", "Osaka", "Denver", "Nairobi", "Krakow", "Hobart", "Quito", "Tallinn", "Porto", "Seville"]
DATES = ["May 3", "June 14", "July 9", "August 21", "September 2", "October 30", "November 11", "March 18"]
STATIONS = ["Jazz Lounge", "Morning Talk", "Coastal FM", "Indie Mix", "Classic Hits", "News Hour", "Lo-fi Beats"]
PODCASTS = ["History Hour", "Code Stories", "Tiny Planet", "Deep Kitchen", "Night Sky"]
ZH_PEOPLE = ["韩梅梅", "李雷", "老妈", "王芳", "陈晨", "刘洋", "赵敏", "周杰"]
ZH_MESSAGES = ["晚上回家吃饭", "明天上午开会", "我到楼下了", "周末一起爬山", "记得带伞", "生日快乐", "快递到了"]
VOLUMES = ["20", "35", "50", "65", "80"]
FONT_SIZES = ["小", "标准", "大", "超大"]


def _pick(rng: random.Random, pool: list[str], used: set[str]) -> str:
    fresh = [v for v in pool if v not in used] or pool
    v = rng.choice(fresh)
    used.add(v)
    return v


# -- the tasks ----------------------------------------------------------------------------------------
# Each task: its app, goal phrasings (with {slots}), the values it draws, and its path.


def _daybook_entries(titles: list[str]) -> Screen:
    return DAYBOOK.screen("Entries", "New entry", "Search", "More options", *titles)


def _daybook_editor(title: str = "") -> Screen:
    s = DAYBOOK.screen("Edit entry", "Title", *(f"Mood: {m}" for m in MOODS), "Save", "Cancel")
    return s.showing(title) if title else s


def daybook_create(v: dict[str, str], stop: int | None = None) -> Run:
    """Main list → editor: type the name, pick a mood, Save → back on the main list."""
    start = _daybook_entries(["Team lunch", "Budget review"])
    r = Run(start).tap("New entry", _daybook_editor()).tap("Title").type(v["title"])
    r.tap(f"Mood: {v['mood']}").tap("Save", start.showing(v["title"]), commit=True)
    return r


def daybook_edit(v: dict[str, str], stop: int | None = None) -> Run:
    """Main list → the entry's editor: rename it, Save → back on the main list."""
    start = _daybook_entries([v["old"], "Evening walk"])
    r = Run(start).tap(v["old"], _daybook_editor(v["old"])).tap("Title").type(v["title"])
    r.tap("Save", start.showing(v["title"]), commit=True)
    return r


def daybook_settings(v: dict[str, str], stop: int | None = None) -> Run:
    """A settings page inside the diary app: turn a switch, back to the list."""
    start = _daybook_entries(["Team lunch"])
    menu = DAYBOOK.screen("Entries", "Settings", "Export", "About", dialogs=("menu",))
    settings = DAYBOOK.screen("Settings", "Navigate up", "Reminders", "Backup", "Theme")
    r = Run(start).tap("More options", menu).tap("Settings", settings)
    r.tap(v["switch"], settings.showing(f"{v['switch']} off"), commit=True).button("back", start)
    return r


def riji_create(v: dict[str, str], stop: int | None = None) -> Run:
    """The same create task in a Chinese diary app."""
    start = RIJI.screen("日记列表", "新建", "搜索", "更多", "家庭聚餐")
    editor = RIJI.screen("编辑", "标题", *(f"心情：{m}" for m in ZH_MOODS), "保存", "取消")
    r = Run(start).tap("新建", editor).tap("标题").type(v["title"]).tap(f"心情：{v['mood']}")
    r.tap("保存", start.showing(v["title"]), commit=True)
    return r


def _decks() -> Screen:
    return CARDS.screen("Decks", "Add", "Create deck", "Sync", *DECKS[:4])


def cards_add(v: dict[str, str], stop: int | None = None) -> Run:
    """Deck list → note editor: front and back, Save → the deck list."""
    editor = CARDS.screen("Note editor", "Navigate up", "Deck", "Front", "Back", "Attach media", "Save")
    r = Run(_decks()).tap("Add", editor).tap("Front").type(v["question"]).tap("Back").type(v["answer"])
    r.tap("Save", _decks().showing("Card added"), commit=True)
    return r


def cards_media(v: dict[str, str], stop: int | None = None) -> Run:
    """The multimedia field sub-page, left by Done, Navigate up or back (all three lead to the editor)."""
    browser = CARDS.screen("Card browser", "Navigate up", *CARDS_IN_DECK)
    editor = CARDS.screen("Note editor", "Navigate up", "Deck", "Front", "Back", "Attach media", "Save")
    media = CARDS.screen("Multimedia field", "Navigate up", "Gallery", "Camera", "Done", *IMAGES)
    r = Run(_decks()).tap(v["deck"], browser).tap(v["card"], editor).tap("Attach media", media)
    r.tap(v["image"], media.showing(v["image"]))
    way = v["leave"]
    done = editor.showing(v["image"])
    if way == "back":
        r.button("back", done)
    else:
        r.tap(way, done)
    return r.tap("Save", browser, commit=True)


def cards_sync(v: dict[str, str], stop: int | None = None) -> Run:
    """An account sync behind a sign-in page: e-mail, password (sensitive), LOG IN → the deck list."""
    signin = CARDS.screen("Sign in", "E-mail", "Password", "LOG IN", "Forgot password")
    r = Run(_decks()).tap("Sync", signin).tap("E-mail").type(v["email"]).tap("Password")
    r.type("hunter2-" + v["email"][:3], sensitive=True).tap("LOG IN", _decks().showing("Synced"), commit=True)
    return r


def cards_new_deck(v: dict[str, str], stop: int | None = None) -> Run:
    """A name dialog: type the deck's name, OK → the deck list."""
    dialog = CARDS.screen("Create deck", "Deck name", "OK", "Cancel", dialogs=("Create deck",))
    r = Run(_decks()).tap("Create deck", dialog).tap("Deck name").type(v["deck"])
    return r.tap("OK", _decks().showing(v["deck"]), commit=True)


def _inbox() -> Screen:
    return POSTBOX.screen("Inbox", "Compose", "Search mail", "Shared folders", "Storage", "Weekly digest",
                          "Re: the offsite")


def _home_with_postbox() -> Screen:
    return launcher("Postbox", "Tripnest", "Wavecast")


def mail_compose(v: dict[str, str], stop: int | None = None) -> Run:
    """From the launcher: open the mail app (the shared first tap), write, attach a file, Send."""
    compose = POSTBOX.screen("Compose", "To", "Subject", "Attach", "Send", "Discard")
    files = POSTBOX.screen("Files", "Navigate up", *FILES)
    r = Run(_home_with_postbox()).tap("Postbox", _inbox()).tap("Compose", compose).tap("To").type(v["to"])
    r.tap("Subject").type(v["subject"]).tap("Attach", files).tap(v["file"], compose.showing(v["to"], v["file"]))
    return r.tap("Send", _inbox().showing("Sent"), commit=True)


def mail_flag(v: dict[str, str], stop: int | None = None) -> Run:
    """From the launcher: open the mail app (the shared first tap), search, select all, Flag."""
    results = POSTBOX.screen("Search results", "Navigate up", "Select all", "Flag", f"{v['query']} update",
                             f"{v['query']} notes")
    search = POSTBOX.screen("Search", "Search box", "Recent")
    r = Run(_home_with_postbox()).tap("Postbox", _inbox()).tap("Search mail", search).tap("Search box")
    r.type(v["query"])
    r.acts[-1] = replace(r.acts[-1], after=results)  # the search runs as the query is typed
    r.screen = results
    return r.tap("Select all").tap("Flag", results.showing("Flagged"), commit=True)


def _trip_home() -> Screen:
    return TRIPNEST.screen("Home", "Stays", "Cars", "Flights", "Destination", "Search")


def _trip_open(r: Run, how: str) -> Run:
    # Reached three ways: the launch tool with its long name, the launcher icon, or the system search.
    if how == "launch":
        return r.launch(TRIPNEST, _trip_home())
    if how == "icon":
        return r.tap("Tripnest", _trip_home())
    search = Screen(LAUNCHER[0], "Search", LAUNCHER[1], ("Search box",))
    r.tap("Search", search).tap("Search box").type("Tripnest")
    r.acts[-1] = replace(r.acts[-1], after=Screen(LAUNCHER[0], "Search", LAUNCHER[1], ("Search box", "Tripnest")))
    r.screen = r.acts[-1].after
    return r.tap("Tripnest", _trip_home())


def trip_book(v: dict[str, str], stop: int | None = None) -> Run:
    """Book a stay: destination, Search, a hotel, Reserve, Pay now → confirmation."""
    results = TRIPNEST.screen("Results", "Filter", f"Hotel {v['city']} Centre", f"{v['city']} Harbour Inn")
    hotel = TRIPNEST.screen("Hotel", "Navigate up", "Photos", "Reserve")
    checkout = TRIPNEST.screen("Checkout", "Dates", "Guests", "Pay now")
    r = _trip_open(Run(_home_with_postbox()), v["how"]).tap("Destination").type(v["city"])
    r.tap("Search", results).tap(f"Hotel {v['city']} Centre", hotel).tap("Reserve", checkout)
    if stop == 0:
        return r  # the failing variant stops here: Pay now does nothing
    return r.tap("Pay now", TRIPNEST.screen("Booked", "Done", "View booking"), commit=True)


def trip_car(v: dict[str, str], stop: int | None = None) -> Run:
    """Rent a car: the Cars tab, pick-up city, a car, the same checkout page."""
    cars = TRIPNEST.screen("Cars", "Pick-up city", "Search cars")
    results = TRIPNEST.screen("Car results", "Compact", "Estate", "Van")
    checkout = TRIPNEST.screen("Checkout", "Dates", "Guests", "Pay now")
    r = _trip_open(Run(_home_with_postbox()), v["how"]).tap("Cars", cars).tap("Pick-up city").type(v["city"])
    r.tap("Search cars", results).tap("Compact", checkout)
    if stop == 0:
        return r
    return r.tap("Pay now", TRIPNEST.screen("Booked", "Done", "View booking"), commit=True)


def trip_search(v: dict[str, str], stop: int | None = None) -> Run:
    """Search stays (or flights) in a city: the results page loads."""
    tab = v.get("tab", "Stays")
    r = _trip_open(Run(_home_with_postbox()), v["how"])
    if tab != "Stays":
        r.tap(tab, TRIPNEST.screen(tab, "Destination", "Search"))
    r.tap("Destination").type(v["city"])
    loading = TRIPNEST.screen("Loading results", "Cancel")
    if stop == 0:
        return r.tap("Search", loading)
    return r.tap("Search", TRIPNEST.screen("Results", "Filter", f"{v['city']} results"))


def _wave_home(dialog: bool = False) -> Screen:
    if dialog:
        return WAVECAST.screen("Home", "Not now", "Rate now", "Search stations", *STATIONS[:3],
                               dialogs=("Rate Wavecast",))
    return WAVECAST.screen("Home", "Search stations", "Podcasts", *STATIONS[:3])


def wave_play(v: dict[str, str], stop: int | None = None) -> Run:
    """Launch by the long name, search the station, play it."""
    search = WAVECAST.screen("Search", "Search box")
    found = WAVECAST.screen("Search", "Search box", v["station"])
    player = WAVECAST.screen("Player", "Play", "Follow", "Navigate up")
    r = Run(launcher("Wavecast")).launch(WAVECAST, _wave_home(dialog=stop == 0))
    if stop == 0:
        return r
    r.tap("Search stations", search).tap("Search box").type(v["station"])
    r.acts[-1] = replace(r.acts[-1], after=found)
    r.screen = found
    return r.tap(v["station"], player).tap("Play", player.showing("Playing"), commit=True)


def wave_follow(v: dict[str, str], stop: int | None = None) -> Run:
    """Launch, the podcasts tab, a podcast, Follow."""
    pods = WAVECAST.screen("Podcasts", *PODCASTS)
    page = WAVECAST.screen("Podcast", "Follow", "Episodes", "Navigate up")
    r = Run(launcher("Wavecast")).launch(WAVECAST, _wave_home(dialog=stop == 0))
    if stop == 0:
        return r
    return r.tap("Podcasts", pods).tap(v["podcast"], page).tap("Follow", page.showing("Following"), commit=True)


def liaoliao_message(v: dict[str, str], stop: int | None = None) -> Run:
    """A Chinese chat app: search the contact, open the chat, type the message, 发送."""
    home = LIAOLIAO.screen("消息", "搜索", "通讯录", "发现", "我")
    search = LIAOLIAO.screen("搜索", "搜索框")
    found = LIAOLIAO.screen("搜索", "搜索框", v["name"])
    chat = LIAOLIAO.screen("聊天", "返回", "输入框", "发送", "更多")
    r = Run(home).tap("搜索", search).tap("搜索框").type(v["name"])
    r.acts[-1] = replace(r.acts[-1], after=found)
    r.screen = found
    r.tap(v["name"], chat.showing(v["name"])).tap("输入框").type(v["message"])
    return r.tap("发送", chat.showing(v["name"], v["message"]), commit=True)


def controls_dark(v: dict[str, str], stop: int | None = None) -> Run:
    """A settings-like app: a section, then a switch."""
    top = CONTROLS.screen("All settings", "Display", "Sound", "Network", "Battery")
    display = CONTROLS.screen("Display", "Navigate up", "Dark theme", "Font size", "Screen timeout")
    return Run(top).tap("Display", display).tap(v["switch"], display.showing(f"{v['switch']} on"), commit=True)


def controls_volume(v: dict[str, str], stop: int | None = None) -> Run:
    """A settings-like app: a value typed into a field, OK."""
    top = CONTROLS.screen("All settings", "Display", "Sound", "Network", "Battery")
    sound = CONTROLS.screen("Sound", "Navigate up", "Ring volume", "Vibrate")
    dialog = CONTROLS.screen("Ring volume", "Volume value", "OK", "Cancel", dialogs=("Ring volume",))
    r = Run(top).tap("Sound", sound).tap("Ring volume", dialog).tap("Volume value").type(v["volume"])
    return r.tap("OK", sound.showing(f"{v['volume']}%"), commit=True)


def kongzhi_font(v: dict[str, str], stop: int | None = None) -> Run:
    """The settings-like app in Chinese: 显示 → 字体大小 → a size."""
    top = KONGZHI.screen("全部设置", "显示", "声音", "网络")
    display = KONGZHI.screen("显示", "返回", "深色模式", "字体大小")
    sizes = KONGZHI.screen("字体大小", *FONT_SIZES, "确定")
    r = Run(top).tap("显示", display).tap("字体大小", sizes).tap(v["size"], sizes.showing(v["size"]))
    return r.tap("确定", display.showing(v["size"]), commit=True)


def mail_share(v: dict[str, str], stop: int | None = None) -> Run:
    """Find a mail, open the share sheet: the app the goal names is not in it (never reached)."""
    mail = POSTBOX.screen("Message", "Navigate up", "Reply", "Share")
    sheet = POSTBOX.screen("Message", "Copy link", "Print", "Save as PDF", dialogs=("Share via",))
    r = Run(_home_with_postbox()).tap("Postbox", _inbox()).tap("Re: the offsite", mail).tap("Share", sheet)
    return r.swipe("up").swipe("up")


def mail_walled(v: dict[str, str], stop: int | None = None) -> Run:
    """A part of the mail app behind a sign-in wall."""
    wall = POSTBOX.screen("Sign in", "E-mail", "Password", "Sign in with SSO", "LOG IN")
    return Run(_home_with_postbox()).tap("Postbox", _inbox()).tap(v["section"], wall)


def daybook_find(v: dict[str, str], stop: int | None = None) -> Run:
    """Look for an entry that is not on the list: scroll, scroll."""
    return Run(_daybook_entries(["Team lunch", "Budget review"])).swipe("up").swipe("up").swipe("down")


def cards_rename_deck(v: dict[str, str], stop: int | None = None) -> Run:
    """Rename a deck in the same name dialog."""
    menu = CARDS.screen("Decks", "Rename", "Delete", "Export", dialogs=("deck menu",))
    dialog = CARDS.screen("Create deck", "Deck name", "OK", "Cancel", dialogs=("Create deck",))
    return Run(_decks()).tap(v["old"], menu).tap("Rename", dialog).tap("Deck name")


@dataclass(frozen=True)
class Task:
    """A task template: its id, app, goal phrasings, the values it draws and how its path goes."""

    id: str
    app: App
    phrasings: tuple[str, ...]
    draw: Callable[[random.Random, set[str]], dict[str, str]]
    build: Callable[..., Run]
    language: str = "en"
    unreached: str | None = None  # an app the goal names that the run never reaches


def _v(**pools: Any) -> Callable[[random.Random, set[str]], dict[str, str]]:
    def draw(rng: random.Random, used: set[str]) -> dict[str, str]:
        return {k: (_pick(rng, p, used) if k[0] != "_" else rng.choice(p)) for k, p in pools.items()}
    return draw


HOW = ["launch", "icon", "search"]
TASKS: tuple[Task, ...] = (
    Task("daybook_create", DAYBOOK, ("Add a new entry named {title} to the diary, mood {mood}",
                                     "Create a diary entry called {title} in Daybook with the mood {mood}",
                                     "In Daybook, add the activity {title} and set the mood to {mood}"),
         _v(title=TITLES, _mood=MOODS), daybook_create),
    Task("daybook_edit", DAYBOOK, ("Rename the diary entry {old} to {title}",
                                   "In Daybook, change the title of {old} to {title}",
                                   "Edit the Daybook entry {old} so that it is called {title}"),
         _v(old=TITLES, title=TITLES), daybook_edit),
    Task("daybook_settings", DAYBOOK, ("Adjust the settings of the Daybook app: turn off {switch}",
                                       "Open the Daybook settings and switch off {switch}",
                                       "In the diary app's settings, disable {switch}"),
         _v(_switch=["Reminders", "Backup"]), daybook_settings),
    Task("riji_create", RIJI, ("在小日记里新建一篇日记，标题是{title}，心情{mood}",
                               "新建日记：{title}，心情选{mood}", "帮我在小日记记一条{title}，心情是{mood}"),
         _v(title=ZH_TITLES, _mood=ZH_MOODS), riji_create, "zh-CN"),
    Task("cards_add", CARDS, ("Create a new flashcard with the question '{question}' and the answer '{answer}'",
                              "Add a card to CardDeck: front '{question}', back '{answer}'",
                              "Make a flashcard asking \"{question}\" with answer \"{answer}\""),
         _v(question=QUESTIONS, answer=ANSWERS), cards_add),
    Task("cards_media", CARDS, ("Attach the image {image} to {card} in the {deck} deck",
                                "In CardDeck, add the picture {image} to {card} of deck {deck}",
                                "Put {image} on the card {card} ({deck} deck)"),
         _v(deck=DECKS[:4], card=CARDS_IN_DECK, image=IMAGES, _leave=["Done", "Navigate up", "back"]), cards_media),
    Task("cards_sync", CARDS, ("Synchronize the CardDeck account as {email}", "Sync my flashcards, log in with {email}",
                               "Sign in to CardDeck with {email} and sync the collection"),
         _v(email=PEOPLE), cards_sync),
    Task("cards_new_deck", CARDS, ("Create a new deck named {deck}", "Add a deck called {deck} in CardDeck",
                                   "Make a new CardDeck deck: {deck}"),
         _v(deck=["Spanish", "Poetry", "Algebra", "Geology", "Cooking", "Rivers of Asia"]), cards_new_deck),
    Task("mail_compose", POSTBOX, ("Compose an e-mail to {to} about {subject} and attach the file {file}",
                                   "Write to {to} with the subject {subject}, attach {file} and send it",
                                   "Send {to} an e-mail about {subject} with {file} attached"),
         _v(to=PEOPLE, subject=SUBJECTS, file=FILES), mail_compose),
    Task("mail_flag", POSTBOX, ("Search for e-mails about '{query}' and flag them",
                                "Find the mails mentioning {query} and flag all of them",
                                "Flag every e-mail that matches '{query}'"),
         _v(query=QUERIES), mail_flag),
    Task("trip_book", TRIPNEST, ("Book a room in {city} on Tripnest", "Reserve a hotel in {city} for me",
                                 "Find a place to stay in {city} and book it"),
         _v(city=CITIES, _how=HOW), trip_book),
    Task("wave_play", WAVECAST, ("Play the station {station} on Wavecast", "Put on {station} radio",
                                 "Listen to {station} in the radio app"),
         _v(station=STATIONS), wave_play),
    Task("wave_follow", WAVECAST, ("Follow the podcast {podcast}", "Subscribe to {podcast} in Wavecast",
                                   "Add {podcast} to my followed podcasts"),
         _v(podcast=PODCASTS), wave_follow),
    Task("liaoliao_message", LIAOLIAO, ("给{name}发消息：{message}", "在聊聊里告诉{name}{message}",
                                        "发条消息给{name}，说{message}"),
         _v(name=ZH_PEOPLE, message=ZH_MESSAGES), liaoliao_message, "zh-CN"),
    Task("controls_dark", CONTROLS, ("Turn on {switch} in Controls", "Enable {switch}",
                                     "Switch {switch} on in the display settings"),
         _v(_switch=["Dark theme", "Font size"]), controls_dark),
    Task("controls_volume", CONTROLS, ("Set the ring volume to {volume} percent",
                                       "Change the ring volume to {volume}", "Make the ringer {volume}% loud"),
         _v(volume=VOLUMES), controls_volume),
    Task("kongzhi_font", KONGZHI, ("把字体大小调成{size}", "在控制中心把字体设为{size}", "字体改成{size}"),
         _v(size=FONT_SIZES), kongzhi_font, "zh-CN"),
    # Tasks that only fail (the causes below), or that name an app they never reach.
    Task("trip_car", TRIPNEST, ("Rent a car in {city}", "Book a rental car for {city} on Tripnest",
                                "Get me a car to pick up in {city}"),
         _v(city=CITIES, _how=HOW), trip_car),
    Task("trip_search", TRIPNEST, ("Show hotels in {city}", "Search Tripnest for stays in {city}",
                                   "List places to stay in {city}"),
         _v(city=CITIES, _how=HOW), trip_search),
    Task("trip_flights", TRIPNEST, ("Show flight prices to {city}", "Search flights to {city} on Tripnest",
                                    "How much is a flight to {city}"),
         _v(city=CITIES, _how=HOW, _tab=["Flights"]), trip_search),
    Task("mail_share_daybook", POSTBOX, ("Find the e-mail about the offsite and share it to Daybook",
                                         "Share the offsite mail to the Daybook diary"),
         _v(), mail_share, unreached="Daybook"),
    Task("mail_share_cards", POSTBOX, ("Send the offsite e-mail to CardDeck Flashcards",
                                       "Open the offsite mail and share to CardDeck"),
         _v(), mail_share, unreached="CardDeck"),
    Task("mail_folder", POSTBOX, ("Open the shared folders in Postbox", "Show the team's shared folders"),
         _v(_section=["Shared folders"]), mail_walled),
    Task("mail_storage", POSTBOX, ("Check how much mail storage is left", "Show my Postbox storage use"),
         _v(_section=["Storage"]), mail_walled),
    Task("daybook_open", DAYBOOK, ("Open the diary entry {title}", "Show me the Daybook entry {title}"),
         _v(title=["Ski trip", "Dentist", "Moving day"]), daybook_find),
    Task("daybook_delete", DAYBOOK, ("Delete the entry {title} from the diary", "Remove {title} from Daybook"),
         _v(title=["Old notes", "Draft plan", "Test entry"]), daybook_find),
    Task("cards_rename_deck", CARDS, ("Rename the deck {old} to {deck}", "Change the name of deck {old} to {deck}"),
         _v(old=DECKS[:4], deck=DECKS[:4]), cards_rename_deck),
)
TASK_BY_ID = {t.id: t for t in TASKS}

# Failures: (cause, task, how the run ends). Each cause is met by two different tasks, on one app and page.
FAILURES: tuple[tuple[str, str], ...] = (
    ("page_unchanged", "trip_book"), ("page_unchanged", "trip_car"),
    ("input_rejected", "cards_new_deck"), ("input_rejected", "cards_rename_deck"),
    ("element_missing", "daybook_open"), ("element_missing", "daybook_delete"),
    ("element_missing", "mail_share_daybook"), ("element_missing", "mail_share_cards"),
    ("dialog", "wave_play"), ("dialog", "wave_follow"),
    ("sign_in_wall", "mail_folder"), ("sign_in_wall", "mail_storage"),
    ("timeout", "trip_search"), ("timeout", "trip_flights"),
)
SUCCESS_TASKS = ("daybook_create", "daybook_edit", "daybook_settings", "riji_create", "cards_add", "cards_media",
                 "cards_sync", "cards_new_deck", "mail_compose", "mail_flag", "trip_book", "wave_play",
                 "wave_follow", "liaoliao_message", "controls_dark", "controls_volume", "kongzhi_font")
UNFINISHED_TASKS = ("daybook_create", "cards_sync", "mail_compose", "liaoliao_message", "trip_book", "cards_media")
CLAIMED_TASKS = ("daybook_create", "cards_add", "controls_volume")
REASONS = {  # the runtime's free-text reasons differ run to run; the cause is the same
    "page_unchanged": ["tapped {l} but nothing happened", "the {l} button does not respond", "still on the same page"],
    "input_rejected": ["the field did not accept the name", "error: name already taken", "input refused"],
    "element_missing": ["could not find the item", "no such option on the screen", "target not visible"],
    "dialog": ["a popup blocks the screen", "rating dialog in the way", "cannot reach the list"],
    "sign_in_wall": ["needs an account", "login required, no credentials", "blocked by sign in"],
    "timeout": ["results never loaded", "timed out waiting", "page kept loading"],
}
PHASES = {"page_unchanged": "state_mismatch", "input_rejected": "tool_error", "element_missing": "planning",
          "dialog": "state_mismatch", "sign_in_wall": "planning", "timeout": "verification_timeout"}


def held_out(goal: str) -> bool:
    """Whether a goal is on the asked side of the fixed split (a stable hash, not Python's ``hash``)."""
    return int(hashlib.sha256(goal.encode("utf-8")).hexdigest()[:8], 16) % 100 < HELD_OUT_SHARE


def _goal(task: Task, values: dict[str, str], n: int) -> tuple[str, list[str]]:
    text = task.phrasings[n % len(task.phrasings)].format(**{k.lstrip("_"): v for k, v in values.items()})
    quoted = [q for mark in ("'", '"') for q in text.split(mark)[1::2] if q]
    return text, quoted


def _values(task: Task, rng: random.Random, used: set[str]) -> dict[str, str]:
    return task.draw(rng, used)


def _failing(cause: str, task: Task, v: dict[str, str], rng: random.Random) -> Run:
    """The failing run of a task: its path up to the cause, then what the cause does."""
    vals = {k.lstrip("_"): x for k, x in v.items()}
    if cause == "page_unchanged":
        r = task.build(vals, stop=0)
        for _ in range(2 + rng.randrange(2)):
            r.tap("Pay now")  # the same tap, the same page
        return r
    if cause == "input_rejected":
        if task.id == "cards_new_deck":
            v["deck"] = vals["deck"] = rng.choice(DECKS[:4])  # a name the phone already has
        r = task.build(vals)
        if task.id == "cards_new_deck":
            del r.acts[2:]  # up to the name field
            r.screen = r.acts[-1].after
        r.type(vals["deck"], error=f"A deck named {vals['deck']} already exists")
        return r.type(vals["deck"], error="A deck with this name already exists")
    if cause == "timeout":
        r = task.build(vals, stop=0)
        for _ in range(3):
            r.wait()
        return r
    if cause == "dialog":
        r = task.build(vals, stop=0)
        r.tap("Search stations")  # under the dialog: nothing happens
        return r.tap("Search stations")
    return task.build(vals)  # element_missing, sign_in_wall: the path ends where the phone stops it


def _trajectory(task: Task, v: dict[str, str], n: int, run: Run, **truth: Any) -> Trajectory:
    goal, quoted = _goal(task, v, n)
    apps = list(dict.fromkeys(s.app for s in [run.start, *(a.after for a in run.acts)] if s.app != LAUNCHER[0]))
    phrasing = task.phrasings[n % len(task.phrasings)]
    values = {k.lstrip("_"): x for k, x in v.items() if "{" + k.lstrip("_") + "}" in phrasing}
    t = Truth(task=task.id, app=task.app.name if task.app.name in apps else None, apps_shown=apps,
              values=values, quoted=quoted, names_unreached_app=task.unreached, **truth)
    return Trajectory(goal, task.language, run.start, run.acts, t)


def generate(seed: int = 7, goals_per_task: int = 8, failures_per_cause_task: int = 3) -> list[Trajectory]:
    """The set: successes, failures (each cause by two tasks), unfinished runs and claimed successes, shuffled
    by the seed; held-out success goals are marked (``held_out``) and are never to be recorded."""
    rng = random.Random(seed)
    out: list[Trajectory] = []
    seen: set[str] = set()

    def draw(task: Task, used: set[str], n: int) -> dict[str, str]:
        # A goal text is one task: draw again while the goal is one already made (a few tries).
        for _ in range(12):
            v = _values(task, rng, used)
            if _goal(task, v, n)[0] not in seen:
                break
        return v

    def add(t: Trajectory) -> None:
        if t.goal not in seen:
            seen.add(t.goal)
            out.append(t)

    def plain(v: dict[str, str]) -> dict[str, str]:
        return {k.lstrip("_"): x for k, x in v.items()}

    for tid in SUCCESS_TASKS:
        task, used = TASK_BY_ID[tid], set()
        for n in range(goals_per_task):
            v = draw(task, used, n)
            t = _trajectory(task, v, n, task.build(plain(v)), success=True, reported_success=True, finished=True,
                            ending="finish")
            t.held_out = held_out(t.goal)
            add(t)
    for cause, tid in FAILURES:
        task, used = TASK_BY_ID[tid], set()
        for n in range(failures_per_cause_task):
            v = draw(task, used, n)
            run = _failing(cause, task, v, rng)
            t = _trajectory(task, v, n, run, success=False, reported_success=False, finished=True, ending="finish",
                            cause=cause)
            t.failure_phase = PHASES[cause]
            label = next((a.label for a in reversed(t.acts) if a.label), "it")
            t.failure_reason = rng.choice(REASONS[cause]).format(l=label)
            add(t)
    endings = ("interrupted", "dropped", "truncated")
    for i, tid in enumerate(UNFINISHED_TASKS):
        task = TASK_BY_ID[tid]
        for k in range(2):
            v = draw(task, set(), k + 1)
            full = task.build(plain(v))
            del full.acts[max(1, len(full.acts) // 2 - k):]  # the record ends mid-task
            add(_trajectory(task, v, k + 1, full, success=False, reported_success=False, finished=False,
                            ending=endings[(i + k) % len(endings)]))
    for tid in CLAIMED_TASKS:
        task = TASK_BY_ID[tid]
        for k in range(2):
            v = draw(task, set(), k)
            full = task.build(plain(v))
            del full.acts[max(i for i, a in enumerate(full.acts) if a.commit):]  # stopped before it sticks
            add(_trajectory(task, v, k, full, success=False, reported_success=True, finished=True, ending="finish"))
    rng.shuffle(out)
    return out
