"""`bench compaction`: a scripted session with a screenshot every step, through the transcript ledger."""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from ._util import r, temp_root


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Render latency, raw screenshots in the prompt, prefix breaks outside compaction events, waits."""
    from episodes.transcript import OfflineVisualLens, TranscriptLedger

    from ..sim import SimPhone

    steps = int(getattr(args, "steps", 150) or 150)
    if getattr(args, "short", False):
        steps = min(steps, 60)
    phone = SimPhone()
    with temp_root() as root:
        ep = root / "episodes" / "2026" / "ep_20260101_bench"
        (ep / "artifacts").mkdir(parents=True)
        led = TranscriptLedger(ep / "transcript", lens=OfflineVisualLens(), system_prompt="You operate a phone. " * 40)
        k = led.config.transcript.image_scrub_depth
        render_ms: list[float] = []
        max_images = 0
        breaks = 0
        previous: list[str] = []
        obs = phone.call("touch_gesture", {"type": "home"}).observation
        for n in range(1, steps + 1):
            ref = f"artifacts/step_{n:03d}.jpg"
            (ep / ref).write_bytes(phone.screenshot())
            els = [{"label": e.label, "bounds": list(e.box)} for e in phone.elements()]
            led.stage(screenshot=ref, width=phone.screen[0], height=phone.screen[1], elements=els,
                      package=obs.get("package"), activity=str(obs.get("page")), plan="find the contact")
            t0 = time.perf_counter()
            msgs = led.render()
            render_ms.append((time.perf_counter() - t0) * 1000)
            keys = [m.key() for m in msgs]
            if keys[: len(previous)] != previous:
                breaks += 1
            previous = keys[: led.stable_prefix_len(msgs)]
            max_images = max(max_images, led.raw_images_in(msgs))
            targets = phone.elements() or []
            tool, a = ("back", {}) if n % 7 == 0 or not targets else (
                "mouse_click", {"x": targets[n % len(targets)].center[0], "y": targets[n % len(targets)].center[1]})
            res = phone.call(tool, a)
            led.commit(action=tool, args=a, thought=f"step {n}: exploring", result=res.output,
                       validator={"executed": res.ok}, post_ui_text=res.observation.get("visible_text"))
            obs = res.observation
        led.flush(30)
        stats = led.service.stats
        out = {
            "steps": steps, "image_scrub_depth": k,
            "render_p50_ms": r(statistics.median(render_ms), 3),
            "render_p95_ms": r(sorted(render_ms)[int(0.95 * (len(render_ms) - 1))], 3),
            "max_raw_screenshots_in_prompt": max_images,
            "goal_max_raw_screenshots": k + 1,
            "prefix_breaks_outside_events": breaks,
            "operator_waits": stats.caller_waits,
            "summaries_ready": stats.ready, "summaries_failed": stats.failed,
            "estimated_prompt_tokens_end": led.estimated_tokens(),
        }
        led.close()
    return out
