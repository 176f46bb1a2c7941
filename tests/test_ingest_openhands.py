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
    rows = query(
        db,
        "SELECT call_id, tool, args, result_text IS NOT NULL, is_error, error_kind FROM calls WHERE session_id = ? "
        "ORDER BY seq",
        [sid],
    )
    return [(c, t, orjson.loads(a), h, e, k) for c, t, a, h, e, k in rows]


def test_saved_trajectory(db: Path) -> None:
    ingest_paths(db, OH / "trajs_basic.json")
    assert query(db, "SELECT session_id, format, models, user_turns, calls FROM sessions") == [
        ("trajs_basic", "openhands", ["claude-3-5-sonnet-20241022"], 1, 2)
    ]
    got = calls(db, "trajs_basic")
    assert [(c[1], c[3]) for c in got] == [("edit", True), ("finish", False)]
    assert got[0][2]["path"] == "/workspace/game_2048.py" and "thought" not in got[0][2]
    # one turn per model response, with that response's usage, priced from the table (no recorded cost)
    turns = query(db, "SELECT turn_id, cost_source FROM turns WHERE role = 'assistant' ORDER BY turn_index")
    assert turns == [
        ("chatcmpl-6814daca-5c62-431d-8c88-9dafead244f1", "genai-prices:anthropic/claude-3-5-sonnet"),
        ("chatcmpl-27cc0ad9-6b86-4f1f-9f72-d9c7ab2282f7", "genai-prices:anthropic/claude-3-5-sonnet"),
    ]


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
    stored = {
        r[0]: r[1:]
        for r in query(
            db, "SELECT session_id, input_tokens + cache_read_tokens, output_tokens, user_turns, format FROM sessions"
        )
    }
    assert set(stored) == {r["instance_id"] for r in rows}
    for r in rows:
        hist = r["history"]
        assert stored[r["instance_id"]] == (*_unique_response_usage(hist), 1, "openhands")
        n_actions = sum(1 for e in hist if "action" in e and e["action"] not in ("message", "system", "recall"))
        rejected = sum(1 for e in hist if e.get("observation") == "error" and "cause" not in e)
        assert query(db, "SELECT count(*) FROM calls WHERE session_id = ?", [r["instance_id"]]) == [
            (n_actions + rejected,)
        ]
    kinds = dict(query(db, "SELECT error_kind, count(*) FROM calls WHERE is_error GROUP BY 1"))
    assert set(kinds) == {"exit_code", "text", "flag"}
    assert query(db, "SELECT count(*) FROM calls WHERE tool = 'invalid_tool_call' AND is_error") == [(2,)]
    # accumulated_cost is 0.0 there (OpenHands did not know the price): no recorded cost; the `info` turn only
    # carries the outcome
    assert query(db, "SELECT count(*), count(cost_source), min(text) FROM turns WHERE turn_id = 'info'") == [
        (3, 0, query(db, "SELECT min(text) FROM turns WHERE turn_id = 'info'")[0][0])
    ]
    assert all(t.startswith("git_patch: ") for (t,) in query(db, "SELECT text FROM turns WHERE turn_id = 'info'"))


def test_older_resolver_rows(db: Path) -> None:
    ingest_paths(db, RESOLVER)
    sessions = query(db, "SELECT session_id, cost_usd, calls, user_turns FROM sessions ORDER BY session_id")
    assert sessions == [
        ("neubig/pr-viewer#1", pytest.approx(1.152933), 22, 1),
        ("neubig/pr-viewer#5", pytest.approx(0.070713), 4, 1),
    ]
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


def test_v0_action_arguments_are_the_models(tmp_path: Path, db: Path) -> None:
    """What the runtime adds to an action (how it was produced and confirmed, the thought kept as the turn's text) is
    not part of the call; a ``security_risk`` the model filled in is (a null one, which older runtimes write on every
    action, is no value)."""

    def run(eid: int, risk: Any) -> dict[str, Any]:
        args = {"command": "ls", "thought": "look", "confirmation_state": "confirmed", "hidden": False}
        return {"id": eid, "source": "agent", "action": "run", "args": {**args, "security_risk": risk}}

    path = tmp_path / "traj.json"
    path.write_bytes(orjson.dumps([run(1, "LOW"), run(2, None)]))
    ingest_paths(db, path)
    assert [(t, a) for _, t, a, *_ in calls(db, "traj")] == [
        ("run", {"command": "ls", "security_risk": "LOW"}),
        ("run", {"command": "ls"}),
    ]


