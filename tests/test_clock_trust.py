"""A clock that is not believed blindly: GC and expiry refuse a clock that is unset, behind the tree or far ahead of
it, and what was written under an unset clock (a phone at 1970 before network time) is never hidden as ancient.

It reaches inside `upkeep._clock` for the newest write's definition (every value parsed), to check its faster
finding against it, and to count its parses."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from freezegun import freeze_time
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane.cli import main as cli
from memory_plane.lifecycle import BUILD_DATE, CLOCK_SKEW, MAX_CLOCK_LEAP, ClockError, clock_doubt, read_jsonl

T = datetime(2026, 6, 1, 12, tzinfo=timezone.utc)
EPOCH = datetime(1970, 1, 2, tzinfo=timezone.utc)


def task(plane: MemoryPlane, goal: str) -> str:
    rec = plane.new_episode_recorder(MemoryRetrieveRequest(input=goal))
    rec.tool_call("launch_app", {"app": "Meituan"})
    rec.tool_result("launch_app", observed_state={"app": "Meituan", "page": "Home"})
    plane.commit_episode(rec.finish(success=True))
    plane.flush(10)
    return rec.id


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != ".lock"}


def seed(root: Path) -> tuple[str, str]:
    """An episode, what it taught, and a fact, all written at T."""
    with freeze_time(T), MemoryPlane.open(root) as plane:
        ep = task(plane, "open Meituan")
        fact = plane.long_term.save_memory(content="The gym on Garden Road opens at six", type="fact")
        return ep, str(fact.id)


def test_a_gc_ten_years_ahead_removes_nothing_and_says_why(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ep, fact = seed(root)
    before = files(root)
    with freeze_time(T + timedelta(days=3653, minutes=5)):
        with MemoryPlane.open(root) as plane, pytest.raises(ClockError) as err:
            plane.gc()
        assert "more than 730 days after the newest write" in str(err.value) and "--now" in str(err.value)
        assert cli(["--root", str(root), "lifecycle", "gc", "--json"]) == 1
        line = json.loads(capsys.readouterr().out)
        assert line["exit_code"] == 1 and "730 days" in line["error"]
        assert cli(["--root", str(root), "lifecycle", "gc"]) == 1
        assert "the clock reads 2036" in capsys.readouterr().err
    assert files(root) == before
    with freeze_time(T + timedelta(minutes=10)), MemoryPlane.open(root) as plane:
        assert plane.episodes.get(ep) is not None and plane.long_term.get(fact) is not None


def test_now_given_by_the_operator_is_believed(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ep, _ = seed(root)
    later = T + timedelta(days=3653)
    assert cli(["--root", str(root), "lifecycle", "gc", "--json", "--now", "2036-06-01T00:00:00Z"]) == 0
    assert json.loads(capsys.readouterr().out)["exit_code"] == 0
    with freeze_time(later), MemoryPlane.open(root) as plane:
        assert plane.episodes.get(ep) is None  # ten years past every TTL: gone, because the operator said so
    assert cli(["--root", str(root), "lifecycle", "gc", "--now", "yesterday"]) == 2


def test_a_clock_behind_the_tree_or_unset_is_refused(root: Path) -> None:
    seed(root)
    for when in (T - timedelta(days=30), EPOCH):
        with freeze_time(when), MemoryPlane.open(root) as plane, pytest.raises(ClockError):
            plane.gc(dry_run=True)
    with freeze_time(T - CLOCK_SKEW / 2), MemoryPlane.open(root) as plane:
        plane.gc()  # a few hours behind (a time zone, a network time correction) is no reason to stop


def test_verify_on_a_leaping_clock_marks_nothing_expired_and_reports_the_clock(root: Path) -> None:
    _, fact = seed(root)
    with freeze_time(T + timedelta(days=3653)), MemoryPlane.open(root) as plane:
        rep = plane.verify()
        assert [p.category for p in rep.problems] == ["clock"] and not rep.ok
        assert not rep.stats["expired_marked"]
        assert cli(["--root", str(root), "lifecycle", "verify"]) == 1
    with freeze_time(T + timedelta(days=1)), MemoryPlane.open(root) as plane:
        mem = plane.long_term.get(fact)
        assert mem is not None and mem.status == "active"
        with_now = plane.verify(now=T + timedelta(days=3653))
        assert fact in with_now.stats["expired_marked"]


def test_a_fact_saved_at_1970_stays_visible_when_network_time_arrives(root: Path) -> None:
    with freeze_time(EPOCH), MemoryPlane.open(root) as plane:
        mem = plane.long_term.save_memory(content="The user's locker code is in the blue notebook", type="fact")
        ep = task(plane, "open Meituan")
        with pytest.raises(ClockError):  # GC at 1970: the clock is not set
            plane.gc()
    with freeze_time(T), MemoryPlane.open(root) as plane:
        assert [m.id for m in plane.long_term.recall_memory("locker code blue notebook")] == [mem.id]
        assert mem.id in plane.retrieve("where is the locker code").refs()
        rep = plane.verify()
        assert mem.id not in rep.stats["expired_marked"] and rep.ok, [str(p) for p in rep.problems]
        plane.gc()  # nothing in the tree has a trusted time: nothing bounds the clock, and nothing is ancient
        assert plane.long_term.get(mem.id) is not None and plane.episodes.get(ep) is not None


def test_a_forget_at_1970_keeps_its_tombstone_and_blocks_the_text(root: Path) -> None:
    text = "The user's bank PIN hint is the cat's birthday"
    with freeze_time(EPOCH), MemoryPlane.open(root) as plane:
        mem = plane.long_term.save_memory(content=text, type="fact")
        assert plane.forget(str(mem.id))
    with freeze_time(T), MemoryPlane.open(root) as plane:
        plane.gc()
        assert read_jsonl(root / "lifecycle" / "tombstones.jsonl").records
        assert plane.long_term.save_memory(content=text, type="fact").status == "ignored"


@settings(max_examples=300, deadline=None)
@given(newest=st.datetimes(min_value=datetime(2025, 1, 2), max_value=datetime(2090, 1, 1),
                           timezones=st.just(timezone.utc)),
       offset=st.timedeltas(min_value=timedelta(days=-3650), max_value=timedelta(days=3650)))
def test_any_clock_outside_the_bounds_is_doubted_and_any_inside_is_not(newest: datetime, offset: timedelta) -> None:
    now = newest + offset
    inside = now >= BUILD_DATE and -CLOCK_SKEW <= offset <= MAX_CLOCK_LEAP
    why = clock_doubt(now, newest)
    assert (why is None) == inside
    if why is not None:
        assert "the clock reads" in why


def _newest_by_parsing_all(root: Path, index_lines: list[dict], tomb_ts: list[str]):  # type: ignore[no-untyped-def]
    """What the newest write is by its definition: every value parsed, the first place of the newest kept."""
    from memory_plane.upkeep._clock import WRITE_KEYS, _time

    best = None
    for e in index_lines:
        for key in WRITE_KEYS:
            when = _time(e.get(key))
            if when is not None and (best is None or when > best[0]):
                best = (when, f"{key} of {e.get('id')}")
    for ts in tomb_ts:
        when = _time(ts)
        if when is not None and (best is None or when > best[0]):
            best = (when, "lifecycle/tombstones.jsonl")
    return best


_moments = st.datetimes(min_value=datetime(1969, 1, 1), max_value=datetime(2040, 1, 1),
                        timezones=st.just(timezone.utc))
_stamp = st.one_of(
    _moments.map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"),
    _moments.map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ")),
    _moments.map(lambda d: d.isoformat()),
    _moments.map(lambda d: d.astimezone(timezone(timedelta(hours=8))).isoformat()),
    st.sampled_from(["2026-02-30T10:00:00.000Z", "2099-13-01T00:00:00Z", "garbage", "", "2026-06-01"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.fixed_dictionaries({"updated_at": _stamp, "created_at": _stamp, "started_at": _stamp}),
                max_size=12), st.lists(_stamp, max_size=4))
def test_the_newest_write_compares_the_writers_own_forms_as_text_and_finds_what_parsing_all_finds(
        tmp_path_factory, lines, tomb_ts) -> None:  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    from memory_plane.upkeep._clock import newest_write

    root = tmp_path_factory.mktemp("t")
    index_lines = [{"id": f"x_{i}", **e} for i, e in enumerate(lines)]
    (root / "lifecycle").mkdir()
    (root / "lifecycle" / "tombstones.jsonl").write_text("".join(json.dumps({"ts": t}) + "\n" for t in tomb_ts))
    store = SimpleNamespace(index=SimpleNamespace(iter_entries=lambda: iter(index_lines)))
    assert newest_write(root, [store]) == _newest_by_parsing_all(root, index_lines, tomb_ts)


def test_the_newest_write_of_a_large_index_parses_only_the_newest_of_each_form(tmp_path: Path, monkeypatch) -> None:
    from types import SimpleNamespace

    import memory_plane.upkeep._clock as clock_mod

    lines = [{"id": f"x_{i}", "updated_at": (T - timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
              "started_at": (T - timedelta(hours=i)).strftime("%Y-%m-%dT%H:%M:%SZ")} for i in range(1000)]
    parsed: list[object] = []
    real = clock_mod.parse_ts
    monkeypatch.setattr(clock_mod, "parse_ts", lambda v: (parsed.append(v), real(v))[1])
    store = SimpleNamespace(index=SimpleNamespace(iter_entries=lambda: iter(lines)))
    assert clock_mod.newest_write(tmp_path, [store]) == (T, "updated_at of x_0")
    assert len(parsed) <= 4  # not 2,000
