"""Properties of what a goal's words say: the app it names, its intents, and the bench's altered goals.

It reaches inside the tokenizer, the query parser and bench/'s goal perturbations: the properties are about those
parts; and inside the lesson writer for its weak intents, which must be the query parser's broad ones.
"""

from __future__ import annotations

import random
import re

from hypothesis import assume, given
from hypothesis import strategies as st

from memory_plane._tokens import token_set
from memory_plane.bench._perturb import inflection, no_app_name, typo
from memory_plane.device_memory import shipped_catalog
from memory_plane.episodes._lesson_writer import WEAK_INTENTS
from memory_plane.retrieval._query import (
    BROAD_INTENTS,
    INTENTS,
    detect_intent,
    detect_intents,
    leading_intent,
    parse_query,
    without_quotes,
)

WORDS = st.sampled_from(["Open", "WeChat", "Spotify", "'", "’", "\"", "Bob's", "settings", "Review", "check",
                         "turn off", "notifications", "打开", "微信", "去哪儿", "“", "”", "and", "play", ".", " "])
GOALS = st.one_of(st.text(max_size=80), st.lists(WORDS, max_size=16).map(" ".join))


@given(GOALS)
def test_the_app_words_are_words_of_the_goal_and_only_for_a_named_specific_app(goal: str) -> None:
    q = parse_query(goal, shipped_catalog())
    assert q.app_words <= token_set(goal)
    if q.app_words:
        assert q.app is not None and q.app in q.apps and not q.app_generic
    assert q.intent == detect_intent(goal)
    assert (q.intent == "unknown") == (not q.intents) and (q.intent in q.intents or q.intent == "unknown")
    assert q.to_dict()["intents"] == sorted(q.intents)


@given(GOALS)
def test_the_first_intent_is_the_leading_verbs_else_the_most_specific_of_those_found(goal: str) -> None:
    found = detect_intents(goal)
    order = [intent for intent, _, _ in INTENTS]
    lead = leading_intent(goal)
    assert lead is None or (lead in found and lead not in BROAD_INTENTS)
    if found:
        assert detect_intent(goal) == (lead or min(found, key=order.index))
    assert set(order) >= BROAD_INTENTS
    assert WEAK_INTENTS == BROAD_INTENTS  # a lesson's goal group and retrieval call the same intents weak


QUOTES = [("'", "'"), ("\"", "\""), ("“", "”"), ("「", "」"), ("‘", "’"), ("『", "』")]


@given(st.lists(WORDS, max_size=8).map(" ".join), st.sampled_from(QUOTES),
       st.sampled_from(["What is the capital city of France?", "check the weather", "播放音乐", "book a hotel",
                        "send it", "Turn off"]))
def test_quoted_text_gives_no_intent(goal: str, quote: tuple[str, str], value: str) -> None:
    quoted = f"{goal} {quote[0]}{value}{quote[1]}"
    if without_quotes(quoted).strip() == without_quotes(goal).strip():  # the value did stand in quotes
        assert detect_intents(quoted) == detect_intents(goal)


def test_a_question_typed_into_a_flashcard_is_not_the_goals_intent() -> None:
    goal = "Create a new flashcard in Default deck with the question 'What is the capital city of France?'"
    assert detect_intent(goal) == "unknown" and not detect_intents(goal)
    assert detect_intent("新建一条笔记，内容是“查看天气”") == "create_note"
    # A leading verb names the task; a word met later is incidental ("meeting" is what is played).
    assert detect_intent("Please play the recording of the meeting") == "play_media"
    assert detect_intent("Check the details of General settings. Turn off all notifications.") == "toggle_setting"


@given(st.text(max_size=60), st.integers(0, 2**32))
def test_typos_and_word_forms_touch_latin_letters_only(goal: str, seed: int) -> None:
    for alter in (typo, inflection):
        out = alter(goal, random.Random(seed))
        assert re.sub(r"[A-Za-z]", "", out) == re.sub(r"[A-Za-z]", "", goal)  # the rest stands as it was
        assert alter(goal, random.Random(seed)) == out  # the same seed, the same text


@given(st.lists(st.sampled_from(["Open", "the", "Moon", "Phase", "app", "and", "Phases", "moon", "check", "."]),
                max_size=12).map(" ".join),
       st.sampled_from(["Moon Phase", "Phase", "moon phase calendar", "微博"]))
def test_the_app_name_is_left_out_as_a_whole_phrase_only(goal: str, app: str) -> None:
    out = no_app_name(goal, app)
    if app.isascii():
        phrase = r"(?<!\w)" + r"\s+".join(map(re.escape, app.split())) + r"(?!\w)"
        assert out == goal or not re.search(phrase, out, re.IGNORECASE)
        kept = [w for w in goal.split() if w.lower() not in {x.lower() for x in app.split()} | {"app"}]
        assert all(w in out.split() for w in kept) or out == goal  # other words, and whole words, stay
    else:
        assert app not in out or out == goal


def test_a_latin_name_after_a_verb_of_messaging_is_the_target() -> None:
    """"send Zhang San a message" names its recipient before what is sent, as "send a message to Zhang San" does
    after it; an app's name there is the app, and a pronoun or a lower-case word is no name."""
    catalog = shipped_catalog()
    cases = {"send Zhang San a message": "Zhang San", "send a message to Zhang San": "Zhang San",
             "Remind Li Lei to buy milk": "Li Lei", "tell Bob on WeChat I will be late": "Bob",
             "send Mom a message saying hi": "Mom", "Send WeChat a message": None, "send it to me": None,
             "send the report to the team": None}
    assert {g: parse_query(g, catalog).target for g in cases} == cases
    assert parse_query("send Zhang San a message", catalog).app is None  # a name is no app


def test_a_name_spelt_beyond_ascii_is_the_whole_target() -> None:
    """Names are written with the letters of their language, an apostrophe, a hyphen or a capital inside."""
    catalog = shipped_catalog()
    cases = {"send José a message saying hi": "José", "message Łukasz about the trip": "Łukasz",
             "text O'Brien that dinner is at 7": "O'Brien", "call Jean-Luc": "Jean-Luc",
             "send McDonald a note": "McDonald", "chat with Nguyễn Văn on Zalo": "Nguyễn Văn",
             "call Дмитрий now": "Дмитрий", "go to Bob's profile": "Bob", "send SMS to Bob": "Bob"}
    assert {g: parse_query(g, catalog).target for g in cases} == cases


_CAPITALS = [c for c in map(chr, range(0x41, 0x530)) if c.isupper() and len(c.lower()) == 1]
_SMALLS = [c for c in map(chr, range(0x61, 0x530)) if c.islower() and c.upper() != c]


@given(first=st.sampled_from(_CAPITALS), rest=st.text(st.sampled_from(_SMALLS), min_size=2, max_size=9),
       verb=st.sampled_from(["send", "Tell", "message", "remind", "call"]))
def test_any_capitalised_word_after_a_verb_of_messaging_is_named_whole(first: str, rest: str, verb: str) -> None:
    name = first + rest
    catalog = shipped_catalog()
    assume(catalog.canonical(name) is None and name.lower() not in {"i", "me", "my", "the", "it", "this", "that"})
    assert parse_query(f"{verb} {name} a message about dinner", catalog).target == name
