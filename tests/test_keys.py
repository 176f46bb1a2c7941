"""Call and result keys: canonical JSON, and Python (a live Guard) agreeing with SQL (the store) on every key."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.detect.keys import (SQL_CALL_KEY, SQL_RESULT_KEY, call_key, canonical_json, normalize_result,
                                  ordered_json, result_key, shallow_sorted_json)

_con = duckdb.connect()


def sql_keys(tool: str, args: str, text: str | None, is_error: bool | None) -> tuple[str, str | None]:
    has = text is not None or is_error is not None
    expr_c = SQL_CALL_KEY.format(tool="$tool", args="$args")
    expr_r = SQL_RESULT_KEY.format(has_result="$has", is_error="$err", text="$text")
    params = {"tool": tool, "args": args, "has": has, "err": bool(is_error), "text": text}
    return _con.execute(f"SELECT {expr_c}, {expr_r}", params).fetchall()[0]


def test_canonical_json_sorts_keys_at_every_depth_and_keeps_array_order() -> None:
    assert canonical_json({"path": "a", "n": 1}) == canonical_json({"n": 1, "path": "a"}) == '{"n":1,"path":"a"}'
    assert canonical_json({"b": {"z": 1, "a": [{"y": 1, "x": 2}]}}) == '{"b":{"a":[{"x":2,"y":1}],"z":1}}'
    assert canonical_json({"paths": ["a", "b"]}) != canonical_json({"paths": ["b", "a"]})
    assert call_key("read", canonical_json({"path": "a"})) != call_key("grep", canonical_json({"path": "a"}))


def test_key_variants_follow_each_guard() -> None:
    args = {"b": 1, "a": {"d": 1, "c": 2}}
    assert ordered_json(args) == '{"b":1,"a":{"d":1,"c":2}}'  # JSON.stringify (Gemini CLI, OpenCode, gitagent)
    assert shallow_sorted_json(args) == '{"a":{"d":1,"c":2},"b":1}'  # Roo Code sorts the top level only
    assert canonical_json(args) == '{"a":{"c":2,"d":1},"b":1}'


def test_volatile_envelope_lines_do_not_change_the_result_key() -> None:
    a = "Chunk ID: 4f2a\nWall time: 0.113 seconds\nProcess exited with code 1\nOutput:\nFAILED test_x"
    b = "Chunk ID: 9c1d\nWall time: 2.907 seconds\nProcess exited with code 1\nOutput:\nFAILED test_x"
    assert normalize_result(a) == normalize_result(b)
    assert result_key(a, True) == result_key(b, True) != result_key(a, False)
    assert result_key("FAILED test_y", True) != result_key("FAILED test_x", True)
    assert result_key(None, None) is None


texts = st.one_of(
    st.none(),
    st.text(),
    st.builds(lambda a, b: f"Chunk ID: {a}\nWall time: {b} s\n{a}{b}", st.text(max_size=20), st.text(max_size=20)),
    st.text(alphabet=" \t\r\n\x0b\x0cab:Chunk IDWall time", max_size=60),
)


@settings(max_examples=300, deadline=None)
@given(tool=st.text(min_size=1, max_size=12), args=st.text(max_size=40), text=texts,
       is_error=st.one_of(st.none(), st.booleans()))
def test_python_and_sql_compute_the_same_keys(tool: str, args: str, text: str | None, is_error: bool | None) -> None:
    tool, args = tool.replace("\x00", ""), args.replace("\x00", "")
    text = text.replace("\x00", "") if text is not None else None
    if text is None and is_error is None:
        expected_result = None
    else:
        expected_result = result_key(text or "", bool(is_error))
    assert sql_keys(tool, args, text, is_error) == (call_key(tool, args), expected_result)


def test_the_store_keeps_each_guards_key(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    from helpers import ingest_paths, query, write_jsonl

    flat = {"command": "make", "timeout": 5}  # keys in order, nothing nested: all three keys are one
    nested = {"path": "a", "opts": {"z": 1, "a": 2}}  # every variant differs
    f = write_jsonl(tmp_path / "s.jsonl", [
        {"type": "session", "version": 3, "id": "k", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/r"},
        {"type": "message", "id": "a1", "timestamp": "2026-01-01T00:00:01Z", "message": {
            "role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": flat},
                                             {"type": "toolCall", "id": "c2", "name": "read", "arguments": nested}]}},
    ])
    db = tmp_path / "k.duckdb"
    ingest_paths(db, f)
    rows = query(db, "SELECT tool, call_key, call_key_ordered, call_key_shallow FROM calls ORDER BY seq")
    for (tool, key, ordered, shallow), args in zip(rows, (flat, nested)):
        assert key == call_key(tool, canonical_json(args))
        assert ordered == call_key(tool, ordered_json(args))
        assert shallow == call_key(tool, shallow_sorted_json(args))
    assert len({rows[1][1], rows[1][2], rows[1][3]}) == 3 and len(set(rows[0][1:])) == 1
