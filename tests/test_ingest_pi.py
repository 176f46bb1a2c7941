"""pi sessions: v1 and v3 files, tool results, aborted calls, user shell commands, usage and cost."""

from __future__ import annotations

from pathlib import Path

from helpers import ingest_paths, query, write_jsonl


def test_large_v1_session_counts(fixtures: Path, db: Path) -> None:
    # Counts read off the file (fixtures/SOURCES.md): 391 toolCalls, 373 toolResults, 19 isError, 18 calls without a
    # result; tokens and cost as `ccusage pi session --json` reports them for this file.
    ingest_paths(db, fixtures / "pi" / "pi-mono_large-session.jsonl")
    ((sid, calls, errors, total, inp, out, cr, cw, cost),) = query(
        db,
        "SELECT session_id, calls, error_calls, total_tokens, input_tokens, output_tokens, cache_read_tokens, "
        "cache_write_tokens, cost_usd FROM sessions",
    )
    assert sid == "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"
    assert (calls, errors) == (391, 19)
    assert (inp, out, cr, cw, total) == (1049, 83156, 43229469, 4296232, 47609906)
    assert round(cost, 6) == round(30.330197699999985, 6)
    ((linked, unanswered),) = query(
        db,
        "SELECT count(*) FILTER (WHERE result_text IS NOT NULL), count(*) FILTER (WHERE result_key IS NULL) FROM calls",
    )
    assert (linked, unanswered) == (373, 18)
    by_tool = dict(query(db, "SELECT tool, count(*) FROM calls GROUP BY tool"))
    assert by_tool == {"bash": 192, "edit": 146, "read": 50, "write": 3}


def test_v3_tree_session_with_bash_execution_and_aborted_call(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"type": "session", "version": 3, "id": "sess-3", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/r"},
            {
                "type": "message",
                "id": "u1",
                "parentId": None,
                "timestamp": "2026-01-01T00:00:01Z",
                "message": {"role": "user", "content": "build it"},
            },
            {
                "type": "message",
                "id": "a1",
                "parentId": "u1",
                "timestamp": "2026-01-01T00:00:02Z",
                "message": {
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [
                        {"type": "text", "text": "Building."},
                        {
                            "type": "toolCall",
                            "id": "c1",
                            "name": "bash",
                            "arguments": {"command": "make", "timeout": 5},
                        },
                        {"type": "toolCall", "id": "c2", "name": "read", "arguments": {"path": "a"}},
                    ],
                    "usage": {"input": 10, "output": 5, "cacheRead": 100, "cacheWrite": 0, "cost": {"total": 0.5}},
                },
            },
            {
                "type": "message",
                "id": "r1",
                "parentId": "a1",
                "timestamp": "2026-01-01T00:00:03Z",
                "message": {
                    "role": "toolResult",
                    "toolCallId": "c1",
                    "toolName": "bash",
                    "content": [{"type": "text", "text": "error: no rule"}],
                    "isError": True,
                },
            },
            {
                "type": "message",
                "id": "b1",
                "parentId": "r1",
                "timestamp": "2026-01-01T00:00:04Z",
                "message": {"role": "bashExecution", "command": "ls", "output": "a b", "exitCode": 0},
            },
            {
                "type": "message",
                "id": "u2",
                "parentId": "b1",
                "timestamp": "2026-01-01T00:00:05Z",
                "message": {"role": "user", "content": [{"type": "text", "text": "again"}]},
            },
        ],
    )
    ingest_paths(db, f)
    rows = query(
        db, "SELECT seq, call_id, tool, args, is_error, result_text, turn_id, user_turn FROM calls ORDER BY seq"
    )
    assert rows == [
        (0, "c1", "bash", '{"command":"make","timeout":5}', True, "error: no rule", "a1", 0),
        (1, "c2", "read", '{"path":"a"}', None, None, "a1", 0),
    ]
    ((user_turns, turns, cost, total),) = query(db, "SELECT user_turns, turns, cost_usd, total_tokens FROM sessions")
    assert (user_turns, turns, cost, total) == (2, 3, 0.5, 115)


def test_tokens_agree_with_ccusage(fixtures: Path, db: Path) -> None:
    from ccusage import run_ccusage

    files = {f"proj/{p.name}": p for p in sorted((fixtures / "pi").glob("*.jsonl"))}
    reference = {s["sessionId"]: s for s in run_ccusage("pi", files)}
    ingest_paths(db, *files.values())
    ours = query(
        db,
        "SELECT source_path, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, "
        "total_tokens, cost_usd FROM sessions",
    )
    assert len(ours) == len(reference) == 2
    for path, inp, out, cr, cw, total, cost in ours:
        # ccusage names a pi session after its file (the part after the last "_").
        ref = reference[Path(path).stem.rsplit("_", 1)[-1]]
        assert (inp, out, cr, cw, total) == (
            ref["inputTokens"],
            ref["outputTokens"],
            ref["cacheReadTokens"],
            ref["cacheCreationTokens"],
            ref["totalTokens"],
        )
        assert abs(cost - ref["totalCost"]) < 1e-6
