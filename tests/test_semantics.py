"""The table of tool semantics (analyzer/detect/semantics.py): every tool the adapters emit is declared or left at the
default on purpose, calls that differ only in commentary or tuning have one action key and calls on different objects
do not, the guard and the store compare calls by it, and a store without action keys is rebuilt, saying so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import orjson
import pytest
from conftest import FIXTURES, ROOT, SAMPLE_DATA
from helpers import ingest_paths, query, write_jsonl

from analyzer.detect.keys import action_json, action_key, call_key, canonical_json, result_key
from analyzer.detect.semantics import (
    DEFAULTED,
    DROPPED_FIELDS,
    TOOLS,
    PatchParts,
    action_args,
    applies_patch,
    patch_parts,
    semantics,
    semantics_table,
    shell_action,
)
from analyzer.detect.stream.live import Detector


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], set[str]]:
    """(format, tool) -> the argument fields seen, for every call the adapters emit from sample_data and the
    fixtures."""
    db = tmp_path_factory.mktemp("semantics") / "store.duckdb"
    ingest_paths(db, SAMPLE_DATA, FIXTURES)
    out: dict[tuple[str, str], set[str]] = {}
    for fmt, tool, args in query(db, "SELECT s.format, c.tool, c.args FROM calls c JOIN sessions s USING (session_id)"):
        a = orjson.loads(args)
        out.setdefault((fmt, tool), set()).update(a if isinstance(a, dict) else ())
    return out


def defaulted(fmt: str, tool: str) -> bool:
    """Left at the default on purpose (``semantics.DEFAULTED``): MCP tools and plain OpenAI-messages functions."""
    return tool.startswith("mcp__") or fmt == "openai_messages"


def test_every_tool_the_adapters_emit_is_declared_or_defaulted_on_purpose(emitted) -> None:
    assert "mcp__*" in DEFAULTED and any("openai_messages" in d for d in DEFAULTED)
    missing = sorted(f"{fmt}: {tool}" for fmt, tool in emitted if not defaulted(fmt, tool) and semantics(tool) is None)
    assert not missing, f"declare these tools in analyzer/detect/semantics.py (or default them on purpose): {missing}"
    formats = {fmt for fmt, tool in emitted if not defaulted(fmt, tool)}
    for fmt, tool in emitted:
        if not defaulted(fmt, tool):
            assert fmt in semantics(tool).formats, f"{tool} is emitted by {fmt}: name the format in its entry"
    assert {"claude_code", "codex", "gemini_cli", "pi", "opencode", "openhands", "swe_agent"} <= formats


def test_every_argument_field_of_a_declared_tool_is_classified(emitted) -> None:
    unclassified = sorted(
        f"{tool}.{field}"
        for (fmt, tool), fields in emitted.items()
        if not defaulted(fmt, tool)
        for field in fields
        if field not in (t := semantics(tool)).action and field not in t.dropped
    )
    assert not unclassified, f"say whether these are the action, commentary or tuning: {unclassified}"


def test_the_table_is_consistent() -> None:
    for t in TOOLS:
        assert not set(t.action) & t.dropped, t.names  # a field is one thing
        assert set(t.shell) <= set(t.action), t.names  # a shell command is the action
    assert "description" in DROPPED_FIELDS and "new_string" not in DROPPED_FIELDS


def test_docs_hold_the_table() -> None:
    doc = (ROOT / "docs" / "detectors.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- semantics:start -->\n(.*?)\n<!-- semantics:end -->", doc, re.S)
    assert m and m.group(1) == semantics_table(), (
        "docs/detectors.md's semantics table is out of date; put this between its markers:\n" + semantics_table()
    )


# -- the action key ---------------------------------------------------------------------------------------------------

SAME = [
    # the same script run from its folder, by its path, and with its exit code echoed (a shell that keeps failing)
    (
        "Bash",
        {"command": "cd /Users/u/reverse-engineer && python3 extract_calculations.py"},
        {"command": 'python3 /Users/u/reverse-engineer/extract_calculations.py || echo "Exit code: $?"'},
    ),
    # a sandboxed test run plain, then with its output captured into a log and printed back
    (
        "shell",
        {"command": ["bash", "-lc", "go test ./internal/auth -run Test -v"]},
        {
            "command": [
                "bash",
                "-lc",
                "set -eo pipefail; go test ./internal/auth -run Test -v > /tmp/t.log 2>&1; cat /tmp/t.log",
            ]
        },
    ),
    # Claude Code: the description is rewritten on every call; timeout and background say how it runs
    ("Bash", {"command": "npm test"}, {"command": "npm test", "description": "Run the tests again", "timeout": 600000}),
    ("Bash", {"command": "npm test", "run_in_background": True}, {"command": "npm test"}),
    ("Grep", {"pattern": "foo", "path": "src", "-n": True}, {"pattern": "foo", "path": "src", "head_limit": 20}),
    ("Task", {"prompt": "Find X", "description": "Find X"}, {"prompt": "Find X", "description": "Look for X"}),
    # Codex: output limits, waits, justifications, escalations
    (
        "exec_command",
        {"cmd": "cargo test", "workdir": "/repo", "max_output_tokens": 6000, "yield_time_ms": 1000},
        {"cmd": "cargo test", "workdir": "/repo", "justification": "run the tests", "sandbox_permissions": "x"},
    ),
    (
        "shell",
        {"command": ["bash", "-lc", "ls -la"], "workdir": "/repo", "timeout_ms": 1000},
        {"command": ["bash", "-lc", "ls  -la"], "workdir": "/repo", "with_escalated_permissions": True},
    ),
    ("write_stdin", {"session_id": 3, "chars": "", "yield_time_ms": 1000}, {"session_id": 3, "chars": ""}),
    # Claude Code in Zed: the same tools served by Zed's ACP bridge
    (
        "mcp__acp__Bash",
        {"command": "npm test", "description": "Run the tests"},
        {"command": "npm test", "description": "Rerun them", "timeout": 60000},
    ),
    # Codex code mode (0.145+): a cell of one tool call is that call; its wait times, output limits and justification
    # (bare or quoted keys) are tuning; ``wait`` for a running cell
    (
        "exec",
        {
            "input": 'const r = await tools.exec_command({"cmd":"make","workdir":"/r","yield_time_ms":10000});'
            "\ntext(r.output);"
        },
        {
            "input": 'const r = await tools.exec_command({cmd:"make  ",workdir:"/r","max_output_tokens":500,'
            '"justification":"again"}); text(JSON.stringify(r))\n'
        },
    ),
    (
        "exec",
        {"input": "const rs = await Promise.all([tools.exec_command({cmd:'a',yield_time_ms:1000})]);"},
        {"input": "const rs = await Promise.all([tools.exec_command({cmd:'a',yield_time_ms:30000})]);"},
    ),
    ("wait", {"cell_id": "8", "yield_time_ms": 30000, "max_tokens": 1000}, {"cell_id": "8", "max_tokens": 5000}),
    # Gemini CLI, opencode, pi
    ("run_shell_command", {"command": "make", "description": "Build"}, {"command": "make", "description": "Again"}),
    ("bash", {"command": "make", "timeout": 30}, {"command": "make"}),
    (
        "replace",
        {"file_path": "a", "old_string": "x", "new_string": "y", "instruction": "fix it"},
        {"file_path": "a", "old_string": "x", "new_string": "y", "instruction": "fix it properly"},
    ),
    # shell wrappers that do not change the action
    ("bash", {"command": "sleep 5 && curl -s http://ci/status"}, {"command": "curl -s http://ci/status"}),
    ("bash", {"command": "timeout 60 pytest -q"}, {"command": "pytest -q"}),
    ("bash", {"command": "npm test 2>&1 | tail -20"}, {"command": "npm test | head -n 50"}),
    ("Bash", {"command": "  git   status "}, {"command": "git status"}),
    ("Bash", {"command": "bash -lc 'make all'"}, {"command": "make all"}),
    # a label echo is commentary, as a description is: the model rewrites it on every call
    (
        "Bash",
        {"command": 'export PATH="/x:$PATH"\necho "🔧 Configuring the server..."\nclaude mcp add s uvx m'},
        {"command": 'export PATH="/x:$PATH"\necho "🔧 Adding the server..."\nclaude mcp add s uvx m'},
    ),
    ("Bash", {"command": 'echo "=== tests ===" && npm test'}, {"command": "npm test"}),
]
DIFFERENT = [
    ("Bash", {"command": "npm test"}, {"command": "npm run build"}),
    ("Bash", {"command": "cd a && make"}, {"command": "cd b && make"}),  # the folder is the object
    ("exec_command", {"cmd": "make", "workdir": "/a"}, {"cmd": "make", "workdir": "/b"}),
    ("Read", {"file_path": "a.py", "offset": 1}, {"file_path": "a.py", "offset": 200}),  # paging
    ("Grep", {"pattern": "foo", "path": "src"}, {"pattern": "bar", "path": "src"}),
    (
        "Edit",
        {"file_path": "a", "old_string": "x", "new_string": "y"},
        {"file_path": "a", "old_string": "x", "new_string": "z"},
    ),
    ("WebFetch", {"url": "https://a", "prompt": "install steps"}, {"url": "https://b", "prompt": "install steps"}),
    ("bash", {"command": "python - <<'EOF'\nif x:\n  y()\nEOF"}, {"command": "python - <<'EOF'\nif x:\n    y()\nEOF"}),
    ("bash", {"command": "grep 'a b' f"}, {"command": "grep 'a  b' f"}),  # quoted text is kept as written
    ("bash", {"command": "make"}, {"command": "make", "description": "x", "workdir": "/elsewhere"}),
    ("Bash", {"command": 'echo "$A" && npm test'}, {"command": 'echo "$B" && npm test'}),  # an echo that looks
    (
        "exec",
        {"input": 'const r = await tools.exec_command({"cmd":"make a"}); text(r.output);'},
        {"input": 'const r = await tools.exec_command({"cmd":"make b"}); text(r.output);'},
    ),
    (  # two calls in one cell are not the first call alone
        "exec",
        {"input": 'const r = await tools.exec_command({"cmd":"make a"}); text(r.output);'},
        {"input": 'const r = await tools.exec_command({"cmd":"make a"}); await tools.exec_command({"cmd":"rm x"});'},
    ),
    ("wait", {"cell_id": "8"}, {"cell_id": "9"}),
    # an undeclared tool keeps every argument
    ("mcp__github__search", {"query": "x", "description": "a"}, {"query": "x", "description": "b"}),
]


@pytest.mark.parametrize(("tool", "a", "b"), SAME, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(SAME)])
def test_calls_differing_only_in_commentary_tuning_or_wrappers_are_one_action(tool: str, a: dict, b: dict) -> None:
    assert action_key(tool, a) == action_key(tool, b)
    assert call_key(tool, canonical_json(a)) != call_key(tool, canonical_json(b))  # the full key still tells them apart


@pytest.mark.parametrize(("tool", "a", "b"), DIFFERENT, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(DIFFERENT)])
def test_calls_on_different_objects_are_different_actions(tool: str, a: dict, b: dict) -> None:
    assert action_key(tool, a) != action_key(tool, b)


def test_action_arguments_are_the_arguments_when_nothing_is_dropped() -> None:
    args = {"file_path": "a.py", "offset": 10}
    assert action_args("Read", args) is args
    assert action_json("Read", args) == canonical_json(args)
    assert action_key("Read", args) == call_key("Read", canonical_json(args))
    assert action_args("Bash", {"command": "ls", "description": "List"}) == {"command": "ls"}


@pytest.mark.parametrize(
    ("command", "action"),
    [
        ("sleep 10; timeout -s KILL 60s pytest -q 2>&1 | tail -n 20", "pytest -q"),
        ("cd /repo && sleep 3 && npm test", "cd /repo && npm test"),
        ("sleep 5", "sleep 5"),  # nothing but the wait: that is the action
        ("ls | tail -f", "ls | tail -f"),  # following a file is not a limit
        ("edit 44:46\n  x = 1\nend_of_edit", "edit 44:46\n  x = 1\nend_of_edit"),  # a script keeps its lines
        # a tail that only reports how it ended, and shell options set first
        ('python3 x.py || echo "Exit code: $?"', "python3 x.py"),
        ('npm test; echo "exit: $?"', "npm test"),
        ("ls build || true", "ls build"),
        ("set -eo pipefail; make check", "make check"),
        # output captured into a file and printed back
        ("go test ./a -v > /tmp/t.log 2>&1; status=$?; cat /tmp/t.log; exit $status", "go test ./a -v"),
        ("make > out.txt; cat other.txt", "make > out.txt; cat other.txt"),  # another file: not the capture
        # `cd DIR &&` before relative paths: the paths joined to DIR
        ("cd /r/tools && python3 extract.py --all", "python3 /r/tools/extract.py --all"),
        ("cd /r && ./run.sh", "/r/run.sh"),
        ("cd /r && make", "cd /r && make"),  # no path: the folder is the object
        ("cd /r && cd sub && ls x.py", "cd /r && cd sub && ls x.py"),  # a second cd: left as written
        ("cd / && cat etc/hosts", "cat /etc/hosts"),
        ("cd - && cat a.py", "cd - && cat a.py"),  # not a folder's path
        ("cd /a && cat x.py && make", "cd /a && cat x.py && make"),  # make still runs in /a
        # what looks like a report or a capture inside quotes, or a partial capture, is the command's own
        ("grep -n '; echo $?' a.sh", "grep -n '; echo $?' a.sh"),
        ('git commit -m "retry || echo done"', 'git commit -m "retry || echo done"'),
        ("python x.py 2> err.txt; cat err.txt", "python x.py 2> err.txt; cat err.txt"),
        ("make >> build.log 2>&1; cat build.log", "make >> build.log 2>&1; cat build.log"),
        ("make || echo failed > status.txt", "make || echo failed > status.txt"),  # the echo writes a file
        # a label echo (fixed words, for the reader) among the steps is commentary, as a description is
        (
            'export PATH="/x:$PATH"\necho "🔧 Adding the server..."\nclaude mcp add s uvx m',
            'export PATH="/x:$PATH"\nclaude mcp add s uvx m',
        ),
        ('echo "=== build ===" && npm run build && echo Done', "npm run build"),
        ('echo "--- a ---"; ls src; echo "--- b ---"; ls lib', "ls src; ls lib"),
        ("cd /r && echo start && make", "cd /r && make"),
        ('sleep 30 && echo "Wait complete"', 'echo "Wait complete"'),  # nothing but labels after the wait: kept
        ('echo "$HOME" && ls', 'echo "$HOME" && ls'),  # a variable: it looks at something
        ("echo $(date) && ls", "echo $(date) && ls"),
        ('echo "a" | grep a', 'echo "a" | grep a'),  # piped into a program: its input
        ("echo x > f.txt && ls", "echo x > f.txt && ls"),  # writes a file
        ("cat > f.sh <<'EOF'\necho hi\nEOF\nbash f.sh", "cat > f.sh <<'EOF'\necho hi\nEOF\nbash f.sh"),  # a file's text
    ],
)
def test_shell_action(command: str, action: str) -> None:
    assert shell_action(command) == action


def test_gemini_process_ids_are_not_part_of_the_result() -> None:
    out = "Command: ls\nDirectory: (root)\nOutput: a.md\nError: (none)\nExit Code: (none)\nSignal: (none)\n"
    a = out + "Background PIDs: (none)\nProcess Group PGID: 48200"
    b = out + "Background PIDs: (none)\nProcess Group PGID: 48211"
    assert result_key(a, False) == result_key(b, False)
    assert result_key(a, False) != result_key(a.replace("a.md", "b.md"), False)
    running = "Chunk ID: a21e41\nWall time: 1.0 seconds\nProcess running with session ID 48230\nOutput:\n"
    assert result_key(running, False) == result_key(running.replace("48230", "20936"), False)


# -- where calls are compared by it ------------------------------------------------------------------------------------


def test_the_live_detector_counts_a_bash_loop_whose_descriptions_differ() -> None:
    g = Detector()
    for d in SAID:
        seen = g.observe_call("Bash", {"command": "npm test", "description": d})
        g.observe_result("FAIL src/app.test.ts\n1 failed", True)
    assert (seen.signals.streak, seen.verdict) == (5, "halt")


def claude_session(sid: str, calls: list[tuple[dict, str, bool]]) -> list[dict]:
    """A Claude Code transcript: one prompt, then one Bash call per assistant message, each with its result."""
    ts = "2026-01-05T10:00:{:02d}.000Z"
    out: list[dict] = [
        {
            "type": "user",
            "timestamp": ts.format(0),
            "sessionId": sid,
            "cwd": "/repo",
            "message": {"role": "user", "content": "Make the tests pass"},
            "uuid": f"{sid}-u",
        }
    ]
    for i, (args, result, error) in enumerate(calls):
        tid = f"toolu_{sid}_{i}"
        use = {"type": "tool_use", "id": tid, "name": "Bash", "input": args}
        res = {"type": "tool_result", "tool_use_id": tid, "content": result, "is_error": error}
        out.append(
            {
                "type": "assistant",
                "timestamp": ts.format(2 * i + 1),
                "sessionId": sid,
                "message": {"id": f"msg_{sid}_{i}", "role": "assistant", "content": [use]},
                "uuid": f"{sid}-a{i}",
            }
        )
        out.append(
            {
                "type": "user",
                "timestamp": ts.format(2 * i + 2),
                "sessionId": sid,
                "message": {"role": "user", "content": [res]},
                "uuid": f"{sid}-r{i}",
            }
        )
    return out


SAID = [
    "Run the tests",
    "Run the tests again",
    "Check whether the fix worked",
    "Re-run the suite",
    "Run tests once more",
]
FAILED = "FAIL src/app.test.ts\n  expect(received).toBe(expected)\n1 failed, 12 passed"


def test_a_claude_code_bash_loop_whose_descriptions_differ_is_found_and_halted(tmp_path: Path) -> None:
    from analyzer.guards.policies import PRESETS
    from analyzer.guards.replay import load_corpus, replay
    from analyzer.scan.run import scan
    from analyzer.store import connection

    folder, db = tmp_path / "t", tmp_path / "s.duckdb"
    calls = [({"command": "npm test", "description": d, "timeout": 120000}, FAILED, True) for d in SAID]
    write_jsonl(folder / "loop.jsonl", claude_session("loop", calls))
    ingest_paths(db, folder)
    rows = query(db, "SELECT tool, args, call_key, action_key, action_args FROM calls ORDER BY seq")
    assert len(rows) == 5 and len({r[2] for r in rows}) == 5 and len({r[3] for r in rows}) == 1
    for tool, args, _, akey, aargs in rows:
        assert akey == action_key(tool, json.loads(args)) and json.loads(aargs) == {"command": "npm test"}
    scan(db)
    assert query(db, "SELECT streak FROM signals ORDER BY seq") == [(1,), (2,), (3,), (4,), (5,)]
    assert query(db, "SELECT kind, repeats, stuck FROM findings") == [("streak", 5, True)]
    con = connection.connect(db, read_only=True)
    try:
        r = replay(load_corpus(con), [PRESETS["loopscope"]], verdicts=True, workers=1)
    finally:
        con.close()
    levels = [lv for (lv,) in r.verdicts.select("level").iter_rows()]
    assert levels == ["warn", "warn", "halt"]  # the 3rd and 4th repeats warn, the 5th is blocked


def test_the_hook_halts_a_bash_loop_whose_descriptions_differ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from analyzer.hook.main import run

    monkeypatch.setenv("LOOPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LOOPSCOPE_CONFIG_DIR", str(tmp_path / "config"))
    base = {"session_id": "h", "transcript_path": "/nonexistent", "cwd": "/repo", "tool_name": "Bash"}
    answers = []
    for i, d in enumerate(SAID):
        args = {"command": "npm test", "description": d}
        event = {**base, "hook_event_name": "PreToolUse", "tool_input": args, "tool_use_id": f"t{i}"}
        answers.append(run(["claude-code"], orjson.dumps(event)))
        done = {**base, "hook_event_name": "PostToolUseFailure", "tool_input": args, "tool_use_id": f"t{i}"}
        run(["claude-code"], orjson.dumps({**done, "error": FAILED}))
    assert answers[:2] == [None, None]
    deny = answers[4]["hookSpecificOutput"]
    assert deny["permissionDecision"] == "deny" and "npm test" in deny["permissionDecisionReason"]


def test_a_store_without_action_keys_is_rebuilt_by_ingest_and_refused_by_the_rest(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from analyzer.store.schema import SCHEMA_VERSION

    folder, db = tmp_path / "t", tmp_path / "s.duckdb"
    write_jsonl(
        folder / "loop.jsonl",
        claude_session("old", [({"command": "ls", "description": d}, "a", False) for d in SAID[:3]]),
    )
    ingest_paths(db, folder)
    con = duckdb.connect(str(db))  # a store as loopscope wrote it before the semantics table: schema v3
    con.execute("ALTER TABLE calls DROP COLUMN action_key")
    con.execute("ALTER TABLE calls DROP COLUMN action_args")
    con.execute("UPDATE loopscope_meta SET value = '3' WHERE key = 'schema_version'")
    con.close()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "analyzer.cli", *args, "--db", str(db)],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "300"},
        )

    refused = cli("scan")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "store schema v3, no action keys" in refused.stderr and "loopscope ingest PATHS" in refused.stderr
    rebuilt = cli("ingest", str(folder))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "store schema v3, no action keys" in rebuilt.stderr and "rebuilt" in rebuilt.stderr
    assert query(db, "SELECT value FROM loopscope_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    assert len({k for (k,) in query(db, "SELECT action_key FROM calls")}) == 1
    assert cli("scan").returncode == 0


@pytest.mark.parametrize(
    "command",
    [
        "gh run watch 123",
        "gh run view 42 --json status",
        "gh run list --limit 1",
        "gh pr checks 7",
        "gh workflow view ci.yml",
        "kubectl rollout status deploy/web",
        "glab ci status",
        "glab ci view",
        "cd app && gh run view 1",
        "sleep 30 && curl -s localhost:8080/health",
        "sleep 2.5; tail -n 5 build.log",
        "bash -lc 'sleep 10 && gh run view 1'",
        "cat /tmp/claude/-home-u-app/tasks/b8c5d29.output",
        "tail -n 20 /tmp/claude/-home-u-app/tasks/b8c5d29.output 2>/dev/null || echo 'No output yet'",
        "tail -30 /tmp/claude-1000/-home-u-app/tasks/b8c5d29.output",
        "cat /tmp/claude-1000/-home-u-app/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0/tasks/b25k01pbe.output | tail -30",
    ],
)
def test_every_shell_poll_holds_a_poll_word_so_a_bulk_read_keeps_its_result(command: str) -> None:
    """The replay reads the results of shell calls whose arguments hold one of POLL_WORDS only: a poll without one
    would never be seen as a wait."""
    from analyzer.detect.semantics import POLL_WORDS, SHELL_POLL_TOOLS, is_poll

    assert is_poll("Bash", {"command": command}, command) and "Bash" in SHELL_POLL_TOOLS
    assert re.search("|".join(POLL_WORDS), orjson.dumps({"command": command}).decode())


def test_running_poll_reads_the_status_a_poll_returns() -> None:
    from analyzer.detect.semantics import running_poll

    assert running_poll("Bash", {"command": "gh run view 1"}, "status: in_progress")
    assert not running_poll("Bash", {"command": "gh run view 1"}, "status: completed")
    assert not running_poll("Bash", {"command": "npm test"}, "tests pending")  # not a poll
    assert running_poll("write_stdin", {"session_id": 3, "chars": ""}, "Process running with session ID 3")
    assert not running_poll("write_stdin", {"session_id": 3, "chars": "y\n"}, "Process running with session ID 3")


def test_an_empty_read_of_a_background_tasks_output_is_a_running_poll() -> None:
    """Claude Code writes a background shell's output to ``…/tasks/ID.output``: reading it is ``BashOutput`` by another
    name, and nothing in it yet means the process has not printed anything: it still runs. What it printed says
    neither (a log unchanged since is judged as any repeat), and the same read of another file is no poll."""
    from analyzer.detect.semantics import POLL_WORDS, running_poll

    read = {"command": "sleep 5 && cat /tmp/claude/-home-u-app/tasks/b8c5d29.output"}
    assert running_poll("Bash", read, "")
    assert running_poll("Bash", {"command": "cat /tmp/claude/-home-u-app/tasks/b8c5d29.output"}, "\n")
    assert not running_poll("Bash", read, "ready - started server on 0.0.0.0:3000")
    assert not running_poll("Bash", read, "Tests: 3 pending, 10 passed")  # the process's output, not a status
    assert not running_poll("Bash", {"command": "cat /tmp/app/server.log"}, "")
    assert not running_poll("Bash", {"command": "cat ./tasks/notes.output"}, "")  # not Claude Code's task folder
    # `tail -N`, and the newer layout with the session's id between the project and `tasks/`
    assert running_poll("Bash", {"command": "tail -30 /tmp/claude-1000/-home-u-app/tasks/b8c5d29.output"}, "")
    session = "/private/tmp/claude-501/-Users-u-app/450394ba-8be4-4850-9119-41b34c800e7c/tasks/b7t57ae6l.output"
    assert running_poll("Bash", {"command": f"tail -5 {session} 2>/dev/null"}, "")
    # read from the project's folder: the same poll, and its arguments still hold a poll word
    relative = {"command": "cd /tmp/claude/-home-u-app && cat tasks/b8c5d29.output"}
    assert running_poll("Bash", relative, "")
    assert re.search("|".join(POLL_WORDS), orjson.dumps(relative).decode())


def test_gh_run_views_status_glyph_says_whether_the_run_still_runs() -> None:
    """`gh run view` prints the run's status as a glyph before branch, workflow and id: `*` in progress, `✓` and
    `X` over. Without it, a watched release run read as neither and its polls as a plain streak."""
    from analyzer.detect.semantics import poll_status

    assert poll_status("* main Release · 13877216420\nTriggered via workflow_dispatch about 1 minute ago") == "running"
    assert poll_status("✓ main Release · 13877216420\nTriggered via workflow_dispatch") == "ended"
    assert poll_status("X main CI · 42\nJOBS\nX test in 2m") == "ended"
    assert poll_status("* a bullet point in some text") is None


def test_a_code_mode_cell_of_one_call_is_read_as_that_call() -> None:
    """Codex code mode writes a tool call as JavaScript (bare or quoted keys, JSON values); what it runs, and whether
    it is a poll, is read from the call inside."""
    from analyzer.detect.semantics import code_call, is_poll, js_object, shell_command

    cell = 'const r = await tools.exec_command({cmd:"sleep 30 && gh run view 12",workdir:"/r",yield_time_ms:1000});'
    assert code_call(cell + "\ntext(r.output);") == (
        "exec_command",
        {"cmd": "sleep 30 && gh run view 12", "workdir": "/r", "yield_time_ms": 1000},
    )
    assert shell_command({"input": cell}) == "sleep 30 && gh run view 12"
    assert is_poll("exec", {"input": cell}, shell_command({"input": cell}))
    assert js_object('{a:"x, b: y",b:[1,{c:2}]}') == {"a": "x, b: y", "b": [1, {"c": 2}]}  # a key-like string stays
    assert js_object("{a:'single quotes'}") is None and js_object("{a: f(x)}") is None
    assert code_call("const patch = 'x';\nconst r = await tools.apply_patch(patch);") is None  # not an object literal


def test_code_mode_answers_compare_without_their_chunk_id_and_wall_time() -> None:
    """A cell that prints its command's whole answer (``text(JSON.stringify(r))``) carries a random chunk id and the
    seconds it ran: the same failure twice is the same result."""
    from analyzer.ingest.formats.codex import classify, parse_output

    def answer(chunk: str, secs: str, code: int) -> list[dict]:
        return [
            {"type": "input_text", "text": f"Script completed\nWall time {secs} seconds\nOutput:\n"},
            {
                "type": "input_text",
                "text": f'{{"chunk_id":"{chunk}","wall_time_seconds":{secs},"exit_code":{code},'
                f'"original_token_count":13,"output":"bwrap: Permission denied\\n"}}',
            },
        ]

    first, again, passed = (
        parse_output(answer(*a)) for a in (("6d900c", "0", 1), ("a72395", "0.21", 1), ("x", "0", 0))
    )
    assert first[1] == 1 and classify(*first, None) == (True, "exit_code")
    assert classify(*passed, None) == (False, None)
    assert result_key(first[0], True) == result_key(again[0], True)
    failed = parse_output([{"type": "input_text", "text": "Script failed\nWall time 0.0 seconds\nOutput:\n"}])
    assert classify(*failed, None) == (True, "text")


def test_a_patch_is_read_as_an_edit() -> None:
    """A Codex patch's files are its object and the lines it expects (removed, context, ``@@`` anchors) its old text;
    the added lines are the fix being tried, left out."""
    patch = (
        "*** Begin Patch\n*** Update File: src/app.py\n@@ def main():\n-    run(1)\n+    run(2)\n     return\n"
        "*** Add File: notes.txt\n+hello\n*** Delete File: old.txt\n*** End Patch"
    )
    assert patch_parts(patch) == PatchParts(
        frozenset({("update", "src/app.py"), ("add", "notes.txt"), ("delete", "old.txt")}),
        "def main():\n    run(1)\n    return",
    )
    # a heredoc: the patch ends at its end marker, and what the command runs after it is no old text
    assert patch_parts(
        "apply_patch <<'EOF'\n" + patch + "\nEOF\npytest -q \\\n  --maxfail=1 \\\n  -k slow"
    ) == patch_parts(patch)
    assert patch_parts("sed -i 's/a/b/' x.py") is None
    assert applies_patch(orjson.dumps({"command": ["apply_patch", patch]}).decode())
    assert not applies_patch(orjson.dumps({"command": ["cat", "*** Begin Patch"]}).decode())


def test_a_patch_inside_another_programs_heredoc_is_not_applied() -> None:
    """``cat > AGENTS.md <<'MD'`` whose text shows an example patch writes AGENTS.md; it applies no patch."""
    from analyzer.detect.judge import action

    example = "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/example.py\n@@\n-a\n+b\n*** End Patch\nEOF"
    act = action("shell", orjson.dumps({"command": ["bash", "-lc", f"cat > AGENTS.md <<'MD'\n{example}\nMD"]}).decode())
    assert act.program == "cat" and act.paths == frozenset({"AGENTS.md"})
