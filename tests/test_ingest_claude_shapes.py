"""Claude Code shapes newer sessions show: workflow subagents and their journal, quiet line types, placeholder,
cancelled and validation results, and resumed sessions that copy earlier calls under the same tool ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import ingest_paths, query, write_jsonl
from test_ingest_claude import OTHER, TRUNK, assistant, ts, usage, user


def tool_use(cid: str, name: str = "Bash", **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": name, "input": inp or {"command": "ls"}}


def tool_result(cid: str, content: str, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": cid, "content": content, "is_error": is_error}


def session(sid: str = TRUNK, start: int = 0, ids: tuple[str, ...] = ("toolu_01",)) -> list[dict[str, Any]]:
    out = [user(start, "run it", sessionId=sid)]
    for i, cid in enumerate(ids):
        s = start + 1 + 2 * i
        out.append(assistant(s, f"msg_{cid}", f"req_{cid}", [tool_use(cid)], usage(10, 5), sessionId=sid))
        out.append(user(s + 1, [tool_result(cid, f"out {cid}")], sessionId=sid))
    return out


def test_workflow_agents_are_read_and_the_journal_is_skipped_with_its_reason(tmp_path: Path, db: Path) -> None:
    root = tmp_path / "proj"
    write_jsonl(root / f"{TRUNK}.jsonl", session())
    run = root / TRUNK / "subagents" / "workflows" / "wf_abc123"
    write_jsonl(
        run / "agent-a1.jsonl",
        [
            user(10, "step one", isSidechain=True, agentId="a1"),
            assistant(11, "msg_w1", "req_w1", [tool_use("toolu_w1")], usage(3, 2), isSidechain=True, agentId="a1"),
            user(12, [tool_result("toolu_w1", "ok")], isSidechain=True, agentId="a1"),
        ],
    )
    write_jsonl(
        run / "journal.jsonl",
        [{"type": "step_started", "step": "one", "at": ts(10)}, {"type": "step_finished", "step": "one", "at": ts(12)}],
    )
    summary = ingest_paths(db, root)
    assert sorted(query(db, "SELECT session_id, parent_session_id, calls FROM sessions")) == sorted(
        [(TRUNK, None, 1), ("agent-a1", TRUNK, 1)]
    )
    [(path, reason)] = summary.skipped
    assert path.endswith("journal.jsonl") and "workflow journal" in reason
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_new_line_types_are_recognised_and_ignored_quietly(tmp_path: Path, db: Path) -> None:
    quiet = [
        {"type": "last-prompt", "lastPrompt": "run it", "sessionId": TRUNK},
        {"type": "ai-title", "aiTitle": "Listing files", "sessionId": TRUNK},
        {"type": "mode", "mode": "normal", "sessionId": TRUNK},
        {"type": "permission-mode", "permissionMode": "default", "sessionId": TRUNK},
        {"type": "attachment", "attachment": {"type": "todo_reminder"}, "sessionId": TRUNK},
    ]
    only = write_jsonl(tmp_path / "only.jsonl", quiet)
    mixed = write_jsonl(tmp_path / f"{TRUNK}.jsonl", quiet + session())
    summary = ingest_paths(db, only, mixed)
    assert summary.skipped == [] and summary.errors == 0
    assert query(db, "SELECT path LIKE '%only.jsonl', format, status, sessions FROM files ORDER BY path") == [
        (False, "claude_code", "ingested", 1),
        (True, "claude_code", "ingested", 0),
    ]
    assert query(db, "SELECT calls, user_turns FROM sessions") == [(1, 1)]


def test_placeholder_cancelled_and_validation_results_are_marked(tmp_path: Path, db: Path) -> None:
    results = [
        (
            "toolu_a",
            "File unchanged since last read. The content from the earlier Read tool_result in this "
            "conversation is still current — refer to that instead of re-reading.",
            False,
        ),
        ("toolu_b", "Output identical to result of toolu_a above.", False),
        ("toolu_c", "<tool_use_error>Cancelled: parallel tool call Bash(npm test) errored</tool_use_error>", True),
        ("toolu_d", "Sibling tool call errored", True),
        (
            "toolu_e",
            "<tool_use_error>InputValidationError: Read failed due to the following issue:\nThe required "
            "parameter `file_path` is missing</tool_use_error>",
            True,
        ),
        (
            "toolu_f",
            "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>",
            True,
        ),
        ("toolu_g", "Exit code 1\nboom", True),
        ("toolu_h", "plain output", False),
    ]
    recs = [user(0, "go")]
    recs.append(assistant(1, "msg_1", "req_1", [tool_use(cid, command=cid) for cid, _, _ in results], usage(1, 1)))
    recs.append(user(2, [tool_result(cid, text, err) for cid, text, err in results]))
    ingest_paths(db, write_jsonl(tmp_path / f"{TRUNK}.jsonl", recs))
    assert query(db, "SELECT call_id, is_error, error_kind FROM calls ORDER BY seq") == [
        ("toolu_a", False, "placeholder"),
        ("toolu_b", False, "placeholder"),
        ("toolu_c", True, "cancelled"),
        ("toolu_d", True, "cancelled"),
        ("toolu_e", True, "validation"),
        ("toolu_f", True, "validation"),
        ("toolu_g", True, "flag"),
        ("toolu_h", False, None),
    ]


def test_a_resumed_session_counts_each_copied_call_once(tmp_path: Path, db: Path) -> None:
    original = session(TRUNK, 0, ("toolu_1", "toolu_2"))
    # The resume copies the original's lines (same uuids, tool ids, message ids) under its own session id, then goes on.
    copied = [dict(r, sessionId=OTHER) for r in original]
    resumed = copied + session(OTHER, 100, ("toolu_3",))[1:]
    # the resume is ingested first (its file sorts first): the original still wins
    write_jsonl(tmp_path / "a" / f"{OTHER}.jsonl", resumed)
    write_jsonl(tmp_path / "b" / f"{TRUNK}.jsonl", original)
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT session_id, list(call_id ORDER BY seq) FROM calls GROUP BY 1 ORDER BY 1") == [
        (TRUNK, ["toolu_1", "toolu_2"]),
        (OTHER, ["toolu_3"]),
    ]
    assert query(db, "SELECT session_id, calls FROM sessions ORDER BY 1") == [(TRUNK, 2), (OTHER, 1)]
    assert query(db, "SELECT sum(total_tokens) FROM sessions") == [(45,)]
    # separate ingests, original first: the resume's copies are dropped as they land
    db2 = tmp_path / "two.duckdb"
    ingest_paths(db2, tmp_path / "b")
    ingest_paths(db2, tmp_path / "a")
    assert query(db2, "SELECT session_id, calls FROM sessions ORDER BY 1") == [(TRUNK, 2), (OTHER, 1)]


def test_a_resume_whose_copied_prompts_keep_the_earlier_id_does_not_take_that_session(tmp_path: Path, db: Path) -> None:
    """Some Claude Code versions copy the earlier session's prompts into the resumed file with their old sessionId,
    between copied replies that carry the new one. Those prompts are the resumed session's; read as a session of
    their own they claimed the earlier id first and the earlier session's own file was refused as a duplicate,
    losing its calls."""
    original = session(TRUNK, 0, ("toolu_1", "toolu_2"))
    copied = [r if r["type"] == "user" else dict(r, sessionId=OTHER) for r in original]
    late = dict(user(200, "and one more thing"), sessionId=TRUNK)
    resumed = copied + session(OTHER, 100, ("toolu_3",))[1:] + [late]
    write_jsonl(tmp_path / "a" / f"{OTHER}.jsonl", resumed)  # its file sorts first
    write_jsonl(tmp_path / "b" / f"{TRUNK}.jsonl", original)
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]
    assert query(db, "SELECT session_id, calls, source_path LIKE '%/b/%' FROM sessions ORDER BY 1") == [
        (TRUNK, 2, True),
        (OTHER, 1, False),
    ]
    prompts = query(db, "SELECT count(*) FROM turns WHERE session_id = ? AND role = 'user'", [OTHER])[0][0]
    assert prompts >= 2  # the copied prompt and the late one are the resumed session's
    # A file not named by a session id keeps each line's own session, as before.
    db2 = tmp_path / "two.duckdb"
    ingest_paths(db2, write_jsonl(tmp_path / "c" / "export.jsonl", copied))
    assert query(db2, "SELECT session_id FROM sessions ORDER BY 1") == sorted([(TRUNK,), (OTHER,)])


def test_a_response_recorded_again_on_another_branch_is_one_call(tmp_path: Path, db: Path) -> None:
    """Claude Code can write one API response again under new line uuids (the same message.id, requestId and tool
    ids), each copy with its tool result: one call, one result, no error (three copies read as three calls made a
    streak of a call the agent sent once)."""
    recs = session(TRUNK, 0, ("toolu_a",))
    reply, result = recs[1], recs[2]
    for _ in range(2):  # the same exchange, recorded twice more with new uuids
        recs += [
            dict(reply, uuid=f"again-{len(recs)}"),
            dict(result, uuid=f"again-{len(recs) + 1}"),
        ]
    recs += session(TRUNK, 50, ("toolu_b",))[1:]
    ingest_paths(db, write_jsonl(tmp_path / f"{TRUNK}.jsonl", recs))
    assert query(db, "SELECT call_id, result_text FROM calls ORDER BY seq") == [
        ("toolu_a", "out toolu_a"),
        ("toolu_b", "out toolu_b"),
    ]
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]


def test_a_continuation_written_under_the_earlier_session_id_is_its_own_session(tmp_path: Path, db: Path) -> None:
    """A file named by a session id whose every line carries the earlier session's id (snapshot lines without an id
    among them), beside the earlier session's own file: its calls are its own session's, not a duplicate refused
    with its calls lost."""
    original = session(TRUNK, 0, ("toolu_1", "toolu_2"))
    later = session(TRUNK, 100, ("toolu_3", "toolu_4"))  # every line says TRUNK
    later.insert(2, {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}, "isSnapshotUpdate": False})
    write_jsonl(tmp_path / "a" / f"{TRUNK}.jsonl", original)
    write_jsonl(tmp_path / "b" / f"{OTHER}.jsonl", later)
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT count(*) FROM ingest_errors") == [(0,)]
    assert query(db, "SELECT session_id, list(call_id ORDER BY seq) FROM calls GROUP BY 1 ORDER BY 1") == sorted(
        [(TRUNK, ["toolu_1", "toolu_2"]), (OTHER, ["toolu_3", "toolu_4"])]
    )
