"""Call and result keys: canonical JSON, one fast hash (XXH3-64), and the store holding exactly the keys a live Guard
computes."""

from __future__ import annotations

import xxhash

from analyzer.detect.keys import (
    NOT_FOUND,
    REFUSED,
    call_key,
    canonical_json,
    digest,
    normalize_result,
    ordered_json,
    result_key,
    shallow_sorted_json,
)


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


def test_keys_are_xxh3_64_in_16_hex_digits() -> None:
    assert (
        digest("make test")
        == xxhash.xxh3_64_hexdigest(b"make test")
        == f"{xxhash.xxh3_64_intdigest(b'make test'):016x}"
    )
    assert len(digest("")) == 16 and digest("a\ud800b")  # a lone surrogate (from a \ud800 escape) still hashes


def test_the_store_keeps_each_guards_key(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    from helpers import ingest_paths, query, write_jsonl

    flat = {"command": "make", "timeout": 5}  # keys in order, nothing nested: all three keys are one
    nested = {"path": "a", "opts": {"z": 1, "a": 2}}  # every variant differs
    f = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"type": "session", "version": 3, "id": "k", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/r"},
            {
                "type": "message",
                "id": "a1",
                "timestamp": "2026-01-01T00:00:01Z",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "toolCall", "id": "c1", "name": "bash", "arguments": flat},
                        {"type": "toolCall", "id": "c2", "name": "read", "arguments": nested},
                    ],
                },
            },
        ],
    )
    db = tmp_path / "k.duckdb"
    ingest_paths(db, f)
    rows = query(db, "SELECT tool, call_key, call_key_ordered, call_key_shallow FROM calls ORDER BY seq")
    for (tool, key, ordered, shallow), args in zip(rows, (flat, nested)):
        assert key == call_key(tool, canonical_json(args))
        assert ordered == call_key(tool, ordered_json(args))
        assert shallow == call_key(tool, shallow_sorted_json(args))
    assert len({rows[1][1], rows[1][2], rows[1][3]}) == 3 and len(set(rows[0][1:])) == 1


def test_the_store_holds_the_result_keys_a_guard_computes(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    from helpers import ingest_paths, query, write_jsonl

    outputs = [("Chunk ID: 4f2a\nWall time: 0.1 seconds\nOutput:\nFAILED", True), ("ok \u00e9\n", False), ("", False)]
    records = [{"type": "session", "version": 3, "id": "r", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/r"}]
    for i, (text, err) in enumerate(outputs):
        records.append(
            {
                "type": "message",
                "id": f"a{i}",
                "timestamp": "2026-01-01T00:00:01Z",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "toolCall", "id": f"c{i}", "name": "bash", "arguments": {"command": "x"}}],
                },
            }
        )
        records.append(
            {
                "type": "message",
                "id": f"t{i}",
                "timestamp": "2026-01-01T00:00:02Z",
                "message": {
                    "role": "toolResult",
                    "toolCallId": f"c{i}",
                    "toolName": "bash",
                    "isError": err,
                    "content": [{"type": "text", "text": text}],
                },
            }
        )
    db = tmp_path / "r.duckdb"
    ingest_paths(db, write_jsonl(tmp_path / "r.jsonl", records))
    rows = query(db, "SELECT result_key, is_error, result_text, result_chars FROM calls ORDER BY seq")
    assert [(r[0], r[1], r[3]) for r in rows] == [(result_key(t, e), e, len(t)) for t, e in outputs]


def test_every_edit_refused_for_text_not_in_the_file_has_one_result_key() -> None:
    """Claude Code's, Codex's and OpenHands' "not found" refusals quote the text sent, so each old text would be a
    result of its own and a retry whose old text barely changed would never meet its first try: they share
    ``NOT_FOUND``, as permission refusals share ``REFUSED``. The same words in a successful output, or in another
    error, keep their own key."""
    refusals = [
        "<tool_use_error>String to replace not found in file.\nString:   port: 3000</tool_use_error>",
        "<tool_use_error>String to replace not found in file.\nString:   port: 5000</tool_use_error>",
        "apply_patch verification failed: Failed to find expected lines in /repo/a.md:\n| chat | ok |",
        "apply_patch verification failed: Failed to find context 'def load():' in /repo/store.py",
        "ERROR:\nNo replacement was performed, old_str `x = 1` did not appear verbatim in /repo/a.py.",
    ]
    assert {result_key(r, True) for r in refusals} == {NOT_FOUND}
    assert result_key(refusals[0], False) != NOT_FOUND  # a file that quotes the message, read back
    assert result_key("Permission to use Edit has been denied.", True) == REFUSED
    assert result_key("Tool permission request failed: Error: Stream closed", True) == REFUSED
    failing = "FAIL test_patch.py::test_hunks - AssertionError\n1 failed"
    assert result_key(failing, True) not in (NOT_FOUND, REFUSED)
