"""Gemini CLI chats: the legacy single-JSON record and the JSONL stream (repeated ids, $set, $rewindTo), calls and
their results, failed and cancelled calls, token totals against ccusage, --agent filtering and the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ccusage import run_ccusage
from helpers import ingest_paths, query, write_jsonl
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.ingest.formats import agent_names
from analyzer.store.filters import parse_agent

LEGACY = "gemini/session-2025-12-01T21-45-5b959dae.json"
SID = "5b959dae-8655-4cd1-b10f-720b8c336ea2"
JSONL_SID = "0a1b2c3d-0000-4000-8000-000000000001"


def session_totals(db: Path, sid: str) -> tuple:
    return query(
        db,
        "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, "
        "calls, error_calls, user_turns FROM sessions WHERE session_id = ?",
        [sid],
    )[0]


# -- the public legacy record ------------------------------------------------------------------------------------------
def test_legacy_fixture_calls_and_usage(fixtures: Path, db: Path) -> None:
    # Read off the file: 14 messages (3 user, 11 gemini), 10 toolCalls all status "success", tokens on every gemini
    # message; summed: input 101630 (cached 56538 of it), output 2734, thoughts 1493, tool 0, total 105857.
    s = ingest_paths(db, fixtures / LEGACY)
    assert (s.files_ingested, s.sessions, s.calls, s.errors) == (1, 1, 10, 0)
    assert query(db, "SELECT format, cwd, models FROM sessions") == [
        ("gemini_cli", None, ["gemini-3-pro-image-preview"])
    ]
    tools = [r[0] for r in query(db, "SELECT tool FROM calls ORDER BY seq")]
    assert tools == [
        "list_directory",
        "read_file",
        "read_file",
        "read_file",
        "read_file",
        "read_file",
        "write_file",
        "read_file",
        "replace",
        "read_file",
    ]
    first = query(
        db, "SELECT call_id, args, result_text, is_error, result_text IS NOT NULL FROM calls ORDER BY seq LIMIT 1"
    )[0]
    assert first[0] == "list_directory-1764625554423-6b5d2c6179cc4"
    assert first[1] == '{"dir_path":"/Users/Jane_Smith/Documents/projects/epm-cdme/assistants/"}'
    assert first[2].startswith("Directory listing for /Users/Jane_Smith/Documents/projects/epm-cdme/assistants:")
    assert (first[3], first[4]) == (False, True)
    # input excludes cached; output includes thoughts (billed as output); the total is the CLI's own
    assert session_totals(db, SID) == (101630 - 56538, 2734 + 1493, 56538, 0, 105857, 10, 0, 3)
    # calls belong to the gemini message that made them, in the user turn they were made in
    assert query(db, "SELECT user_turn, count(*) FROM calls GROUP BY 1 ORDER BY 1") == [(1, 5), (2, 5)]


def test_legacy_fixture_agrees_with_ccusage(fixtures: Path, db: Path) -> None:
    ref = run_ccusage("gemini", {"proj/chats/" + Path(LEGACY).name: fixtures / LEGACY})
    ingest_paths(db, fixtures / LEGACY)
    inp, out, cr, cw, total, *_ = session_totals(db, SID)
    (r,) = [x for x in ref if x["sessionId"] == SID]
    # ccusage reports output without thoughts but counts them in the total: only the split differs
    assert (inp, cr, cw, total) == (r["inputTokens"], r["cacheReadTokens"], r["cacheCreationTokens"], r["totalTokens"])
    assert out == r["outputTokens"] + 1493


# -- the JSONL stream (v0.39+) -----------------------------------------------------------------------------------------
def msg(mid: str, kind: str, content: Any, ts: str, **extra: Any) -> dict[str, Any]:
    return {"id": mid, "timestamp": ts, "type": kind, "content": content, **extra}


def tool(
    cid: str, name: str, args: dict[str, Any], status: str, output: str | None = None, error: str | None = None
) -> dict[str, Any]:
    tc: dict[str, Any] = {
        "id": cid,
        "name": name,
        "args": args,
        "status": status,
        "timestamp": "2026-05-01T10:00:03.000Z",
    }
    if output is not None or error is not None:
        resp = {"output": output} if error is None else {"error": error}
        tc["result"] = [{"functionResponse": {"id": cid, "name": name, "response": resp}}]
    return tc


def tokens(inp: int, out: int, cached: int = 0, thoughts: int = 0, tool_: int = 0) -> dict[str, int]:
    return {
        "input": inp,
        "output": out,
        "cached": cached,
        "thoughts": thoughts,
        "tool": tool_,
        "total": inp + out + thoughts + tool_,
    }


def jsonl_chat(tmp_path: Path) -> Path:
    g1_partial = msg(
        "g1",
        "gemini",
        "Let me look.",
        "2026-05-01T10:00:02.000Z",
        model="gemini-2.5-pro",
        toolCalls=[tool("ls-1", "list_directory", {"dir_path": "."}, "executing")],
    )
    g1_done = dict(
        g1_partial,
        toolCalls=[
            tool("ls-1", "list_directory", {"dir_path": "."}, "success", output="a.py\nb.py"),
            tool("rd-1", "read_file", {"file_path": "c.py"}, "error", error="File not found: c.py"),
            tool("sh-1", "run_shell_command", {"command": "rm -rf /"}, "cancelled"),
        ],
        tokens=tokens(1000, 50, cached=400, thoughts=20),
    )
    records = [
        {
            "sessionId": JSONL_SID,
            "projectHash": "abc123",
            "startTime": "2026-05-01T10:00:00.000Z",
            "lastUpdated": "2026-05-01T10:00:00.000Z",
            "kind": "main",
        },
        msg("u1", "user", [{"text": "list the files"}], "2026-05-01T10:00:01.000Z"),
        g1_partial,
        g1_done,  # the same id appended again, grown: last write wins
        {"$set": {"lastUpdated": "2026-05-01T10:00:04.000Z", "summary": "listing"}},
        msg("u2", "user", "now read b.py", "2026-05-01T10:00:05.000Z"),
        msg(
            "g2",
            "gemini",
            "Reading.",
            "2026-05-01T10:00:06.000Z",
            model="gemini-2.5-pro",
            toolCalls=[tool("rd-2", "read_file", {"file_path": "b.py"}, "success", output="print(1)")],
            tokens=tokens(1500, 30, cached=1000, tool_=5),
        ),
        {"$rewindTo": "g2"},  # not applied: g2 happened and cost tokens
        msg("i1", "info", "Request cancelled.", "2026-05-01T10:00:07.000Z"),
        msg(
            "g3",
            "gemini",
            "Done.",
            "2026-05-01T10:00:08.000Z",
            model="gemini-2.5-pro",
            tokens=tokens(1600, 10, cached=1500),
        ),
        msg("x1", "mystery", "?", "2026-05-01T10:00:09.000Z"),  # bad: unknown message type
    ]
    path = write_jsonl(tmp_path / "tmp" / "proj" / "chats" / "session-2026-05-01T10-00-0a1b2c3d.jsonl", records)
    with path.open("a") as f:
        f.write('{"id": "g4", "type": "gemini", "content": \n')  # a torn last line
    return path


def test_jsonl_stream(tmp_path: Path, db: Path) -> None:
    path = jsonl_chat(tmp_path)
    s = ingest_paths(db, path)
    assert (s.files_ingested, s.sessions, s.calls) == (1, 1, 4)
    rows = query(db, "SELECT call_id, tool, result_text, is_error, error_kind, user_turn FROM calls ORDER BY seq")
    assert rows == [
        ("ls-1", "list_directory", "a.py\nb.py", False, None, 0),
        ("rd-1", "read_file", "File not found: c.py", True, "flag", 0),
        ("sh-1", "run_shell_command", "", True, "rejected", 0),
        ("rd-2", "read_file", "print(1)", False, None, 1),
    ]
    # usage: g1 counted once (its last copy), input excludes cached, tool-use prompt tokens are input
    assert session_totals(db, JSONL_SID) == (
        (1000 - 400) + (1500 - 1000 + 5) + (1600 - 1500),
        50 + 20 + 30 + 10,
        400 + 1000 + 1500,
        0,
        1070 + 1535 + 1610,
        4,
        2,
        2,
    )
    errors = query(db, "SELECT line, reason FROM ingest_errors ORDER BY line")
    assert [e[0] for e in errors] == [11, 12]
    assert "unknown type 'mystery'" in errors[0][1]
    assert query(db, "SELECT turns FROM sessions") == [(5,)]  # 2 prompts, 3 gemini messages (info is not a turn)


def test_jsonl_agrees_with_ccusage(tmp_path: Path, db: Path) -> None:
    path = jsonl_chat(tmp_path)
    ref = run_ccusage("gemini", {"proj/chats/" + path.name: path})
    ingest_paths(db, path)
    inp, out, cr, cw, total, *_ = session_totals(db, JSONL_SID)
    (r,) = [x for x in ref if x["sessionId"] == JSONL_SID]
    assert (inp, cr, cw, total) == (r["inputTokens"], r["cacheReadTokens"], r["cacheCreationTokens"], r["totalTokens"])
    assert out == r["outputTokens"] + 20  # thoughts: output here, only in the total there


def test_subagent_chat_points_to_its_parent(tmp_path: Path, db: Path) -> None:
    path = write_jsonl(
        tmp_path / "chats" / JSONL_SID / "sub-1.jsonl",
        [
            {
                "sessionId": "sub-1",
                "projectHash": "abc123",
                "startTime": "2026-05-01T10:00:00.000Z",
                "kind": "subagent",
            },
            msg("g1", "gemini", "hi", "2026-05-01T10:00:01.000Z", tokens=tokens(10, 1)),
        ],
    )
    ingest_paths(db, path)
    assert query(db, "SELECT session_id, parent_session_id FROM sessions") == [("sub-1", JSONL_SID)]


def test_reingest_after_append(tmp_path: Path, db: Path) -> None:
    path = jsonl_chat(tmp_path)
    ingest_paths(db, path)
    with path.open("a") as f:
        f.write('\n{"id":"u3","timestamp":"2026-05-01T11:00:00.000Z","type":"user","content":"more"}\n')
    s = ingest_paths(db, path)
    assert s.files_ingested == 1
    assert query(db, "SELECT user_turns FROM sessions") == [(3,)]


# -- --agent and the CLI -----------------------------------------------------------------------------------------------
def test_agent_aliases() -> None:
    assert {parse_agent(a, agent_names()) for a in ("gemini", "gemini-cli", "gemini_cli", "Gemini")} == {"gemini_cli"}


def test_cli_ingest_then_sessions(fixtures: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(fixtures / "gemini", corpus / "gemini")
    shutil.copytree(fixtures / "codex", corpus / "codex")
    db = tmp_path / "cli.duckdb"
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(corpus), "--db", str(db)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["sessions", "--db", str(db), "--agent", "gemini", "--format", "csv"])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    chats = list((fixtures / "gemini").glob("session-*.json"))
    assert len(lines) == 1 + len(chats) and any(SID in line for line in lines[1:])
    assert all("gemini_cli" in line for line in lines[1:])


def test_legacy_chat_yields_to_its_migrated_jsonl(fixtures: Path, tmp_path: Path, db: Path) -> None:
    chats = tmp_path / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True)
    legacy = chats / Path(LEGACY).name
    shutil.copyfile(fixtures / LEGACY, legacy)
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT source_path, calls FROM sessions") == [(str(legacy), 10)]
    # the CLI resumes it: everything is written again to <name>.jsonl, plus the new turn; the .json stays
    doc = json.loads(legacy.read_text())
    meta = {k: v for k, v in doc.items() if k != "messages"}
    write_jsonl(
        chats / (legacy.name + "l"), [meta, *doc["messages"], msg("u9", "user", "and now?", "2025-12-02T10:00:00.000Z")]
    )
    s = ingest_paths(db, tmp_path)
    assert s.files_ingested == 2
    assert query(db, "SELECT source_path, calls, user_turns FROM sessions") == [(str(legacy) + "l", 10, 4)]
    notes = [r[0] for r in query(db, "SELECT reason FROM ingest_errors")]
    assert len(notes) == 1 and "superseded by" in notes[0]
    assert ingest_paths(db, tmp_path).files_ingested == 0  # and both are unchanged next time
