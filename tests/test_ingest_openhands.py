"""OpenHands: saved trajectories (a JSON array of events), evaluation/resolver ``output.jsonl`` (current and older
2024 rows), and conversation folders (``events/<n>.json``). Calls linked by ``cause``, errors, usage once per
model response, the run's recorded cost, bad values, and the ``--agent`` filter."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import FIXTURES
from helpers import ingest_paths, query, write_jsonl

from analyzer.ingest.formats import agent_names
from analyzer.store.filters import parse_agent

OH = FIXTURES / "openhands"
EVAL = OH / "multi_swe_bench_examples_output.jsonl"
RESOLVER = OH / "resolver_mock_output.jsonl"
FOLDER = OH / "events_folder"


def calls(db: Path, sid: str) -> list[tuple[Any, ...]]:
    rows = query(db, "SELECT call_id, tool, args, result_text IS NOT NULL, is_error, error_kind FROM calls WHERE session_id = ? "
                     "ORDER BY seq", [sid])
    return [(c, t, orjson.loads(a), h, e, k) for c, t, a, h, e, k in rows]


def test_saved_trajectory(db: Path) -> None:
    ingest_paths(db, OH / "trajs_basic.json")
    assert query(db, "SELECT session_id, format, models, user_turns, calls FROM sessions") == [
        ("trajs_basic", "openhands", ["claude-3-5-sonnet-20241022"], 1, 2)]
    got = calls(db, "trajs_basic")
    assert [(c[1], c[3]) for c in got] == [("edit", True), ("finish", False)]
    assert got[0][2]["path"] == "/workspace/game_2048.py" and "thought" not in got[0][2]
    # one turn per model response, with that response's usage, priced from the table (no recorded cost)
    turns = query(db, "SELECT turn_id, cost_source FROM turns WHERE role = 'assistant' ORDER BY turn_index")
    assert turns == [("chatcmpl-6814daca-5c62-431d-8c88-9dafead244f1", "genai-prices:anthropic/claude-3-5-sonnet"),
                     ("chatcmpl-27cc0ad9-6b86-4f1f-9f72-d9c7ab2282f7", "genai-prices:anthropic/claude-3-5-sonnet")]


def _unique_response_usage(history: list[dict[str, Any]]) -> tuple[int, int]:
    """Prompt and completion tokens summed once per model_response id, straight from the file."""
    seen: dict[str, dict[str, Any]] = {}
    for ev in history:
        resp = (ev.get("tool_call_metadata") or {}).get("model_response") or {}
        if "action" in ev and resp.get("id") and resp.get("usage"):
            seen.setdefault(resp["id"], resp["usage"])
    return (sum(u["prompt_tokens"] for u in seen.values()), sum(u["completion_tokens"] for u in seen.values()))


def test_evaluation_output_jsonl(db: Path) -> None:
    rows = [orjson.loads(line) for line in EVAL.read_bytes().splitlines() if line.strip()]
    ingest_paths(db, EVAL)
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]
    stored = {r[0]: r[1:] for r in query(db, "SELECT session_id, input_tokens + cache_read_tokens, output_tokens, "
                                             "user_turns, format FROM sessions")}
    assert set(stored) == {r["instance_id"] for r in rows}
    for r in rows:
        hist = r["history"]
        assert stored[r["instance_id"]] == (*_unique_response_usage(hist), 1, "openhands")
        n_actions = sum(1 for e in hist if "action" in e and e["action"] not in ("message", "system", "recall"))
        rejected = sum(1 for e in hist if e.get("observation") == "error" and "cause" not in e)
        assert query(db, "SELECT count(*) FROM calls WHERE session_id = ?", [r["instance_id"]]) == [
            (n_actions + rejected,)]
    kinds = dict(query(db, "SELECT error_kind, count(*) FROM calls WHERE is_error GROUP BY 1"))
    assert set(kinds) == {"exit_code", "text", "flag"}
    assert query(db, "SELECT count(*) FROM calls WHERE tool = 'invalid_tool_call' AND is_error") == [(2,)]
    # accumulated_cost is 0.0 there (OpenHands did not know the price): no recorded cost; the `info` turn only
    # carries the outcome
    assert query(db, "SELECT count(*), count(cost_source), min(text) FROM turns WHERE turn_id = 'info'") == [
        (3, 0, query(db, "SELECT min(text) FROM turns WHERE turn_id = 'info'")[0][0])]
    assert all(t.startswith("git_patch: ") for (t,) in query(db, "SELECT text FROM turns WHERE turn_id = 'info'"))


def test_older_resolver_rows(db: Path) -> None:
    ingest_paths(db, RESOLVER)
    sessions = query(db, "SELECT session_id, cost_usd, calls, user_turns FROM sessions ORDER BY session_id")
    assert sessions == [("neubig/pr-viewer#1", pytest.approx(1.152933), 22, 1),
                        ("neubig/pr-viewer#5", pytest.approx(0.070713), 4, 1)]
    got = calls(db, "neubig/pr-viewer#5")
    assert got == [
        ("#0", "run", {"command": "touch LICENSE"}, True, False, None),
        ("#1", "run_ipython", {"code": got[1][2]["code"]}, True, False, None),
        ("#2", "run", {"command": "cat LICENSE"}, True, False, None),
        ("#3", "finish", {"outputs": {}}, False, None, None),
    ]
    text = query(db, "SELECT result_text FROM calls WHERE session_id = 'neubig/pr-viewer#5' AND seq = 1")[0][0]
    assert text.startswith("MIT License has been added")
    info = query(db, "SELECT text, cost_source FROM turns WHERE session_id = 'neubig/pr-viewer#5' AND turn_id = 'info'")
    assert info[0][1] == "transcript" and info[0][0].startswith("git_patch: ")


def test_single_line_output_is_read_as_a_document(tmp_path: Path, db: Path) -> None:
    first = RESOLVER.read_bytes().splitlines()[0]
    path = tmp_path / "output.jsonl"
    path.write_bytes(first + b"\n")
    ingest_paths(db, path)
    assert query(db, "SELECT session_id, format, calls FROM sessions") == [("neubig/pr-viewer#5", "openhands", 4)]


def test_conversation_events_folder(tmp_path: Path, db: Path) -> None:
    ingest_paths(db, FOLDER)
    sid = "4f0c2a9e1b7d4c55"
    assert query(db, "SELECT session_id, models, user_turns, calls, error_calls, input_tokens, output_tokens, cost_usd "
                     "FROM sessions") == [(sid, ["claude-sonnet-4-20250514"], 1, 6, 3, 6700, 270, pytest.approx(0.0123))]
    assert calls(db, sid) == [
        ("e1", "run", {"command": "pytest -q", "is_input": False, "blocking": False}, True, True, "exit_code"),
        ("e3", "read", {"path": "/workspace/calc.py", "start": 0, "end": -1, "view_range": None}, True, False, None),
        ("e4", "read", {"path": "/workspace/tests/test_math.py", "start": 0, "end": -1, "view_range": None}, True, False,
         None),
        ("e7", "invalid_tool_call", {}, True, True, "flag"),
        ("e8", "edit", {"path": "/workspace/calc.py", "command": "str_replace", "old_str": "return a/b",
                        "new_str": "return a / b if b else 0"}, True, True, "text"),
        ("e10", "finish", {"outputs": {}}, False, None, None),
    ]
    # results found by `cause` even when the two parallel reads are answered out of order
    assert query(db, "SELECT result_text FROM calls WHERE call_id = 'e3'") == [("def div(a, b):\n    return a / b\n",)]
    # the two parallel reads share one response: its usage counts once
    assert query(db, "SELECT turn_id, input_tokens, output_tokens, cost_usd FROM turns WHERE turn_id = 'resp-2'") == [
        ("resp-2", 1500, 80, 0.0)]
    # the first event file reads the folder; the others write nothing and are no error
    files = query(db, "SELECT sessions, status, errors FROM files ORDER BY path")
    assert len(files) == 12 and sum(f[0] for f in files) == 1 and all(f[1:] == ("ingested", 0) for f in files)
    # re-ingesting an unchanged folder reads nothing
    again = ingest_paths(db, FOLDER)
    assert again.files_ingested == 0 and again.files_unchanged == 12


def test_bad_values_are_recorded_and_the_rest_kept(tmp_path: Path, db: Path) -> None:
    events = orjson.loads((OH / "trajs_basic.json").read_bytes())
    events.insert(1, "not an event")
    events.insert(2, {"id": 99, "source": "agent", "action": ["run"], "args": {}})
    events.insert(3, {"id": 100, "source": "agent", "message": "?"})
    path = tmp_path / "traj.json"
    path.write_bytes(orjson.dumps(events, option=orjson.OPT_INDENT_2))
    ingest_paths(db, path)
    assert [r[0] for r in query(db, "SELECT reason FROM ingest_errors ORDER BY reason")] == [
        "history item 1 is not an object", "history item 2: `action` is not a string",
        "history item 3: neither an action nor an observation"]
    assert query(db, "SELECT calls, user_turns FROM sessions") == [(2, 1)]


def test_output_jsonl_lines_are_sessions_and_bad_lines_recorded(tmp_path: Path, db: Path) -> None:
    good = orjson.loads(RESOLVER.read_bytes().splitlines()[0])
    path = write_jsonl(tmp_path / "output.jsonl", [
        good | {"instance_id": "a"},
        good | {"instance_id": "b", "metrics": "n/a"},
        good | {"instance_id": "a"},
    ])
    with path.open("ab") as f:
        f.write(b'{"instance_id": "c", "history": [\n')
    ingest_paths(db, path)
    assert [r[0] for r in query(db, "SELECT session_id FROM sessions ORDER BY 1")] == ["a", "a:3", "b"]
    reasons = [r[0] for r in query(db, "SELECT reason FROM ingest_errors ORDER BY reason")]
    assert "`metrics` is not an object" in reasons
    assert any(r.startswith("duplicate instance id a") for r in reasons)
    assert len(reasons) == 3  # and the truncated last line


def test_incremental_reingest_of_a_changed_output(tmp_path: Path, db: Path) -> None:
    path = tmp_path / "output.jsonl"
    shutil.copy(RESOLVER, path)
    ingest_paths(db, path)
    lines = RESOLVER.read_bytes().splitlines()
    path.write_bytes(lines[0] + b"\n")
    s = ingest_paths(db, path)
    assert s.files_ingested == 1
    assert query(db, "SELECT session_id FROM sessions") == [("neubig/pr-viewer#5",)]


def test_agent_aliases() -> None:
    for alias in ("openhands", "OpenHands", "open-hands"):
        assert parse_agent(alias, agent_names()) == "openhands"