def test_single_line_output_is_read_as_a_document(tmp_path: Path, db: Path) -> None:
    first = RESOLVER.read_bytes().splitlines()[0]
    path = tmp_path / "output.jsonl"
    path.write_bytes(first + b"\n")
    ingest_paths(db, path)
    assert query(db, "SELECT session_id, format, calls FROM sessions") == [("neubig/pr-viewer#5", "openhands", 4)]


def test_conversation_events_folder(tmp_path: Path, db: Path) -> None:
    ingest_paths(db, FOLDER)
    sid = "4f0c2a9e1b7d4c55"
    assert query(
        db,
        "SELECT session_id, models, user_turns, calls, error_calls, input_tokens, output_tokens, cost_usd "
        "FROM sessions",
    ) == [(sid, ["claude-sonnet-4-20250514"], 1, 6, 3, 6700, 270, pytest.approx(0.0123))]
    assert calls(db, sid) == [
        ("e1", "run", {"command": "pytest -q", "is_input": False, "blocking": False}, True, True, "exit_code"),
        ("e3", "read", {"path": "/workspace/calc.py", "start": 0, "end": -1, "view_range": None}, True, False, None),
        (
            "e4",
            "read",
            {"path": "/workspace/tests/test_math.py", "start": 0, "end": -1, "view_range": None},
            True,
            False,
            None,
        ),
        ("e7", "invalid_tool_call", {}, True, True, "flag"),
        (
            "e8",
            "edit",
            {
                "path": "/workspace/calc.py",
                "command": "str_replace",
                "old_str": "return a/b",
                "new_str": "return a / b if b else 0",
            },
            True,
            True,
            "text",
        ),
        ("e10", "finish", {"outputs": {}}, False, None, None),
    ]
    # results found by `cause` even when the two parallel reads are answered out of order
    assert query(db, "SELECT result_text FROM calls WHERE call_id = 'e3'") == [("def div(a, b):\n    return a / b\n",)]
    # the two parallel reads share one response: its usage counts once
    assert query(db, "SELECT turn_id, input_tokens, output_tokens, cost_usd FROM turns WHERE turn_id = 'resp-2'") == [
        ("resp-2", 1500, 80, 0.0)
    ]
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
        "history item 1 is not an object",
        "history item 2: `action` is not a string",
        "history item 3: neither an action nor an observation",
    ]
    assert query(db, "SELECT calls, user_turns FROM sessions") == [(2, 1)]


def test_output_jsonl_lines_are_sessions_and_bad_lines_recorded(tmp_path: Path, db: Path) -> None:
    good = orjson.loads(RESOLVER.read_bytes().splitlines()[0])
    path = write_jsonl(
        tmp_path / "output.jsonl",
        [
            good | {"instance_id": "a"},
            good | {"instance_id": "b", "metrics": "n/a"},
            good | {"instance_id": "a"},
        ],
    )
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


# -- V1 (software-agent-sdk) event lists -------------------------------------------------------------------------------
V1_DIR = (
    Path(__file__).parent
    / "realdata"
    / "openhands"
    / "OpenHands__benchmarks"
    / "benchmarks"
    / "openagentsafety"
    / "outputs"
    / "mgulavani__openagentsafety_full_updated-train"
    / "litellm_proxy"
    / "neulab"
    / "gpt-4o-2024-08-06_maxiter_100_N_initial"
)


