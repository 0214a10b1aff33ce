"""A user's rule outranks automatic experience: an automatic memory that says the opposite of a rule that applies
is found without the user naming it (``--overrides``), is not offered, and ``--explain`` says which rule it
contradicts. It reaches inside ``memory_plane._contradiction`` for the property of the rule it checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane, MemoryRetrieveRequest
from memory_plane._contradiction import overrules, stance


def _learn(plane: MemoryPlane, goal: str, app: str, labels: list[str]) -> str:
    req = MemoryRetrieveRequest(input=goal)
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    rec.tool_call("launch_app", {"app": app})
    rec.tool_result("launch_app", observed_state={"app": app, "page": "Home"})
    for n, label in enumerate(labels):
        rec.tool_call("tap", {"x": 100 + 50 * n, "y": 900}, target_label=label)
        rec.tool_result("tap", observed_state={"app": app, "page": f"Step{n}"})
    ep = rec.finish(success=True, completion_reason="the order is paid")
    assert plane.commit_episode(ep) and plane.flush(10)
    (e,) = [e for e in plane.device.entries("procedure") if goal in str(e.get("summary"))]
    return str(e["id"])


@pytest.mark.parametrize(("goal", "app", "labels", "rule"), [
    ("pay with the gift card in Meituan", "Meituan", ["Gift card", "Pay"], "Never pay with the gift card in Meituan"),
    ("在美团用礼品卡付款", "美团", ["礼品卡", "付款"], "不要在美团用礼品卡付款"),
])
def test_an_automatic_memory_against_a_user_rule_is_not_offered_and_explain_names_the_rule(
        tmp_path: Path, goal: str, app: str, labels: list[str], rule: str) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        proc = _learn(plane, goal, app, labels)
        assert proc in plane.retrieve(goal).refs()
        saved = plane.save_rule(rule)  # no overrides named
        ctx = plane.retrieve(goal)
        assert proc not in ctx.refs()
        assert saved.id in ctx.refs()  # the rule itself is shown
        assert ctx.dropped.get("user_rule") == 1
        why = [d for d in plane.explain(goal).dropped_items if d["id"] == proc]
        assert why and why[0]["reason"] == "user_rule" and saved.id in why[0]["detail"]


def test_a_rule_on_something_else_leaves_the_memory_alone(tmp_path: Path) -> None:
    goal = "pay with the gift card in Meituan"
    with MemoryPlane.open(tmp_path / "m") as plane:
        proc = _learn(plane, goal, "Meituan", ["Gift card", "Pay"])
        plane.save_rule("Never share my location in Meituan")
        plane.save_rule("Always pay with the gift card in Meituan")  # says the same: no conflict
        assert proc in plane.retrieve(goal).refs()


words = st.text(st.sampled_from("bcdfghjklmnpqrstvwxyz"), min_size=3, max_size=7)


@settings(max_examples=100, deadline=None)
@given(action=st.lists(words, min_size=2, max_size=4, unique=True), extra=st.lists(words, max_size=4),
       neg=st.sampled_from(["never", "do not", "don't", "must not", "avoid"]),
       pos=st.sampled_from(["always", "must", "", "please"]))
def test_a_negated_rule_overrules_exactly_the_memories_that_do_its_action(action: list[str], extra: list[str],
                                                                         neg: str, pos: str) -> None:
    phrase = " ".join(action)
    memory = stance(f"When goal is like '{' '.join([*extra, phrase])}': verified path")
    assert overrules(stance(f"{neg} {phrase}"), memory)
    assert not overrules(stance(f"{pos} {phrase}"), memory)  # the same stance: nothing to overrule
    assert not overrules(stance(f"{neg} {phrase} zzqx"), memory)  # the rule asks more than the memory does


@pytest.mark.parametrize(("rule", "memory", "opposite"), [
    # A negation about something the rule does not name is no opposite.
    ("always message Bob in Signal", "When goal is like 'message Bob in Signal without sound': verified path", False),
    ("要群里发通知", "When goal is like '在不同的群里发通知': verified path", False),
    ("特别注意群里发通知", "When goal is like '在群里发通知': verified path", False),
    # A prohibition against a memory that does it, whatever else the memory denies.
    ("never message Bob in Signal", "When goal is like 'message Bob in Signal without sound': verified path", True),
    ("不要在群里发通知", "When goal is like '在群里发通知': 别人的群也发", True),
    # The memory refusing what the rule asks for; the two agreeing.
    ("always ask before paying", "pay without asking before paying", True),
    ("never pay with the gift card", "never pay with the gift card: it fails", False),
])
def test_only_a_negation_of_the_rules_own_action_is_an_opposite(rule: str, memory: str, opposite: bool) -> None:
    assert overrules(stance(rule), stance(memory)) is opposite


phrases = st.lists(st.sampled_from(["never", "always", "pay", "gift", "card", "ask", "without", "sound", "meituan",
                                    "不要", "付款", "礼品卡", "别人"]), min_size=1, max_size=6).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(now=st.lists(phrases, max_size=5), planned=st.lists(phrases, max_size=8), memory=phrases,
       apart=st.sets(st.integers(0, 7), max_size=3))
def test_rules_found_by_their_words_are_the_first_rule_a_pass_over_all_finds(now: list[str], planned: list[str],
                                                                          memory: str, apart: set[int]) -> None:
    """Filing the rules by a word of theirs finds the same rule, the first in order, as asking each in turn."""
    from memory_plane.retrieval._rules_said import RulesSaid

    now_rules = [(f"n{k}", stance(t)) for k, t in enumerate(now)]
    plan_rules = [(f"p{k}", stance(t)) for k, t in enumerate(planned)]
    skip = frozenset(f"p{k}" for k in apart)
    said = RulesSaid.of(now_rules, RulesSaid.of(plan_rules), skip)
    mine = stance(memory)
    in_turn = [rid for rid, rule in [*now_rules, *(r for r in plan_rules if r[0] not in skip)] if overrules(rule, mine)]
    assert said.overruling(mine) == (in_turn[0] if in_turn else None)
