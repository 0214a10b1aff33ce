"""The memory tools as the model sees them: one JSON-schema declaration per tool."""

from __future__ import annotations

from typing import Any

from ._tool_args import MAX_LIST_ITEMS

WRITE_TOOLS = ("save_memory", "forget_memory")


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


_S, _I = {"type": "string"}, {"type": "integer"}
_L = {"type": "array", "items": {"type": "string"}, "maxItems": MAX_LIST_ITEMS}

_B = {"type": "boolean"}
# Said once in every declaration: how the arguments are read when a model writes them the Go agent's way.
_LENIENT = (" Lists may also be sent as one string or as a JSON array in a string; numbers as text. At most "
            f"{MAX_LIST_ITEMS} items a list.")

DECLARATIONS: dict[str, dict[str, Any]] = {
    "recall_memory": {
        "description": ("Search long-term memory: what the user told you to remember (profile facts, preferences, "
                        "rules, procedures). Use it before asking the user again or guessing. Give a few words of "
                        "what you need, or topic/domain keywords as tags, e.g. {\"tags\":[\"verification\"]}. With "
                        "no query, tags or entities it lists the saved memories, most important first (e.g. "
                        "{\"types\":[\"rule\"]} for every rule). A long memory is shown in part; ids=[its id] "
                        "shows it whole. For what was said earlier in this conversation use recall_session_chunks."
                        + _LENIENT),
        "parameters": _schema({"query": {**_S, "description": "what you need, e.g. 'home address' or '支付 规则'"},
                               "tags": {**_L, "description": "topic/domain keywords (optional)"},
                               "entities": {**_L, "description": "people, apps, places (optional)"},
                               "types": {**_L, "description": "only these kinds: profile, preference, rule, "
                                                              "procedure, fact (optional)"},
                               "ids": {**_L, "description": "memory ids to show whole (optional)"},
                               "limit": {**_I, "description": "at most this many memories (1-20, default 5)"},
                               "offset": {**_I, "description": "skip this many results, to read on after a cut "
                                                               "answer (default 0)"}},
                              [])},
    "save_memory": {
        "description": ("Save a durable fact, preference or rule that the user stated or that was verified on the "
                        "phone, so later tasks know it. Mandatory when the user asks to remember/save something. "
                        "Use profile for durable user facts (name, location, timezone): they join the synthesized "
                        "user profile; preference for likes, rule for always/never. Answers status=saved, "
                        "status=superseded (it replaces an older one), status=ignored (ignored as a duplicate, or "
                        "forgotten on purpose before) or status=conflicted (it contradicts the user's own rule or "
                        "preference, which stays in force). Do not save guesses, one-off task details or anything "
                        "shown only on screen." + _LENIENT),
        "parameters": _schema({
            "content": {**_S, "description": "one self-contained sentence, in the user's words where possible"},
            "type": {**_S, "enum": ["fact", "preference", "rule", "profile", "procedure"],
                     "description": "rule: always/never do something; preference: what the user likes"},
            "title": {**_S, "description": "a short title (optional)"},
            "tags": {**_L, "description": "topics (optional)"},
            "entities": {**_L, "description": "people, apps, places it is about (optional)"},
            "priority": {**_I, "description": "importance 1-100 (optional; the type's default otherwise)"},
            "force": {**_B, "description": "true only when the user asks again to remember something they had "
                                           "you forget (optional)"}}, ["content"])},
    "forget_memory": {
        "description": ("Forget a memory when the user asks you to, or when it is wrong. It is removed everywhere "
                        "and not learned again. Needs the memory id (from recall; `id` is accepted for memory_id) "
                        "and a reason."),
        "parameters": _schema({"memory_id": {**_S, "description": "e.g. mem_3f9a1c2b or proc_... (also read from id)"},
                               "reason": {**_S, "description": "why, e.g. 'the user asked' or 'out of date'"}},
                              ["memory_id", "reason"])},
    "recall_device_memory": {
        "description": ("Look up what this phone taught: how to open an app, verified step-by-step procedures, "
                        "page transitions, tap positions, known failures. Use before exploring an app by trial. "
                        "The Go agent's terms, tags, entities, types and device_id arguments are read too; ids=[…] "
                        "shows memories whole." + _LENIENT),
        "parameters": _schema({
            "query": {**_S, "description": "the goal or screen, e.g. 'send a message in WeChat'"},
            "app": {**_S, "description": "an app name or package (optional)"},
            "type": {**_S, "enum": ["app_profile", "procedure", "navigation", "calibration", "failure",
                                    "ui_anchor"], "description": "one kind of memory (optional)"},
            "ids": {**_L, "description": "memory ids to show whole (optional)"},
            "limit": {**_I, "description": "at most this many (1-30, default 8)"},
            "offset": {**_I, "description": "skip this many results, to read on after a cut answer (default 0)"}},
            [])},
    "inspect_episode": {
        "description": ("Read a past task (an episode id from the memory block): its goal, outcome and the "
                        "actions taken, to reuse a path that worked or avoid one that failed. `id` is accepted for "
                        "episode_id. A long episode is shown in parts: the answer says which events it shows and "
                        "the offset that reads on."),
        "parameters": _schema({"episode_id": {**_S, "description": "e.g. ep_20261201_3f9a1c2b7d (also read from id)"},
                               "max_events": {**_I, "description": "at most this many events (0-200, default 20)"},
                               "offset": {**_I, "description": "skip this many events (default 0)"}},
                              ["episode_id"])},
    "recall_session_chunks": {
        "description": ("Recall prior conversation content that is no longer in your visible context: archived "
                        "chunks of this session, by words or chunk_ids. PREFERRED before asking the user to repeat "
                        "something; FALLBACK to recall_memory for what should hold across sessions. With no query, "
                        "tags or chunk_ids (e.g. tags []) it gives the most recent parts. chunk_ids also show what "
                        "was said in those parts. Closed sessions are not searched." + _LENIENT),
        "parameters": _schema({"query": {**_S, "description": "words from what was said"},
                               "tags": {**_L, "description": "topic keywords (optional)"},
                               "entities": {**_L, "description": "people, apps, places (optional)"},
                               "chunk_ids": {**_L, "description": "chunk ids named in the session summary"},
                               "limit": {**_I, "description": "at most this many parts (1-10, default 3)"},
                               "offset": {**_I, "description": "skip this many results, to read on after a cut "
                                                               "answer (default 0)"}},
                              [])},
}
