"""mini-swe-agent trajectories: the call list equals the realdata-dev reference reader on real files, errors
(return codes, the 'EXACTLY ONE action' format error, timeouts), run usage and cost, the v2 tool-calling shape, bad
values, and that such a file is never taken for an OpenAI ``messages`` record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import FIXTURES
from helpers import ingest_paths, query
from test_ingest_swe_agent import reference_module, stored_calls

from analyzer.ingest.formats import agent_names
from analyzer.store.filters import parse_agent

MINI = FIXTURES / "mini_swe_agent"
RUN = "20251118_gemini-3-pro-74pct"
FILES = sorted(MINI.rglob("*.traj.json"))


def inst(name: str) -> Path:
    return MINI / RUN / "trajs" / name / f"{name}.traj.json"


def expected_error(call: dict[str, Any]) -> bool:
    """The reference decides errors by ``<returncode>`` only and leaves the rest undecided (None). The adapter also
    counts mini-swe-agent's format-error reply and its timeout notice as errors (they are: the action did not run
    or was killed); everything else without a return code (the final submission) is not an error."""
    if call["is_error"] is not None:
        return call["is_error"]
    text = call["result"]
    return "Please always provide EXACTLY ONE action" in text[:200] or text.lstrip().startswith(
        "The last command <command>"
    )


def test_fixture_set() -> None:
    assert len(FILES) == 5


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.name)
def test_calls_equal_reference_reader(path: Path, db: Path) -> None:
    # Whole results, to compare them with the reference's; result_chars is their whole length either way.
    ref = reference_module().read(str(path), "mini_swe_agent")["calls"]
    ingest_paths(db, path, full_results=True)
    assert query(db, "SELECT format FROM sessions") == [("mini_swe_agent",)]
    assert stored_calls(db) == [(c["tool"], c["args"], c["result"], expected_error(c)) for c in ref]
    assert [n for (n,) in query(db, "SELECT result_chars FROM calls ORDER BY seq")] == [len(c["result"]) for c in ref]
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_format_errors_and_timeouts_are_errors(db: Path) -> None:
    ingest_paths(db, inst("django__django-14155"), inst("pylint-dev__pylint-6528"))
    kinds = dict(query(db, "SELECT error_kind, count(*) FROM calls WHERE is_error GROUP BY 1"))
    assert set(kinds) == {"exit_code", "format", "timeout"}
    fmt = query(db, "SELECT args, result_text FROM calls WHERE error_kind = 'format' ORDER BY session_id, seq LIMIT 1")
    assert fmt[0][1].startswith("Please always provide EXACTLY ONE action in triple backticks, found")
    assert "<returncode>" not in fmt[0][1]


def test_run_usage_cost_outcome_and_ids(db: Path) -> None:
    path = inst("pydata__xarray-4629")
    doc = orjson.loads(path.read_bytes())
    ingest_paths(db, path)
    row = query(db, "SELECT session_id, agent_version, models, cost_usd, total_tokens, user_turns FROM sessions")
    assert row == [
        (
            f"{RUN}/pydata__xarray-4629",
            doc["info"]["mini_version"],
            [doc["info"]["config"]["model"]["model_name"]],
            pytest.approx(doc["info"]["model_stats"]["instance_cost"]),
            0,
            1,
        )
    ]
    info = query(db, "SELECT text, cost_source FROM turns WHERE turn_id = 'info'")
    assert info == [(f"exit_status: Submitted; submission: {len(doc['info']['submission'])} chars", "transcript")]
    # the task is the one user prompt; the observations are results, not prompts
    assert query(db, "SELECT count(*) FROM turns WHERE role = 'user'") == [(1,)]


def _mini(messages: list[Any], **info: Any) -> dict[str, Any]:
    return {
        "info": {
            "exit_status": "Submitted",
            "submission": "",
            "mini_version": "1.15.0",
            "model_stats": {"instance_cost": 0.5, "api_calls": 4},
            **info,
        },
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "repo__repo-7",
    }


V1 = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Fix the bug."},
    {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls\n```"},
    {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
    {"role": "assistant", "content": "THOUGHT: no action here"},
    {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 0 actions."},
    {"role": "assistant", "content": "```bash\npython a.py\n```\nand\n```bash\nls\n```"},
    {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."},
    {"role": "assistant", "content": [{"type": "text", "text": "```bash\npython a.py\n```"}]},
    {"role": "user", "content": [{"type": "text", "text": "<returncode>1</returncode>\n<output>boom</output>"}]},
]


@pytest.mark.parametrize("layout", ["single_line", "pretty"])
def test_not_taken_for_openai_messages(tmp_path: Path, db: Path, layout: str) -> None:
    opt = orjson.OPT_INDENT_2 if layout == "pretty" else 0
    path = tmp_path / "run" / "x.jsonl"
    path.parent.mkdir()
    path.write_bytes(orjson.dumps(_mini(V1), option=opt))
    ingest_paths(db, path)
    assert query(db, "SELECT format, session_id FROM sessions") == [("mini_swe_agent", "run/repo__repo-7")]
    calls = query(db, "SELECT tool, args, result_text, is_error, error_kind FROM calls ORDER BY seq")
    assert [(t, orjson.loads(a), r, e, k) for t, a, r, e, k in calls] == [
        ("bash", {"command": "ls"}, "<returncode>0</returncode>\n<output>\na.py\n</output>", False, None),
        (
            "bash",
            {"command": "python a.py"},
            "Please always provide EXACTLY ONE action in triple backticks, found 2 actions.",
            True,
            "format",
        ),
        ("bash", {"command": "python a.py"}, "<returncode>1</returncode>\n<output>boom</output>", True, "exit_code"),
    ]
    # the message without a block is text; the reply to it is neither a result nor a prompt
    assert query(db, "SELECT count(*) FROM turns WHERE role = 'user'") == [(1,)]
    assert query(db, "SELECT count(*) FROM turns WHERE text = 'THOUGHT: no action here'") == [(1,)]
    assert query(db, "SELECT cost_usd FROM sessions") == [(0.5,)]


def test_v2_tool_calls(tmp_path: Path, db: Path) -> None:
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Fix the bug."},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "false"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "<returncode>1</returncode>\n<output></output>"},
        {"role": "tool", "tool_call_id": "call_1", "content": "<returncode>0</returncode>\n<output>a.py</output>"},
        {"role": "tool", "tool_call_id": "call_9", "content": "stray"},
    ]
    path = tmp_path / "v2.traj.json"
    path.write_bytes(orjson.dumps(_mini(msgs) | {"trajectory_format": "mini-swe-agent-1.1"}))
    ingest_paths(db, path)
    ref = reference_module().read(str(path), "mini_swe_agent")["calls"]
    assert stored_calls(db) == [(c["tool"], c["args"], c["result"], c["is_error"]) for c in ref]
    assert query(db, "SELECT call_id, is_error FROM calls ORDER BY seq") == [("call_1", False), ("call_2", True)]
    assert [r[0] for r in query(db, "SELECT reason FROM ingest_errors")] == [
        "message 5: tool result for a call not in this trajectory (call_9)"
    ]


def test_bad_values_are_recorded_and_the_rest_kept(tmp_path: Path, db: Path) -> None:
    msgs = V1[:4] + ["not a message", 42] + V1[8:]
    path = tmp_path / "bad.traj.json"
    path.write_bytes(orjson.dumps(_mini(msgs, model_stats={"instance_cost": "free", "api_calls": 2})))
    ingest_paths(db, path)
    assert [r[0] for r in query(db, "SELECT reason FROM ingest_errors ORDER BY reason")] == [
        "info.model_stats.instance_cost is not a non-negative number",
        "message 4 is not an object",
        "message 5 is not an object",
    ]
    assert query(db, "SELECT count(*), count(*) FILTER (WHERE is_error) FROM calls") == [(2, 1)]
    assert query(db, "SELECT cost_usd FROM sessions") == [(0.0,)]


def test_agent_aliases() -> None:
    for alias in ("mini_swe_agent", "mini-swe-agent", "mini", "MINI"):
        assert parse_agent(alias, agent_names()) == "mini_swe_agent"
