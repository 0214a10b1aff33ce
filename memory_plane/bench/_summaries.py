"""`bench summaries`: the offline and the model lens over one fixed transcript, scored blind, and a paired A/B
of the agent's prompt with and without compaction.

Summaries: every segment of a scripted session (facts planted in tool results, thoughts, notes and user
instructions, where a capsule must carry them over by itself) gets a capsule from each lens. The capsules are
shuffled under anonymous ids before a judge sees them: a model judge when GEMINI_API_KEY is set, otherwise the
recall of the planted facts, so neither judge can know which lens wrote what. Without a key the model lens runs
through the real google-genai SDK against the project's fake Gemini server: its scores then measure the
pipeline (request, checks, the facts the ledger adds), not a model.

A/B: the same scripted steps through two ledgers, compaction on and off; at every step the prompt's estimated
size, its cache-stable prefix (checked against the minimum size for implicit caching) and the latency of the
agent's call with that prompt (the SDK to the fake server; to Gemini with a key), compared step by step.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._util import r, temp_root

# 002 §3.2: the stable prefix should be at least 4K tokens to meet Gemini 3.x's minimum for implicit caching.
IMPLICIT_CACHE_MIN_TOKENS = 4096
SEGMENT_STEPS = 6
AGENT_MODEL = "gemini-3.8-flash"
# The fixed planted facts: (where in the step it is written, the text, the token a summary must keep).
PLANTS = [("result", "the SMS says the login code is 482913", "482913"),
          ("thought", "the invoice total I need later is 1,284.50 CNY", "1,284.50"),
          ("note", "notes/wifi.md", "notes/wifi.md"),
          ("user", "pay with the card ending 4431", "4431"),
          ("result", "order number MT20261129-0042 confirmed on screen", "MT20261129-0042"),
          ("thought", "王小明's number is 13800138000", "13800138000"),
          ("result", "meeting room 7F-Orion is free at 15:00", "7F-Orion"),
          ("note", "notes/flight_CA1831.md", "notes/flight_CA1831.md"),
          ("result", "parcel pickup code 6-2-1107", "6-2-1107"),
          ("user", "use the coupon SAVE30NOW", "SAVE30NOW")]
JUDGE_PROMPT = ("You grade history summaries of a phone agent's steps. For each summary (by its id) you get the "
                "steps it summarises. Score 1 to 5: fidelity (nothing stated that the steps do not support), "
                "coverage (the values and facts a later step would need are kept), neutrality (describes, never "
                "judges success). Answer a JSON object {\"<id>\": {\"fidelity\": n, \"coverage\": n, "
                "\"neutrality\": n}, ...} and nothing else.")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both halves on one fixed session; the model lens against the fake server unless GEMINI_API_KEY is set."""
    steps = int(getattr(args, "steps", 60) or 60)
    steps = min(steps, 24) if getattr(args, "short", False) else min(max(steps, 12), 240)
    seed = int(getattr(args, "seed", 0) or 0)
    key = os.environ.get("GEMINI_API_KEY")
    from .._lenses import GeminiClient, GeminiSettings, StepCapsuleLens, VisualTransitionLens

    with temp_root() as root:
        ep = root / "episodes" / "2026" / "ep_20260101_summaries"
        records = _session(ep, steps)
        if key:
            client = GeminiClient(GeminiSettings(api_key=key))
            out = _both(ep, records, client, VisualTransitionLens, StepCapsuleLens, seed, judge=client)
            out["model"] = "gemini (GEMINI_API_KEY)"
            return out
        from .._fake_gemini import FakeGemini
        from ._compaction import _fake_answer

        with FakeGemini(default=_fake_answer) as fake:
            client = GeminiClient(GeminiSettings(base_url=fake.url, api_key="bench", timeout_s=5))
            out = _both(ep, records, client, VisualTransitionLens, StepCapsuleLens, seed, judge=None)
            out["model"] = "fake Gemini server on 127.0.0.1 (real SDK): scores measure the pipeline, not a model"
            out["model_requests"] = len(fake.requests)
            return out


