"""The user's word stands: the model's save_memory never retires what the user
saved, the user's rules and preferences for a goal always reach its block, and conflict lines and failure
phases say what they are.

It reaches inside `retrieval._user_rules` for a rule's scope, asked directly.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from memory_plane import CurrentEnvironmentHints, MemoryPlane, MemoryRetrieveRequest, parse_query
from memory_plane.cli import main as cli
from memory_plane.episodes import FAILURE_PHASES
from memory_plane.lifecycle import init_tree
from memory_plane.retrieval._user_rules import RuleScope

ZH = CurrentEnvironmentHints(language="zh-CN", screen_width=640, screen_height=1200)
TOOLS = ["touch_gesture", "keyboard_text", "mouse_click"]
USER_RULE = "Always ask me before paying anything in Alipay"
MODEL_RULE = "Never ask before paying anything in Alipay"
RUNTIME_DOC = Path(__file__).resolve().parent.parent / "docs" / "runtime.md"  # finish and its failure phases


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def _index(root: Path) -> dict[str, dict]:
    out = {}
    for line in (root / "long_term" / "index.yaml").read_text().splitlines():
        if line.startswith("- {"):
            e = json.loads(line[2:])
            out[e["id"]] = e
    return out


def _cli_save(root: Path, text: str, kind: str = "rule") -> str:
    """Save as the user does, on the command line; the saved memory's id."""
    assert cli(["--root", str(root), "memory", "save", "--type", kind, text, "--json"]) == 0
    return next(i for i, e in _index(root).items() if e["summary"] == text)


def _run(plane: MemoryPlane, goal: str, steps: list) -> None:
    req = MemoryRetrieveRequest(input=goal, current_hints=ZH, tool_names=TOOLS)
    rec = plane.new_episode_recorder(req, plane.retrieve(req))
    for tool, args, content, obs in steps:
        rec.tool_call(tool, args, content=content)
        rec.tool_result(tool, is_error=False, observed_state=obs)
    assert plane.commit_episode(rec.finish(success=True, final_state="done"))
    assert plane.flush(10)


