"""Plain OpenAI chat `messages` JSONL: one conversation per line, arguments and content in every shape, results
matched by id and by position, the legacy function_call, usage when a dataset carries it, and bad lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import ingest_paths, query, write_jsonl

OAI = "openai_messages"


def tool_call(cid: Any, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def calls(db: Path, sid: str | None = None) -> list[tuple]:
    where = "WHERE session_id = ?" if sid else ""
    return query(
        db,
        f"SELECT call_id, tool, args, result_text, is_error, turn_id, user_turn FROM calls {where} "
        "ORDER BY session_id, seq",
        [sid] if sid else [],
    )


# -- the public fixtures -----------------------------------------------------------------------------------------------
# Read off each file (fixtures/SOURCES.md): per file the sessions (one per line), calls, calls with a linked result,
# user prompts, and ingest_errors.
FIXTURE_COUNTS = {
    "dataset-parser_edge_cases_dict_content.jsonl": (1, 0, 0, 1, 0),
    "dataset-parser_edge_cases_reasoning_field.jsonl": (2, 0, 0, 2, 0),
    "dataset-parser_edge_cases_tool_calls_variations.jsonl": (3, 4, 1, 3, 0),
    "dataset-parser_edge_cases_tool_structure_variations.jsonl": (4, 0, 0, 4, 0),
    "dataset-parser_invalid_malformed.jsonl": (2, 0, 0, 0, 1),
    "dataset-parser_valid_full.jsonl": (1, 1, 1, 1, 0),
    "dataset-parser_valid_large_tools.jsonl": (1, 0, 0, 1, 0),
    "dataset-parser_valid_multi_record.jsonl": (3, 0, 0, 3, 0),
}


def test_every_fixture_file(fixtures: Path, db: Path) -> None:
    folder = fixtures / OAI
    assert sorted(p.name for p in folder.glob("*.jsonl")) == sorted(FIXTURE_COUNTS)
    ingest_paths(db, *sorted(folder.glob("*.jsonl")))
    got = {
        Path(r[0]).name: tuple(r[1:])
        for r in query(
            db,
            """
        SELECT f.path, f.sessions,
               (SELECT count(*) FROM calls c WHERE c.file_id = f.file_id),
               (SELECT count(*) FROM calls c WHERE c.file_id = f.file_id AND c.result_text IS NOT NULL),
               (SELECT coalesce(sum(s.user_turns), 0) FROM sessions s WHERE s.file_id = f.file_id),
               f.errors
        FROM files f WHERE f.format = 'openai_messages' AND f.status = 'ingested'""",
        )
    }
    assert got == FIXTURE_COUNTS
    assert query(db, "SELECT sum(error_calls), sum(total_tokens) FROM sessions") == [(0, 0)]


def test_full_record(fixtures: Path, db: Path) -> None:
    ingest_paths(db, fixtures / OAI / "dataset-parser_valid_full.jsonl")
    assert calls(db) == [
        (
            "call_weather_1",
            "get_weather",
            '{"city":"Paris"}',
            '{"temperature": 18, "condition": "cloudy"}',
            False,
            "m2",
            0,
        )
    ]
    assert query(db, "SELECT role, text FROM turns ORDER BY turn_index") == [
        ("user", "What is the weather in Paris?"),
        ("assistant", None),
        ("assistant", "The weather in Paris is cloudy with a temperature of 18°C."),
    ]


def test_parallel_calls_and_dict_content(fixtures: Path, db: Path) -> None:
    ingest_paths(
        db,
        fixtures / OAI / "dataset-parser_edge_cases_tool_calls_variations.jsonl",
        fixtures / OAI / "dataset-parser_edge_cases_dict_content.jsonl",
    )
    assert [(c[0], c[1], c[3]) for c in calls(db, "toolcall-002")] == [
        ("call_a", "func1", None),
        ("call_b", "func2", None),
    ]
    # A dict content without text is kept as JSON rather than dropped.
    assert query(db, "SELECT role, text FROM turns WHERE session_id = 'dict-content-001' ORDER BY turn_index") == [
        ("user", '{"data":{"nested":true},"type":"complex"}'),
        ("assistant", '{"response":"structured"}'),
    ]


def test_malformed_lines_reported_good_lines_kept(fixtures: Path, db: Path) -> None:
    ingest_paths(db, fixtures / OAI / "dataset-parser_invalid_malformed.jsonl")
    assert query(db, "SELECT session_id, turns FROM sessions ORDER BY session_id") == [
        ("valid-001", 0),
        ("valid-002", 0),
    ]
    ((line, reason, text),) = query(db, "SELECT line, reason, excerpt FROM ingest_errors")
    assert (line, text) == (2, "{invalid json here")
    assert reason.startswith("invalid JSON")


# -- pitfalls ----------------------------------------------------------------------------------------------------------
def test_argument_shapes(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(
        tmp_path / "args.jsonl",
        [
            {
                "id": "args",
                "messages": [
                    {"role": "user", "content": "go"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            tool_call("s", "f", '{"b": 1, "a": [1, 2]}'),
                            tool_call("o", "f", {"a": [1, 2], "b": 1}),
                            tool_call("d", "f", '"{\\"a\\": [1, 2], \\"b\\": 1}"'),
                            tool_call("r", "f", "ls -la"),
                            tool_call("e", "f", ""),
                            tool_call("n", "f", None),
                        ],
                    },
                ],
            }
        ],
    )
    ingest_paths(db, f)
    assert [(c[0], c[2]) for c in calls(db)] == [
        ("s", '{"a":[1,2],"b":1}'),
        ("o", '{"a":[1,2],"b":1}'),
        ("d", '{"a":[1,2],"b":1}'),
        ("r", '{"raw":"ls -la"}'),
        ("e", "{}"),
        ("n", "{}"),
    ]
    # The same call written three ways is one call key.
    assert query(db, "SELECT count(DISTINCT call_key) FROM calls WHERE call_id IN ('s', 'o', 'd')") == [(1,)]


def test_content_shapes(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(
        tmp_path / "content.jsonl",
        [
            {
                "id": "content",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {}}],
                    },
                    {"role": "assistant", "content": None, "tool_calls": [tool_call("t1", "read", '{"p":"a"}')]},
                    {
                        "role": "tool",
                        "tool_call_id": "t1",
                        "content": [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}],
                    },
                    {"role": "assistant", "content": {"type": "text", "text": "read it"}},
                    {"role": "user", "content": None},
                ],
            }
        ],
    )
    ingest_paths(db, f)
    assert query(db, "SELECT role, text, user_turn FROM turns ORDER BY turn_index") == [
        ("user", "look", 0),
        ("assistant", None, 0),
        ("assistant", "read it", 0),
        ("user", "", 1),
    ]
    assert [c[3] for c in calls(db)] == ["line 1\nline 2"]


def test_repeated_ids_match_by_position(tmp_path: Path, db: Path) -> None:
    # As in the τ-bench sample: every tool_call id is "0", so results can only be matched in order.
    f = write_jsonl(
        tmp_path / "tau.jsonl",
        [
            {
                "id": "tau",
                "messages": [
                    {"role": "user", "content": "book it"},
                    {"role": "assistant", "content": "", "tool_calls": [tool_call("0", "get_user", {"id": "u1"})]},
                    {"role": "tool", "tool_call_id": "0", "content": "user u1"},
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [tool_call("0", "get_flight", {"n": 1}), tool_call("0", "get_flight", {"n": 2})],
                    },
                    {"role": "tool", "tool_call_id": "0", "content": "flight 1"},
                    {"role": "tool", "tool_call_id": "0", "content": "flight 2"},
                ],
            }
        ],
    )
    ingest_paths(db, f)
    assert [(c[1], c[2], c[3], c[5]) for c in calls(db)] == [
        ("get_user", '{"id":"u1"}', "user u1", "m1"),
        ("get_flight", '{"n":1}', "flight 1", "m3"),
        ("get_flight", '{"n":2}', "flight 2", "m3"),
    ]


def test_parallel_results_by_id_missing_ids_by_position(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(
        tmp_path / "par.jsonl",
        [
            {
                "id": "par",
                "messages": [
                    {"role": "user", "content": "both"},
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            tool_call("a", "x", "{}"),
                            tool_call("b", "y", "{}"),
                            tool_call(None, "z", "{}"),
                        ],
                    },
                    {"role": "tool", "tool_call_id": "b", "content": "B"},
                    {"role": "tool", "tool_call_id": "a", "content": "A"},
                    {"role": "tool", "content": "Z"},
                    {"role": "tool", "tool_call_id": "nope", "content": "?"},
                ],
            }
        ],
    )
    ingest_paths(db, f)
    assert [(c[0], c[1], c[3]) for c in calls(db)] == [("a", "x", "A"), ("b", "y", "B"), ("#2", "z", "Z")]
    assert query(db, "SELECT line, reason FROM ingest_errors") == [
        (1, "message 5: tool result for a call not in this conversation (nope)")
    ]


def test_legacy_function_call(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(
        tmp_path / "legacy.jsonl",
        [
            {
                "id": "legacy",
                "messages": [
                    {"role": "user", "content": "weather?"},
                    {
                        "role": "assistant",
                        "content": None,
                        "function_call": {"name": "get_weather", "arguments": '{"c":"Oslo"}'},
                    },
                    {"role": "function", "name": "get_weather", "content": "rain"},
                    {
                        "role": "assistant",
                        "content": None,
                        "function_call": {"name": "get_weather", "arguments": '{"c":"Oslo"}'},
                    },
                    {"role": "function", "name": "get_weather", "content": "rain", "is_error": True},
                    {"role": "assistant", "content": "It rains."},
                ],
            }
        ],
    )
    ingest_paths(db, f)
    assert [c[1:5] for c in calls(db)] == [
        ("get_weather", '{"c":"Oslo"}', "rain", False),
        ("get_weather", '{"c":"Oslo"}', "rain", True),
    ]
    assert query(db, "SELECT error_calls FROM sessions") == [(1,)]


def test_session_ids_and_usage(tmp_path: Path, db: Path) -> None:
    convo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    f = write_jsonl(
        tmp_path / "ids.jsonl",
        [
            {
                "conversation_id": "conv-9",
                "messages": convo,
                "model": "gpt-4o",
                "usage": {
                    "prompt_tokens": 1200,
                    "completion_tokens": 30,
                    "total_tokens": 1230,
                    "prompt_tokens_details": {"cached_tokens": 1000},
                },
            },
            {"messages": convo},
            {
                "uuid": "u-1",
                "messages": [
                    {"role": "user", "content": "a"},
                    {
                        "role": "assistant",
                        "content": "b",
                        "model": "gpt-4o",
                        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
                    },
                    {"role": "user", "content": "c"},
                    {
                        "role": "assistant",
                        "content": "d",
                        "model": "gpt-4o",
                        "usage": {"prompt_tokens": 20, "completion_tokens": 3},
                    },
                ],
                "usage": {"prompt_tokens": 30, "completion_tokens": 5},
            },
            {"uuid": "u-1", "messages": convo},
            {"id": 42, "messages": convo},
        ],
    )
    ingest_paths(db, f)
    rows = query(
        db,
        "SELECT session_id, input_tokens, cache_read_tokens, output_tokens, total_tokens, models "
        "FROM sessions ORDER BY session_id",
    )
    assert rows == [
        ("42", 0, 0, 0, 0, []),
        ("conv-9", 200, 1000, 30, 1230, ["gpt-4o"]),
        ("ids:2", 0, 0, 0, 0, []),
        ("u-1", 30, 0, 5, 35, ["gpt-4o"]),
        ("u-1:4", 0, 0, 0, 0, []),
    ]
    ((cost,),) = query(db, "SELECT cost_usd FROM sessions WHERE session_id = 'conv-9'")
    assert cost > 0  # priced from the table: the record names its model
    assert query(db, "SELECT line, reason FROM ingest_errors") == [
        (4, "duplicate session id u-1 in this file; loaded as u-1:4")
    ]


def test_bad_lines_reported_rest_ingested(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"id": "ok-1", "messages": [{"role": "user", "content": "x"}]},
            [1, 2],
            {"id": "no-messages", "prompt": "x"},
            {"id": "ok-2", "messages": ["not a message", {"role": "user", "content": "y"}]},
        ],
    )
    ingest_paths(db, f)
    assert query(db, "SELECT session_id, user_turns FROM sessions ORDER BY session_id") == [("ok-1", 1), ("ok-2", 1)]
    assert query(db, "SELECT line, reason FROM ingest_errors ORDER BY line") == [
        (2, "not a JSON object"),
        (3, "not a chat record: no `messages` list"),
        (4, "message 0 is not an object"),
    ]


@pytest.mark.parametrize(
    "rec, expected",
    [
        ({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}, True),
        ({"uuid": "x", "messages": []}, True),
        ({"sessionId": "s", "projectHash": "h", "messages": [{"id": "1", "type": "user", "content": "x"}]}, False),
        ({"info": {"id": "ses_1"}, "messages": [{"info": {}, "parts": []}]}, False),
        ({"type": "message", "message": {"role": "user"}}, False),
    ],
)
def test_sniff(rec: dict[str, Any], expected: bool) -> None:
    from analyzer.ingest.formats import openai_messages

    assert openai_messages.sniff(rec) is expected


def test_conversations_longer_than_the_head_are_read_as_lines(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON-lines file whose first conversation is longer than the 64 KB head is JSON lines, told from its first
    line alone: it is never read and decoded whole as if it were one document (on a 90 MB file of such lines that
    doubled the parser's memory), and every conversation is kept."""
    from analyzer.ingest import parse

    whole: list[str] = []
    load = parse._load_document
    monkeypatch.setattr(parse, "_load_document", lambda path, size: (whole.append(path), load(path, size))[1])
    long = "x" * (parse.HEAD_BYTES + 1000)
    lines = [
        {
            "messages": [
                {"role": "user", "content": f"{i} {long}"},
                {"role": "assistant", "content": None, "tool_calls": [tool_call(f"c{i}", "read", {"path": f"/f{i}"})]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": "ok"},
            ]
        }
        for i in range(3)
    ]
    path = write_jsonl(tmp_path / "conversations.jsonl", lines)
    ingest_paths(db, path)
    assert whole == []
    assert query(
        db, "SELECT f.format, f.sessions, count(c.call_id) FROM files f JOIN calls c USING (file_id) GROUP BY ALL"
    ) == [(OAI, 3, 3)]
