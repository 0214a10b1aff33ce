"""An episode cited as evidence keeps an excerpt past its full-trace TTL: episode.yaml and the steps the memories
cite (their events and screenshots), not every screenshot, the events and the transcript."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from freezegun import freeze_time

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.lifecycle import EvidenceRef, read_jsonl

from helpers import screenshot

T0 = datetime(2026, 6, 1, tzinfo=timezone.utc)


def _episode(plane: MemoryPlane) -> tuple[str, list[dict]]:
    rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="turn on the flashlight"))
    for i, page in enumerate(("home", "settings", "quick panel")):
        rec.tool_call("mouse_click", {"x": 10 + i, "y": 20 + i}, content=page, target_label=page)
        rec.tool_result("mouse_click", observed_state={"app": "Settings", "page": page},
                        screenshot=screenshot(page, (640, 1200)))
    ep = rec.finish(success=True, final_state="flashlight on")
    plane.commit_episode(ep)
    plane.flush(10)
    events = read_jsonl(plane.episodes.episode_dir(ep.id) / "events.jsonl").records
    return ep.id, events


def _cite(plane: MemoryPlane, ep_id: str, event_ids: list[str]) -> None:
    """Only a user rule cites the episode, and only these events of it."""
    for kind in ("procedure", "app_profile", "failure", "navigation", "calibration", "ui_anchor"):
        for e in plane.device.entries(kind):
            plane.device.forget(e["id"], reason="test")
    res = plane.long_term.save_memory(type="rule", content="the flashlight is in the quick panel")

    def cite(mem):  # type: ignore[no-untyped-def]
        mem.evidence_refs = [EvidenceRef(type="episode", id=ep_id, event_ids=event_ids)]
        return mem

    plane.long_term.update(res.id, cite)


def test_a_cited_episode_past_its_trace_ttl_keeps_the_cited_steps_and_nothing_else(root: Path) -> None:
    with freeze_time(T0) as ft, MemoryPlane.open(root) as plane:
        ep_id, events = _episode(plane)
        d = plane.episodes.episode_dir(ep_id)
        cited = [ev for ev in events if ev.get("step") == 2]
        _cite(plane, ep_id, [cited[-1]["event_id"]])  # the result of step 2 (its call comes with it)
        shots = sorted(p.name for p in (d / "artifacts").iterdir())
        stray = d / "artifacts" / "stray_from_a_crash.jpg"
        stray.write_bytes(screenshot("stray", (64, 64)))
        ft.move_to(T0 + timedelta(days=2))
        plane.gc()
        assert not stray.exists()  # a stray screenshot goes from a cited episode too
        assert (d / "events.jsonl").exists() and len(list((d / "artifacts").iterdir())) == len(shots)

        ft.move_to(T0 + timedelta(days=31))
        dry = plane.gc(dry_run=True)
        assert (d / "events.jsonl").exists() and any(r["reason"] == "episode_trace_ttl" for r in dry.removed)
        plane.gc()
        assert (d / "episode.yaml").exists() and not (d / "events.jsonl").exists()
        assert not (d / "transcript").exists()
        excerpt = read_jsonl(d / "excerpt.jsonl").records
        assert [ev["event_id"] for ev in excerpt] == [ev["event_id"] for ev in cited]
        kept_shots = sorted(p.name for p in (d / "artifacts").iterdir())
        wanted = sorted(Path(ev["screenshot_ref"]).name for ev in cited if ev.get("screenshot_ref"))
        assert wanted and set(wanted) <= set(kept_shots) and len(kept_shots) < len(shots)
        ep = plane.episodes.get(ep_id)
        assert ep is not None and ep.traceability == "excerpt_only"

        ft.move_to(T0 + timedelta(days=200))
        plane.gc()  # past the summary TTL the cited episode keeps its excerpt
        assert (d / "episode.yaml").exists() and (d / "excerpt.jsonl").exists()
        assert set(wanted) <= {p.name for p in (d / "artifacts").iterdir()}


def test_an_episode_cited_as_a_whole_is_trimmed_without_an_excerpt_file(root: Path) -> None:
    """A memory that cites an episode but none of its events: past the trace TTL the episode keeps episode.yaml
    (excerpt_only) and the screenshots episode.yaml names; there is no step to keep, so no excerpt file is written.
    An excerpt a GC wrote before is replaced, never left naming steps no memory cites."""
    with freeze_time(T0) as ft, MemoryPlane.open(root) as plane:
        ep_id, events = _episode(plane)
        d = plane.episodes.episode_dir(ep_id)
        _cite(plane, ep_id, [])
        ft.move_to(T0 + timedelta(days=31))
        plane.gc()
        assert (d / "episode.yaml").exists() and not (d / "events.jsonl").exists()
        assert not (d / "excerpt.jsonl").exists()
        ep = plane.episodes.get(ep_id)
        assert ep is not None and ep.traceability == "excerpt_only"

    other = root.parent / "other"
    with freeze_time(T0) as ft, MemoryPlane.open(other) as plane:
        ep_id, events = _episode(plane)
        d = plane.episodes.episode_dir(ep_id)
        _cite(plane, ep_id, [])
        (d / "excerpt.jsonl").write_text(json.dumps(events[0]) + "\n")  # a GC killed once another memory cited it
        ft.move_to(T0 + timedelta(days=31))
        plane.gc()
        assert read_jsonl(d / "excerpt.jsonl").records == []
