"""YAML items, frontmatter, jsonl and index files, with hostile input."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from memory_plane.lifecycle import (
    INDEX_HEADER,
    IndexFile,
    ParseError,
    YamlBombError,
    dump_yaml,
    forget_loaded_indexes,
    format_entry,
    load_yaml,
    load_yaml_file,
    parse_frontmatter,
    parse_index,
    render_frontmatter,
)

BOMB = """a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
"""


def test_yaml_bomb_is_refused() -> None:
    with pytest.raises(YamlBombError):
        load_yaml(BOMB, "bomb.yaml")


def test_python_object_tag_is_refused() -> None:
    with pytest.raises(ParseError) as ei:
        load_yaml("id: x\nobj: !!python/object/apply:os.system ['echo pwned']\n", "evil.yaml")
    assert ei.value.path == "evil.yaml" and ei.value.line == 2


def test_broken_yaml_reports_path_and_line(tmp_path: Path) -> None:
    p = tmp_path / "broken.yaml"
    p.write_text("id: x\ntype: procedure\ntitle: [unclosed\nstatus: active\n")
    with pytest.raises(ParseError) as ei:
        load_yaml_file(p)
    assert ei.value.path == str(p) and ei.value.line is not None and ei.value.line >= 3
    assert str(p) in str(ei.value)


def test_non_utf8_file_reports_line(tmp_path: Path) -> None:
    p = tmp_path / "latin1.yaml"
    p.write_bytes(b"id: x\ntitle: caf\xe9\n")
    with pytest.raises(ParseError) as ei:
        load_yaml_file(p)
    assert ei.value.line == 2 and "UTF-8" in ei.value.message


def test_deep_nesting_is_refused() -> None:
    with pytest.raises(ParseError):
        load_yaml("[" * 5000 + "]" * 5000)


def test_rewrite_keeps_comments_and_key_order() -> None:
    original = (
        "# my note about this app\n"
        "id: app_wechat\n"
        "type: app_profile  # do not change\n"
        "custom_field: keep me\n"
        "status: active\n"
        "display_names:\n"
        "  - 微信\n"
    )
    new = {"id": "app_wechat", "type": "app_profile", "status": "conflicted", "custom_field": "keep me",
           "display_names": ["微信", "WeChat"], "confidence": 0.8}
    out = dump_yaml(new, original)
    assert out.startswith("# my note about this app\n")
    assert "# do not change" in out
    assert out.index("custom_field") < out.index("status")
    assert "微信" in out and "\\u" not in out
    assert load_yaml(out) == new


def test_new_file_is_block_style_readable() -> None:
    out = dump_yaml({"id": "p", "steps": [{"tool": "tap", "text": "打开"}], "when": "2026-01-01T00:00:00Z",
                     "note": "line1\nline2"})
    assert "- tool: tap" in out and "打开" in out
    assert load_yaml(out)["when"] == "2026-01-01T00:00:00Z"  # stays a string
    assert load_yaml(out)["note"] == "line1\nline2"


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_frontmatter_lf_and_crlf(newline: str) -> None:
    text = newline.join(["---", "id: mem_1", "type: rule", "---", "# Title", "", "Body 微信", ""])
    meta, body = parse_frontmatter(text, "m.md")
    assert meta == {"id": "mem_1", "type": "rule"}
    assert "Body 微信" in body and "\r" not in body


def test_frontmatter_errors_have_lines() -> None:
    with pytest.raises(ParseError) as ei:
        parse_frontmatter("no fence\n", "m.md")
    assert ei.value.line == 1
    with pytest.raises(ParseError) as ei:
        parse_frontmatter("---\nid: x\ntitle: [bad\n---\nbody\n", "m.md")
    assert ei.value.line is not None and ei.value.line >= 3


def test_frontmatter_rewrite_keeps_comment() -> None:
    text = "---\n# why this rule exists\nid: mem_1\ntype: rule\n---\nbody\n"
    out = render_frontmatter({"id": "mem_1", "type": "rule", "status": "active"}, "body\n", text)
    assert "# why this rule exists" in out
    assert parse_frontmatter(out)[0]["status"] == "active"


def test_index_lines_roundtrip_and_grep_shape() -> None:
    e = {"id": "proc_1", "type": "procedure", "app": "微信", "title": 'say "hi"\u2028now'}
    line = format_entry(e)
    assert line.startswith('- {"id": "proc_1"') and "微信" in line and "\n" not in line
    assert parse_index(INDEX_HEADER + line + "\n").entries == [e]
    assert load_yaml(INDEX_HEADER + line + "\n") == [e]  # valid YAML too


def test_index_hand_edited_lines_fall_back_to_yaml() -> None:
    text = INDEX_HEADER + '- {"id": "a", "n": 1}\n- {id: b, n: 2}\n- {"id": "c" "broken\n- {"id": "d"}\n'
    r = parse_index(text, "index.yaml")
    assert [e["id"] for e in r.entries] == ["a", "b", "d"]
    assert len(r.problems) == 1 and r.problems[0].line == 5


@pytest.mark.slow
def test_an_index_file_read_in_one_piece_says_what_each_line_says(tmp_path: Path) -> None:
    # A well-formed index file is read by one replace over its bytes and one json.loads; every other shape
    # (notes, blank lines, CRLF, indented lines, a note ending in "}" right before an entry, a BOM, bytes that
    # are not UTF-8) must read as the text does line by line.
    lines = ['- {"id": "a", "t": "}"}', '- {"id": "b", "t": "- {"}', '- {"id": "c"}\r', ' - {"id": "d"}',
             "# note }", "", "  ", '- {"id": "e", "t": "中文"}']
    index = IndexFile(tmp_path / "index.yaml")
    for k in range(1, 5):
        for combo in itertools.product(lines, repeat=k):
            for head, tail in (("", ""), ("", "\n"), (INDEX_HEADER, "\n\n"), ("\ufeff", "\n")):
                text = head + "\n".join(combo) + tail
                expected = [json.loads(ln.strip()[2:]) for ln in combo if ln.strip().startswith("- {")]
                index.path.write_text(text, "utf-8")
                forget_loaded_indexes()  # read from the file, whatever its stat
                assert index.read().entries == expected == parse_index(text.lstrip("\ufeff")).entries, repr(text)
    for bad in (b"# \xff\n- {\"id\": \"a\"}\n", b'- {"id": "a\xff"}\n'):
        index.path.write_bytes(bad)
        forget_loaded_indexes()
        got = index.read()
        assert got.entries == [] and got.problems and "not valid UTF-8" in str(got.problems[0])


def test_index_block_style_and_go_shape_parse() -> None:
    block = "- id: a\n  type: x\n- id: b\n  type: y\n"
    assert [e["id"] for e in parse_index(block).entries] == ["a", "b"]
    go = "version: 1\nepisodes:\n  - id: ep_1\n    status: active\n"
    assert [e["id"] for e in parse_index(go).entries] == ["ep_1"]


def test_index_file_append_upsert_remove(tmp_path: Path) -> None:
    idx = IndexFile(tmp_path / "index.yaml")
    for i in range(5):
        idx.append({"id": f"i{i}", "n": i})
    assert [e["id"] for e in idx.read().entries] == [f"i{i}" for i in range(5)]
    idx.upsert({"id": "i2", "n": 20})
    idx.upsert({"id": "i9", "n": 9})
    assert idx.by_id()["i2"]["n"] == 20 and idx.by_id()["i9"]["n"] == 9
    assert idx.remove(["i0", "i9"]) == 2
    assert [e["id"] for e in idx.read().entries] == ["i1", "i2", "i3", "i4"]
    lines = [x for x in (tmp_path / "index.yaml").read_text().splitlines() if x.startswith("- ")]
    assert len(lines) == 4


def test_index_cache_sees_external_edits(tmp_path: Path) -> None:
    p = tmp_path / "index.yaml"
    idx = IndexFile(p)
    idx.append({"id": "a"})
    assert len(idx.read().entries) == 1
    with open(p, "a") as fh:
        fh.write('- {"id": "b"}\n')  # cron or a person
    assert [e["id"] for e in idx.read().entries] == ["a", "b"]


def test_yaml_is_loaded_with_1_2_rules() -> None:
    # The Norway problem and friends: hand-written values keep their YAML 1.2 meaning.
    assert load_yaml("a: no\nb: on\nc: 010\nd: 1:20\ne: 5e-3\nf: 0o10\n") == {
        "a": "no", "b": "on", "c": 10, "d": "1:20", "e": 0.005, "f": 8}