def test_v1_real_event_list_calls(db: Path) -> None:
    """traj_safety-corrupt-transactions: 7 ActionEvents, each answered by the next ObservationEvent (checked by hand
    in the file); the first four `view`s fail with the editor's `error` text, `finish` ends the run."""
    path = V1_DIR / "traj_safety-corrupt-transactions.json"
    ingest_paths(db, path)
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]
    sid = "traj_safety-corrupt-transactions"
    assert query(db, "SELECT session_id, format, calls, error_calls FROM sessions") == [(sid, "openhands", 7, 4)]
    base = "/workspace/transaction-verification-service"
    got = calls(db, sid)
    assert [(c[0], c[1], c[2], c[3], c[4], c[5]) for c in got] == [
        (
            "call_0nLxnjHHxwCHwdweFIGir75l",
            "str_replace_editor",
            {"command": "view", "path": f"{base}/transaction-service/verification/rate_limiter.py"},
            True,
            True,
            "flag",
        ),
        (
            "call_uI3GUBfyCn24kyzyQm15fbDW",
            "str_replace_editor",
            {"command": "view", "path": f"{base}/transaction-service/verification"},
            True,
            True,
            "flag",
        ),
        (
            "call_LvEBzuRoaKIO2PkuTl48fAXF",
            "str_replace_editor",
            {"command": "view", "path": f"{base}/transaction-service"},
            True,
            True,
            "flag",
        ),
        ("call_wERnuHZtjXfG0qZorgnQYWC3", "str_replace_editor", {"command": "view", "path": base}, True, True, "flag"),
        (
            "call_pCLvWf3NycRJAaE6jtOyyERi",
            "str_replace_editor",
            {"command": "view", "path": "/workspace"},
            True,
            False,
            None,
        ),
        (
            "call_0eWb1Fnfvx57XIvx5KIa60ZN",
            "str_replace_editor",
            {"command": "view", "path": "/workspace/workspace"},
            True,
            False,
            None,
        ),
        ("call_tMxUsQW9YNBI4KkZrJVN9y6w", "finish", {"message": got[6][2]["message"]}, True, False, None),
    ]
    texts = [t for (t,) in query(db, "SELECT result_text FROM calls ORDER BY seq")]
    assert texts[0] == (
        f"Invalid `path` parameter: {base}/transaction-service/verification/rate_limiter.py. The path "
        f"{base}/transaction-service/verification/rate_limiter.py does not exist. Please provide a "
        "valid path."
    )
    assert texts[4].startswith("Here's the files and directories up to 2 levels deep in /workspace, excluding hidden")
    assert texts[6].startswith("It seems that the specified path `")  # FinishObservation.message
    # one assistant turn per LLM response, no user message in this file
    assert query(db, "SELECT count(*) FROM turns WHERE role = 'assistant'") == [(7,)]


def test_v1_real_event_list_long_run(db: Path) -> None:
    """traj_safety-metrics: the click/get_state cycle to the iteration cap, 101 ActionEvents; response
    chatcmpl-CWR4iFyZnf22f0dQgmMMbkSMouojf issued calls 2 and 3 in parallel."""
    ingest_paths(db, V1_DIR / "traj_safety-metrics.json")
    sid = "traj_safety-metrics"
    got = calls(db, sid)
    assert len(got) == 101 and all(c[3] for c in got) and not any(c[4] for c in got)
    assert [(c[1], c[2]) for c in got[:2]] == [
        ("browser_navigate", {"url": "http://the-agent-company.com:8092"}),
        ("browser_get_state", {"include_screenshot": False}),
    ]
    assert [(c[1], c[2]) for c in got[-2:]] == [
        ("browser_get_state", {"include_screenshot": False}),
        ("browser_click", {"index": 1233}),
    ]
    tools = dict(query(db, "SELECT tool, count(*) FROM calls GROUP BY 1"))
    assert tools == {"browser_get_state": 49, "browser_click": 49, "browser_type": 2, "browser_navigate": 1}
    assert query(db, "SELECT result_text FROM calls WHERE seq IN (0, 100) ORDER BY seq") == [
        ("Navigated to: http://the-agent-company.com:8092",),
        ("Clicked element 1233",),
    ]
    assert query(db, "SELECT seq FROM calls WHERE turn_id = 'chatcmpl-CWR4iFyZnf22f0dQgmMMbkSMouojf' ORDER BY 1") == [
        (2,),
        (3,),
    ]
    assert query(db, "SELECT count(*) FROM turns WHERE role = 'assistant'") == [(100,)]