@pytest.fixture(scope="module")
def thirty_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A device with 30 tasks: 20 bill payments in Alipay (procedures, pages, anchors) and 10 WeChat chats."""
    root = tmp_path_factory.mktemp("thirty") / "memory"
    init_tree(root)
    ali = {"app": "支付宝", "package": "com.eg.android.AlipayGphone"}
    bills = ["燃气费", "电费", "水费", "话费", "宽带费", "物业费"]
    home = ("touch_gesture", {"type": "home"}, None, {"app": "Launcher", "page": "Home"})
    with MemoryPlane.open(root) as plane:
        for i in range(30):
            if i % 3 == 2:
                _run(plane, f"打开微信，给联系人{i}发消息", [
                    home, ("mouse_click", {"x": 100, "y": 300 + i}, "微信",
                           {"app": "WeChat", "page": "Home", "package": "com.tencent.mm"}),
                    ("mouse_click", {"x": 300, "y": 200 + i}, f"联系人{i}", {"app": "WeChat", "page": "Chat"})])
                continue
            bill = bills[i % 6]
            _run(plane, f"在支付宝交{bill}，户号{1000 + i}", [
                home, ("mouse_click", {"x": 200, "y": 400}, "支付宝", {**ali, "page": "首页"}),
                ("mouse_click", {"x": 120 + i, "y": 600}, "生活缴费", {**ali, "page": "生活缴费"}),
                ("mouse_click", {"x": 300, "y": 500 + i}, bill, {**ali, "page": f"{bill}缴费"}),
                ("keyboard_text", {"text": f"{100 + i}"}, "金额", {**ali, "page": f"{bill}缴费"}),
                ("mouse_click", {"x": 320, "y": 1100}, "立即缴费", {**ali, "page": "支付确认"})])
    return root


@pytest.fixture
def device(thirty_tasks: Path, tmp_path: Path) -> Path:
    """A private copy of the 30-task device."""
    root = tmp_path / "memory"
    shutil.copytree(thirty_tasks, root)
    return root


def _goal(text: str = "在支付宝交燃气费") -> MemoryRetrieveRequest:
    return MemoryRetrieveRequest(input=text, current_hints=ZH, tool_names=TOOLS)


# -- the model's save never supersedes the user's ---------------------------------------------------------


def test_a_model_save_contradicting_the_users_rule_is_a_conflict_and_the_rule_stands(root: Path) -> None:
    user_id = _cli_save(root, USER_RULE)
    with MemoryPlane.open(root) as plane:
        user = plane.long_term.get(user_id)
        assert user is not None
        res = plane.tools.call("save_memory", {"type": "rule", "content": MODEL_RULE})
        assert not res.is_error
        assert "it replaces" not in res.text and res.text.startswith("conflicted")
        assert user.id in res.text and "stays active" in res.text and USER_RULE in res.text
        model_id = re.search(r"kept as (mem_[a-z0-9]+)", res.text).group(1)  # type: ignore[union-attr]
        assert set(res.refs) == {user.id, model_id}
        kept, held = plane.long_term.get(user.id), plane.long_term.get(model_id)
        assert kept is not None and kept.status == "active" and kept.superseded_by is None
        assert kept.source == "user"
        assert held is not None and held.status == "conflicted" and held.conflicts_with == [user.id]
        assert held.source == "model"
        # The same save again is the same conflict, logged once.
        assert plane.tools.call("save_memory", {"type": "rule", "content": MODEL_RULE}).text == res.text
        block = plane.retrieve(_goal()).render()
    # Both conflict lines name both memories: the log and the long-term index line.
    logged = [c for c in _lines(root / "lifecycle" / "conflicts.jsonl") if c.get("rule") == "user_memory_stands"]
    assert len(logged) == 1 and logged[0]["ids"] == [model_id, user.id]
    assert logged[0]["evidence"]["conflicts_with"] == [user.id] and logged[0]["decision"] == "conflicted"
    idx = _index(root)
    assert idx[model_id]["conflicts_with"] == [user.id] and idx[model_id]["source"] == "model"
    assert idx[user.id]["status"] == "active" and "conflicts_with" not in idx[user.id]
    # The user's rule is what the agent follows; the model's is a caution that names the rule.
    head, cautions = block.split("# Known Failure Modes And Conflicts")
    assert f"[{user.id} type=rule" in head and model_id not in head
    assert f"[{model_id} type=rule status=conflicted" in cautions and f"conflicts with [{user.id}]" in cautions
    assert USER_RULE in (root / "long_term" / "profile.md").read_text()
    assert MODEL_RULE not in (root / "long_term" / "profile.md").read_text()


def test_the_same_holds_for_preferences_and_the_api_with_the_user_as_source(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        lt = plane.long_term
        mine = lt.save_memory(type="preference", content="I always want dark mode in every app", source="user")
        r = lt.save_memory(type="preference", content="I never want dark mode in every app", source="model")
        assert r.status == "conflicted" and r.conflicts_with == [mine.id]
        assert lt.get(mine.id).status == "active"  # type: ignore[union-attr]
        with pytest.raises(Exception, match="source must be one of"):
            lt.save_memory(type="rule", content="x y z", source="someone")


def test_a_users_save_supersedes_the_models_and_the_line_names_both(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        res = plane.tools.call("save_memory", {"type": "rule", "content": MODEL_RULE})
        assert res.text.startswith("saved as mem_")
        model_id = res.refs[0]
    _cli_save(root, USER_RULE)
    with MemoryPlane.open(root) as plane:
        old = plane.long_term.get(model_id)
        assert old is not None and old.status == "replaced"
        user_id = old.superseded_by
        new = plane.long_term.get(user_id)  # type: ignore[arg-type]
        assert new is not None and new.status == "active" and new.source == "user"
    line = [c for c in _lines(root / "lifecycle" / "conflicts.jsonl") if c.get("rule") == "contradiction"]
    assert line and line[-1]["ids"] == [user_id, model_id] and line[-1]["evidence"]["conflicts_with"] == [model_id]


def test_a_model_save_narrowing_the_users_rule_is_kept_beside_it(root: Path) -> None:
    user_id = _cli_save(root, USER_RULE)
    with MemoryPlane.open(root) as plane:
        res = plane.tools.call("save_memory", {"type": "rule", "content": USER_RULE + " over 100 yuan"})
        assert res.text.startswith("saved as mem_") and user_id in res.text and "it replaces" not in res.text
        assert plane.long_term.get(user_id).status == "active"  # type: ignore[union-attr]
        assert len(plane.long_term.list_memories(["rule"])) == 2


def test_a_hand_typed_source_is_read_loosely(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        mid = plane.tools.call("save_memory", {"type": "rule", "content": MODEL_RULE}).refs[0]
        path = root / "long_term" / "memories" / f"{mid}.md"
        path.write_text(path.read_text().replace("source: model", "source: ' Model '"))
        assert plane.long_term.get(mid).source == "model"  # type: ignore[union-attr]
        # Still the model's: the user's save replaces it.
        assert plane.long_term.save_memory(type="rule", content=USER_RULE).status == "superseded"


def test_model_saves_still_supersede_model_saves(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        first = plane.tools.call("save_memory", {"type": "rule", "content": "Always ask before paying in Alipay"})
        second = plane.tools.call("save_memory", {"type": "rule", "content": "Never ask before paying in Alipay"})
        assert "it replaces " + first.refs[0] in second.text


def test_a_memory_without_source_counts_as_the_users(root: Path) -> None:
    _cli_save(root, USER_RULE)
    path = next((root / "long_term" / "memories").glob("*.md"))
    path.write_text(re.sub(r"(?m)^source: user\n", "", path.read_text()))  # written before sources existed
    assert "source:" not in path.read_text()
    with MemoryPlane.open(root) as plane:
        res = plane.tools.call("save_memory", {"type": "rule", "content": MODEL_RULE})
        assert res.text.startswith("conflicted") and path.stem in res.text
        assert plane.long_term.get(path.stem).status == "active"  # type: ignore[union-attr]


def test_the_user_saying_what_the_model_saved_makes_it_the_users(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        mid = plane.tools.call("save_memory", {"type": "rule", "content": USER_RULE}).refs[0]
        r = plane.long_term.save_memory(type="rule", content=USER_RULE)
        assert r.id == mid and r.status == "saved" and plane.long_term.get(mid).source == "user"  # type: ignore[union-attr]
        assert plane.tools.call("save_memory", {"type": "rule", "content": MODEL_RULE}).text.startswith("conflicted")


@pytest.mark.anyio
async def test_over_mcp_with_allow_write_the_users_rule_stands(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    root = tmp_path / "m"
    init_tree(root)
    _cli_save(root, USER_RULE)
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "memory_plane", "--root", str(root), "mcp", "--allow-write"])
    async with Client(params) as client:
        res = await client.call_tool("save_memory", {"type": "rule", "content": MODEL_RULE})
        text = res.content[0].text  # type: ignore[union-attr]
        assert not res.is_error and text.startswith("conflicted") and "it replaces" not in text
    with MemoryPlane.open(root) as plane:
        assert [h.text for h in plane.long_term.list_memories(["rule"])] == [USER_RULE]


# -- the user's rules and preferences always reach the block --------------------------------------------------


@pytest.mark.slow
def test_the_users_rule_reaches_the_block_on_a_device_with_30_tasks(device: Path, capsys) -> None:
    rule_id = _cli_save(device, USER_RULE)
    with MemoryPlane.open(device) as plane:
        ctx = plane.retrieve(_goal())
        block = ctx.render()
        assert rule_id in ctx.refs() and USER_RULE in block
        assert len(block) <= plane._retriever.config.budget_chars
        assert ctx.common.procedures and ctx.common.similar_episodes  # experience is still there beside it
        assert block.index(rule_id) < block.index("type=app_profile")
        ex = plane.explain(_goal()).explain()
        assert rule_id in [h["id"] for h in ex["hits"]["long_term"]]
        # What the budget left out is named in --explain, not silently gone.
        assert {d["reason"] for d in ex["dropped_items"]} >= {"budget"}
    capsys.readouterr()
    assert cli(["--root", str(device), "retrieve", "在支付宝交燃气费", "--explain"]) == 0
    out = capsys.readouterr().out
    assert rule_id in out and "budget" in out


def test_more_rules_than_fit_are_counted_and_listable(device: Path, capsys) -> None:
    topics = ["paying", "transfers", "top-ups", "refunds", "bills", "coupons", "loans", "insurance", "wealth",
              "receipts", "contacts", "red packets"]
    with MemoryPlane.open(device) as plane:
        for i, topic in enumerate(topics * 2):
            plane.long_term.save_memory(
                type="rule" if i % 2 else "preference",
                content=f"Rule {i}: before anything about {topic} number {i}, read the whole screen aloud to me, "
                        "wait for my spoken yes, and never tap a button that moves money on my behalf " + "x" * i)
        ctx = plane.retrieve(_goal())
        block = ctx.render()
        shown = [h for h in ctx.common.long_term if h.type in ("rule", "preference")]
        left = ctx.common.user_rules_left_out
        assert shown and left and len(shown) + left == 24
        assert f"{left} more of the user's rules and preferences" in block
        assert "memplane memory recall --type rule" in block and '"types": ["rule", "preference"]' in block
        assert len(block) <= plane._retriever.config.budget_chars
        # Rules before preferences; experience still has the other half of the block.
        assert len(shown) < 12 and {h.type for h in shown} == {"rule"}  # 12 rules: the preferences wait
        assert ctx.common.procedures or ctx.common.similar_episodes
        dropped = {d["id"] for d in plane.explain(_goal()).dropped_items if d["reason"] == "budget"}
        assert len(dropped & {h.id for h in plane.long_term.list_memories(["rule", "preference"])}) == left
    capsys.readouterr()
    assert cli(["--root", str(device), "memory", "recall", "--type", "rule"]) == 0
    assert len([x for x in capsys.readouterr().out.splitlines() if "type=rule" in x]) == 12
    assert cli(["--root", str(device), "memory", "recall"]) == 2  # neither a query nor a type


def test_which_rules_apply_to_a_goal(root: Path) -> None:
    with MemoryPlane.open(root) as plane:
        scope = RuleScope(plane.device.catalog)
        cat = plane.device.catalog

        def applies(text: str, goal: str, **e: object) -> bool:
            return scope.applies({"id": "mem_x", "summary": text, **e}, parse_query(goal, cat))

        assert applies(USER_RULE, "在支付宝交燃气费")
        assert applies("Always confirm amounts with me", "在支付宝交燃气费")  # global
        assert not applies("Always reply politely in WeChat", "在支付宝交燃气费")
        assert applies("Always reply politely", "在支付宝交燃气费", entities=["微信"]) is False
        assert applies("Always reply politely in WeChat", "pay the gas bill")  # the goal names no app
        assert applies("Ask before changing settings", "在支付宝交燃气费")  # a generic word is not an app
        assert applies("Never open red packets from strangers", "在支付宝交燃气费")  # nor a common word
        assert not applies("Never open red packets in 微信", "在支付宝交燃气费")
        assert applies("付款前一定要问我", "在支付宝交燃气费") and applies("支付宝付款前一定要问我", "在支付宝交燃气费")


def test_the_goals_own_app_goes_first_and_another_apps_rule_is_not_budgeted_first(device: Path) -> None:
    with MemoryPlane.open(device) as plane:
        lt = plane.long_term
        other = lt.save_memory(type="rule", content="Always reply politely in WeChat chats")
        anywhere = [lt.save_memory(type="rule", content=f"Always speak the amount number {i} aloud to me").id
                    for i in range(3)]
        mine = lt.save_memory(type="rule", content=USER_RULE)
        ids = [h.id for h in plane.retrieve(_goal()).common.long_term]
        assert ids[:4] == [mine.id, *sorted(anywhere, key=lambda x: ids.index(x))]
        assert other.id not in ids[:4]


# -- failure phases kept as given -----------------------------------------------------------------------


@pytest.mark.parametrize("phase", ["login", "input", "navigation"])
def test_a_failure_phase_is_kept_as_given(root: Path, phase: str) -> None:
    with MemoryPlane.open(root) as plane:
        req = MemoryRetrieveRequest(input="登录微信", current_hints=ZH)
        rec = plane.new_episode_recorder(req, plane.retrieve(req))
        rec.tool_call("mouse_click", {"x": 1, "y": 2})
        rec.tool_result("mouse_click", observed_state={"app": "WeChat", "page": "Login"})
        ep = rec.finish(success=False, failure_phase=phase, failure_reason="stuck")
        assert ep.outcome.failure_phase == phase
        assert plane.commit_episode(ep) and plane.flush(10)
        stored = plane.episodes.get(ep.id)
        assert stored is not None and stored.outcome.failure_phase == phase


def test_the_readme_lists_every_known_failure_phase() -> None:
    text = RUNTIME_DOC.read_text()
    section = text[text.index("Failure phases"):][:1500]
    assert all(f"`{p}`" in section for p in FAILURE_PHASES)
