"""opencode: the legacy storage tree (a session read from its session file with its message and part files), the
SQLite opencode.db, and ``opencode export`` documents. Calls, results and errors from tool parts, usage from
step-finish parts, token totals against ccusage, re-ingest when messages are added, bad records kept-and-recorded,
--agent filtering and the CLI.

No public opencode transcript was found to copy, so the records are built here from docs/formats.md#opencode
(opencode's message-v2 schema and session.sql.ts tables)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from ccusage import run_ccusage
from helpers import OPENCODE_DDL, ingest_paths, query
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.errors import NothingToIngestError
from analyzer.ingest.formats import agent_names
from analyzer.store.filters import parse_agent

SID = "ses_7f3a1c2b9ffeAbCdEfGhIjKlMn"
PROJECT = "4b0ea68d7af9a6031a7ffda7ad66e0cb83315750"
T0 = 1767312000000  # 2026-01-02T00:00:00Z in ms


def tokens(inp: int, out: int, reasoning: int = 0, read: int = 0, write: int = 0) -> dict[str, Any]:
    return {"input": inp, "output": out, "reasoning": reasoning, "cache": {"read": read, "write": write}}


def tool_part(
    pid: str,
    mid: str,
    call: str,
    name: str,
    inp: dict[str, Any],
    status: str,
    output: str | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    state: dict[str, Any] = {"status": status, "input": inp, "time": {"start": T0 + 5000}}
    if status == "completed":
        state.update(output=output, title=name, metadata={}, time={"start": T0 + 5000, "end": T0 + 6000})
    elif status == "error":
        state.update(error=error, time={"start": T0 + 5000, "end": T0 + 6000})
    return {"id": pid, "sessionID": SID, "messageID": mid, "type": "tool", "callID": call, "tool": name, "state": state}


def step_finish(pid: str, mid: str, tok: dict[str, Any], cost: float) -> dict[str, Any]:
    return {
        "id": pid,
        "sessionID": SID,
        "messageID": mid,
        "type": "step-finish",
        "reason": "tool-calls",
        "tokens": tok,
        "cost": cost,
    }


def records(multi_step: bool = True) -> tuple[dict[str, Any], list[tuple[dict[str, Any], list[dict[str, Any]]]]]:
    """One session: a prompt, an assistant message over two model steps (three tools: completed, error, still
    running), a second prompt and a one-step answer with one tool call."""
    session = {
        "id": SID,
        "slug": "brave-otter",
        "version": "1.1.36",
        "projectID": PROJECT,
        "directory": "/work/app",
        "title": "Fix the tests",
        "time": {"created": T0, "updated": T0 + 60000},
    }
    u1 = {
        "id": "msg_a00000001",
        "sessionID": SID,
        "role": "user",
        "time": {"created": T0 + 1000},
        "agent": "build",
        "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"},
    }
    u1_parts = [
        {
            "id": "prt_a00000001",
            "sessionID": SID,
            "messageID": u1["id"],
            "type": "text",
            "text": "run the tests and fix them",
        }
    ]
    a1 = {
        "id": "msg_a00000002",
        "sessionID": SID,
        "role": "assistant",
        "parentID": u1["id"],
        "modelID": "claude-sonnet-4-5",
        "providerID": "anthropic",
        "mode": "build",
        "agent": "build",
        "path": {"cwd": "/work/app", "root": "/work/app"},
        "time": {"created": T0 + 2000, "completed": T0 + 9000},
        "cost": 0.05,
        "tokens": tokens(300, 40, 10, 2000, 100),
    }  # opencode keeps the LAST step's tokens here
    a1_parts = [
        {"id": "prt_a00000002", "sessionID": SID, "messageID": a1["id"], "type": "step-start"},
        {"id": "prt_a00000003", "sessionID": SID, "messageID": a1["id"], "type": "text", "text": "Running them."},
        tool_part(
            "prt_a00000004",
            a1["id"],
            "toolu_01",
            "bash",
            {"command": "pytest -q"},
            "completed",
            output="1 failed, 3 passed",
        ),
        step_finish("prt_a00000005", a1["id"], tokens(1000, 60, 0, 500, 1500), 0.02),
        {"id": "prt_a00000006", "sessionID": SID, "messageID": a1["id"], "type": "step-start"},
        tool_part(
            "prt_a00000007",
            a1["id"],
            "toolu_02",
            "read",
            {"filePath": "tests/x.py"},
            "error",
            error="File not found: tests/x.py",
        ),
        tool_part("prt_a00000008", a1["id"], "toolu_03", "bash", {"command": "sleep 100"}, "running"),
        step_finish("prt_a00000009", a1["id"], tokens(300, 40, 10, 2000, 100), 0.03),
    ]
    if not multi_step:  # one step only: message tokens are the step's, as ccusage reads them
        a1_parts = [p for p in a1_parts if p["id"] not in ("prt_a00000005", "prt_a00000006")]
    u2 = {"id": "msg_a00000003", "sessionID": SID, "role": "user", "time": {"created": T0 + 20000}}
    u2_parts = [{"id": "prt_a00000010", "sessionID": SID, "messageID": u2["id"], "type": "text", "text": "thanks"}]
    a2 = {
        "id": "msg_a00000004",
        "sessionID": SID,
        "role": "assistant",
        "parentID": u2["id"],
        "modelID": "claude-sonnet-4-5",
        "providerID": "anthropic",
        "time": {"created": T0 + 21000},
        "cost": 0.01,
        "tokens": tokens(50, 20, 0, 2500, 0),
    }
    a2_parts = [
        tool_part(
            "prt_a00000011",
            a2["id"],
            "toolu_04",
            "edit",
            {"filePath": "a.py", "oldString": "x"},
            "error",
            error="The user rejected permission to use this specific tool call.",
        ),
        {"id": "prt_a00000012", "sessionID": SID, "messageID": a2["id"], "type": "text", "text": "Stopped."},
        step_finish("prt_a00000013", a2["id"], tokens(50, 20, 0, 2500, 0), 0.01),
    ]
    return session, [(u1, u1_parts), (a1, a1_parts), (u2, u2_parts), (a2, a2_parts)]


def write_tree(root: Path, multi_step: bool = True) -> Path:
    """``root`` is the opencode data dir; returns the session file."""
    session, msgs = records(multi_step)
    storage = root / "storage"
    sfile = storage / "session" / PROJECT / f"{SID}.json"
    sfile.parent.mkdir(parents=True)
    sfile.write_text(json.dumps(session, indent=2))
    for msg, parts in msgs:
        mdir = storage / "message" / SID
        mdir.mkdir(parents=True, exist_ok=True)
        (mdir / f"{msg['id']}.json").write_text(json.dumps(msg, indent=2))
        pdir = storage / "part" / msg["id"]
        pdir.mkdir(parents=True, exist_ok=True)
        for p in parts:
            (pdir / f"{p['id']}.json").write_text(json.dumps(p, indent=2))
    return sfile


def write_db(path: Path, multi_step: bool = True) -> Path:
    session, msgs = records(multi_step)
    con = sqlite3.connect(path)
    con.executescript(OPENCODE_DDL)
    con.execute(
        "INSERT INTO session VALUES (?,?,?,?,?,?,?,?,?,?)",
        (
            SID,
            PROJECT,
            None,
            session["slug"],
            session["directory"],
            session["title"],
            session["version"],
            0.06,
            T0,
            T0 + 60000,
        ),
    )
    for msg, parts in msgs:
        data = {k: v for k, v in msg.items() if k not in ("id", "sessionID")}
        con.execute(
            "INSERT INTO message VALUES (?,?,?,?,?)",
            (msg["id"], SID, msg["time"]["created"], msg["time"]["created"], json.dumps(data)),
        )
        for p in parts:
            pdata = {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")}
            con.execute("INSERT INTO part VALUES (?,?,?,?,?,?)", (p["id"], msg["id"], SID, T0, T0, json.dumps(pdata)))
    con.commit()
    con.close()
    return path


EXPECTED_CALLS = [
    ("toolu_01", "bash", '{"command":"pytest -q"}', "1 failed, 3 passed", False, None, 0),
    ("toolu_02", "read", '{"filePath":"tests/x.py"}', "File not found: tests/x.py", True, "flag", 0),
    ("toolu_03", "bash", '{"command":"sleep 100"}', None, None, None, 0),
    (
        "toolu_04",
        "edit",
        '{"filePath":"a.py","oldString":"x"}',
        "The user rejected permission to use this specific tool call.",
        True,
        "rejected",
        1,
    ),
]


def calls(db: Path) -> list[tuple]:
    return query(db, "SELECT call_id, tool, args, result_text, is_error, error_kind, user_turn FROM calls ORDER BY seq")


def totals(db: Path) -> tuple:
    return query(
        db,
        "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, "
        "cost_usd FROM sessions",
    )[0]


# step-finish sums: input 1000+300+50, output (60+0)+(40+10)+(20+0), cache read 500+2000+2500, write 1500+100+0
STEP_TOTALS = (1350, 130, 5000, 1600, 1350 + 130 + 5000 + 1600)


def test_storage_tree(tmp_path: Path, db: Path) -> None:
    write_tree(tmp_path / "opencode")
    s = ingest_paths(db, tmp_path / "opencode")
    assert (s.sessions, s.calls, s.errors) == (1, 4, 0)
    assert calls(db) == EXPECTED_CALLS
    assert query(db, "SELECT session_id, format, cwd, agent_version, user_turns, turns, models FROM sessions") == [
        (SID, "opencode", "/work/app", "1.1.36", 2, 4, ["claude-sonnet-4-5"])
    ]
    assert totals(db)[:5] == STEP_TOTALS
    assert abs(totals(db)[5] - 0.06) < 1e-9  # the transcript's own cost, summed per step
    texts = query(db, "SELECT role, text FROM turns ORDER BY turn_index")
    assert texts == [
        ("user", "run the tests and fix them"),
        ("assistant", "Running them."),
        ("user", "thanks"),
        ("assistant", "Stopped."),
    ]
    # every message and part file is accounted for: read with its session file (a companion), none skipped
    session_file = str(tmp_path / "opencode/storage/session" / PROJECT / f"{SID}.json")
    assert query(db, "SELECT status, format, reason, count(*) FROM files WHERE status <> 'ingested' GROUP BY ALL") == [
        ("companion", "opencode", f"read with {session_file}", 4 + 13)
    ]
    assert s.skipped == [] and (s.files_ingested, s.files_companion) == (1, 4 + 13)


def test_companion_files_stay_out_of_the_skipped_ones_and_are_read_again_with_their_session(
    tmp_path: Path, db: Path
) -> None:
    """The CLI summary names no message or part file as skipped; a rewritten part file re-reads its session and is
    recorded again as read with it; a store that recorded them as skipped (an older loopscope) records them again as
    companions without parsing anything; a message folder named alone is not read, and says so."""
    root = tmp_path / "opencode"
    write_tree(root)
    res = CliRunner().invoke(app, ["ingest", str(root), "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "files: 18 seen, 1 ingested (+17 companion files read with them), 0 unchanged, 0 skipped" in res.stdout
    assert "skipped " not in res.stdout.replace("0 skipped", "")
    # a rewritten message: its session is read again (the new text), the message file recorded again as a companion
    mfile = root / "storage/message" / SID / "msg_a00000003.json"
    pfile = root / "storage/part/msg_a00000003/prt_a00000010.json"
    part = json.loads(pfile.read_text())
    pfile.write_text(json.dumps({**part, "text": "thanks, that is all"}))
    os.utime(pfile, ns=(time.time_ns(), time.time_ns() + 10**9))
    again = ingest_paths(db, root)
    assert (again.files_ingested, again.files_companion, again.skipped) == (1, 1, [])
    assert ("user", "thanks, that is all") in query(db, "SELECT role, text FROM turns")
    assert query(db, "SELECT status FROM files WHERE path = ?", [str(pfile)]) == [("companion",)]
    # an older store recorded them as skipped: recorded again as read with their session, nothing parsed
    with duckdb.connect(str(db)) as con:
        con.execute(
            "UPDATE files SET status = 'skipped', format = NULL, reason = 'opencode record' WHERE status = 'companion'"
        )
    upgraded = ingest_paths(db, root)
    assert (upgraded.files_ingested, upgraded.files_companion, upgraded.skipped) == (0, 17, [])
    assert query(db, "SELECT count(*) FROM files WHERE status = 'skipped'") == [(0,)]
    assert ingest_paths(db, root).files_unchanged == 18
    # the message folder alone: no session file found with it, so nothing reads these files
    other = tmp_path / "other.duckdb"
    with pytest.raises(NothingToIngestError, match="nothing could be read"):
        ingest_paths(other, root / "storage/message")
    assert query(other, "SELECT DISTINCT status FROM files") == [("skipped",)]
    assert query(other, "SELECT count(*) FROM files WHERE path = ?", [str(mfile)]) == [(1,)]


def test_database_gives_the_same_session(tmp_path: Path, db: Path) -> None:
    root = tmp_path / "opencode"
    root.mkdir()
    write_db(root / "opencode.db")
    s = ingest_paths(db, root)  # a walked folder: opencode*.db is read, other .db files are not
    assert (s.files_ingested, s.sessions, s.calls, s.errors) == (1, 1, 4, 0)
    assert calls(db) == EXPECTED_CALLS
    assert totals(db)[:5] == STEP_TOTALS
    assert query(db, "SELECT cwd, agent_version FROM sessions") == [("/work/app", "1.1.36")]


def test_tree_and_database_copies_load_once(tmp_path: Path, db: Path) -> None:
    root = tmp_path / "opencode"
    write_tree(root)
    write_db(root / "opencode.db")
    s = ingest_paths(db, root)
    assert s.sessions == 1
    assert query(db, "SELECT count(*) FROM calls") == [(4,)]
    assert any("duplicate session id" in r[0] for r in query(db, "SELECT reason FROM ingest_errors"))


def test_single_step_usage_agrees_with_ccusage(tmp_path: Path, db: Path) -> None:
    root = tmp_path / "opencode"
    write_tree(root, multi_step=False)
    files = {str(p.relative_to(root)): p for p in root.rglob("*.json")}
    ref = run_ccusage("opencode", files)
    ingest_paths(db, root)
    (r,) = [x for x in ref if x["sessionId"] == SID]
    inp, out, cr, cw, total, _ = totals(db)
    assert (inp, cr, cw) == (r["inputTokens"], r["cacheReadTokens"], r["cacheCreationTokens"])
    assert out == r["outputTokens"] + 10  # reasoning: output here (billed as output), only in the total there
    assert total == r["totalTokens"]


def test_database_agrees_with_ccusage(tmp_path: Path, db: Path) -> None:
    root = tmp_path / "opencode"
    root.mkdir()
    write_db(root / "opencode.db", multi_step=False)
    ref = run_ccusage("opencode", {"opencode.db": root / "opencode.db"})
    ingest_paths(db, root)
    (r,) = [x for x in ref if x["sessionId"] == SID]
    inp, out, cr, cw, total, _ = totals(db)
    assert (inp, cr, cw, out) == (
        r["inputTokens"],
        r["cacheReadTokens"],
        r["cacheCreationTokens"],
        r["outputTokens"] + 10,
    )


def test_multi_step_message_counts_every_step(tmp_path: Path, db: Path) -> None:
    # ccusage reads message.tokens, which opencode overwrites with each step: it sees the last step only
    root = tmp_path / "opencode"
    write_tree(root)
    files = {str(p.relative_to(root)): p for p in root.rglob("*.json")}
    ref = run_ccusage("opencode", files)
    ingest_paths(db, root)
    (r,) = [x for x in ref if x["sessionId"] == SID]
    assert r["inputTokens"] == 300 + 50 and totals(db)[0] == 1000 + 300 + 50


def test_reingest_notices_added_messages(tmp_path: Path, db: Path) -> None:
    root = tmp_path / "opencode"
    write_tree(root)
    ingest_paths(db, root)
    again = ingest_paths(db, root)
    assert again.files_ingested == 0 and again.files_unchanged == again.files_seen
    # a new turn: a message and its part, new files beside the session file (which itself is not touched)
    msg = {"id": "msg_a00000005", "sessionID": SID, "role": "user", "time": {"created": T0 + 40000}}
    part = {"id": "prt_a00000014", "sessionID": SID, "messageID": msg["id"], "type": "text", "text": "one more"}
    (root / "storage/message" / SID / f"{msg['id']}.json").write_text(json.dumps(msg))
    (root / "storage/part" / msg["id"]).mkdir()
    (root / "storage/part" / msg["id"] / f"{part['id']}.json").write_text(json.dumps(part))
    s = ingest_paths(db, root)
    assert s.sessions == 1
    assert query(db, "SELECT user_turns FROM sessions") == [(3,)]
    # a tool part rewritten in place (running -> completed) is noticed too
    ppath = root / "storage/part/msg_a00000002/prt_a00000008.json"
    done = tool_part(
        "prt_a00000008", "msg_a00000002", "toolu_03", "bash", {"command": "sleep 100"}, "completed", output=""
    )
    time.sleep(0.01)
    ppath.write_text(json.dumps(done))
    os.utime(ppath, ns=(time.time_ns(), time.time_ns() + 10**9))
    ingest_paths(db, root)
    assert query(db, "SELECT is_error, result_text FROM calls WHERE call_id = 'toolu_03'") == [(False, "")]


def test_bad_records_are_recorded_and_the_rest_kept(tmp_path: Path, db: Path) -> None:
    root = tmp_path / "opencode"
    write_tree(root)
    (root / "storage/part/msg_a00000002/prt_a00000007.json").write_text('{"id": "prt_a00000007", "type": "to')
    s = ingest_paths(db, root)
    assert (s.sessions, s.calls) == (1, 3)
    reasons = [r[0] for r in query(db, "SELECT reason FROM ingest_errors")]
    assert any("prt_a00000007.json cannot be read" in r for r in reasons)


def test_database_with_bad_rows(tmp_path: Path, db: Path) -> None:
    path = write_db(tmp_path / "opencode.db")
    con = sqlite3.connect(path)
    con.execute("INSERT INTO part VALUES ('prt_zzz', 'msg_a00000004', ?, 0, 0, 'not json')", (SID,))
    con.execute("INSERT INTO message VALUES ('msg_b1', 'ses_other', 0, 0, '{\"role\": \"assistant\", ')")
    con.commit()
    con.close()
    s = ingest_paths(db, path)
    assert (s.calls, s.errors) == (4, 2)


def test_database_sessions_around_the_main_one(tmp_path: Path, db: Path) -> None:
    """The database is read in one ordered pass per table: a session known only from its messages (sorting before
    the main one), a session row with no messages, and parts filed under sessions or messages that hold no such
    message each land where they belong, or nowhere, without disturbing the main session."""
    path = write_db(tmp_path / "opencode.db")
    con = sqlite3.connect(path)
    con.execute("INSERT INTO message VALUES ('msg_c1', 'ses_000first', 5, 5, '{\"role\": \"user\"}')")
    con.execute(
        "INSERT INTO part VALUES ('prt_c1', 'msg_c1', 'ses_000first', 0, 0, '{\"type\": \"text\", \"text\": \"hi\"}')"
    )
    con.execute(
        'INSERT INTO part VALUES (\'prt_c2\', \'msg_c1\', ?, 0, 0, \'{"type": "text", "text": "elsewhere"}\')', (SID,)
    )  # filed under the main session, for a message of another: not read
    for sid in ("ses_0orphan", "ses_zzzorphan"):  # parts of sessions that have no message: never decoded
        con.execute("INSERT INTO part VALUES (?, 'msg_zz', ?, 0, 0, 'not json')", (f"prt_{sid}", sid))
    con.execute("INSERT INTO session VALUES ('ses_empty', 'p', NULL, 's', '/d', 't', '1.0', 0, 1, 2)")
    con.commit()
    con.close()
    s = ingest_paths(db, path)
    assert (s.sessions, s.calls, s.errors) == (3, 4, 0)
    assert calls(db) == EXPECTED_CALLS
    assert query(db, "SELECT session_id FROM sessions ORDER BY 1") == [("ses_000first",), (SID,), ("ses_empty",)]
    assert query(db, "SELECT session_id, text FROM turns WHERE role = 'user' ORDER BY 1, turn_index") == [
        ("ses_000first", "hi"),
        (SID, "run the tests and fix them"),
        (SID, "thanks"),
    ]


def test_export_document(tmp_path: Path, db: Path) -> None:
    session, msgs = records()
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"info": session, "messages": [{"info": m, "parts": p} for m, p in msgs], "todos": []}))
    s = ingest_paths(db, path)
    assert (s.sessions, s.errors) == (1, 0)
    assert calls(db) == EXPECTED_CALLS


def test_agent_filter_and_cli(tmp_path: Path) -> None:
    assert parse_agent("opencode", agent_names()) == parse_agent("open-code", agent_names()) == "opencode"
    root = tmp_path / "corpus"
    write_tree(root / "opencode")
    (root / "other.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)  # not opencode's: not read
    db = tmp_path / "cli.duckdb"
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(root), "--db", str(db)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["sessions", "--db", str(db), "--agent", "opencode", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)  # the price notes go to stderr
    assert [(r["session_id"], r["format"], r["calls"]) for r in rows] == [(SID, "opencode", 4)]
    res = runner.invoke(app, ["sessions", "--db", str(db), "--agent", "gemini", "--format", "json"])
    assert res.exit_code == 0 and json.loads(res.output or "[]") == []
    # not read, but named: recorded as skipped for its suffix
    assert query(
        db, "SELECT status, starts_with(reason, 'not read: a .db file') FROM files WHERE path LIKE '%other.db'"
    ) == [("skipped", True)]


def test_default_roots_find_gemini_and_opencode(tmp_path: Path, monkeypatch: Any) -> None:
    from analyzer.ingest.formats import default_roots

    for var in (
        "PI_CODING_AGENT_DIR",
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "GEMINI_DATA_DIR",
        "GEMINI_CLI_HOME",
        "OPENCODE_DATA_DIR",
        "XDG_DATA_HOME",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".gemini/tmp").mkdir(parents=True)
    write_tree(tmp_path / ".local/share/opencode")
    write_db(tmp_path / ".local/share/opencode/opencode.db")
    assert default_roots() == [
        tmp_path / ".gemini/tmp",
        tmp_path / ".local/share/opencode/storage",
        tmp_path / ".local/share/opencode/opencode.db",
    ]
    monkeypatch.setenv("OPENCODE_DATA_DIR", str(tmp_path / "oc"))
    monkeypatch.setenv("GEMINI_DATA_DIR", f"{tmp_path / 'g1'}, {tmp_path / 'g2'}")
    (tmp_path / "oc/storage").mkdir(parents=True)
    (tmp_path / "g2").mkdir()
    assert default_roots() == [tmp_path / "g2", tmp_path / "oc/storage"]


def test_database_writes_still_in_the_wal_are_noticed(tmp_path: Path, db: Path) -> None:
    path = write_db(tmp_path / "opencode.db")
    live = sqlite3.connect(path)  # opencode keeps its database open in WAL mode: new rows sit in opencode.db-wal
    live.execute("PRAGMA journal_mode=WAL")
    live.execute("PRAGMA wal_autocheckpoint=0")
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT user_turns FROM sessions") == [(2,)]
    live.execute(
        "INSERT INTO message VALUES ('msg_a00000009', ?, 1, 1, ?)",
        (SID, json.dumps({"role": "user", "time": {"created": T0 + 50000}})),
    )
    live.commit()
    s = ingest_paths(db, tmp_path)
    live.close()
    assert s.files_ingested >= 1
    assert query(db, "SELECT user_turns FROM sessions") == [(3,)]