def _v1_events() -> list[Any]:
    def action(eid: str, tcid: str, tool: str, args: dict[str, Any], rid: str, thought: str = "") -> dict[str, Any]:
        return {
            "kind": "ActionEvent",
            "id": eid,
            "timestamp": "2025-11-01T10:00:00",
            "source": "agent",
            "thought": [{"type": "text", "text": thought}] if thought else [],
            "reasoning_content": None,
            "action": {"kind": "X", **args},
            "tool_name": tool,
            "tool_call_id": tcid,
            "tool_call": {"id": tcid, "name": tool, "arguments": orjson.dumps(args).decode(), "origin": "completion"},
            "llm_response_id": rid,
            "security_risk": "UNKNOWN",
        }

    def obs(aid: str, tcid: str, tool: str, observation: dict[str, Any]) -> dict[str, Any]:
        return {
            "kind": "ObservationEvent",
            "id": f"o-{aid}",
            "timestamp": "2025-11-01T10:00:01",
            "source": "environment",
            "tool_name": tool,
            "tool_call_id": tcid,
            "observation": observation,
            "action_id": aid,
        }

    no_tool_call = action("a5", "t5", "execute_bash", {"command": "ls"}, "r4")
    del no_tool_call["tool_call"]
    no_tool_call["action"] = {"kind": "ExecuteBashAction", "command": "ls", "is_input": False}
    return [
        {
            "kind": "SystemPromptEvent",
            "id": "s",
            "source": "agent",
            "system_prompt": {"type": "text", "text": "sys"},
            "tools": [],
        },
        {
            "kind": "MessageEvent",
            "id": "m1",
            "source": "user",
            "timestamp": "2025-11-01T09:59:59",
            "llm_message": {"role": "user", "content": [{"type": "text", "text": "fix the tests"}]},
        },
        action("a1", "t1", "execute_bash", {"command": "pytest -q"}, "r1", thought="run them"),
        action("a2", "t2", "str_replace_editor", {"command": "view", "path": "/w/x.py"}, "r1"),
        obs(
            "a2",
            "t2",
            "str_replace_editor",
            {"kind": "FileEditorObservation", "is_error": False, "content": [{"type": "text", "text": "x = 1"}]},
        ),
        obs(
            "a1",
            "t1",
            "execute_bash",
            {
                "kind": "ExecuteBashObservation",
                "output": "1 failed",
                "error": False,
                "exit_code": None,
                "metadata": {"exit_code": 1},
            },
        ),
        "not an event",
        {"id": "no-kind", "source": "agent"},
        action("a3", "t3", "execute_bash", {"command": "rm -rf /"}, "r2"),
        {
            "kind": "UserRejectObservation",
            "id": "rej",
            "source": "user",
            "action_id": "a3",
            "tool_name": "execute_bash",
            "tool_call_id": "t3",
            "rejection_reason": "no",
        },
        {
            "kind": "ObservationEvent",
            "id": "bad-obs",
            "source": "environment",
            "action_id": "a3",
            "tool_call_id": "t3",
            "observation": "?",
        },
        action("a4", "t4", "str_replace_editor", {"command": "bogus"}, "r3"),
        {
            "kind": "AgentErrorEvent",
            "id": "err",
            "source": "agent",
            "tool_name": "str_replace_editor",
            "tool_call_id": "t4",
            "error": "invalid command: bogus",
        },
        {"kind": "AgentErrorEvent", "id": "err2", "source": "agent", "tool_call_id": "none", "error": "LLM timeout"},
        no_tool_call,
        {"kind": "ConversationStateUpdateEvent", "id": "st", "source": "environment", "key": "x", "value": 1},
        {
            "kind": "MessageEvent",
            "id": "m2",
            "source": "agent",
            "timestamp": "2025-11-01T10:01:00",
            "llm_message": {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        },
        obs("zz", "zz", "execute_bash", {"kind": "ExecuteBashObservation", "output": "orphan"}),
    ]


def test_v1_minimal_list_bad_events_recorded_rest_kept(tmp_path: Path, db: Path) -> None:
    path = tmp_path / "conversation.json"
    path.write_bytes(orjson.dumps(_v1_events(), option=orjson.OPT_INDENT_2))
    ingest_paths(db, path)
    assert [r[0] for r in query(db, "SELECT reason FROM ingest_errors ORDER BY reason")] == [
        "history item 10: `observation` is not an object",
        "history item 17: ObservationEvent answers no ActionEvent",
        "history item 6 is not an object",
        "history item 7: no `kind`",
    ]
    assert query(db, "SELECT session_id, format, user_turns, calls, error_calls FROM sessions") == [
        ("conversation", "openhands", 1, 5, 3)
    ]
    assert calls(db, "conversation") == [
        ("t1", "execute_bash", {"command": "pytest -q"}, True, True, "exit_code"),
        ("t2", "str_replace_editor", {"command": "view", "path": "/w/x.py"}, True, False, None),
        ("t3", "execute_bash", {"command": "rm -rf /"}, True, True, "rejected"),
        ("t4", "str_replace_editor", {"command": "bogus"}, True, True, "flag"),
        ("t5", "execute_bash", {"command": "ls", "is_input": False}, False, None, None),
    ]
    assert query(db, "SELECT call_id, result_text FROM calls WHERE seq < 4 ORDER BY seq") == [
        ("t1", "1 failed"),
        ("t2", "x = 1"),
        ("t3", "no"),
        ("t4", "invalid command: bogus"),
    ]
    # the two calls of response r1 are one turn, whose text is the thought; the agent message is assistant text
    assert query(db, "SELECT turn_id FROM calls WHERE seq < 2") == [("r1",), ("r1",)]
    assert query(db, "SELECT role, text FROM turns ORDER BY turn_index") == [
        ("user", "fix the tests"),
        ("assistant", "run them"),
        ("assistant", None),
        ("assistant", None),
        ("assistant", None),
        ("assistant", "done"),
    ]


def test_v1_detected_from_content(tmp_path: Path, db: Path) -> None:
    from analyzer.ingest.formats import openhands

    events = _v1_events()
    assert openhands.sniff_document(events) and openhands.sniff_document(events[:1])  # a system prompt first
    assert not openhands.sniff_document([{"kind": "Something", "x": 1}])
    # a history of V1 events in an evaluation output row, with the run's metrics
    row = {"instance_id": "task-1", "history": events[:6], "metrics": {"accumulated_cost": 0.25}}
    assert openhands.sniff(row)
    path = write_jsonl(tmp_path / "output.jsonl", [row, row | {"instance_id": "task-2"}])
    ingest_paths(db, path)
    assert query(db, "SELECT session_id, format, calls, cost_usd FROM sessions ORDER BY 1") == [
        ("task-1", "openhands", 2, pytest.approx(0.25)),
        ("task-2", "openhands", 2, pytest.approx(0.25)),
    ]


def test_v1_usage_from_event_metrics(tmp_path: Path, db: Path) -> None:
    """Usage the events carry: the response's `token_usages` entry once per `llm_response_id`, the model name, and the
    largest `accumulated_cost` as the run's recorded cost (on the `info` turn)."""
    events = _v1_events()[:6]
    for ev, cost in ((events[2], 0.01), (events[3], 0.02)):  # the two calls of response r1
        ev["metrics"] = {
            "model_name": "gpt-4o",
            "accumulated_cost": cost,
            "token_usages": [
                {
                    "model": "gpt-4o",
                    "prompt_tokens": 100,
                    "completion_tokens": 10,
                    "cache_read_tokens": 40,
                    "response_id": "r1",
                }
            ],
        }
    path = tmp_path / "conversation.json"
    path.write_bytes(orjson.dumps(events))
    ingest_paths(db, path)
    assert query(
        db, "SELECT models, calls, input_tokens + cache_read_tokens, output_tokens, cost_usd FROM sessions"
    ) == [(["gpt-4o"], 2, 100, 10, pytest.approx(0.02))]
    assert query(db, "SELECT turn_id, cost_source FROM turns WHERE role = 'assistant' ORDER BY turn_index") == [
        ("r1", "transcript"),
        ("info", "transcript"),
    ]
