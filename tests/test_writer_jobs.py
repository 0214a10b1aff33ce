"""The writer owns its marker files and hands each job the episode's events, read once per commit."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.episodes import EpisodeJob, TaskEpisodeStore, read_config


def count_event_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read of an episode's events.jsonl through the store, by episode id."""
    reads: list[str] = []
    real = TaskEpisodeStore.events

    def events(self: TaskEpisodeStore, episode_id: str) -> Any:
        reads.append(episode_id)
        return real(self, episode_id)

    monkeypatch.setattr(TaskEpisodeStore, "events", events)
    return reads


def record(plane: MemoryPlane, goal: str = "open settings and turn on wifi") -> str:
    req = MemoryRetrieveRequest(input=goal)
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": "Settings"})
    rec.tool_result("launch_app", output="ok", observed_state={"app": "Settings", "page": "Main"})
    ep = rec.finish(success=True)
    assert plane.commit_episode(ep)
    assert plane.flush()
    return ep.id


def test_a_commit_reads_its_events_once_for_every_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def counting(ep: Any, events: Any) -> None:
        seen.append(len(events))

    with MemoryPlane.open(tmp_path / "m", extra_jobs=[EpisodeJob("counting", counting, takes_events=True)]) as plane:
        reads = count_event_reads(monkeypatch)
        ep_id = record(plane)
        # The recorder read them at finish (for the summary); the outcome update, the extraction and the
        # extra job were handed that read.
        assert reads == [ep_id]
        assert seen == [3]  # call, result, finish
        d = plane.episodes.episode_dir(ep_id)
        assert all((d / f".done-{n}").exists() for n in ("update_outcomes", "extract_lessons", "counting"))


def test_an_event_after_finish_is_seen_by_the_jobs(tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def job(ep: Any, events: Any) -> None:
        seen.append([e.get("type") for e in events])

    with MemoryPlane.open(tmp_path / "m", extra_jobs=[EpisodeJob("seen", job, takes_events=True)]) as plane:
        req = MemoryRetrieveRequest(input="pay with alipay")
        rec = plane.new_episode_recorder(req)
        rec.tool_call("launch_app", {"app": "Alipay"})
        ep = rec.finish(success=True)
        rec.note("written after finish")
        assert plane.commit_episode(ep) and plane.flush()
    assert seen == [["tool_call", "finish", "note"]]


def test_catch_up_runs_what_lacks_its_marker_and_reads_the_events_once(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        # The writer's insides: as if the process died before its jobs ran (no public verb kills a worker).
        jobs, plane._writer.jobs = plane._writer.jobs, []
        ep_id = record(plane)
        plane._writer.jobs = jobs
    with MemoryPlane.open(root) as plane:
        d = plane.episodes.episode_dir(ep_id)
        old = time.time() - 3600
        os.utime(d / "episode.yaml", (old, old))
        reads = count_event_reads(monkeypatch)
        assert plane._writer.catch_up() == [ep_id]
        assert reads == [ep_id]  # one read for both jobs
        assert (d / ".done-update_outcomes").exists() and (d / ".done-extract_lessons").exists()
        assert plane._writer.catch_up() == []  # nothing left
        report = plane.verify()
        assert report.stats["jobs_caught_up"] == [] and report.stats["jobs_failed"] == []


def test_one_read_config_for_the_plane_and_the_recorder(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root):
        (root / "config.yaml").write_text("chunking:\n  max_steps: 3\n")
        assert read_config(root) == {"chunking": {"max_steps": 3}}
        (root / "config.yaml").write_text("{{{\n")
        assert read_config(root) == {}
    assert read_config(tmp_path / "nowhere") == {}


def test_verify_runs_a_closed_episodes_jobs_through_the_writer_so_they_run_once(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        ended = plane.new_episode_recorder(MemoryRetrieveRequest(input="open settings and turn on wifi"))
        ended.tool_call("launch_app", {"app": "Settings"})
        ended.tool_result("launch_app", output="ok", observed_state={"app": "Settings", "page": "Main"})
        ended.finish(success=True)  # the task ended; its commit never happened
        crashed = plane.new_episode_recorder(MemoryRetrieveRequest(input="open settings"))
        crashed.tool_call("launch_app", {"app": "Settings"})
        for rec in (ended, crashed):
            rec._release_recording_lock()  # the recorder's process died here
        ids = ended.episode.id, crashed.episode.id
    with MemoryPlane.open(root) as plane:
        report = plane.verify()
        assert report.stats["interrupted"] == [ids[1]]
        done, cut = (plane.episodes.episode_dir(i) for i in ids)
        # Each job that ran left its marker, as a commit's would: a later catch-up does not run it again.
        assert (done / ".done-update_outcomes").exists() and (done / ".done-extract_lessons").exists()
        assert (cut / ".done-extract_lessons").exists() and not (cut / ".done-update_outcomes").exists()
        old = time.time() - 3600
        os.utime(done / "episode.yaml", (old, old))
        assert plane.verify().stats["jobs_caught_up"] == []
