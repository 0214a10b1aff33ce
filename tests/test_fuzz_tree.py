"""One broken field costs one field, never the device's memory (a fuzzer over every field of every file).

The property runs here bounded (fixed seed, a few dozen examples plus the cases that once broke the tree);
`memplane bench fuzz --examples N` runs it longer and reports examples, raises and items lost.

It reaches inside bench/ for the field fuzzer's fixture and strategies, which the bench runs but does not export.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, seed, settings

from memory_plane.bench._fuzz import Fixture, Mutation, strategies

from helpers import built_once

fixture, _cleanup = built_once(Fixture)  # the template tree, built once for the module


# Edits that once took all memory away, replayed on every run whatever hypothesis draws.
KNOWN = [("procedure", ("steps",), 5), ("procedure", ("steps",), {"a": 1}), ("procedure", ("confidence",), [1, 2]),
         ("procedure", ("success_count",), float("inf")), ("procedure", ("evidence_refs",), 7),
         ("procedure", ("tags",), {"x": 1}), ("app", ("open_methods",), 3), ("episode", ("retrieved_memory_refs",), 9),
         ("memory", ("tags",), {"a": "b"}), ("procedure", ("type",), [1]), ("app", ("type",), {"a": 1})]
PREFIX = {"procedure": "device/procedures/proc_", "app": "device/apps/app_", "episode": "episodes/2",
          "memory": "long_term/memories/"}


@pytest.mark.parametrize(("kind", "key", "value"), KNOWN, ids=[f"{k}.{'.'.join(map(str, p))}" for k, p, _ in KNOWN])
def test_known_breaking_edits_cost_one_field(kind: str, key: tuple[Any, ...], value: Any) -> None:
    prefix = PREFIX[kind]
    path = next(f for f in fixture().catalogue if f.startswith(prefix) and f.endswith((".yaml", ".md"))
                and not f.endswith("index.yaml") and "transcript" not in f)
    out = fixture().run(Mutation(path, "field", key, value))
    assert out.ok, (out.raises[:2], out.lost, out.silent_fix)


def _property(m: Mutation) -> None:
    out = fixture().run(m)
    assert out.ok, (m.describe(), out.raises[:2], out.lost[:3], out.silent_fix[:1])


@pytest.mark.slow
def test_any_one_broken_field_or_file_costs_at_most_its_own_item() -> None:
    """Hypothesis draws a file and a field (or a whole-file fault) of the realistic tree; nothing may raise."""
    fx = fixture()
    test = seed(27)(settings(max_examples=25, deadline=None, database=None, derandomize=True,
                             suppress_health_check=list(HealthCheck), print_blob=True)(
        given(m=strategies(fx.catalogue))(
            example(m=Mutation("episodes/index.yaml", "file", (), b"\xff\x00" * 1000, "random"))(
                example(m=Mutation("device/procedures/index.yaml", "file", (), 0.5, "torn"))(_property)))))
    test()


def test_steps_of_the_wrong_type_are_named_and_treated_as_absent(tmp_path: Path) -> None:
    from memory_plane import MemoryPlane
    from memory_plane.cli import main as cli

    root = tmp_path / "m"
    with MemoryPlane.open(root) as plane:
        coll = plane.device.collection("procedure")
        item = plane.device.new_item(coll.model, "proc_manual", title="Pay with Alipay", app_id="alipay",
                                     intent="pay", steps=[{"tool": "tap", "target_label": "Pay"}])
        path = coll.save(item)
        other = plane.device.new_item(coll.model, "proc_send", title="Send a WeChat message", app_id="wechat",
                                      intent="send", steps=[{"tool": "tap", "target_label": "Send"}])
        coll.save(other)
        text = path.read_text()
        for bad in ("5", "{a: 1}"):
            path.write_text(re.sub(r"steps:\n(?:[ -].*\n)*", f"steps: {bad}\n", text))
            got = plane.device.get("proc_manual")
            assert got is not None and got.steps == [], bad  # not one step "a", not a crash
            report = plane.verify()
            (prob,) = [p for p in report.problems if p.path.endswith("proc_manual.yaml")]
            assert prob.category == "field" and "steps" in prob.message and prob.line
            assert "proc_manual" in plane.retrieve("用支付宝付款 pay with alipay").refs()
            assert "proc_send" in plane.retrieve("send a wechat message").refs()
    assert cli(["--root", str(root), "device", "show", "proc_manual"]) == 0
    assert cli(["--root", str(root), "lifecycle", "gc", "--json"]) == 0
