"""OpenAI `messages` wrapped in other records: τ-bench's `traj`, a `messages` list under another key, `.json` arrays
of conversation rows, and `.parquet` files of such rows as dataset hubs export them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from helpers import ingest_paths, query, write_jsonl


def tau_row(task: int, result: str = "ok") -> dict[str, Any]:
    """A τ-bench result row: every tool call id is "0", so results can only be matched by position."""
    tc = lambda name, args: {"id": "0", "type": "function", "function": {"name": name, "arguments": args}}  # noqa: E731
    return {
        "task_id": task,
        "reward": 1.0,
        "info": {"source": "user"},
        "trial": 0,
        "traj": [
            {"role": "system", "content": "# Airline Agent Policy"},
            {"role": "user", "content": "Book me a flight"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    tc("get_user_details", {"user_id": "mia"}),
                    tc("search_direct_flight", '{"origin":"JFK"}'),
                ],
            },
            {"role": "tool", "tool_call_id": "0", "name": "get_user_details", "content": "user mia"},
            {"role": "tool", "tool_call_id": "0", "name": "search_direct_flight", "content": result},
            {"role": "assistant", "content": "Done."},
        ],
    }


CALLS = [("get_user_details", '{"user_id":"mia"}', "user mia"), ("search_direct_flight", '{"origin":"JFK"}', "ok")]


def calls(db: Path) -> list[tuple]:
    return query(db, "SELECT tool, args, result_text FROM calls ORDER BY session_id, seq")


def test_real_tau_bench_results_file(fixtures: Path, db: Path) -> None:
    f = fixtures / "openai_messages" / "tau-bench_tool-calling-deepseek-v3-results.json"
    summary = ingest_paths(db, f)
    assert summary.skipped == [] and summary.errors == 0
    assert query(db, "SELECT format, sessions FROM files") == [("openai_messages", 1)]
    assert query(db, "SELECT calls, user_turns FROM sessions") == [(0, 0)]


def test_traj_rows_in_jsonl_match_repeated_ids_by_position(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(tmp_path / "tau.jsonl", [tau_row(0), tau_row(1)])
    ingest_paths(db, f)
    assert query(db, "SELECT format, sessions, errors FROM files") == [("openai_messages", 2, 0)]
    assert calls(db) == CALLS * 2
    assert query(db, "SELECT sum(user_turns) FROM sessions") == [(2,)]


def test_messages_under_another_key(tmp_path: Path, db: Path) -> None:
    convo = tau_row(0)["traj"]
    f = write_jsonl(
        tmp_path / "rows.jsonl",
        [{"id": "a", "conversation": convo}, {"id": "b", "sample": {"messages": convo}, "score": 0.5}],
    )
    ingest_paths(db, f)
    assert query(db, "SELECT session_id, calls FROM sessions ORDER BY 1") == [("a", 2), ("b", 2)]


def test_json_array_of_conversations_is_a_document(tmp_path: Path, db: Path) -> None:
    f = tmp_path / "results.json"
    f.write_bytes(orjson.dumps([tau_row(0), tau_row(1, "none")], option=orjson.OPT_INDENT_2))
    summary = ingest_paths(db, f)
    assert summary.skipped == []
    assert query(db, "SELECT session_id FROM sessions ORDER BY 1") == [("results:1",), ("results:2",)]
    assert [c[2] for c in calls(db)] == ["user mia", "ok", "user mia", "none"]


def test_parquet_rows_from_a_dataset_hub(tmp_path: Path, db: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for i in range(600):  # more than one batch
        traj = tau_row(i)["traj"]
        for m in traj:  # a hub stores arguments as strings and every struct field on every message
            for tc in m.get("tool_calls") or []:
                if not isinstance(tc["function"]["arguments"], str):
                    tc["function"]["arguments"] = orjson.dumps(tc["function"]["arguments"]).decode()
        rows.append({"task_id": i, "messages": traj})
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train-00000-of-00001.parquet")
    pq.write_table(pa.table({"x": [1, 2, 3]}), tmp_path / "numbers.parquet")
    summary = ingest_paths(db, tmp_path)
    assert query(db, "SELECT format, sessions, calls, errors FROM files WHERE status = 'ingested'") == [
        ("openai_messages", 600, 1200, 0)
    ]
    assert calls(db)[:2] == CALLS
    [(path, reason)] = summary.skipped
    assert path.endswith("numbers.parquet") and "Parquet" in reason
