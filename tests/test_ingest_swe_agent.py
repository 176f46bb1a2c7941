"""SWE-agent ``.traj``: the call list equals the realdata-dev reference reader on every real file, usage and cost
from ``info.model_stats``, the outcome, history-only demonstrations, bad values inside the document, detection from
content, and the ``--agent`` filter through the CLI."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import FIXTURES
from helpers import ingest_paths, query

from analyzer.ingest.formats import agent_names
from analyzer.store.filters import SessionFilter, parse_agent

SWE = FIXTURES / "swe_agent"
GPT4 = SWE / "test_swe-agent__test-repo-i1.traj"
DEMO_HISTORY_ONLY = SWE / "demo_function_calling_simple.traj"
TRAJ_FILES = sorted(p for p in SWE.rglob("*.traj") if p != DEMO_HISTORY_ONLY)


def reference_module() -> Any:
    """``realdata-dev/tools/transcripts.py``, copied under tests/realdata/tools (MIT, see its sources)."""
    spec = importlib.util.spec_from_file_location(
        "realdata_transcripts", FIXTURES.parent / "realdata" / "tools" / "transcripts.py"
    )
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def stored_calls(db: Path) -> list[tuple[str, Any, str, bool]]:
    rows = query(db, "SELECT tool, args, result_text, is_error FROM calls ORDER BY session_id, seq")
    return [(t, orjson.loads(a), r, e) for t, a, r, e in rows]


def test_fixture_set_is_complete() -> None:
    assert len(TRAJ_FILES) == 10  # the 9 realdata-dev files and the gpt4 test run


@pytest.mark.parametrize("path", TRAJ_FILES, ids=lambda p: str(p.relative_to(SWE)))
def test_calls_equal_reference_reader(path: Path, db: Path) -> None:
    """Tool, arguments, result text, error flag and order: exactly what ``transcripts.read_swe_agent`` lists."""
    ref = reference_module().read(str(path), "swe_agent")["calls"]
    assert ref, "every fixture with a trajectory has calls"
    ingest_paths(db, path)
    assert query(db, "SELECT format FROM sessions") == [("swe_agent",)]
    expected = [(c["tool"], c["args"], c["result"], c["is_error"]) for c in ref]
    assert stored_calls(db) == expected
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_usage_cost_and_outcome_from_model_stats(db: Path) -> None:
    ingest_paths(db, GPT4)
    (sid,) = query(db, "SELECT session_id FROM sessions")[0]
    assert sid == "swe_agent/test_swe-agent__test-repo-i1"
    row = query(db, "SELECT input_tokens, output_tokens, total_tokens, cost_usd, calls, user_turns FROM sessions")
    assert row == [(52861, 326, 52861 + 326, pytest.approx(0.53839), 5, 1)]
    info = query(db, "SELECT role, text, cost_usd, cost_source, usage_counted FROM turns WHERE turn_id = 'info'")
    assert info == [
        ("assistant", "exit_status: submitted; submission: 301 chars", pytest.approx(0.53839), "transcript", True)
    ]
    # the one user turn is the issue, not the demonstration that precedes it in the history
    prompt = query(db, "SELECT text FROM turns WHERE role = 'user'")[0][0]
    assert prompt.startswith("We're currently solving the following issue")


def test_demonstrations_record_zero_usage_as_none(db: Path) -> None:
    path = SWE / "trajectories/demonstrations/ctf/pwn/warmup.traj"
    ingest_paths(db, path)
    assert query(db, "SELECT total_tokens, cost_usd FROM sessions") == [(0, 0.0)]
    assert query(db, "SELECT text, cost_source FROM turns WHERE turn_id = 'info'") == [
        (
            "exit_status: submitted; submission: "
            + str(len(orjson.loads(path.read_bytes())["info"]["submission"]))
            + " chars",
            None,
        )
    ]


def test_history_only_demo_reads_tool_calls(db: Path) -> None:
    """1.x function-calling demonstrations hold only ``history``; ``tool_calls`` there is a Python repr string."""
    ingest_paths(db, DEMO_HISTORY_ONLY)
    rows = query(db, "SELECT call_id, tool, args, left(result_text, 24), is_error FROM calls ORDER BY seq")
    assert [(c, t, orjson.loads(a), r, e) for c, t, a, r, e in rows] == [
        (
            "call_PbWErNIge3YTrli3fiVvmIid",
            "find_file",
            {"file_name": "missing_colon.py"},
            'Found 1 matches for "mis',
            False,
        ),
        (
            "call_upNLxh7rBcDH9w5XiNdoAS0I",
            "open",
            {"path": "tests/missing_colon.py"},
            "[File: tests/missing_col",
            False,
        ),
        (
            "call_hIiDKXAXZl4qMHV6RRXvil4u",
            "edit",
            {
                "search": "def division(a: float, b: float) -> float",
                "replace": "def division(a: float, b: float) -> float:",
            },
            "Text replaced. Please re",
            False,
        ),
        (
            "call_5O339epJ3rKjEal3Kuvpj9bM",
            "bash",
            {"command": "python tests/missing_colon.py"},
            "8.2\n(Open file: /SWE-age",
            False,
        ),
        ("call_6zuFhIfpOAi1jAiD2QHMmh6S", "submit", {}, "\r\ndiff --git a/tests/mis", False),
    ]
    assert query(db, "SELECT user_turns, turns FROM sessions") == [(1, 6)]
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_same_instance_in_two_runs_is_two_sessions(db: Path) -> None:
    demos = SWE / "trajectories/demonstrations"
    ingest_paths(db, demos)
    ids = [r[0] for r in query(db, "SELECT session_id FROM sessions WHERE session_id LIKE '%marshmallow%' ORDER BY 1")]
    assert ids == [
        "replay__marshmallow-code__marshmallow-1867__defa/marshmallow-code__marshmallow-1867",
        "replay__marshmallow-code__marshmallow-1867__xml/marshmallow-code__marshmallow-1867",
    ]
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]


def _doc(**over: Any) -> dict[str, Any]:
    step = {
        "action": "ls -la\n",
        "observation": "total 0\n",
        "thought": "Look around.",
        "response": "Look around.",
        "state": "{}",
    }
    doc = {
        "environment": "swe_main",
        "history": [{"role": "user", "content": "Fix it", "agent": "primary"}],
        "trajectory": [
            step,
            "not a step",
            {"action": 5, "observation": "x"},
            {"action": "cat nope.py", "observation": "cat: nope.py: No such file or directory", "thought": "Read it."},
            {"action": "python x.py", "observation": "Traceback (most recent call last):\n  File", "thought": ""},
            {"action": "  ", "observation": "", "thought": "only a thought"},
            {"action": "submit", "observation": {"diff": "…"}, "thought": "Done."},
        ],
        "info": {
            "exit_status": "submitted",
            "submission": "diff",
            "model_stats": {"instance_cost": 0.25, "tokens_sent": "lots", "tokens_received": 40, "api_calls": 6},
        },
    }
    doc.update(over)
    return doc


def test_bad_values_are_recorded_and_the_rest_kept(tmp_path: Path, db: Path) -> None:
    path = tmp_path / "run1" / "repo__repo-1.traj"
    path.parent.mkdir()
    path.write_bytes(orjson.dumps(_doc(), option=orjson.OPT_INDENT_2))
    ingest_paths(db, path)
    errors = [r[0] for r in query(db, "SELECT reason FROM ingest_errors ORDER BY reason")]
    assert errors == [
        "info.model_stats.tokens_sent is not a non-negative number",
        "trajectory step 1 is not an object",
        "trajectory step 2: `action` is not a string",
        "trajectory step 6: `observation` is not a string; kept as text",
    ]
    calls = query(db, "SELECT tool, args, is_error, error_kind FROM calls ORDER BY seq")
    assert [(t, orjson.loads(a), e, k) for t, a, e, k in calls] == [
        ("bash", {"command": "ls -la"}, False, None),
        ("bash", {"command": "cat nope.py"}, False, None),  # "cat: …" is not one of SWE-agent's error prefixes
        ("bash", {"command": "python x.py"}, True, "text"),
        ("submit", {}, False, None),
    ]
    assert query(db, "SELECT session_id, input_tokens, output_tokens, cost_usd, calls, error_calls FROM sessions") == [
        ("run1/repo__repo-1", 0, 40, 0.25, 4, 1)
    ]
    assert query(db, "SELECT files.format, files.errors FROM files") == [("swe_agent", 4)]


@pytest.mark.parametrize("layout", ["single_line", "pretty"])
def test_detected_from_content_not_name(tmp_path: Path, db: Path, layout: str) -> None:
    doc = _doc(trajectory=[{"action": "ls", "observation": "a.py", "thought": "t"}])
    opt = orjson.OPT_INDENT_2 if layout == "pretty" else 0
    path = tmp_path / "whatever.jsonl"
    path.write_bytes(orjson.dumps(doc, option=opt) + b"\n")
    ingest_paths(db, path)
    assert query(db, "SELECT format, calls FROM sessions") == [("swe_agent", 1)]


def test_agent_filter_and_aliases() -> None:
    for alias in ("swe_agent", "swe-agent", "SWE-Agent", "sweagent"):
        assert parse_agent(alias, agent_names()) == "swe_agent"
    assert SessionFilter.parse(agent="swe-agent", agents=agent_names()).where() == ("s.format = ?", ["swe_agent"])


def test_cli_ingest_and_sessions_agent_filter(tmp_path: Path) -> None:
    db = tmp_path / "cli.duckdb"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.traj").write_bytes(GPT4.read_bytes())
    (corpus / "pi.jsonl").write_bytes(
        orjson.dumps({"type": "session", "version": 3, "id": "pi-1", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/x"})
        + b"\n"
    )
    run = [sys.executable, "-m", "analyzer.cli"]
    ing = subprocess.run([*run, "ingest", str(corpus), "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert ing.returncode == 0, ing.stderr
    out = subprocess.run(
        [*run, "sessions", "--db", str(db), "--agent", "swe-agent", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = orjson.loads(out.stdout)
    assert [r["session_id"] for r in rows] == ["corpus/a"]
    bad = subprocess.run(
        [*run, "sessions", "--db", str(db), "--agent", "swe-agnet"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode != 0 and "swe_agent" in (bad.stderr + bad.stdout)
