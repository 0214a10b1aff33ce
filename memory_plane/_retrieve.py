"""Retrieval: recall candidates from the indexes, drop what must not be shown, score, route, trim."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from device_memory import DeviceMemory, Procedure, type_of_id
from episodes import TaskEpisodeStore
from lifecycle import FileProblemError, parse_ts

from ._context import MemoryContext
from ._long_term import PROFILE_TYPES, LongTermStore
from ._query import ParsedQuery, parse_query
from ._render import render_context
from ._text import InvertedIndex
from ._types import MemoryHit, MemoryRetrieveRequest, RoleMemoryContext

log = logging.getLogger("memory_plane")

WEIGHTS = {"goal_similarity": 0.35, "entity_or_app_match": 0.20, "applicability": 0.15, "confidence": 0.10,
           "recency": 0.10, "validation": 0.10}
PENALTY_WEIGHT = 0.30
CAPS = {"device_profile": 1, "app_profiles": 2, "long_term": 4, "procedures": 3, "navigation": 4,
        "similar_episodes": 3, "calibration_notes": 2, "failure_modes": 4, "conflicts": 3}
APP_BOUND = ("procedure", "navigation", "app_profile", "failure", "ui_anchor")
APPLICABILITY_KEYS = {"device_id": ("device_id", "device"), "language": ("language", "lang"),
                      "screen": ("screen", "resolution"), "app": ("app", "app_id", "app_name"),
                      "input_method": ("input_method",)}


@dataclass
class RetrieveConfig:
    """Caps, thresholds and the size budget of the prompt block."""

    caps: dict[str, int] = field(default_factory=lambda: dict(CAPS))
    budget_chars: int = 4000
    min_similarity: float = 0.25
    episode_max_age_days: float = 180.0
    recency_days: float = 30.0
    search_limit: int = 200


class _Source:
    """Index entries of one collection plus their inverted index, kept in step incrementally."""

    def __init__(self, text: Callable[[dict[str, Any]], str]) -> None:
        self._text = text
        self._key: int | None = None
        self.entries: list[dict[str, Any]] = []
        self.inv = InvertedIndex()
        self.by_app: dict[str, list[int]] = {}

    def sync(self, entries: list[dict[str, Any]]) -> None:
        # The index reader returns the same list object until the file changes; a pure append
        # extends it in place, so only the new tail needs indexing.
        if id(entries) != self._key or len(entries) < len(self.inv.docs):
            self._key = id(entries)
            self.inv = InvertedIndex()
            self.by_app = {}
        self.entries = entries
        for i in range(len(self.inv.docs), len(entries)):
            e = entries[i]
            self.inv.add(self._text(e))
            app = e.get("app")
            if isinstance(app, str):
                self.by_app.setdefault(app, []).append(i)


def _device_text(e: dict[str, Any]) -> str:
    return " ".join(str(x) for x in (e.get("title"), e.get("summary"), e.get("app_name"), e.get("app"),
                                     e.get("page"), " ".join(e.get("tags") or [])) if x)


def _episode_text(e: dict[str, Any]) -> str:
    return " ".join(str(x) for x in (e.get("goal"), e.get("app")) if x)


def _long_term_text(e: dict[str, Any]) -> str:
    return " ".join(str(x) for x in (e.get("title"), e.get("summary"), " ".join(e.get("tags") or []),
                                     " ".join(e.get("entities") or [])) if x)


def _ts(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return parse_ts(value)
    except ValueError:
        return None


class Retriever:
    """Finds the few most useful memories for a goal; never raises for bad data (it is skipped)."""

    def __init__(self, device: DeviceMemory, episodes: TaskEpisodeStore, long_term: LongTermStore,
                 config: RetrieveConfig | None = None) -> None:
        self.device = device
        self.episodes = episodes
        self.long_term = long_term
        self.config = config or RetrieveConfig()
        self._device_sources = {t: _Source(_device_text) for t in device.collections}
        self._episode_source = _Source(_episode_text)
        self._lt_source = _Source(_long_term_text)

    # -- the call ----------------------------------------------------------------

    def retrieve(self, req: MemoryRetrieveRequest, now: datetime) -> MemoryContext:
        """Build the MemoryContext for a request."""
        hints = req.current_hints
        q = parse_query(req.input, self.device.catalog, app_hint=hints.app)
        env = {"device_id": req.device_id or "default", "language": hints.language, "screen": hints.screen(),
               "app": q.app, "input_method": hints.input_method}
        picked: dict[str, list[MemoryHit]] = {k: [] for k in CAPS}
        dropped: dict[str, int] = {}

        def drop(reason: str) -> None:
            dropped[reason] = dropped.get(reason, 0) + 1

        self._device_candidates(q, env, now, picked, drop, req.tool_names)
        self._episode_candidates(q, env, now, picked, drop)
        self._long_term_candidates(q, env, now, picked, drop)
        self._device_profile(env, picked)

        common = RoleMemoryContext()
        for cat, hits in picked.items():
            hits.sort(key=lambda h: (-h.score, h.id))
            setattr(common, cat, hits[: self.config.caps.get(cat, 3)])
        self._expand_steps(common)
        self._fit_budget(common)
        return MemoryContext(common, q, dropped=dropped)

    # -- scoring -------------------------------------------------------------------

    def _applicability(self, entry: dict[str, Any], env: dict[str, Any], *, app_bound: bool) -> float | None:
        """1.0 all known keys match, lower when the request does not know some; None on a mismatch."""
        appl = dict(entry.get("applicability") or {})
        for key in ("device_id", "language", "screen"):
            if key not in appl and entry.get(key):
                appl[key] = entry[key]
        if not appl:
            return 0.6
        known = matched = 0
        for key, aliases in APPLICABILITY_KEYS.items():
            value = next((appl[a] for a in aliases if appl.get(a) not in (None, "")), None)
            if value is None:
                continue
            want = env.get(key)
            if key == "app" and not app_bound:
                continue
            if want in (None, ""):
                continue
            known += 1
            if str(value).lower() == str(want).lower():
                matched += 1
            else:
                return None
        total = sum(1 for k, aliases in APPLICABILITY_KEYS.items() if any(appl.get(a) for a in aliases))
        return 1.0 if known == total else 0.6 + 0.4 * (known / max(1, total))

    def _score(self, *, sim: float, app_match: float, appl: float, conf: float, when: datetime | None,
               validation: float, penalty: float, now: datetime) -> tuple[float, dict[str, float]]:
        recency = 0.5
        if when is not None:
            age = max(0.0, (now - when).total_seconds() / 86400)
            recency = math.exp(-age / self.config.recency_days)
        f = {"goal_similarity": sim, "entity_or_app_match": app_match, "applicability": appl,
             "confidence": conf, "recency": recency, "validation": validation}
        score = sum(WEIGHTS[k] * v for k, v in f.items()) - PENALTY_WEIGHT * penalty
        f["conflict_or_stale_penalty"] = penalty
        return round(score, 4), {k: round(v, 3) for k, v in f.items()}

    def _app_match(self, q: ParsedQuery, app: Any, text: str) -> float:
        if q.app and app == q.app:
            return 1.0
        if app and app in q.apps:
            return 0.8
        low = text.lower()
        if q.entities and any(e.lower() in low for e in q.entities):
            return 0.7
        return 0.3 if not app else 0.0

    @staticmethod
    def _intent_sim(q: ParsedQuery, intent: Any, sim: float) -> float:
        if q.intent != "unknown" and intent == q.intent:
            return max(sim, 0.5 + 0.5 * sim)
        return sim

    # -- device memory -------------------------------------------------------------

    def _device_candidates(self, q: ParsedQuery, env: dict[str, Any], now: datetime,
                           picked: dict[str, list[MemoryHit]], drop: Callable[[str], None],
                           tool_names: list[str]) -> None:
        for item_type, coll in self.device.collections.items():
            src = self._device_sources[item_type]
            try:
                src.sync(coll.entries())
            except (OSError, FileProblemError) as exc:
                log.warning("retrieve: cannot read %s: %s", coll.dir, exc)
                continue
            found = dict(src.inv.search(q.tokens, self.config.search_limit))
            for app in {q.app, *q.apps} - {None}:
                for i in src.by_app.get(str(app), [])[-self.config.search_limit:]:
                    found.setdefault(i, src.inv.similarity(q.tokens, i))
            if item_type == "calibration":
                for i in range(len(src.entries)):
                    found.setdefault(i, 0.0)
            if item_type == "failure":
                for i, e in enumerate(src.entries):
                    if not e.get("app"):
                        found.setdefault(i, src.inv.similarity(q.tokens, i))
            for i, sim in found.items():
                self._device_hit(src.entries[i], item_type, sim, q, env, now, picked, drop, tool_names)

    def _device_hit(self, e: dict[str, Any], item_type: str, sim: float, q: ParsedQuery, env: dict[str, Any],
                    now: datetime, picked: dict[str, list[MemoryHit]], drop: Callable[[str], None],
                    tool_names: list[str]) -> None:
        status = e.get("status", "active")
        if status in ("replaced", "deleted", "expired"):
            drop(status)
            return
        exp = e.get("expires_at")
        if exp and (_ts(exp) is None or _ts(exp) <= now):  # type: ignore[operator]
            drop("expired")
            return
        app_bound = item_type in APP_BOUND
        appl = self._applicability(e, env, app_bound=False)
        if appl is None:
            drop("inapplicable")
            return
        app = e.get("app")
        if item_type == "calibration" and not e.get("evidence"):
            drop("calibration_without_evidence")
            return
        app_match = self._app_match(q, app, e.get("summary", ""))
        sim = self._intent_sim(q, e.get("intent") or (e.get("tags") or [None])[-1], sim)
        relevant = self._relevant(item_type, sim, q, app, app_match, e, tool_names)
        if not relevant:
            return
        s, f = e.get("success_count", 0) or 0, e.get("failure_count", 0) or 0
        validation = (s + 1) / (s + f + 2)
        penalty = 0.0
        if app_bound and not e.get("evidence"):
            penalty = max(penalty, 0.5)
        if f > s:
            penalty = max(penalty, 0.5)
        if e.get("conflicts_with"):
            penalty = max(penalty, 0.5)
        when = _ts(e.get("last_validated_at")) or _ts(e.get("updated_at"))
        score, factors = self._score(sim=sim, app_match=app_match, appl=appl, conf=float(e.get("confidence", 0.5)),
                                     when=when, validation=validation, penalty=penalty, now=now)
        hit = MemoryHit(id=e["id"], type=item_type, score=score, confidence=float(e.get("confidence", 0.5)),
                        text=e.get("summary") or e.get("title") or e["id"], title=e.get("title"),
                        path=f"{self.device.collections[item_type].rel_dir}/{e.get('path', e['id'] + '.yaml')}",
                        app=app, page=e.get("page"), status=status, factors=factors)
        if status == "conflicted":
            hit.caution = True
            picked["conflicts"].append(hit)
            return
        cat = {"app_profile": "app_profiles", "procedure": "procedures", "navigation": "navigation",
               "calibration": "calibration_notes", "failure": "failure_modes", "ui_anchor": "navigation"}[item_type]
        if item_type == "failure":
            hit.caution = True
        picked[cat].append(hit)

    def _relevant(self, item_type: str, sim: float, q: ParsedQuery, app: Any, app_match: float,
                  e: dict[str, Any], tool_names: list[str]) -> bool:
        if item_type == "calibration":
            return True
        if e.get("status") == "conflicted":
            return app_match >= 0.8 or sim >= 0.3
        if item_type == "app_profile":
            return app is not None and (app == q.app or app in q.apps)
        if item_type == "failure":
            if not app:
                return True  # a device-wide failure mode (e.g. the input method) is always a caution
            return app_match >= 0.8 or sim >= 0.4
        if item_type in ("navigation", "ui_anchor"):
            return q.app is not None and app == q.app
        if q.app and app and app != q.app:
            return False
        if q.app and app == q.app:
            return sim >= 0.1
        return sim >= self.config.min_similarity + 0.05

    # -- episodes --------------------------------------------------------------------

    def _episode_candidates(self, q: ParsedQuery, env: dict[str, Any], now: datetime,
                            picked: dict[str, list[MemoryHit]], drop: Callable[[str], None]) -> None:
        src = self._episode_source
        try:
            src.sync(self.episodes.entries())
        except (OSError, FileProblemError) as exc:
            log.warning("retrieve: cannot read episodes index: %s", exc)
            return
        found = src.inv.search(q.tokens, self.config.search_limit)
        for i, sim in found:
            e = src.entries[i]
            status = e.get("status", "active")
            if status not in ("active", "interrupted"):
                drop(status)
                continue
            started = _ts(e.get("started_at"))
            if started and (now - started).days > self.config.episode_max_age_days:
                drop("expired")
                continue
            appl = self._applicability(e, env, app_bound=False)
            if appl is None:
                drop("inapplicable")
                continue
            app = e.get("app")
            if q.app and app and app != q.app and self.device.catalog.app_id_for(str(app)) != q.app:
                continue
            sim = self._intent_sim(q, e.get("intent"), sim)
            success = bool(e.get("success"))
            if sim < (self.config.min_similarity if success else self.config.min_similarity + 0.1):
                continue
            app_match = self._app_match(q, self.device.catalog.app_id_for(str(app)) if app else None, e.get("goal", ""))
            score, factors = self._score(sim=sim, app_match=app_match, appl=appl, conf=1.0 if success else 0.8,
                                         when=started, validation=1.0 if success else 0.5, penalty=0.0, now=now)
            hit = MemoryHit(id=e["id"], type="task_episode" if success else "task_episode_failure", score=score,
                            confidence=1.0 if success else 0.8, text=e.get("summary") or e.get("goal", ""),
                            title=e.get("goal"), path=f"episodes/{e.get('path', '')}", app=app, status=status,
                            factors=factors, caution=not success)
            picked["similar_episodes" if success else "failure_modes"].append(hit)

    # -- long-term -------------------------------------------------------------------

    def _long_term_candidates(self, q: ParsedQuery, env: dict[str, Any], now: datetime,
                              picked: dict[str, list[MemoryHit]], drop: Callable[[str], None]) -> None:
        src = self._lt_source
        try:
            src.sync(self.long_term.entries())
        except (OSError, FileProblemError) as exc:
            log.warning("retrieve: cannot read long-term index: %s", exc)
            return
        found = dict(src.inv.search(q.tokens, self.config.search_limit))
        for i, e in enumerate(src.entries):
            if e.get("type") in PROFILE_TYPES:
                found.setdefault(i, src.inv.similarity(q.tokens, i))
        for i, sim in found.items():
            e = src.entries[i]
            status = e.get("status", "active")
            if status in ("replaced", "deleted", "expired"):
                drop(status)
                continue
            exp = e.get("expires_at")
            if exp and (_ts(exp) is None or _ts(exp) <= now):  # type: ignore[operator]
                drop("expired")
                continue
            appl = self._applicability(e, env, app_bound=True)
            if appl is None:
                drop("inapplicable")
                continue
            user_rule = e.get("type") in PROFILE_TYPES
            if not user_rule and sim < self.config.min_similarity:
                continue
            # User rules outrank automatic experience: they get full validation and no penalty.
            score, factors = self._score(sim=sim, app_match=self._app_match(q, None, e.get("summary", "")), appl=appl,
                                         conf=float(e.get("confidence", 0.8)), when=None,
                                         validation=1.0 if user_rule else 0.5, penalty=0.0, now=now)
            if user_rule:
                score += 0.2
            hit = MemoryHit(id=e["id"], type=str(e.get("type", "fact")), score=round(score, 4),
                            confidence=float(e.get("confidence", 0.8)), text=e.get("summary", ""),
                            title=e.get("title"), path=f"long_term/{e.get('path', '')}", status=status, factors=factors)
            if status == "conflicted":
                hit.caution = True
                picked["conflicts"].append(hit)
            else:
                picked["long_term"].append(hit)

    # -- profile, steps, budget ----------------------------------------------------------

    def _device_profile(self, env: dict[str, Any], picked: dict[str, list[MemoryHit]]) -> None:
        try:
            prof = self.device.profiles.get(env["device_id"])
        except (OSError, FileProblemError) as exc:
            log.warning("retrieve: device profile unreadable: %s", exc)
            return
        if prof is None or prof.status != "active":
            return
        path = self.device.profiles.path_for(env["device_id"])
        picked["device_profile"].append(MemoryHit(
            id=prof.id, type="device_profile", score=1.0, confidence=prof.confidence, text=prof.body(),
            path=str(path.relative_to(self.device.root)), status=prof.status))

    def _expand_steps(self, common: RoleMemoryContext) -> None:
        for hit in common.procedures:
            if type_of_id(hit.id) != "procedure":
                continue
            try:
                item = self.device.get(hit.id)
            except (OSError, FileProblemError) as exc:
                log.warning("retrieve: %s unreadable: %s", hit.id, exc)
                continue
            if isinstance(item, Procedure):
                hit.steps = [s.render() for s in item.steps]

    def _fit_budget(self, common: RoleMemoryContext) -> None:
        # Drop the weakest non-caution hits until the block fits; cautions go last.
        order = ["similar_episodes", "navigation", "calibration_notes", "long_term", "procedures", "app_profiles",
                 "conflicts", "failure_modes"]
        while len(render_context(common)) > self.config.budget_chars:
            victims = [(getattr(common, c)[-1].score, c) for c in order if getattr(common, c)]
            if not victims:
                return
            non_caution = [v for v in victims if v[1] not in ("conflicts", "failure_modes")]
            _, cat = min(non_caution or victims)
            getattr(common, cat).pop()