def _both(ep: Path, records: list[Any], client: Any, visual_cls: Any, capsule_cls: Any, seed: int,
          judge: Any) -> dict[str, Any]:
    from memory_plane.episodes.transcript import OfflineCapsuleLens, OfflineVisualLens

    lenses = {"offline": (OfflineVisualLens(), OfflineCapsuleLens()),
              "model": (visual_cls(client), capsule_cls(client))}
    capsules = {name: _capsules(ep, records, v, c) for name, (v, c) in lenses.items()}
    scores = _blind_scores(records, capsules, seed, judge)
    ab = _ab(ep, records, client, judge is not None)
    return {"steps": len(records), "segments": len(capsules["offline"]), "judge": scores.pop("judge"),
            **scores, **ab}


def _session(ep: Path, steps: int) -> list[Any]:
    """The fixed scripted session (one ledger, offline lenses, no compaction): its step records."""
    from memory_plane.episodes.transcript import OfflineVisualLens, TranscriptConfig, TranscriptLedger

    from ..sim import SimPhone

    (ep / "artifacts").mkdir(parents=True)
    phone = SimPhone()
    led = TranscriptLedger(ep / "transcript_script", lens=OfflineVisualLens(), config=TranscriptConfig.plain(),
                           goal="a long phone task")
    obs = phone.call("touch_gesture", {"type": "home"}).observation
    plants = {2 + SEGMENT_STEPS * i: PLANTS[i % len(PLANTS)] for i in range(steps // SEGMENT_STEPS)}
    for n in range(1, steps + 1):
        ref = f"artifacts/step_{n:03d}.jpg"
        (ep / ref).write_bytes(phone.screenshot())
        kind, fact, _ = plants.get(n, ("", "", ""))
        led.stage(screenshot=ref, width=phone.screen[0], height=phone.screen[1],
                  elements=[{"label": e.label, "bounds": list(e.box)} for e in phone.elements()],
                  package=obs.get("package"), activity=str(obs.get("page")),
                  user_instructions=[fact] if kind == "user" else ())
        targets = phone.elements()
        tool, a = ("back", {}) if n % 7 == 0 or not targets else (
            "mouse_click", {"x": targets[n % len(targets)].center[0], "y": targets[n % len(targets)].center[1]})
        res = phone.call(tool, a)
        obs = res.observation
        result = f"{res.output}; {fact}" if kind == "result" else res.output
        thought = f"step {n}: continuing the task" + (f"; {fact}" if kind == "thought" else "")
        led.commit(action=tool, args=a, thought=thought, result=result, validator={"executed": res.ok},
                   notes_written=[fact] if kind == "note" else (), post_ui_text=obs.get("visible_text"))
    records = led.all_records()
    led.close()
    return records


def _segments(records: list[Any]) -> list[list[Any]]:
    return [records[i: i + SEGMENT_STEPS] for i in range(0, len(records), SEGMENT_STEPS)]


def _capsules(ep: Path, records: list[Any], visual: Any, capsule: Any) -> list[dict[str, Any]]:
    """Each segment's capsule from one lens pair (step summaries first, as the ledger gives them)."""
    from memory_plane.episodes.transcript import VisualJob, check_capsule

    out = []
    for seg in _segments(records):
        summaries: dict[int, str] = {}
        for rec in seg:
            try:
                summaries[rec.step] = visual.summarize(VisualJob(rec, ep / rec.pre_image, None, rec.ui_diff)).text
            except Exception:  # a failed step summary leaves the capsule without it, as in the ledger
                continue
        t0 = time.perf_counter()
        try:
            cap = capsule.capsule(seg, summaries)
            problem = check_capsule(cap, seg)
        except Exception as exc:
            cap, problem = None, f"{type(exc).__name__}"
        out.append({"start": seg[0].step, "end": seg[-1].step, "capsule": cap, "problem": problem,
                    "seconds": time.perf_counter() - t0})
    return out


def _capsule_text(cap: Any) -> str:
    if cap is None:
        return ""
    fields = [cap.doing, cap.did, cap.effect, *cap.verified_facts, *cap.unresolved, *cap.failed_paths,
              *cap.important_entities, cap.entry_state or "", cap.exit_state or "", *cap.intervals]
    return "\n".join(f for f in fields if f)


def _planted(seg: list[Any]) -> list[str]:
    """The tokens planted in a segment's results, thoughts and notes (what a summary of it must keep; a user
    instruction is kept verbatim beside the summary at every level, so it is not asked of the summary)."""
    out: list[str] = []
    for rec in seg:
        blob = " ".join([rec.result or "", rec.thought or "", *rec.notes_written])
        out.extend(tok for kind, fact, tok in PLANTS if kind != "user" and fact in blob)
    return out


def _blind_scores(records: list[Any], capsules: dict[str, list[dict[str, Any]]], seed: int,
                  judge: Any) -> dict[str, Any]:
    """Shuffle every capsule under an anonymous id, score them without the lens names, then unblind."""
    from memory_plane.episodes.transcript import banned_words_in

    segs = {seg[0].step: seg for seg in _segments(records)}
    items = [(lens, c) for lens, cs in capsules.items() for c in cs]
    rng = random.Random(seed)
    rng.shuffle(items)
    blind = {f"S{i:02d}": (_capsule_text(c["capsule"]), segs[c["start"]]) for i, (_, c) in enumerate(items, 1)}
    if judge is not None:
        graded = _model_judge(judge, blind)
        name = "model judge (blind: anonymous ids, shuffled)"
    else:
        graded = {i: {"fact_recall": _recall(text, _planted(seg))} for i, (text, seg) in blind.items()}
        name = "recall of planted facts (blind: anonymous ids, shuffled)"
    out: dict[str, Any] = {"judge": name}
    for lens in capsules:
        ids = [f"S{i:02d}" for i, (who, _) in enumerate(items, 1) if who == lens]
        per = [graded.get(i) or {} for i in ids]
        for metric in sorted({k for g in per for k in g}):
            vals = [g[metric] for g in per if g.get(metric) is not None]
            out[f"{lens}_{metric}"] = r(statistics.mean(vals), 3) if vals else None
        texts = [blind[i][0] for i in ids]
        out[f"{lens}_capsules_rejected"] = sum(1 for c in capsules[lens] if c["problem"])
        out[f"{lens}_banned_words"] = sum(len(banned_words_in(t)) for t in texts)
        out[f"{lens}_capsule_tokens_mean"] = r(statistics.mean(len(t) / 4 for t in texts), 1) if texts else None
        out[f"{lens}_capsule_seconds_mean"] = r(statistics.mean(c["seconds"] for c in capsules[lens]), 4)
    return out


def _recall(text: str, planted: list[str]) -> float | None:
    if not planted:
        return None
    return sum(1 for tok in planted if tok in text) / len(planted)


def _model_judge(client: Any, blind: dict[str, tuple[str, list[Any]]]) -> dict[str, dict[str, Any]]:
    from google.genai import types

    out: dict[str, dict[str, Any]] = {}
    for sid, (text, seg) in blind.items():
        steps = "\n".join(f"Step {x.step}: {x.action_line()} -> {(x.result or '')[:200]}; thought: "
                          f"{(x.thought or '')[:200]}; notes: {x.notes_written}; user: {x.user_instructions}"
                          for x in seg)
        body = f"id {sid}\nSTEPS:\n{steps}\nSUMMARY:\n{text or '(empty)'}"
        try:
            answer, _ = client.generate([client.settings.capsule_model, *client.settings.capsule_fallbacks],
                                        [types.Content(role="user", parts=[types.Part.from_text(text=body)])],
                                        system=JUDGE_PROMPT, purpose="judge", json_output=True)
            got = json.loads(answer).get(sid) or {}
            out[sid] = {k: float(got[k]) for k in ("fidelity", "coverage", "neutrality") if k in got}
        except Exception:
            out[sid] = {}
    return out


def _ab(ep: Path, records: list[Any], client: Any, real: bool) -> dict[str, Any]:
    """Replay the session's steps through a ledger with and without compaction; compare step by step."""
    arms = {"with": _arm(ep, records, client, compaction=True), "without": _arm(ep, records, client,
                                                                                compaction=False)}
    out: dict[str, Any] = {"ab_pairs": len(records), "implicit_cache_min_tokens": IMPLICIT_CACHE_MIN_TOKENS,
                           "ab_latency_source": "Gemini" if real else "SDK round trip to the fake server"}
    for metric in ("prompt_tokens", "stable_prefix_tokens", "latency_ms"):
        for arm, rows in arms.items():
            vals = [row[metric] for row in rows]
            out[f"{metric}_{arm}_median"] = r(statistics.median(vals), 1)
            out[f"{metric}_{arm}_max"] = r(max(vals), 1)
        diffs = sorted(a[metric] - b[metric] for a, b in zip(arms["with"], arms["without"], strict=True))
        out[f"{metric}_paired_diff_median"] = r(statistics.median(diffs), 1)
        out[f"{metric}_paired_diff_p90"] = r(diffs[int(0.9 * (len(diffs) - 1))], 1)
    out["system_prefix_tokens"] = arms["with"][0]["system_tokens"]
    out["system_prefix_meets_cache_min"] = out["system_prefix_tokens"] >= IMPLICIT_CACHE_MIN_TOKENS
    for arm, rows in arms.items():
        out[f"steps_prefix_meets_cache_min_{arm}"] = r(
            sum(1 for row in rows if row["stable_prefix_tokens"] >= IMPLICIT_CACHE_MIN_TOKENS) / len(rows), 3)
        if real:
            cached = [row["cached_tokens"] for row in rows if row.get("cached_tokens") is not None]
            out[f"cached_tokens_{arm}_median"] = r(statistics.median(cached), 1) if cached else None
    out["compactions_with"] = arms["with"][-1]["compactions"]
    return out


def _arm(ep: Path, records: list[Any], client: Any, compaction: bool) -> list[dict[str, Any]]:
    from memory_plane.episodes.transcript import (
        OfflineCapsuleLens,
        OfflineVisualLens,
        TranscriptConfig,
        TranscriptLedger,
        load_image_bytes,
        to_genai,
    )
    from memory_plane.lifecycle import load_yaml, template_files

    from .._tool_declarations import DECLARATIONS

    shipped = load_yaml(dict(template_files())["config.yaml"].decode("utf-8")) or {}
    shipped.setdefault("transcript", {})["context_budget_tokens"] = 12_000  # as bench compaction: a short task
    if not compaction:
        shipped.setdefault("chunking", {})["enabled"] = False
    cfg = TranscriptConfig.from_mapping(shipped)
    # The stable prefix S as an agent sends it: its role and the tool schemas, byte-identical all session.
    system = ("You operate an Android phone for the user, one action a turn, and keep your notes.\n"
              + json.dumps(DECLARATIONS, ensure_ascii=False, sort_keys=True))
    led = TranscriptLedger(ep / f"transcript_{'with' if compaction else 'without'}", lens=OfflineVisualLens(),
                           capsule_lens=OfflineCapsuleLens(), config=cfg, system_prompt=system,
                           goal="a long phone task")
    load: Callable[[str], bytes] = load_image_bytes(ep)
    rows: list[dict[str, Any]] = []
    usage: list[Any] = []
    client.on_usage = lambda u, _p: usage.append(u)
    for rec in records:
        led.stage(screenshot=rec.pre_image, width=None, height=None, ui_text=rec.ui_text, package=rec.package,
                  activity=rec.activity, user_instructions=rec.user_instructions)
        msgs = led.render()
        stable = led.stable_prefix_len(msgs)
        row: dict[str, Any] = {"prompt_tokens": led.estimated_tokens(msgs),
                               "stable_prefix_tokens": sum(led.tokens_of(m) for m in msgs[:stable]),
                               "system_tokens": led.tokens_of(msgs[0])}
        sys_text, contents = to_genai(msgs, load)
        usage.clear()
        t0 = time.perf_counter()
        try:
            client.generate([AGENT_MODEL], contents, system=sys_text, purpose="agent")
        except Exception:
            pass  # the latency of a failed call is still the time the agent waited
        row["latency_ms"] = (time.perf_counter() - t0) * 1000
        if usage:
            row["cached_tokens"] = usage[-1].cached_tokens
        led.commit(action=str(rec.action.get("name")), args=dict(rec.action.get("args") or {}), thought=rec.thought,
                   result=rec.result, validator=rec.validator, notes_written=rec.notes_written)
        led.flush(5)
        row["compactions"] = len([e for e in led.compaction.events if e["kind"] == "fold"])
        rows.append(row)
    client.on_usage = None
    led.close()
    return rows
