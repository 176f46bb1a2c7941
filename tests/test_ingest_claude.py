"""Claude Code transcripts: split responses, subagents in both layouts, prompts, rejections, lines that must not create
calls, and token totals that agree with ccusage session by session."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import ingest_paths, query, write_jsonl

from analyzer.ingest import parse
from analyzer.ingest.formats import claude

TRUNK = "0d5e6a4c-1111-4222-8333-444455556666"
OTHER = "1e6f7b5d-2222-4333-8444-555566667777"
MODEL = "claude-sonnet-4-20250514"
_uuid = itertools.count()


def ts(second: int) -> str:
    return f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}.000Z"


def env(kind: str, second: int, **kw: Any) -> dict[str, Any]:
    """The envelope Claude Code writes on user/assistant lines."""
    rec = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/repo",
        "sessionId": TRUNK,
        "version": "2.1.7",
        "type": kind,
        "uuid": f"uuid-{next(_uuid)}",
        "timestamp": ts(second),
    }
    rec.update(kw)
    return rec


def user(second: int, content: Any, **kw: Any) -> dict[str, Any]:
    return env("user", second, message={"role": "user", "content": content}, **kw)


def usage(inp: int, out: int, cache_read: int = 0, cache_write: int = 0, **kw: Any) -> dict[str, Any]:
    return {
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write,
        **kw,
    }


def assistant(
    second: int,
    mid: str | None,
    rid: str | None,
    blocks: list[dict[str, Any]],
    use: dict[str, Any] | None,
    model: str = MODEL,
    **kw: Any,
) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "model": model,
        "id": mid,
        "type": "message",
        "role": "assistant",
        "content": blocks,
        "stop_reason": None,
        "stop_sequence": None,
    }
    if mid is None:
        del msg["id"]
    if use is not None:
        msg["usage"] = use
    rec = env("assistant", second, message=msg, **kw)
    if rid is not None:
        rec["requestId"] = rid
    return rec


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool_use(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": name, "input": args}


def tool_result(cid: str, content: Any, is_error: bool | None = None) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": cid, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    return block


def session_tokens(db: Path) -> dict[str, tuple[int, int, int, int, int]]:
    rows = query(
        db,
        "SELECT session_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, "
        "total_tokens FROM sessions",
    )
    return {sid: tuple(rest) for sid, *rest in rows}


def by_ccusage_session(db: Path) -> dict[str, tuple[int, int, int, int, int]]:
    """Our sessions summed the way ccusage groups files: a session is its file stem, and a file under
    ``<session>/subagents/`` belongs to ``<session>``."""
    out: dict[str, list[int]] = {}
    for path, *tokens in query(
        db,
        "SELECT source_path, input_tokens, output_tokens, cache_read_tokens, "
        "cache_write_tokens, total_tokens FROM sessions",
    ):
        p = Path(path)
        name = p.parent.parent.name if p.parent.name == "subagents" else p.stem
        acc = out.setdefault(name, [0, 0, 0, 0, 0])
        for i, v in enumerate(tokens):
            acc[i] += v
    return {k: tuple(v) for k, v in out.items() if v[4]}  # ccusage lists only sessions with usage


def ccusage_tokens(files: dict[str, Path]) -> dict[str, tuple[int, int, int, int, int]]:
    from ccusage import run_ccusage

    return {
        s["sessionId"]: (
            s["inputTokens"],
            s["outputTokens"],
            s["cacheReadTokens"],
            s["cacheCreationTokens"],
            s["totalTokens"],
        )
        for s in run_ccusage("claude", files)
    }


# -- detection -----------------------------------------------------------------------------------------------------


def test_sniff_claims_claude_records_and_leaves_other_formats_alone() -> None:
    assert claude.sniff({"type": "summary", "summary": "x", "leafUuid": "u"})
    assert claude.sniff({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}})
    assert claude.sniff({"type": "queue-operation", "operation": "enqueue", "sessionId": "s"})
    assert claude.sniff(user(0, "hi"))
    assert not claude.sniff({"type": "session", "version": 3, "id": "x", "cwd": "/r"})  # pi
    assert not claude.sniff({"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}})  # Codex
    assert not claude.sniff({"sessionId": "s", "projectHash": "h", "startTime": "t"})  # Gemini CLI JSONL header
    assert not claude.sniff({"messages": [{"role": "user", "content": "x"}]})  # OpenAI messages
    assert not claude.sniff(["not", "a", "record"])
    assert parse.detect_format(user(0, "hi")) is claude


# -- the public fixtures, counts read off the files (fixtures/SOURCES.md) --------------------------------------------

# session -> (user prompts, turns, calls, calls with a result, error results, input, output, cache read, cache write,
# total). Calls/results/errors counted from the tool_use and tool_result blocks; turns = prompts + distinct
# message.ids; tokens as `ccusage claude session --json` (20.0.24) reports them.
FIXTURE_SESSIONS = {
    "d3ad4cdc-5657-435d-98fa-0035d53e383d": (5, 67, 59, 58, 4, 114, 16769, 3754072, 174552, 3945507),
    "ba79134d-b6e9-4867-af0c-6941038c9e4b": (6, 30, 30, 30, 0, 91, 2266, 503769, 16072, 522198),
    "e9fb405b-169f-40eb-9396-7e75076f045d": (1, 12, 14, 14, 0, 537, 10099, 223343, 157962, 391941),
    "agent-a485154": (1, 7, 20, 20, 1, 5233, 1845, 91980, 115531, 214589),
    "test-session-id": (2, 5, 2, 2, 0, 0, 0, 0, 0, 0),
}


def test_every_fixture_file_ingests_with_the_counts_read_off_it(fixtures: Path, db: Path) -> None:
    summary = ingest_paths(db, fixtures / "claude_code")
    assert summary.skipped == [] and summary.errors == 0
    rows = query(
        db,
        """
        SELECT s.session_id, s.user_turns, s.turns, s.calls,
               (SELECT count(*) FROM calls c WHERE c.session_id = s.session_id AND c.result_text IS NOT NULL),
               s.error_calls, s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_write_tokens,
               s.total_tokens
        FROM sessions s""",
    )
    assert {sid: tuple(rest) for sid, *rest in rows} == FIXTURE_SESSIONS
    files = dict(query(db, "SELECT regexp_extract(path, '[^/]+$'), sessions FROM files WHERE format = 'claude_code'"))
    assert files == {
        "d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl": 1,
        "ba79134d-b6e9-4867-af0c-6941038c9e4b.jsonl": 1,
        "ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl": 0,
        "turn-2.jsonl": 1,
        "agent-a485154.jsonl": 1,
        "sample_session.jsonl": 1,
    }
    # The subagent hangs off the trunk; cwd, version and model come from the records.
    meta = {
        sid: rest
        for sid, *rest in query(db, "SELECT session_id, parent_session_id, agent_version, cwd, models FROM sessions")
    }
    assert meta["agent-a485154"] == [
        "e9fb405b-169f-40eb-9396-7e75076f045d",
        "2.1.7",
        "/Users/User/repo/codemie-ai/codemie-code",
        ["claude-sonnet-4-5-20250929"],
    ]
    assert meta["ba79134d-b6e9-4867-af0c-6941038c9e4b"] == [None, "1.0.17", "/Users/chip/dev/ai-music", [MODEL]]
    # The sniffly file with the 9-line response: one turn, eight calls pointing at it, its usage counted once.
    ((turn_id, n_calls, out),) = query(
        db,
        """
        SELECT c.turn_id, count(*), any_value(t.output_tokens) FROM calls c JOIN turns t
          ON t.session_id = c.session_id AND t.turn_id = c.turn_id
        WHERE c.session_id = 'ba79134d-b6e9-4867-af0c-6941038c9e4b' GROUP BY 1 ORDER BY 2 DESC LIMIT 1""",
    )
    assert (turn_id, n_calls, out) == ("msg_012sQGakUhELhhykRHa4Dypy", 8, 4)
    # /init in CC 1.0.17 is a prompt, stored as the command.
    (first_prompt,) = query(
        db,
        "SELECT text FROM turns WHERE session_id = 'ba79134d-b6e9-4867-af0c-6941038c9e4b' "
        "AND role = 'user' ORDER BY turn_index LIMIT 1",
    )
    assert first_prompt == ("/init",)


def test_summary_only_file_is_a_claude_file_with_nothing_to_load(fixtures: Path, db: Path) -> None:
    summary = ingest_paths(
        db, fixtures / "claude_code" / "-Users-chip-dev-ai-music" / "ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl"
    )
    assert summary.skipped == [] and summary.files_ingested == 1 and summary.sessions == 0
    assert query(db, "SELECT format, status, reason, sessions, errors FROM files") == [
        ("claude_code", "ingested", None, 0, 0)
    ]
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]


@pytest.mark.parametrize(
    "records",
    [
        [{"type": "summary", "summary": "Refactor the parser", "leafUuid": "uuid-in-another-session"}],
        [
            {
                "type": "file-history-snapshot",
                "messageId": "m1",
                "isSnapshotUpdate": False,
                "snapshot": {"messageId": "m1", "trackedFileBackups": {}, "timestamp": ts(0)},
            },
            {"type": "queue-operation", "operation": "dequeue", "sessionId": TRUNK, "timestamp": ts(1)},
        ],
        [{"agentType": "Explore", "toolUseId": "toolu_01"}],
    ],
    ids=["summaries", "bookkeeping", "subagent-meta"],
)
def test_files_without_messages_load_nothing_and_are_not_unknown(
    tmp_path: Path, db: Path, records: list[dict[str, Any]]
) -> None:
    name = "agent-a1.meta.json" if "agentType" in records[0] else f"{TRUNK}.jsonl"
    f = write_jsonl(tmp_path / name, records)
    summary = ingest_paths(db, f)
    assert summary.skipped == [] and summary.sessions == 0 and summary.errors == 0
    assert query(db, "SELECT format, status, sessions FROM files") == [("claude_code", "ingested", 0)]


# Tokens per ccusage session for the fixtures, as `ccusage claude session --json --offline` 20.0.24 printed them (the
# parent of the new subagent layout, turn-2, includes its subagent). The summary-only file and the usage-free sample
# have no usage, so ccusage lists no session for them.
CCUSAGE_FIXTURES = {
    "d3ad4cdc-5657-435d-98fa-0035d53e383d": (114, 16769, 3754072, 174552, 3945507),
    "ba79134d-b6e9-4867-af0c-6941038c9e4b": (91, 2266, 503769, 16072, 522198),
    "turn-2": (5770, 11944, 315323, 273493, 606530),
}


def _fixture_layout(fixtures: Path) -> dict[str, Path]:
    base = fixtures / "claude_code"
    return {str(p.relative_to(base)): p for p in sorted(base.rglob("*.jsonl"))}


def test_fixture_tokens_match_the_recorded_ccusage_numbers(fixtures: Path, db: Path) -> None:
    ingest_paths(db, fixtures / "claude_code")
    assert by_ccusage_session(db) == CCUSAGE_FIXTURES


def test_fixture_tokens_agree_with_ccusage_live(fixtures: Path, db: Path) -> None:
    files = _fixture_layout(fixtures)
    reference = ccusage_tokens(files)
    ingest_paths(db, fixtures / "claude_code")
    assert by_ccusage_session(db) == reference == CCUSAGE_FIXTURES


# -- one response over several lines ---------------------------------------------------------------------------------


def test_split_response_is_one_turn_with_its_usage_counted_once(tmp_path: Path, db: Path) -> None:
    # CC 2.x: each content block on its own line, usage repeated, output growing until the last line.
    f = write_jsonl(
        tmp_path / f"{TRUNK}.jsonl",
        [
            user(0, "fix the build"),
            assistant(
                1,
                "msg_A",
                "req_A",
                [{"type": "thinking", "thinking": "hmm", "signature": "s"}],
                usage(10, 1, 1000, 200),
            ),
            assistant(2, "msg_A", "req_A", [text("Looking.")], usage(10, 2, 1000, 200)),
            assistant(3, "msg_A", "req_A", [tool_use("toolu_1", "Bash", {"command": "make"})], usage(10, 2, 1000, 200)),
            assistant(
                4, "msg_A", "req_A", [tool_use("toolu_2", "Read", {"file_path": "Makefile"})], usage(10, 85, 1000, 200)
            ),
            user(5, [tool_result("toolu_1", "make: *** no rule", True)]),
            user(6, [tool_result("toolu_2", [{"type": "text", "text": "all: build"}])]),
        ],
    )
    ingest_paths(db, f)
    turns = query(
        db,
        "SELECT role, turn_id, text, input_tokens, output_tokens, usage_key, usage_counted FROM turns "
        "ORDER BY turn_index",
    )
    assert turns[1:] == [("assistant", "msg_A", "Looking.", 10, 85, "msg_A", True)]
    calls = query(
        db, "SELECT seq, call_id, tool, turn_id, user_turn, result_text, is_error, error_kind FROM calls ORDER BY seq"
    )
    assert calls == [
        (0, "toolu_1", "Bash", "msg_A", 0, "make: *** no rule", True, "flag"),
        (1, "toolu_2", "Read", "msg_A", 0, "all: build", False, None),
    ]
    assert session_tokens(db) == {TRUNK: (10, 85, 1000, 200, 1295)}


# -- subagents -------------------------------------------------------------------------------------------------------


def _subagent_records(agent: str) -> list[dict[str, Any]]:
    return [
        user(10, "Survey the CLI.", isSidechain=True, agentId=agent),
        assistant(
            11,
            f"msg_{agent}",
            f"req_{agent}",
            [tool_use(f"toolu_{agent}", "Glob", {"pattern": "*.ts"})],
            usage(5, 7),
            isSidechain=True,
            agentId=agent,
        ),
        user(12, [tool_result(f"toolu_{agent}", "a.ts")], isSidechain=True, agentId=agent),
        # progress lines never create calls, in the subagent or in the trunk
        env("progress", 13, isSidechain=True, agentId=agent, data={"type": "hook_progress", "hookName": "Stop"}),
    ]


def _trunk_records() -> list[dict[str, Any]]:
    return [
        {"type": "summary", "summary": "Survey", "leafUuid": "uuid-x"},
        {"type": "file-history-snapshot", "messageId": "m", "snapshot": {"trackedFileBackups": {}}},
        user(0, "survey the CLI with a subagent"),
        assistant(1, "msg_T", "req_T", [tool_use("toolu_task", "Task", {"prompt": "Survey the CLI."})], usage(3, 4)),
        {"type": "queue-operation", "operation": "enqueue", "sessionId": TRUNK, "timestamp": ts(2), "content": "x"},
        # The trunk's copy of the subagent's messages: its tool_use and usage must not count a second time.
        env(
            "progress",
            11,
            parentToolUseID="toolu_task",
            toolUseID="agent_msg_1",
            data={
                "type": "agent_progress",
                "agentId": "a1",
                "message": {
                    "type": "assistant",
                    "timestamp": ts(11),
                    "requestId": "req_a1",
                    "message": {
                        "id": "msg_a1",
                        "model": MODEL,
                        "role": "assistant",
                        "usage": usage(5, 7),
                        "content": [tool_use("toolu_a1", "Glob", {"pattern": "*.ts"})],
                    },
                },
            },
        ),
        user(20, [tool_result("toolu_task", [text("Found a.ts")])]),
    ]


@pytest.mark.parametrize("layout", ["beside", "subagents"])
def test_subagent_files_are_their_own_sessions_under_the_trunk(tmp_path: Path, db: Path, layout: str) -> None:
    project = tmp_path / "projects" / "-repo"
    write_jsonl(project / f"{TRUNK}.jsonl", _trunk_records())
    sub = project / "agent-a1.jsonl" if layout == "beside" else project / TRUNK / "subagents" / "agent-a1.jsonl"
    write_jsonl(sub, _subagent_records("a1"))
    summary = ingest_paths(db, tmp_path / "projects")
    assert summary.errors == 0 and summary.skipped == []
    sessions = query(db, "SELECT session_id, parent_session_id, user_turns, calls FROM sessions ORDER BY 1")
    assert sessions == [(TRUNK, None, 1, 1), ("agent-a1", TRUNK, 1, 1)]
    calls = query(db, "SELECT session_id, call_id, tool, result_text FROM calls ORDER BY 1")
    assert calls == [(TRUNK, "toolu_task", "Task", "Found a.ts"), ("agent-a1", "toolu_a1", "Glob", "a.ts")]
    sidechain = dict(
        query(db, "SELECT session_id, bool_and(is_sidechain) FROM turns WHERE role = 'assistant' GROUP BY 1")
    )
    assert sidechain == {TRUNK: False, "agent-a1": True}
    # tokens: the trunk's response and the subagent's, each once (the agent_progress copy is ignored)
    assert session_tokens(db) == {TRUNK: (3, 4, 0, 0, 7), "agent-a1": (5, 7, 0, 0, 12)}


def test_a_subagent_file_that_writes_its_lines_again_is_read_once(tmp_path: Path, db: Path) -> None:
    """A resumed subagent can write its earlier lines into its file a second time, byte for byte (same uuids, same
    tool_use ids, as in a real Zatoichi-42/claude-zibe transcript): one call, one prompt, one turn, counted once; the
    reference counter (tests/realdata/tools/transcripts.py, which the labels index) also counts the call once."""
    first = _subagent_records("a1")[:3]
    later = [
        assistant(30, "msg_a1b", "req_a1b", [tool_use("toolu_a1b", "Read", {"file_path": "a.ts"})], usage(2, 3)),
        user(31, [tool_result("toolu_a1b", "export {}")]),
    ]
    for rec in later:
        rec.update(isSidechain=True, agentId="a1")
    path = write_jsonl(tmp_path / TRUNK / "subagents" / "agent-a1.jsonl", first + first + later)
    summary = ingest_paths(db, path)
    assert summary.errors == 0
    assert query(db, "SELECT seq, call_id, result_text FROM calls ORDER BY seq") == [
        (0, "toolu_a1", "a.ts"),
        (1, "toolu_a1b", "export {}"),
    ]
    assert query(db, "SELECT user_turns, turns, input_tokens, output_tokens FROM sessions") == [(1, 3, 7, 10)]


def test_sidechain_lines_inside_the_trunk_file_are_routed_to_their_agent(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(tmp_path / f"{TRUNK}.jsonl", [user(0, "go"), *_subagent_records("b2")])
    ingest_paths(db, f)
    assert query(db, "SELECT session_id, parent_session_id, calls FROM sessions ORDER BY 1") == [
        (TRUNK, None, 0),
        ("agent-b2", TRUNK, 1),
    ]


def test_inline_sidechain_without_agent_id_is_not_the_users_prompt(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(
        tmp_path / f"{TRUNK}.jsonl",
        [
            user(0, "go"),
            user(1, "Task prompt written by the model", isSidechain=True),
            assistant(
                2, "msg_s", "req_s", [tool_use("toolu_s", "Grep", {"pattern": "x"})], usage(1, 1), isSidechain=True
            ),
        ],
    )
    ingest_paths(db, f)
    assert query(db, "SELECT session_id, user_turns, calls FROM sessions") == [(TRUNK, 1, 1)]
    assert query(db, "SELECT user_turn FROM calls") == [(0,)]


# -- prompts ---------------------------------------------------------------------------------------------------------


def test_what_counts_as_a_user_prompt(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(
        tmp_path / f"{TRUNK}.jsonl",
        [
            user(0, "Caveat: The messages below were generated by the user while running local commands.", isMeta=True),
            user(
                1,
                "<command-name>/model</command-name>\n<command-message>model</command-message>\n"
                "<command-args>opus</command-args>",
            ),
            user(2, "<local-command-stdout>Set model to opus</local-command-stdout>"),
            user(3, [text("add a test"), {"type": "image", "source": {"type": "base64", "data": "AAAA"}}]),
            assistant(4, "msg_1", "req_1", [tool_use("toolu_1", "Bash", {"command": "pytest"})], usage(1, 1)),
            user(5, [tool_result("toolu_1", "1 passed")]),
            user(6, "[Request interrupted by user]"),
            user(7, "<bash-input>git status</bash-input>"),
            user(8, "<bash-stdout>clean</bash-stdout><bash-stderr></bash-stderr>"),
            env("system", 9, subtype="compact_boundary", compactMetadata={"trigger": "auto", "preTokens": 1}),
            user(10, "This session is being continued from a previous conversation…", isCompactSummary=True),
            {
                "type": "attachment",
                "sessionId": TRUNK,
                "uuid": "att-1",
                "timestamp": ts(11),
                "attachment": {"type": "queued_command", "prompt": "also lint it", "origin": {"kind": "human"}},
            },
            {
                "type": "attachment",
                "sessionId": TRUNK,
                "uuid": "att-2",
                "timestamp": ts(12),
                "attachment": {"type": "queued_command", "prompt": "<task-notification>", "origin": {"kind": "task"}},
            },
            assistant(13, "msg_2", "req_2", [tool_use("toolu_2", "Bash", {"command": "ruff ."})], usage(1, 1)),
            user(14, [tool_result("toolu_2", "ok")]),
        ],
    )
    ingest_paths(db, f)
    prompts = query(db, "SELECT user_turn, text FROM turns WHERE role = 'user' ORDER BY turn_index")
    assert prompts == [(0, "/model opus"), (1, "add a test"), (2, "also lint it")]
    assert query(db, "SELECT call_id, user_turn FROM calls ORDER BY seq") == [("toolu_1", 1), ("toolu_2", 2)]


def test_a_rejected_call_is_an_error_of_kind_rejected(tmp_path: Path, db: Path) -> None:
    reject = (
        "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
        "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
        "tell you how to proceed."
    )
    f = write_jsonl(
        tmp_path / f"{TRUNK}.jsonl",
        [
            user(0, "clean up"),
            assistant(1, "msg_1", "req_1", [tool_use("toolu_1", "Bash", {"command": "rm -rf build"})], usage(1, 1)),
            user(2, [tool_result("toolu_1", reject, True)]),
            assistant(3, "msg_2", "req_2", [tool_use("toolu_2", "Bash", {"command": "sleep 100"})], usage(1, 1)),
            user(4, [tool_result("toolu_2", [text("[Request interrupted by user for tool use]")], True)]),
            assistant(5, "msg_3", "req_3", [tool_use("toolu_3", "Read", {"file_path": "x"})], usage(1, 1)),
            user(6, [tool_result("toolu_3", "File does not exist.", True)]),
        ],
    )
    ingest_paths(db, f)
    rows = query(db, "SELECT call_id, is_error, error_kind FROM calls ORDER BY seq")
    assert rows == [("toolu_1", True, "rejected"), ("toolu_2", True, "rejected"), ("toolu_3", True, "flag")]
    assert query(db, "SELECT error_calls FROM sessions") == [(3,)]


def test_server_tool_calls_get_their_result_from_the_same_message(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(
        tmp_path / f"{TRUNK}.jsonl",
        [
            user(0, "what changed in duckdb 1.4?"),
            assistant(
                1,
                "msg_1",
                "req_1",
                [
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "web_search",
                        "input": {"query": "duckdb 1.4"},
                    },
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_1",
                        "content": [{"type": "web_search_result", "url": "https://duckdb.org/1.4", "title": "1.4"}],
                    },
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_2",
                        "name": "web_search",
                        "input": {"query": "duckdb 1.4"},
                    },
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_2",
                        "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
                    },
                    text("Here is what changed."),
                ],
                usage(1, 1),
            ),
        ],
    )
    ingest_paths(db, f)
    assert query(db, "SELECT call_id, tool, result_text, is_error FROM calls ORDER BY seq") == [
        ("srvtoolu_1", "web_search", "https://duckdb.org/1.4", False),
        ("srvtoolu_2", "web_search", "max_uses_exceeded", True),
    ]


# -- bad input -------------------------------------------------------------------------------------------------------


def test_unusable_records_are_reported_and_the_rest_is_loaded(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(
        tmp_path / f"{TRUNK}.jsonl",
        [
            user(0, "go"),
            ["a", "list"],
            {**env("assistant", 1), "message": "not an object"},
            {**env("user", 2), "message": None},
            user(3, [tool_result("toolu_unknown", "orphan")]),
            assistant(4, "msg_1", "req_1", ["junk", tool_use("toolu_1", "Bash", {"command": "ls"})], usage(1, 1)),
            user(5, [tool_result("toolu_1", None)]),
        ],
    )
    summary = ingest_paths(db, f)
    reasons = [r for (r,) in query(db, "SELECT reason FROM ingest_errors ORDER BY line")]
    assert reasons == [
        "not a JSON object",
        "assistant line without a message object",
        "user line without a message object",
        "tool result for a call not in this session (toolu_unknown)",
    ]
    assert summary.errors == 4
    assert query(db, "SELECT call_id, result_text, is_error FROM calls") == [("toolu_1", "", False)]


# -- tokens: ccusage's rules -----------------------------------------------------------------------------------------


def _ccusage_rule_corpus(root: Path) -> dict[str, Path]:
    """Small files, each line exercising one of ccusage's rules; returns path-under-projects -> file."""
    bad_null = assistant(
        19, "msg_nul", "req_nul", [tool_use("toolu_n", "TodoWrite", {"todos": [{"id": None}]})], usage(1, 1000)
    )  # a null `id` anywhere in the line: ccusage skips the line's usage
    trunk = [
        user(0, "go"),
        # split response: the largest line counts (1000 + 50 + 100 + 40)
        assistant(1, "msg_split", "req_split", [text("a")], usage(100, 3, 1000, 50)),
        assistant(2, "msg_split", "req_split", [text("b")], usage(100, 40, 1000, 50)),
        # Bedrock: no requestId, keyed on (session, message.id) (largest: 5 + 7)
        assistant(3, "msg_bdrk_1", None, [text("c")], usage(5, 2)),
        assistant(4, "msg_bdrk_1", None, [text("d")], usage(5, 7)),
        # one message id answered by two requests: ccusage counts both (9 + 11)
        assistant(5, "msg_two", "req_two_a", [text("e")], usage(4, 5)),
        assistant(6, "msg_two", "req_two_b", [text("f")], usage(4, 7)),
        # no message.id: every line counts (2 + 2)
        assistant(7, None, None, [text("g")], usage(1, 1)),
        assistant(8, None, None, [text("h")], usage(1, 1)),
        # cache_creation's 5m + 1h parts (10 + 5) win over cache_creation_input_tokens (99)
        assistant(
            9,
            "msg_eph",
            "req_eph",
            [text("i")],
            usage(1, 1, 0, 99, cache_creation={"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 5}),
        ),
        # an advisor's usage is added in (1 + 1, plus 30 + 3 + 300 read)
        assistant(
            10,
            "msg_adv",
            "req_adv",
            [text("j")],
            usage(
                1,
                1,
                iterations=[
                    {
                        "type": "advisor_message",
                        "model": "claude-opus-4-1",
                        "input_tokens": 30,
                        "output_tokens": 3,
                        "cache_read_input_tokens": 300,
                    }
                ],
            ),
        ),
        # synthetic and API-error messages count like any other (2 + 3)
        assistant(
            11, "msg_syn", None, [text("API Error: 529")], usage(2, 3), model="<synthetic>", isApiErrorMessage=True
        ),
        # lines ccusage does not count: a timestamp without a zone, a version that is not semver, a fractional token
        # count, an unknown speed, and the null field above (the first line of that response still counts: 1 + 1)
        {**assistant(12, "msg_tz", "req_tz", [text("k")], usage(1000, 1)), "timestamp": "2026-01-01T00:00:12"},
        assistant(13, "msg_ver", "req_ver", [text("l")], usage(1000, 1), version="dev"),
        assistant(14, "msg_flt", "req_flt", [text("m")], {"input_tokens": 1000.0, "output_tokens": 1}),
        assistant(15, "msg_spd", "req_spd", [text("n")], usage(1000, 1, speed="warp")),
        assistant(18, "msg_nul", "req_nul", [text("o")], usage(1, 1)),
        bad_null,
        user(20, [tool_result("toolu_n", "ok")]),
        # the transcript's own cost (1 + 1)
        assistant(21, "msg_cost", "req_cost", [text("p")], usage(1, 1), costUSD=0.25),
        # a two-line response the aside below replays (1 + 60)
        assistant(22, "msg_multi", "req_multi", [text("q")], usage(1, 1)),
        assistant(23, "msg_multi", "req_multi", [text("r")], usage(1, 60)),
    ]
    # A /btw aside under subagents/. It replays msg_split's kept line (same timestamp, new request id, a huge cache
    # read): dropped, the trunk copy wins. It replays both lines of msg_multi: ccusage counts that copy again
    # (1 + 60 + 5000). And it answers once itself (6 + 6).
    aside_id = {"isSidechain": True, "agentId": "aside_question-1"}
    aside = [
        user(30, "btw, what is X?", **aside_id),
        assistant(2, "msg_split", "req_replay", [text("b")], usage(100, 40, 900000, 50), **aside_id),
        assistant(22, "msg_multi", "req_replay2", [text("q")], usage(1, 1, 5000), **aside_id),
        env("progress", 22, data={"type": "hook_progress"}, **aside_id),
        assistant(23, "msg_multi", "req_replay2", [text("r")], usage(1, 60, 5000), **aside_id),
        assistant(32, "msg_aside", "req_aside", [text("X is Y")], usage(6, 6), **aside_id),
    ]
    # Old layout: a subagent beside the trunk. ccusage calls it by its file name, agent-old.
    old = [
        user(40, "Survey.", isSidechain=True, agentId="old"),
        assistant(41, "msg_old", "req_old", [text("done")], usage(8, 9, 70, 0), isSidechain=True, agentId="old"),
    ]
    # Another session, resumed from the first: its copy of msg_split (same message and request id) is not counted
    # again, but its Bedrock response, though it shares msg_bdrk_1, belongs to another session and counts (5 + 9).
    other = [
        user(50, "continue", sessionId=OTHER),
        assistant(1, "msg_split", "req_split", [text("b")], usage(100, 40, 1000, 50), sessionId=OTHER),
        assistant(51, "msg_bdrk_1", None, [text("s")], usage(5, 9), sessionId=OTHER),
    ]
    files = {
        f"-repo/{TRUNK}.jsonl": trunk,
        f"-repo/{TRUNK}/subagents/agent-aside_question-1.jsonl": aside,
        "-repo/agent-old.jsonl": old,
        f"-repo/{OTHER}.jsonl": other,
    }
    return {rel: write_jsonl(root / rel, recs) for rel, recs in files.items()}


# ccusage 20.0.24 on _ccusage_rule_corpus (`ccusage claude session --json --offline`), as worked out line by line above:
# trunk input 100+5+4+4+1+1+1+1+30+2+1+1+1, output 40+7+5+7+1+1+1+1+3+3+1+1+60, cache read 1000+300, write 50+15,
# plus the aside (1 + 60 + 5000 read; 6 + 6).
CCUSAGE_RULES = {
    TRUNK: (159, 197, 6300, 65, 6721),
    "agent-old": (8, 9, 70, 0, 87),
    OTHER: (5, 9, 0, 0, 14),
}


def test_usage_follows_ccusage_rules(tmp_path: Path, db: Path) -> None:
    _ccusage_rule_corpus(tmp_path / "projects")
    summary = ingest_paths(db, tmp_path / "projects")
    assert summary.errors == 0
    assert by_ccusage_session(db) == CCUSAGE_RULES
    assert session_tokens(db) == {
        TRUNK: (152, 131, 1300, 65, 1648),
        "agent-aside_question-1": (7, 66, 5000, 0, 5073),
        "agent-old": (8, 9, 70, 0, 87),
        OTHER: (5, 9, 0, 0, 14),
    }
    # The replayed copy is a row of the aside session but its usage is not counted.
    split = query(db, "SELECT session_id, usage_counted FROM turns WHERE turn_id = 'msg_split' ORDER BY 1")
    assert split == [(TRUNK, True), (OTHER, False), ("agent-aside_question-1", False)]
    keys = [k for (k,) in query(db, "SELECT usage_key FROM turns WHERE usage_key LIKE 'msg_two%' ORDER BY 1")]
    assert keys == ["msg_two", "msg_two:req_two_b"]
    models = query(db, f"SELECT models FROM sessions WHERE session_id = '{TRUNK}'")
    assert models == [([MODEL],)]  # <synthetic> is not a model that answered
    (cost,) = query(db, "SELECT cost_usd, cost_source FROM turns WHERE turn_id = 'msg_cost'")
    assert cost == (0.25, "transcript")


def test_usage_rules_agree_with_ccusage_live(tmp_path: Path, db: Path) -> None:
    files = _ccusage_rule_corpus(tmp_path / "projects")
    reference = ccusage_tokens(files)
    ingest_paths(db, tmp_path / "projects")
    assert by_ccusage_session(db) == reference == CCUSAGE_RULES


def _screenshot(data: str) -> list[dict[str, Any]]:
    return [
        text("# take_screenshot response\nTook a screenshot of the current page's viewport."),
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
    ]


def test_a_results_images_are_part_of_its_text_by_digest(tmp_path: Path, db: Path) -> None:
    """A screenshot's answer is its image: the text ("Took a screenshot") is the same every time, so without the image
    four screenshots of a changing page read as the same result four times (Jason-liu-0219/my-claude). Each image is a
    line naming it by a digest of its data, never the data itself."""
    shots = ["iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB", "iVBORw0KGgoAAAANSUhEUgAAAAIAAAAC", "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"]
    records: list[dict[str, Any]] = [user(0, "check the hover style")]
    for i, data in enumerate(shots):
        cid = f"toolu_{i}"
        records.append(assistant(2 * i + 1, f"msg_{i}", f"req_{i}", [tool_use(cid, "take_screenshot", {})], None))
        records.append(user(2 * i + 2, [tool_result(cid, _screenshot(data))]))
    ingest_paths(db, write_jsonl(tmp_path / f"{TRUNK}.jsonl", records))
    rows = query(db, "SELECT result_text, result_key FROM calls ORDER BY seq")
    texts = [r[0] for r in rows]
    assert all(t.startswith("# take_screenshot response\nTook a screenshot") for t in texts)
    assert all(re.search(r"\n\[image/png, 24 bytes, sha1 [0-9a-f]{12}\]$", t) for t in texts)
    assert not any(data in t for data in shots for t in texts)
    keys = [r[1] for r in rows]
    assert keys[0] != keys[1] and keys[0] == keys[2]  # another image is another result; the same image, the same
