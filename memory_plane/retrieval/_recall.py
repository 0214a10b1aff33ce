"""Recall: the candidates each source offers a goal, with their similarity (and, for episodes, the evidence
the search found about the goal as a whole: its app, P(app | goal), the closest past goal)."""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

from .._inverted_index import nearest_goal
from ._candidates import EpisodeEvidence
from ._config import RetrieveConfig
from ._goal_match import Query
from ._query import ParsedQuery
from ._sources import Source


def recall(src: Source, q: ParsedQuery, config: RetrieveConfig, always: Sequence[int] | None = None,
           floor: float = 0.0, reach: Container[int] | None = None) -> dict[int, float]:
    """Candidates of one source: the best token matches, the query app's items, the always-shown ones (``always``
    instead of all of them, when the caller accounts for the others at similarity 0).

    With a ``floor``, a similarity under it counts as none (0.0): the caller takes no word match weaker than that
    for one, so the documents only the goal's commonest words reach are not looked at. With ``reach``, an
    always-shown one outside it counts as reached by no word (see ``closest_always``)."""
    found = dict(src.inv.search(q.tokens, config.search_limit, floor))
    # Below the search cut-off a document shares no token with the query (none the floor lets count), so its
    # similarity is 0; only when the search was truncated must the extra candidates be measured.
    truncated = len(found) >= config.search_limit
    weights = src.inv.weights(q.tokens) if truncated else None
    extra = list(src.gen.always if always is None else always)
    for i in extra:
        if i not in found:
            found[i] = (src.inv.similarity(q.tokens, i, weights) if truncated and (reach is None or i in reach)
                        else 0.0)
    bound: list[int] = []
    for app in {q.app, *q.apps} - {None}:
        bound += src.gen.by_app.get(str(app), [])[-config.app_bound_limit:]
    for i in bound:
        if i not in found:
            found[i] = src.inv.similarity(q.tokens, i, weights) if truncated else 0.0
    if floor > 0:
        return {i: (sim if sim >= floor else 0.0) for i, sim in found.items()}
    return found


def closest_always(src: Source, q: ParsedQuery, config: RetrieveConfig, within: Container[int],
                   floor: float) -> frozenset[int]:
    """The always-shown entries of ``within`` whose word match counts: of those the goal's words reach (a word the
    ``floor`` does not leave out), the search's pool of the most shared weight (``InvertedIndex.pool``).

    Every rule and preference is a candidate of every goal; among those a goal's words reach, the closest rank
    first. Only the search's pool of them is measured, as a search measures only its pool: in a large store a
    goal's word may reach thousands of rules, and the rest rank as reached by no word."""
    return frozenset(src.inv.pool(q.tokens, 3 * config.search_limit, floor, within))


def recall_episodes(src: Source, ctx: Query, config: RetrieveConfig, apps_named: Callable[[str], Sequence[str]]
                    ) -> tuple[dict[int, float], EpisodeEvidence]:
    """The episodes a goal recalls (the caller's excluded ones left out), and what the search learned;
    ``apps_named`` finds the apps a text names, as the goal's own were found."""
    q = ctx.q
    limit = config.search_limit
    hits = src.inv.search(q.tokens, limit)  # best first
    if ctx.exclude:
        hits = [(i, sim) for i, sim in hits if src.entries[i]["id"] not in ctx.exclude]
    found = dict(hits)
    nearest = hits[:8]
    lead, fused = nearest_hit(src, q, hits, ctx.exclude)
    post = src.app_posterior(q.tokens, ctx.exclude, nearest)
    target = target_app(q, post)
    if target is not None:
        # The device's experience of the app the goal is about is a candidate even when no word
        # is shared: which app it is was learned from the device's own goals, not from the words.
        truncated = len(hits) >= limit
        weights = src.inv.weights(q.tokens) if truncated else None
        # The app's most recent episodes, a few more than can be shown: they compete on score.
        for i in src.gen.by_canon.get(target, [])[-2 * config.caps.get("similar_episodes", 3):]:
            if i not in found and not (ctx.exclude and src.entries[i]["id"] in ctx.exclude):
                found[i] = src.inv.similarity(q.tokens, i, weights) if truncated else 0.0
    return found, EpisodeEvidence(target, post, lead, fused, named_app(src, q, lead, apps_named))


def named_app(src: Source, q: ParsedQuery, lead: int | None,
              apps_named: Callable[[str], Sequence[str]]) -> frozenset[str]:
    """The words of the app the goal names, when the device's closest past goal shows they say where it is done.

    A past goal done in another app tells which: one that named its own app the same way ("track the stars in
    the StarTracker app") says the names decide, and a goal naming Stellarium is not its task, however alike
    the sentences. One that named an app it was not done in ("search Google Play for Facebook", "… pay with
    WeChat"), or none by a name of its own ("notification settings"), says a name may be what the task is
    about, not where it is done.
    """
    words = q.app_words
    if not words or lead is None:
        return words
    app = src.gen.canon[lead]
    if app in q.apps:  # the goal's own app (a named one is always among them) or another it names
        return words
    # An episode's words are its goal's and its own app's (another app here): the goal's app is in its goal.
    if words <= src.inv.doc(lead):
        return frozenset()
    goal = src.entries[lead].get("goal")
    named = apps_named(goal) if isinstance(goal, str) else ()
    return words if app and app in named else frozenset()


def nearest_hit(src: Source, q: ParsedQuery, hits: list[tuple[int, float]],
                exclude: frozenset[str]) -> tuple[int | None, dict[int, float]]:
    """The closest past goal among the word search's hits, and each hit's similarity on a calibrated scale.

    The hits are ordered by BM25 over shared words and character trigrams (an inflection, a typo or a
    phrase counts as in FTS5 trigram). A hit's similarity is the larger of its BM25 scaled so that the
    closest gets the best word similarity (the words' scale, the trigrams' order) and its BM25 as a share
    of the query's own score (so a goal close in characters but not in words, a typo, clears the floor)."""
    if not hits or src.inv.grams is None:
        return (hits[0][0] if hits else None), {}
    left_out = [i for i, e in enumerate(src.entries) if e["id"] in exclude] if exclude else []
    ranked, own = nearest_goal(q.text, q.tokens, [i for i, _ in hits], src.inv, src.inv.grams, src.gen.texts,
                               left_out)
    top = ranked[0][1]
    if top <= 0 or own <= 0:
        return hits[0][0], {}
    best = hits[0][1]
    return ranked[0][0], {i: max(best * b / top, min(1.0, b / own)) for i, b in ranked}


def target_app(q: ParsedQuery, post: dict[str, float]) -> str | None:
    """The app the goal is about: the one it names, else the one the device's goals make more likely
    than all others together."""
    if q.app and not q.app_generic:
        return q.app
    if not post:
        return None
    app, p = max(post.items(), key=lambda kv: kv[1])
    return app if p > 0.5 else None
