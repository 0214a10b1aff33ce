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
from dataclasses import dataclass, field
from typing import Any

from ._trajectory_apps import (
    ANSWERS,
    CARDS,
    CARDS_IN_DECK,
    CITIES,
    CONTROLS,
    DAYBOOK,
    DECKS,
    FILES,
    FONT_SIZES,
    IMAGES,
    KONGZHI,
    LAUNCHER,
    LIAOLIAO,
    MOODS,
    PEOPLE,
    PODCASTS,
    POSTBOX,
    QUERIES,
    QUESTIONS,
    RIJI,
    STATIONS,
    SUBJECTS,
    TITLES,
    TRIPNEST,
    VOLUMES,
    WAVECAST,
    ZH_MESSAGES,
    ZH_MOODS,
    ZH_PEOPLE,
    ZH_TITLES,
    Act,
    App,
    Run,
    Screen,
    cards_add,
    cards_media,
    cards_new_deck,
    cards_rename_deck,
    cards_sync,
    controls_dark,
    controls_volume,
    daybook_create,
    daybook_edit,
    daybook_find,
    daybook_settings,
    kongzhi_font,
    liaoliao_message,
    mail_compose,
    mail_flag,
    mail_share,
    mail_walled,
    pick,
    riji_create,
    trip_book,
    trip_car,
    trip_search,
    wave_follow,
    wave_play,
)


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
        return {k: (pick(rng, p, used) if k[0] != "_" else rng.choice(p)) for k, p in pools.items()}
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


HELD_OUT_SHARE = 20  # percent of the success goals asked and never recorded (by a stable hash of the goal)


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
        task, used = TASK_BY_ID[tid], set[str]()
        for n in range(goals_per_task):
            v = draw(task, used, n)
            t = _trajectory(task, v, n, task.build(plain(v)), success=True, reported_success=True, finished=True,
                            ending="finish")
            t.held_out = held_out(t.goal)
            add(t)
    for cause, tid in FAILURES:
        task, used = TASK_BY_ID[tid], set[str]()
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
