"""Codex rollouts: calls and their many output shapes, errors, prompts vs injected context, text stored twice, turn
grouping, and token counts that agree with ccusage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import ingest_paths, query, write_jsonl

CODEX = "codex"
SID = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


def ev(ts: str, type_: str, **payload: Any) -> dict[str, Any]:
    return {"timestamp": ts, "type": "event_msg", "payload": {"type": type_, **payload}}


def item(ts: str, type_: str, **payload: Any) -> dict[str, Any]:
    return {"timestamp": ts, "type": "response_item", "payload": {"type": type_, **payload}}


def meta(sid: str = SID, **extra: Any) -> dict[str, Any]:
    return {
        "timestamp": "2026-02-01T10:00:00.000Z",
        "type": "session_meta",
        "payload": {
            "id": sid,
            "timestamp": "2026-02-01T10:00:00.000Z",
            "cwd": "/repo",
            "originator": "codex_cli_rs",
            "cli_version": "0.46.0",
            "source": "cli",
            **extra,
        },
    }


def ctx(ts: str = "2026-02-01T10:00:00.500Z", model: str = "gpt-5.2-codex") -> dict[str, Any]:
    return {"timestamp": ts, "type": "turn_context", "payload": {"cwd": "/repo", "model": model}}


def said(ts: str, text: str) -> list[dict[str, Any]]:
    """A user prompt as newer Codex builds store it: once as an event and once as a response item."""
    return [
        ev(ts, "user_message", message=text, images=[]),
        item(ts, "message", role="user", content=[{"type": "input_text", "text": text}]),
    ]


def usage(inp: int, cached: int, out: int, reasoning: int = 0, total: int | None = None) -> dict[str, int]:
    u = {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out, "reasoning_output_tokens": reasoning}
    if total is not None:
        u["total_tokens"] = total
    return u


def tokens(
    ts: str, last: dict[str, int] | None = None, total: dict[str, int] | None = None, **info: Any
) -> dict[str, Any]:
    body: dict[str, Any] = dict(info)
    if last is not None:
        body["last_token_usage"] = last
    if total is not None:
        body["total_token_usage"] = total
    return ev(ts, "token_count", info=body, rate_limits=None)


def call(ts: str, cid: str, name: str, arguments: str) -> dict[str, Any]:
    return item(ts, "function_call", name=name, arguments=arguments, call_id=cid)


def output(ts: str, cid: str, out: Any) -> dict[str, Any]:
    return item(ts, "function_call_output", call_id=cid, output=out)


def rollout(tmp_path: Path, records: list[dict[str, Any]], name: str = f"rollout-2026-02-01T10-00-00-{SID}") -> Path:
    return write_jsonl(tmp_path / "sessions" / "2026" / "02" / "01" / f"{name}.jsonl", records)


def calls(db: Path) -> list[tuple]:
    return query(
        db, "SELECT call_id, tool, args, result_text, is_error, error_kind, turn_id, user_turn FROM calls ORDER BY seq"
    )


# -- the public fixtures -----------------------------------------------------------------------------------------------
def test_claude_code_log_rollout(fixtures: Path, db: Path) -> None:
    # Read off the file: session_meta id/cwd/cli_version, one prompt stored twice (lines 3-4), three calls each with
    # its output (line 9's output is an array of content items), the final answer stored twice (lines 12-13), an
    # unknown record type (line 14), no token_count.
    f = next((fixtures / "codex").glob("claude-code-log_rollout-*.jsonl"))
    ingest_paths(db, f)
    ((sid, cwd, version, parent, user_turns, n_calls, errors, total),) = query(
        db,
        "SELECT session_id, cwd, agent_version, parent_session_id, user_turns, calls, error_calls, total_tokens "
        "FROM sessions",
    )
    assert (sid, cwd, version, parent) == (
        "11111111-1111-4111-8111-111111111111",
        "/workspace/synthetic-project",
        "0.0.0-test",
        None,
    )
    assert (user_turns, n_calls, errors, total) == (1, 3, 0, 0)
    assert calls(db) == [
        (
            "call-structured-001",
            "exec_command",
            '{"cmd":"find . -maxdepth 1 -type f"}',
            "./alpha.txt\n./beta.txt",
            False,
            None,
            "L5",
            0,
        ),
        (
            "call-custom-001",
            "apply_patch",
            '{"input":"*** Begin Patch\\n*** Add File: gamma.txt\\n+synthetic\\n*** End Patch"}',
            "Done!",
            False,
            None,
            "L8",
            0,
        ),
        ("call-mcp-001", "mcp__synthetic__lookup", '{"query":"fixture"}', '{"status":"ok"}', False, None, "L10", 0),
    ]
    texts = query(db, "SELECT role, text FROM turns WHERE text IS NOT NULL ORDER BY turn_index")
    assert texts == [
        ("user", "List the synthetic files."),
        ("assistant", "The synthetic files are alpha.txt and beta.txt."),
    ]
    assert query(db, "SELECT count(*) FROM turns WHERE text LIKE '%ENCRYPTED%'") == [(0,)]
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_codemie_spawn_rollout(fixtures: Path, db: Path) -> None:
    # Read off the file: 3 function calls, only call_skill1 has an output ("ok"); spawn_agent/wait_agent are answered
    # by collab_* events, not outputs. One token_count (5000 in, 1000 cached, 200 out, total 5200) after the spawn.
    ingest_paths(db, fixtures / "codex" / "codemie_turn-spawn-skill.jsonl")
    rows = calls(db)
    assert [(r[0], r[1], r[3], r[4]) for r in rows] == [
        ("call_skill1", "exec_command", "ok", False),
        ("call_spawn1", "spawn_agent", None, None),
        ("call_wait1", "wait_agent", None, None),
    ]
    ((sid, version, models, inp, cr, out, total),) = query(
        db,
        "SELECT session_id, agent_version, models, input_tokens, cache_read_tokens, output_tokens, total_tokens "
        "FROM sessions",
    )
    assert (sid, version, models) == ("spawn-test-uuid", "0.129.0", ["gpt-5.4"])
    assert (inp, cr, out, total) == (4000, 1000, 200, 5200)
    # The usage belongs to the request that issued spawn_agent.
    assert query(
        db,
        "SELECT c.call_id FROM calls c JOIN turns t ON t.session_id = c.session_id "
        "AND t.turn_id = c.turn_id WHERE t.total_tokens > 0",
    ) == [("call_spawn1",)]


def test_ccusage_usage_only_rollout(fixtures: Path, db: Path) -> None:
    # No session_meta and no items: the id is the file stem, and each token_count is a turn with its own model.
    ingest_paths(db, fixtures / "codex" / "ccusage_session-alpha.jsonl")
    assert query(db, "SELECT session_id, calls, models FROM sessions") == [
        ("ccusage_session-alpha", 0, ["gpt-5.2-codex", "gpt-5.3-codex"])
    ]
    assert query(
        db, "SELECT model, input_tokens, cache_read_tokens, output_tokens, total_tokens FROM turns ORDER BY turn_index"
    ) == [("gpt-5.2-codex", 750, 250, 125, 1200), ("gpt-5.3-codex", 2000, 500, 300, 3000)]


# Numbers from `ccusage codex session --json --offline` 20.0.24 on these files (keyed by file stem); the rollout from
# claude-code-log has no token_count, so ccusage lists no session for it.
CCUSAGE_FIXTURES = {
    "ccusage_session-alpha": (2750, 750, 425, 4200, 0.01089375),
    "codemie_turn-spawn-skill": (4000, 1000, 200, 5200, 0.01325),
}


def _ours_by_stem(db: Path) -> dict[str, tuple]:
    rows = query(
        db,
        "SELECT source_path, input_tokens, cache_read_tokens, output_tokens, total_tokens, cost_usd, "
        "cache_write_tokens FROM sessions",
    )
    assert all(r[6] == 0 for r in rows)  # Codex has no cache writes
    return {Path(r[0]).stem: r[1:6] for r in rows}


def _same(ours: tuple, ref: tuple) -> bool:
    return ours[:4] == ref[:4] and abs(ours[4] - ref[4]) < 1e-9


def test_fixture_tokens_match_recorded_ccusage(fixtures: Path, db: Path) -> None:
    ingest_paths(db, *sorted((fixtures / "codex").glob("*.jsonl")))
    ours = _ours_by_stem(db)
    for stem, ref in CCUSAGE_FIXTURES.items():
        assert _same(ours[stem], ref), stem
    others = [s for s in ours if s not in CCUSAGE_FIXTURES]
    assert len(others) == 1 and ours[others[0]][:4] == (0, 0, 0, 0)


def test_fixture_tokens_agree_with_ccusage(fixtures: Path, db: Path) -> None:
    from ccusage import run_ccusage

    files = {f"proj/{p.name}": p for p in sorted((fixtures / "codex").glob("*.jsonl"))}
    reference = {s["sessionId"].rsplit("/", 1)[-1]: s for s in run_ccusage(CODEX, files)}
    ingest_paths(db, *files.values())
    ours = _ours_by_stem(db)
    assert set(reference) == set(CCUSAGE_FIXTURES)
    for stem, row in ours.items():
        ref = reference.get(stem)
        expected = (
            (ref["inputTokens"], ref["cacheReadTokens"], ref["outputTokens"], ref["totalTokens"], ref["costUSD"])
            if ref
            else (0, 0, 0, 0, 0.0)
        )
        assert _same(row, expected), stem
        assert ref is None or ref["cacheCreationTokens"] == 0


# -- token pitfalls, each checked against ccusage ----------------------------------------------------------------------
def token_pitfalls(tmp_path: Path) -> dict[str, Path]:
    """One small rollout per token-counting rule ccusage applies."""
    d = tmp_path / "tok"
    spawn = meta("child-1", source={"subagent": {"thread_spawn": {"parent_thread_id": "parent-1", "depth": 1}}})
    files = {
        # last_token_usage per event; a re-emitted identical event (same instant) counts once, the same counts at
        # another instant count again; an all-zero event is skipped; an event without a timestamp is skipped.
        "dupes": [
            meta("tok-dupes"),
            ctx(),
            tokens("2026-02-01T10:00:01.000Z", usage(1000, 200, 50, 10, 1050), usage(1000, 200, 50, 10, 1050)),
            tokens("2026-02-01T10:00:01.000Z", usage(1000, 200, 50, 10, 1050), usage(1000, 200, 50, 10, 1050)),
            tokens("2026-02-01T10:00:02.000Z", usage(1000, 200, 50, 10, 1050), usage(2000, 400, 100, 20, 2100)),
            tokens("2026-02-01T10:00:03.000Z", usage(0, 0, 0, 0, 0), usage(2000, 400, 100, 20, 2100)),
            {
                "type": "event_msg",
                "payload": {"type": "token_count", "info": {"last_token_usage": usage(9, 0, 9, 0, 18)}},
            },
            ev("2026-02-01T10:00:04.000Z", "token_count", info=None),
        ],
        # No last_token_usage: successive total_token_usage are differenced; no total_tokens: input + output.
        "totals": [
            meta("tok-totals"),
            ctx(),
            tokens("2026-02-01T10:00:01.000Z", total=usage(100, 10, 50, 5)),
            tokens("2026-02-01T10:00:02.000Z", total=usage(300, 50, 70, 5)),
            tokens("2026-02-01T10:00:03.000Z", total=usage(300, 50, 70, 5)),
        ],
        # A subagent replays its parent's token_counts at the top, within one second: skipped.
        "replay": [
            spawn,
            ctx(),
            tokens("2026-02-01T09:00:05.100Z", usage(5000, 0, 100, 0, 5100), usage(5000, 0, 100, 0, 5100)),
            tokens("2026-02-01T09:00:05.300Z", usage(6000, 0, 100, 0, 6100), usage(11000, 0, 200, 0, 11200)),
            ev("2026-02-01T09:00:06.000Z", "token_count", info=None),
            tokens("2026-02-01T10:00:01.000Z", total=usage(11400, 100, 230, 0, 11630)),
            tokens("2026-02-01T10:00:02.000Z", usage(70, 0, 7, 0, 77), usage(11470, 100, 237, 0, 11707)),
        ],
        # Model: the event's own beats the turn_context's and sticks; codex-auto-review maps to the model of its
        # date; with no model anywhere ccusage prices as gpt-5; cached above input is capped at input.
        "models": [
            ctx(model="gpt-5.2-codex"),
            tokens("2026-02-01T10:00:01.000Z", usage(100, 10, 50, 0, 150), model="gpt-5.1-codex"),
            tokens("2026-02-01T10:00:02.000Z", usage(100, 10, 50, 0, 150)),
            ctx("2026-03-06T00:00:00.000Z", "codex-auto-review"),
            tokens("2026-03-06T00:00:01.000Z", usage(100, 120, 50, 0, 150)),
        ],
        "nomodel": [tokens("2026-02-01T10:00:01.000Z", usage(100, 10, 50, 0, 150))],
    }
    return {name: write_jsonl(d / f"{name}.jsonl", recs) for name, recs in files.items()}


# From `ccusage codex session --json --offline` 20.0.24 on the files token_pitfalls writes:
# (inputTokens, cacheReadTokens, outputTokens, totalTokens, costUSD).
CCUSAGE_PITFALLS = {
    "dupes": (1600, 400, 100, 2100, 0.00427),
    "totals": (250, 50, 70, 370, 0.00142625),
    "replay": (370, 100, 37, 507, 0.001183),
    "models": (180, 120, 150, 450, 0.0020025),
    "nomodel": (90, 10, 50, 150, 0.00061375),
}


def test_token_pitfalls_match_recorded_ccusage(tmp_path: Path, db: Path) -> None:
    ingest_paths(db, *token_pitfalls(tmp_path).values())
    ours = _ours_by_stem(db)
    for name, ref in CCUSAGE_PITFALLS.items():
        assert _same(ours[name], ref), (name, ours[name], ref)
    assert query(db, "SELECT models FROM sessions WHERE session_id = 'models'") == [(["gpt-5.1-codex", "gpt-5.4"],)]
    assert query(db, "SELECT parent_session_id FROM sessions WHERE session_id = 'child-1'") == [("parent-1",)]


def test_token_pitfalls_agree_with_ccusage(tmp_path: Path, db: Path) -> None:
    from ccusage import run_ccusage

    files = token_pitfalls(tmp_path)
    reference = {
        s["sessionId"].rsplit("/", 1)[-1]: s for s in run_ccusage(CODEX, {f"p/{p.name}": p for p in files.values()})
    }
    ingest_paths(db, *files.values())
    ours = _ours_by_stem(db)
    assert set(reference) == set(files)
    for name, ref in reference.items():
        assert _same(
            ours[name],
            (ref["inputTokens"], ref["cacheReadTokens"], ref["outputTokens"], ref["totalTokens"], ref["costUSD"]),
        ), name


# -- calls, outputs and errors -----------------------------------------------------------------------------------------
def test_output_shapes_and_error_detection(tmp_path: Path, db: Path) -> None:
    unified_fail = (
        "Chunk ID: 4f1a\nWall time: 0.2100 seconds\nProcess exited with code 2\n"
        "Original token count: 12\nOutput:\nmake: *** No rule to make target 'x'.  Stop.\n"
    )
    unified_ok = (
        "Chunk ID: 4f1b\nWall time: 0.0100 seconds\nProcess exited with code 0\nOutput:\n"
        "Process exited with code 1\n"
    )  # the command's own output says it; the header does not
    shell_fail = "Exit code: 1\nWall time: 0.3 seconds\nOutput:\nFAILED tests/test_a.py::test_x\n"
    recs = [
        meta(),
        ctx(),
        *said("2026-02-01T10:00:01.000Z", "fix the build"),
        call("2026-02-01T10:00:02.000Z", "c1", "shell", '{"command":["bash","-lc","make"]}'),
        call("2026-02-01T10:00:02.100Z", "c2", "exec_command", '{"cmd":"make x"}'),
        call("2026-02-01T10:00:02.200Z", "c3", "exec_command", '{"cmd":"cat log"}'),
        call("2026-02-01T10:00:02.300Z", "c4", "shell_command", '{"command":"pytest"}'),
        call("2026-02-01T10:00:02.400Z", "c5", "write_stdin", '{"session_id":7,"chars":"y\\n"}'),
        item(
            "2026-02-01T10:00:02.500Z",
            "custom_tool_call",
            name="apply_patch",
            call_id="c6",
            input="*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch",
        ),
        call("2026-02-01T10:00:02.600Z", "c7", "exec_command", "not json at all"),
        call("2026-02-01T10:00:02.700Z", "c8", "shell", '{"command":["ls"]}'),
        call("2026-02-01T10:00:02.800Z", "c9", "view_image", '{"path":"a.png"}'),
        tokens("2026-02-01T10:00:03.000Z", usage(100, 0, 10, 0, 110)),
        output(
            "2026-02-01T10:00:04.000Z",
            "c1",
            '{"output":"make: *** [all] Error 1\\n","metadata":{"exit_code":2,"duration_seconds":0.5}}',
        ),
        output("2026-02-01T10:00:04.100Z", "c2", unified_fail),
        output("2026-02-01T10:00:04.200Z", "c3", unified_ok),
        output("2026-02-01T10:00:04.300Z", "c4", shell_fail),
        output("2026-02-01T10:00:04.400Z", "c5", "write_stdin failed: Unknown process id 7"),
        item(
            "2026-02-01T10:00:04.500Z",
            "custom_tool_call_output",
            call_id="c6",
            output="apply_patch verification failed: Failed to find expected lines in a.py",
        ),
        output("2026-02-01T10:00:04.600Z", "c7", "aborted"),
        output(
            "2026-02-01T10:00:04.700Z", "c8", '{"output":"a.py\\n","metadata":{"exit_code":0,"duration_seconds":0.01}}'
        ),
        output(
            "2026-02-01T10:00:04.800Z",
            "c9",
            [{"type": "input_text", "text": "image attached"}, {"type": "input_image", "image_url": "data:..."}],
        ),
        output("2026-02-01T10:00:04.900Z", "c404", "orphan output"),
    ]
    f = rollout(tmp_path, recs)
    ingest_paths(db, f)
    got = {r[0]: r[1:6] for r in calls(db)}
    assert got == {
        "c1": ("shell", '{"command":["bash","-lc","make"]}', "make: *** [all] Error 1\n", True, "exit_code"),
        "c2": ("exec_command", '{"cmd":"make x"}', unified_fail, True, "exit_code"),
        "c3": ("exec_command", '{"cmd":"cat log"}', unified_ok, False, None),
        "c4": ("shell_command", '{"command":"pytest"}', shell_fail, True, "exit_code"),
        "c5": (
            "write_stdin",
            '{"chars":"y\\n","session_id":7}',
            "write_stdin failed: Unknown process id 7",
            True,
            "text",
        ),
        "c6": (
            "apply_patch",
            '{"input":"*** Begin Patch\\n*** Update File: a.py\\n@@\\n-x\\n+y\\n*** End Patch"}',
            "apply_patch verification failed: Failed to find expected lines in a.py",
            True,
            "text",
        ),
        "c7": ("exec_command", '{"raw":"not json at all"}', "aborted", True, "text"),
        "c8": ("shell", '{"command":["ls"]}', "a.py\n", False, None),
        "c9": ("view_image", '{"path":"a.png"}', "image attached\n[image, 6 bytes, sha1 fb72c7ee7901]", False, None),
    }
    assert query(db, "SELECT calls, error_calls FROM sessions") == [(9, 6)]
    errs = query(db, "SELECT line, reason FROM ingest_errors")
    assert errs == [(len(recs), "tool output for a call not in this file (c404)")]


def test_local_shell_namespaces_and_end_events(tmp_path: Path, db: Path) -> None:
    recs = [
        meta(),
        ctx(),
        *said("2026-02-01T10:00:01.000Z", "run it"),
        item(
            "2026-02-01T10:00:02.000Z",
            "local_shell_call",
            call_id="ls1",
            status="completed",
            action={"type": "exec", "command": ["pytest", "-q"], "timeout_ms": 10000, "working_directory": "/repo"},
        ),
        item(
            "2026-02-01T10:00:02.100Z",
            "function_call",
            name="js",
            namespace="mcp__node_repl__",
            arguments='{"code":"1+1"}',
            call_id="m1",
        ),
        call("2026-02-01T10:00:02.200Z", "e1", "exec_command", '{"cmd":"false"}'),
        item(
            "2026-02-01T10:00:02.300Z",
            "web_search_call",
            status="completed",
            action={"type": "search", "query": "duckdb list_distinct"},
        ),
        tokens("2026-02-01T10:00:03.000Z", usage(100, 0, 10, 0, 110)),
        ev("2026-02-01T10:00:03.500Z", "exec_command_end", call_id="ls1", exit_code=1, stdout="", stderr=""),
        output("2026-02-01T10:00:04.000Z", "ls1", "1 failed"),
        ev(
            "2026-02-01T10:00:04.100Z",
            "mcp_tool_call_end",
            call_id="m1",
            result={"Ok": {"content": [{"type": "text", "text": "boom"}], "isError": True}},
        ),
        output("2026-02-01T10:00:04.200Z", "m1", '[{"type":"text","text":"boom"}]'),
        ev("2026-02-01T10:00:04.300Z", "exec_command_end", call_id="e1", exit_code=0),
        output("2026-02-01T10:00:04.400Z", "e1", ""),
    ]
    ingest_paths(db, rollout(tmp_path, recs))
    assert [r[:6] for r in calls(db)] == [
        (
            "ls1",
            "local_shell",
            '{"command":["pytest","-q"],"timeout_ms":10000,"type":"exec","working_directory":"/repo"}',
            "1 failed",
            True,
            "exit_code",
        ),
        ("m1", "mcp__node_repl__js", '{"code":"1+1"}', '[{"type":"text","text":"boom"}]', True, "flag"),
        ("e1", "exec_command", '{"cmd":"false"}', "", False, None),
        # A web search runs server-side; the rollout records the query but no result.
        ("#3", "web_search", '{"query":"duckdb list_distinct","type":"search"}', None, None, None),
    ]


# -- prompts, text stored twice, turn grouping -------------------------------------------------------------------------
def test_prompts_injected_context_and_text_stored_twice(tmp_path: Path, db: Path) -> None:
    env = "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"
    agents = "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nuse uv\n</INSTRUCTIONS>"
    recs = [
        meta(),
        item(
            "2026-02-01T10:00:00.100Z",
            "message",
            role="developer",
            content=[{"type": "input_text", "text": "<permissions instructions>…"}],
        ),
        item("2026-02-01T10:00:00.200Z", "message", role="user", content=[{"type": "input_text", "text": agents}]),
        item("2026-02-01T10:00:00.300Z", "message", role="user", content=[{"type": "input_text", "text": env}]),
        item(
            "2026-02-01T10:00:00.400Z",
            "message",
            role="user",
            content=[{"type": "input_text", "text": "<user_instructions>\nbe brief\n</user_instructions>"}],
        ),
        ctx(),
        # the event first, then its twin item
        *said("2026-02-01T10:00:01.000Z", "continue"),
        ev("2026-02-01T10:00:02.000Z", "agent_message", message="Done."),
        item(
            "2026-02-01T10:00:02.001Z", "message", role="assistant", content=[{"type": "output_text", "text": "Done."}]
        ),
        tokens("2026-02-01T10:00:02.100Z", usage(10, 0, 2, 0, 12)),
        # the same words again are a new prompt; this time the item comes first
        item("2026-02-01T10:00:03.000Z", "message", role="user", content=[{"type": "input_text", "text": "continue"}]),
        ev("2026-02-01T10:00:03.001Z", "user_message", message="continue", images=[]),
        item(
            "2026-02-01T10:00:04.000Z", "message", role="assistant", content=[{"type": "output_text", "text": "Done."}]
        ),
        ev("2026-02-01T10:00:04.001Z", "agent_message", message="Done."),
        # an older build: event without a twin, kind marks injected context
        ev("2026-02-01T10:00:05.000Z", "user_message", message="<environment_context>…", kind="environment_context"),
        ev("2026-02-01T10:00:06.000Z", "user_message", message="ship it", kind="plain"),
    ]
    ingest_paths(db, rollout(tmp_path, recs))
    assert query(db, "SELECT role, text, user_turn FROM turns ORDER BY turn_index") == [
        ("user", "continue", 0),
        ("assistant", "Done.", 0),
        ("user", "continue", 1),
        ("assistant", "Done.", 1),
        ("user", "ship it", 2),
    ]
    assert query(db, "SELECT user_turns FROM sessions") == [(3,)]


def test_one_turn_per_model_request(tmp_path: Path, db: Path) -> None:
    recs = [
        meta(),
        ctx(),
        *said("2026-02-01T10:00:01.000Z", "look around"),
        # request 1: reasoning, text and two parallel calls, then its usage, then the outputs
        item(
            "2026-02-01T10:00:02.000Z",
            "reasoning",
            summary=[{"type": "summary_text", "text": "plan"}],
            encrypted_content="x",
        ),
        item(
            "2026-02-01T10:00:02.100Z",
            "message",
            role="assistant",
            content=[{"type": "output_text", "text": "Looking."}],
        ),
        call("2026-02-01T10:00:02.200Z", "a", "exec_command", '{"cmd":"ls"}'),
        call("2026-02-01T10:00:02.300Z", "b", "exec_command", '{"cmd":"pwd"}'),
        tokens("2026-02-01T10:00:02.400Z", usage(1000, 800, 40, 0, 1040), usage(1000, 800, 40, 0, 1040)),
        output("2026-02-01T10:00:03.000Z", "a", "Process exited with code 0\nOutput:\nx"),
        output("2026-02-01T10:00:03.100Z", "b", "/repo"),
        # request 2: one call and its usage
        call("2026-02-01T10:00:04.000Z", "c", "exec_command", '{"cmd":"cat x"}'),
        tokens("2026-02-01T10:00:04.100Z", usage(1100, 1000, 20, 0, 1120), usage(2100, 1800, 60, 0, 2160)),
        output("2026-02-01T10:00:04.500Z", "c", "hello"),
        # an older build without usage: call, output, call -> two requests
        call("2026-02-01T10:00:05.000Z", "d", "exec_command", '{"cmd":"true"}'),
        output("2026-02-01T10:00:05.100Z", "d", "ok"),
        call("2026-02-01T10:00:05.200Z", "e", "exec_command", '{"cmd":"true"}'),
        output("2026-02-01T10:00:05.300Z", "e", "ok"),
    ]
    ingest_paths(db, rollout(tmp_path, recs))
    turns = query(
        db,
        "SELECT turn_id, text, model, input_tokens, cache_read_tokens, output_tokens, total_tokens "
        "FROM turns WHERE role = 'assistant' ORDER BY turn_index",
    )
    assert turns == [
        ("L5", "Looking.", "gpt-5.2-codex", 200, 800, 40, 1040),
        ("L12", None, "gpt-5.2-codex", 100, 1000, 20, 1120),
        ("L15", None, "gpt-5.2-codex", 0, 0, 0, 0),
        ("L17", None, "gpt-5.2-codex", 0, 0, 0, 0),
    ]
    assert [(r[0], r[6]) for r in calls(db)] == [("a", "L5"), ("b", "L5"), ("c", "L12"), ("d", "L15"), ("e", "L17")]
    assert query(db, "SELECT total_tokens FROM sessions") == [(2160,)]


# -- session identity and bad input ------------------------------------------------------------------------------------
def test_session_id_fallbacks_and_subagent_parent(tmp_path: Path, db: Path) -> None:
    no_meta = rollout(tmp_path, [ctx(), *said("2026-02-01T10:00:01.000Z", "hi")])
    stem_only = write_jsonl(tmp_path / "other" / "my-session.jsonl", [ctx(), *said("2026-02-01T10:00:01.000Z", "x")])
    child = write_jsonl(
        tmp_path / "child.jsonl",
        [
            meta(
                "0199ffff-0000-7000-8000-000000000001",
                source={"subagent": {"thread_spawn": {"parent_thread_id": SID, "depth": 1}}},
            ),
            *said("2026-02-01T10:00:01.000Z", "review code"),
        ],
    )
    ingest_paths(db, no_meta, stem_only, child)
    assert query(db, "SELECT session_id, parent_session_id, cwd, user_turns FROM sessions ORDER BY session_id") == [
        ("0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", None, "/repo", 1),
        ("0199ffff-0000-7000-8000-000000000001", SID, "/repo", 1),
        ("my-session", None, "/repo", 1),
    ]


def test_bad_records_are_reported_and_the_rest_ingested(tmp_path: Path, db: Path) -> None:
    f = rollout(
        tmp_path,
        [
            meta(),
            ctx(),
            *said("2026-02-01T10:00:01.000Z", "go"),
            {"timestamp": "2026-02-01T10:00:02.000Z", "type": "response_item", "payload": "oops"},
            call("2026-02-01T10:00:03.000Z", "ok1", "exec_command", '{"cmd":"ls"}'),
            output("2026-02-01T10:00:03.500Z", "ok1", "a"),
        ],
    )
    with f.open("a") as fh:
        fh.write("[1, 2, 3]\n{not json\n")
    ingest_paths(db, f)
    errs = query(db, "SELECT line, reason FROM ingest_errors ORDER BY line")
    assert [e[0] for e in errs] == [5, 8, 9]
    assert errs[0][1] == "codex response_item record without a payload object"
    assert errs[1][1] == "not a JSON object"
    assert query(db, "SELECT call_id, result_text FROM calls") == [("ok1", "a")]
    assert query(db, "SELECT status, sessions, calls, errors FROM files") == [("ingested", 1, 1, 3)]


@pytest.mark.parametrize(
    "rec, expected",
    [
        ({"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}}, True),
        ({"timestamp": "t", "type": "event_msg", "payload": {"type": "token_count"}}, True),
        ({"type": "message", "role": "user", "content": "hi"}, False),
        ({"type": "session", "id": "x", "cwd": "/r"}, False),
        ({"messages": [{"role": "user", "content": "hi"}]}, False),
    ],
)
def test_sniff(rec: dict[str, Any], expected: bool) -> None:
    from analyzer.ingest.formats import codex

    assert codex.sniff(rec) is expected


@pytest.mark.parametrize(
    "out, expected",
    [
        ("aborted", ("aborted", True, "text")),
        ("aborted by user after 12.0s", ("aborted by user after 12.0s", True, "text")),
        ("exec command rejected by user", ("exec command rejected by user", True, "rejected")),
        (
            "failed to parse function arguments: missing field `cmd`",
            ("failed to parse function arguments: missing field `cmd`", True, "text"),
        ),
        # older builds answer a command the sandbox stopped with a bare string (docs/formats.md, Codex pitfall 6)
        ("failed in sandbox: ", ("failed in sandbox: ", True, "text")),
        (
            "failed in sandbox LinuxSeccomp with execution error: Denied",
            ("failed in sandbox LinuxSeccomp with execution error: Denied", True, "text"),
        ),
        # older builds refuse a patch run through the shell in their own words, with no exit code
        (
            "error: Failed to find expected lines in /repo/docs/spec.md:\n<!--",
            ("error: Failed to find expected lines in /repo/docs/spec.md:\n<!--", True, "text"),
        ),
        (
            "error: invalid hunk at line 4, '' is not a valid hunk header",
            ("error: invalid hunk at line 4, '' is not a valid hunk header", True, "text"),
        ),
        ("error: 0 warnings", ("error: 0 warnings", False, None)),
        ({"content": "denied", "success": False}, ("denied", True, "flag")),
        ('{"output":"ok","metadata":{"exit_code":0}}', ("ok", False, None)),
        ('{"status":"error","metadata":{"code":1}}', ('{"status":"error","metadata":{"code":1}}', False, None)),
        # Error words inside ordinary output are not errors.
        (
            "test_aborted_upload PASSED\nERROR: 0 failures",
            ("test_aborted_upload PASSED\nERROR: 0 failures", False, None),
        ),
        ("Exit code: 3 is what the docs say", ("Exit code: 3 is what the docs say", False, None)),
        (None, ("", False, None)),
    ],
)
def test_output_classification(out: Any, expected: tuple[str, bool, str | None]) -> None:
    from analyzer.ingest.formats.codex import classify, parse_output

    text, code, flag = parse_output(out)
    assert (text, *classify(text, code, flag, None)) == expected


def test_archived_sessions_forks_text_exit_codes_and_web_search(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from analyzer.ingest.formats import codex

    home = tmp_path / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(home))
    assert codex.default_roots() == [home / "sessions", home / "archived_sessions"]
    fork_id = "0199bbbb-0000-7000-8000-000000000002"
    recs = [
        meta(fork_id, forked_from_id=SID),
        ctx(),
        *said("2026-02-01T10:00:01.000Z", "go"),
        call("2026-02-01T10:00:02.000Z", "c1", "shell_command", '{"command":"false"}'),
        call("2026-02-01T10:00:02.100Z", "c2", "exec_command", '{"cmd":"make"}'),
        item("2026-02-01T10:00:02.200Z", "custom_tool_call", name="apply_patch", call_id="c3", input="*** x"),
        item(
            "2026-02-01T10:00:02.300Z",
            "web_search_call",
            status="completed",
            action={"type": "search", "query": "duckdb"},
        ),
        output("2026-02-01T10:00:03.000Z", "c1", "Exit code: 1\nWall time: 0.1 seconds\nOutput:\n"),
        output("2026-02-01T10:00:03.100Z", "c2", "Wall time: 1.0 seconds\nProcess exited with code 0\nOutput:\nok"),
        item(
            "2026-02-01T10:00:03.200Z",
            "custom_tool_call_output",
            call_id="c3",
            output='{"output":"patch failed\\n","metadata":{"exit_code":1,"duration_seconds":0.0}}',
        ),
    ]
    # archived_sessions/ is flat: rollout files right under it
    f = write_jsonl(home / "archived_sessions" / f"rollout-2026-02-01T10-00-00-{fork_id}.jsonl", recs)
    summary = ingest_paths(db, *codex.default_roots()[1:])
    assert summary.skipped == [] and f.exists()
    assert query(db, "SELECT session_id, parent_session_id FROM sessions") == [(fork_id, SID)]
    assert query(db, "SELECT tool, is_error, error_kind, result_text IS NULL FROM calls ORDER BY seq") == [
        ("shell_command", True, "exit_code", False),
        ("exec_command", False, None, False),
        ("apply_patch", True, "exit_code", False),
        ("web_search", None, None, True),
    ]
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_code_mode_cells_retried_blindly_are_a_stuck_loop_and_polls_of_a_running_cell_are_waiting(
    tmp_path: Path, db: Path
) -> None:
    """Codex 0.145+ code mode: ``exec`` cells of JavaScript that call the tools, ``wait`` for a cell still running. The
    same failing command sent four times, its wait time and limits varied and each answer with a new chunk id, is a
    stuck loop; three waits on a cell that still runs are waiting, not a loop."""
    from analyzer.scan.run import scan

    def cell(ts: str, cid: str, js: str) -> dict[str, Any]:
        return item(ts, "custom_tool_call", status="completed", call_id=cid, name="exec", input=js)

    def cell_out(ts: str, cid: str, head: str, body: str) -> dict[str, Any]:
        out = [{"type": "input_text", "text": head}, {"type": "input_text", "text": body}]
        return item(ts, "custom_tool_call_output", call_id=cid, output=out)

    recs: list[dict[str, Any]] = [meta(cli_version="0.146.0"), ctx(), *said("2026-02-01T10:00:01.000Z", "build it")]
    for i, (wait_ms, limit) in enumerate(((10000, 5000), (30000, 5000), (10000, 20000), (60000, 8000))):
        ts = f"2026-02-01T10:01:0{i}.000Z"
        js = (
            f'const r = await tools.exec_command({{cmd:"make build",workdir:"/repo",yield_time_ms:{wait_ms},'
            f"max_output_tokens:{limit}}});\ntext(JSON.stringify(r));"
        )
        answer = f'{{"chunk_id":"c{i}a{i}","wall_time_seconds":0.{i}1,"exit_code":2,"output":"make: *** No rule"}}'
        recs += [
            cell(ts, f"e{i}", js),
            cell_out(ts, f"e{i}", "Script completed\nWall time 0.1 seconds\nOutput:\n", answer),
        ]
    recs += [*said("2026-02-01T10:02:00.000Z", "now run the long job")]
    recs += [
        cell(
            "2026-02-01T10:02:01.000Z",
            "run",
            'const r = await tools.exec_command({"cmd":"./train.sh"}); text(r.output);',
        ),
        cell_out("2026-02-01T10:02:01.000Z", "run", "Script running with cell ID 7\nWall time 10.0 seconds\n", ""),
    ]
    for i in range(3):
        ts = f"2026-02-01T10:03:0{i}.000Z"
        recs += [
            call(
                ts, f"w{i}", "wait", json.dumps({"cell_id": "7", "yield_time_ms": 30000 * (i + 1), "max_tokens": 1000})
            ),
            output(
                ts, f"w{i}", [{"type": "input_text", "text": "Script running with cell ID 7\nWall time 30.0 seconds\n"}]
            ),
        ]
    ingest_paths(db, rollout(tmp_path, recs))
    scan(db)
    rows = calls(db)
    assert [r[1] for r in rows] == ["exec"] * 5 + ["wait"] * 3
    assert [r[4] for r in rows[:4]] == [True] * 4  # the exit code the cell printed
    found = query(db, "SELECT kind, first_seq, last_seq, stuck FROM findings ORDER BY first_seq")
    assert found[0][1:] == (0, 3, True), found
    assert [(k, s) for k, _, _, s in found[1:]] == [("waiting", False)], found


def test_a_rollout_from_before_the_envelopes_is_read(tmp_path: Path, db: Path) -> None:
    """Codex CLI of mid-2025 wrote a session header line (id, timestamp, instructions, git), then bare response items
    and ``{"record_type": "state"}`` lines (docs/formats.md, Codex pitfall 7). Such a file was skipped as of no known
    format; it is one session now, its prompts, calls, results and sandbox failures read as in a newer rollout."""
    sid = "d7e0b7f3-b7c1-47c6-9aee-b17ae9c41262"
    cwd = "<environment_context>\n  <cwd>E:\\ANPR\\ANPR_NEW</cwd>\n  <shell>powershell.exe</shell>\n"
    cwd += "</environment_context>"
    recs = [
        {"id": sid, "timestamp": "2025-09-24T02:40:17.546Z", "instructions": None, "git": {"branch": "master"}},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": cwd}]},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run the tests"}]},
        {"type": "reasoning", "summary": [], "encrypted_content": "x"},
        {"type": "function_call", "name": "shell", "arguments": '{"command":["pytest","-q"]}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "failed in sandbox: "},
        {
            "type": "function_call",
            "name": "shell",
            "arguments": '{"command":["pytest","-q"],"with_escalated_permissions":true}',
            "call_id": "c2",
        },
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": '{"output":"3 passed","metadata":{"exit_code":0,"duration_seconds":1.2}}',
        },
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "All 3 pass."}]},
        {"record_type": "state"},
    ]
    path = write_jsonl(tmp_path / "sessions" / "2025" / "09" / "24" / f"rollout-2025-09-24T04-40-17-{sid}.jsonl", recs)
    summary = ingest_paths(db, path)
    assert summary.skipped == [] and summary.files_ingested == 1
    assert query(db, "SELECT session_id, format, cwd, started_at::VARCHAR, user_turns FROM sessions") == [
        (sid, CODEX, "E:\\ANPR\\ANPR_NEW", "2025-09-24 02:40:17.546", 1)
    ]
    got = [(c[0], c[1], c[3], c[4], c[5]) for c in calls(db)]
    assert got == [
        ("c1", "shell", "failed in sandbox: ", True, "text"),
        ("c2", "shell", "3 passed", False, None),
    ]
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_a_dataset_row_with_an_id_and_instructions_is_not_a_codex_header() -> None:
    """Only the header's own keys make a rollout from before the envelopes: a chat-dataset row that also has an id, a
    timestamp and instructions, with its messages, is left to the formats that read messages."""
    from analyzer.ingest.formats.codex import legacy_header

    header = {"id": "d7e0b7f3-b7c1-47c6-9aee-b17ae9c41262", "timestamp": "2025-09-24T02:40:17.546Z"}
    assert legacy_header({**header, "instructions": None, "git": {"branch": "master"}})
    assert not legacy_header({**header, "instructions": "be brief", "messages": [{"role": "user", "content": "hi"}]})
