"""`bench lessons`' second set, the phone side: fictional apps, their pages and the paths of their tasks.

Every app, page, label and text here is made up for this bench. A ``Screen`` is what a runtime observes
(app, page, package, labelled elements with bounds, visible text, dialogs); a ``Run`` builds a task's
actions from the screen it is on, each tap at the centre of the element it names.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

WIDTH, HEIGHT = 1080, 2400
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


# -- actions ------------------------------------------------------------------------------------


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


def pick(rng: random.Random, pool: list[str], used: set[str]) -> str:
    """A value of the pool not used yet (any, once all are), marked used."""
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
