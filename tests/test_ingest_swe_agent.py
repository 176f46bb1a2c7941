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
    """Order, count, result text and error flag: exactly what ``transcripts.read_swe_agent`` lists (the counting rule
    the labels use). The arguments are the action as the model emitted it (tests/test_roundtrip.py checks them), so
    they are not the reference's: it strips the action and reads ``str_replace_editor`` flags loosely; and where the
    history keeps the model's own tool call (a function-calling run), the tool is that call's."""
    ref = reference_module().read(str(path), "swe_agent")["calls"]
    assert ref, "every fixture with a trajectory has calls"
    ingest_paths(db, path)
    assert query(db, "SELECT format FROM sessions") == [("swe_agent",)]
    stored = stored_calls(db)
    assert [(r, e) for _, _, r, e in stored] == [(c["result"], c["is_error"]) for c in ref]
    function_calling = any(h.get("tool_calls") for h in orjson.loads(path.read_bytes()).get("history", []))
    tools = [t for t, _, _, _ in stored]
    if function_calling:
        assert tools == ["find_file", "open", "edit", "bash", "submit"]
    else:
        assert tools == [c["tool"] for c in ref]
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
        ("bash", {"command": "ls -la\n"}, False, None),
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


def _run(tmp_path: Path, db: Path, trajectory: list[dict[str, Any]], history: list[Any] | None = None) -> list:
    doc = {"trajectory": trajectory, "history": history or [{"role": "user", "content": "Fix it"}], "info": {}}
    path = tmp_path / "run" / "repo__repo-2.traj"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(orjson.dumps(doc))
    ingest_paths(db, path)
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]
    return [(t, orjson.loads(a)) for t, a in query(db, "SELECT tool, args FROM calls ORDER BY seq")]


def test_action_arguments_as_the_model_wrote_them(tmp_path: Path, db: Path) -> None:
    """Issue 30, class 8: ``submit <arg>`` keeps its argument, a bash action is kept byte for byte (its trailing
    newline too), ``str_replace_editor`` flags are read one token each with their types, a step without an action is
    no call."""
    st = '{"open_file": "n/a", "working_dir": "/repo"}'
    steps = [
        "ls -la\n",
        "str_replace_editor view /repo/a.py  --view_range 200 250",
        "str_replace_editor str_replace /repo/a.py   --old_str 'x = 1' --new_str --verbose",
        "str_replace_editor insert /repo/a.py --new_str 'y' --insert_line 7",
        "str_replace_editor create /repo/b.py --file_text hello world",
        "str_replace_editor view '/repo/unbalanced",
        "   ",
        "submit -f\n",
        "submit 'flag{x y}'\n",
        "submit\n",
        "exit_cost",
    ]
    calls = _run(tmp_path, db, [{"action": a, "observation": "ok", "thought": "t", "state": st} for a in steps])
    assert calls == [
        ("bash", {"command": "ls -la\n"}),
        ("str_replace_editor", {"command": "view", "path": "/repo/a.py", "view_range": [200, 250]}),
        (
            "str_replace_editor",
            {"command": "str_replace", "path": "/repo/a.py", "old_str": "x = 1", "new_str": "--verbose"},
        ),
        ("str_replace_editor", {"command": "insert", "path": "/repo/a.py", "new_str": "y", "insert_line": 7}),
        ("str_replace_editor", {"command": "create", "path": "/repo/b.py", "file_text": ["hello", "world"]}),
        ("str_replace_editor", {"raw": "str_replace_editor view '/repo/unbalanced"}),
        ("submit", {"args": "-f"}),
        ("submit", {"args": "'flag{x y}'"}),
        ("submit", {}),
        ("exit_cost", {}),
    ]


def test_window_commands_carry_the_open_file(tmp_path: Path, db: Path) -> None:
    """``goto``/``scroll_*``/``edit``/``search_file`` without a file act on the open file, which only the step's
    state names (a JSON string in 0.x, an object in 1.x): the same ``goto 72`` in two files is two objects."""

    def step(action: str, open_file: str) -> dict[str, Any]:
        return {
            "action": action,
            "observation": "ok",
            "thought": "t",
            "state": orjson.dumps({"open_file": open_file}).decode(),
        }

    calls = _run(
        tmp_path,
        db,
        [
            step("open a.py\n", "/repo/a.py"),
            step("goto 72\n", "/repo/a.py"),
            step("open b.py\n", "/repo/b.py"),
            step("goto 72\n", "/repo/b.py"),
            step("scroll_down\n", "/repo/b.py"),
            step("edit 4:4\n    return 1\nend_of_edit\n", "/repo/b.py"),
            step('search_file "def run("\n', "/repo/b.py"),
            step("search_file run c.py\n", "/repo/b.py"),
            step("goto 3\n", "n/a"),
            {"action": "goto 9", "observation": "ok", "state": {"open_file": "/repo/c.py", "working_dir": "/repo"}},
        ],
    )
    assert calls == [
        ("bash", {"command": "open a.py\n"}),
        ("bash", {"command": "goto 72\n", "open_file": "/repo/a.py"}),
        ("bash", {"command": "open b.py\n"}),
        ("bash", {"command": "goto 72\n", "open_file": "/repo/b.py"}),
        ("bash", {"command": "scroll_down\n", "open_file": "/repo/b.py"}),
        ("bash", {"command": "edit 4:4\n    return 1\nend_of_edit\n", "open_file": "/repo/b.py"}),
        ("bash", {"command": 'search_file "def run("\n', "open_file": "/repo/b.py"}),
        ("bash", {"command": "search_file run c.py\n"}),
        ("bash", {"command": "goto 3\n"}),
        ("bash", {"command": "goto 9", "open_file": "/repo/c.py"}),
    ]
    keys = query(db, "SELECT call_key FROM calls WHERE args LIKE '%goto 72%' ORDER BY seq")
    assert len({k for (k,) in keys}) == 2


def test_the_models_own_tool_call_wins_over_the_action_string(tmp_path: Path, db: Path) -> None:
    """In a function-calling run the history keeps the call as the model sent it: its name and JSON arguments (a
    ``view_range`` list, a boolean) are the stored call, matched to the step by its action; a step the history lacks
    (the last one) is read from its action string."""

    def said(action: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        call = {
            "id": f"call_{name}",
            "type": "function",
            "function": {"name": name, "arguments": orjson.dumps(args).decode()},
        }
        return {"role": "assistant", "content": "", "action": action, "tool_calls": [call]}

    view = "str_replace_editor view /repo/a.py  --view_range 3 9"
    edit = "edit 'a' 'b' False"
    history = [
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": "demo", "action": "ls", "is_demo": True, "tool_calls": [{"function": {}}]},
        {"role": "user", "content": "Fix it"},
        said(view, "str_replace_editor", {"command": "view", "path": "/repo/a.py", "view_range": [3, 9]}),
        {"role": "user", "content": "OBSERVATION"},
        said(edit, "edit", {"search": "a", "replace": "b", "replace-all": False}),
        {"role": "user", "content": "OBSERVATION"},
    ]
    state = {"open_file": "/repo/a.py", "working_dir": "/repo"}
    steps = [{"action": a, "observation": "ok", "state": state} for a in (view, edit, "submit")]
    assert _run(tmp_path, db, steps, history) == [
        ("str_replace_editor", {"command": "view", "path": "/repo/a.py", "view_range": [3, 9]}),
        ("edit", {"search": "a", "replace": "b", "replace-all": False, "open_file": "/repo/a.py"}),
        ("submit", {}),
    ]
