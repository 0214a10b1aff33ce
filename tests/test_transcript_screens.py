"""Screens in the transcript: the ledger hashes a screenshot itself, so "this screen resembles step N" works and
recall_history finds the steps whose screen looks like a given hash or screenshot."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from memory_plane import MemoryPlane, MemoryRetrieveRequest, MemoryTools
from memory_plane.episodes import dhash
from memory_plane.episodes.transcript import OfflineVisualLens, TranscriptLedger
from memory_plane.lifecycle import UsageError

from helpers import episode_ledger, screenshot

SCREENS = ["login", "inbox", "settings", "profile", "search", "compose"]


def screen(name: str) -> bytes:
    """A distinct screen per name: helpers' screenshot, its layout drawn from the name."""
    return screenshot(name * 3, (360, 640))


def hash_of(raw: bytes) -> str:
    with Image.open(io.BytesIO(raw)) as img:
        return dhash(img)


def visit(led: TranscriptLedger, ep: Path, n: int, name: str) -> str:
    ref = f"artifacts/step_{n:03d}.jpg"
    (ep / ref).write_bytes(screen(name))
    led.stage(screenshot=ref, width=360, height=640, package="com.a", activity=name)  # no dhash given
    led.commit(action="tap", args={"x": n, "y": n}, result=f"on {name}")
    return ref


def test_screens_are_far_apart() -> None:
    # The test's premise: every pair of screens differs by more than the hint's distance.
    from memory_plane.episodes import hamming

    hashes = [hash_of(screen(s)) for s in SCREENS]
    assert min(hamming(a, b) for i, a in enumerate(hashes) for b in hashes[i + 1:]) > 5


def test_the_ledger_hashes_a_screenshot_the_runtime_did_not(tmp_path: Path) -> None:
    led, ep = episode_ledger(tmp_path, lens=OfflineVisualLens())
    visit(led, ep, 1, "login")
    from memory_plane.episodes import hamming

    own = led.turns[0].record.dhash
    assert own and hamming(own, hash_of(screen("login"))) <= 2  # the same hash, decoded at a smaller scale
    for n, name in enumerate(SCREENS[1:5], 2):
        visit(led, ep, n, name)
    (ep / "artifacts/now.jpg").write_bytes(screen("login"))
    led.stage(screenshot="artifacts/now.jpg", package="com.a", activity="login")
    assert led.similarity_hint() == ("The current screen closely resembles the screen of Step 1. "
                                     "Use recall_history only if its details are needed.")
    assert "resembles the screen of Step 1" in led.render()[-1].text()


def test_a_hash_the_runtime_gives_wins_and_a_bad_screenshot_only_loses_its_hash(tmp_path: Path) -> None:
    led, ep = episode_ledger(tmp_path, lens=OfflineVisualLens())
    (ep / "artifacts/a.jpg").write_bytes(screen("login"))
    led.stage(screenshot="artifacts/a.jpg", dhash="00ff00ff00ff00ff")
    assert led.staged.dhash == "00ff00ff00ff00ff"
    (ep / "artifacts/broken.jpg").write_bytes(b"not an image at all")
    led.stage(screenshot="artifacts/broken.jpg")
    assert led.staged.dhash is None
    led.stage(screenshot="artifacts/missing.jpg")
    assert led.staged.dhash is None and led.commit(action="tap", args={"x": 1, "y": 1}).dhash is None


def test_recall_finds_steps_by_screen_hash_and_by_image(tmp_path: Path) -> None:
    led, ep = episode_ledger(tmp_path, lens=OfflineVisualLens())
    for n, name in enumerate([*SCREENS, "inbox"], 1):
        visit(led, ep, n, name)
    by_hash = led.recall_history(screen_hash=led.turns[1].record.dhash).to_dict()["results"]
    assert [r["step"] for r in by_hash] == [7, 2] and all(r["kind"] == "screen" and r["distance"] == 0
                                                          for r in by_hash)
    assert "on inbox" in by_hash[0]["text"]
    (ep / "artifacts/query.png").write_bytes(screenshot("settings" * 3, (360, 640), fmt="PNG"))
    by_image = led.recall_history(image="artifacts/query.png", include_images=True).to_dict()
    assert [r["step"] for r in by_image["results"]] == [3] and by_image["images"] == ["artifacts/step_003.jpg"]
    assert [r["step"] for r in led.recall_history(screen_hash=hash_of(screen("inbox")).upper(),
                                                   step_range=[1, 3]).results] == [2]
    with pytest.raises(UsageError, match=r"nowhere\.jpg"):
        led.recall_history(image="nowhere.jpg")


def test_the_model_recalls_by_screen_through_its_tool(plane: MemoryPlane) -> None:
    rec = plane.new_episode_recorder(MemoryRetrieveRequest(input="long task"))
    led = plane.open_transcript(rec)
    for n, name in enumerate(SCREENS[:3], 1):
        visit(led, led.episode_dir, n, name)
    tools = MemoryTools(plane, ledger=led)
    r = tools.call("recall_history", {"image": "artifacts/step_002.jpg"})
    assert not r.is_error and '"step": 2' in r.text and "on inbox" in r.text
    assert tools.call("recall_history", {"screen_hash": hash_of(screen("settings"))}).text.count('"step": 3') == 1
    missing = tools.call("recall_history", {"image": "artifacts/none.jpg"})
    assert missing.is_error and "none.jpg" in missing.text
