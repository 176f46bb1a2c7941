"""The Claude Code hook: protocol round trips, fail-open, install/uninstall merging, and the proof that it decides as
the offline replay does (real transcripts replayed call by call through the hook process and its state file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import FIXTURES, ROOT, SAMPLE_DATA
from helpers import ingest_paths

from analyzer.detect.keys import call_key, canonical_json
from analyzer.guards import Message, UserPrompt
from analyzer.guards.policies import PRESETS, Policy
from analyzer.guards.replay import Session, load_corpus, replay
from analyzer.hook import install as inst
from analyzer.hook.main import run
from analyzer.hook.settings import hook_policy, write_settings
from analyzer.store import connection

CLAUDE_DIRS = (FIXTURES / "claude_code", ROOT / "tests" / "realdata" / "claude_code", SAMPLE_DATA / "claude_code")
HOOK = [sys.executable, "-m", "analyzer.hook", "claude-code"]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Cache and config dirs of this test only (for in-process runs and subprocesses alike)."""
    e = {"LOOPSCOPE_CACHE_DIR": str(tmp_path / "cache"), "LOOPSCOPE_CONFIG_DIR": str(tmp_path / "config")}
    for k, v in e.items():
        monkeypatch.setenv(k, v)
    return {**os.environ, **e}


def pre(sid: str, tid: str, command: str, transcript: str | None = None) -> dict[str, Any]:
    return {
        "session_id": sid,
        "transcript_path": transcript or "/nonexistent/transcript.jsonl",
        "cwd": "/tmp",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": tid,
    }


def post(sid: str, tid: str, command: str, output: str, failed: bool = False) -> dict[str, Any]:
    p: dict[str, Any] = {
        "session_id": sid,
        "transcript_path": "/nonexistent",
        "cwd": "/tmp",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": tid,
    }
    if failed:
        p.update(hook_event_name="PostToolUseFailure", error=output)
    else:
        p.update(hook_event_name="PostToolUse", tool_response={"stdout": output, "stderr": "", "interrupted": False})
    return p


def call_hook(
    payload: Any, args: list[str] | None = None, env: dict[str, str] | None = None, raw: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    data = raw if raw is not None else orjson.dumps(payload)
    return subprocess.run(HOOK + (args or []), input=data, capture_output=True, env=env, cwd=ROOT, timeout=60)


# -- protocol round trips ----------------------------------------------------------------------------------------------
def test_allow_warn_block_json(env: dict[str, str]) -> None:
    """Allow prints nothing; a warning lets the call run with additionalContext; a halt denies with a reason the
    model reads; a repeat of the halted call is denied again, another call runs."""
    cmd = "pytest tests/test_x.py"
    answers = []
    for i in range(6):
        r = call_hook(pre("s1", f"t{i}", cmd), env=env)
        assert r.returncode == 0 and r.stderr == b""
        answers.append(json.loads(r.stdout) if r.stdout.strip() else None)
        if answers[-1] is None or "permissionDecision" not in answers[-1]["hookSpecificOutput"]:
            assert (
                call_hook(
                    post("s1", f"t{i}", cmd, "E   assert 1 == 2\nFAILED tests/test_x.py::test_a", True), env=env
                ).stdout
                == b""
            )
    assert answers[0] is None and answers[1] is None
    for a in answers[2:4]:
        out = a["hookSpecificOutput"]
        assert out["hookEventName"] == "PreToolUse" and "permissionDecision" not in out
        assert "pytest tests/test_x.py" in out["additionalContext"]
    deny = answers[4]["hookSpecificOutput"]
    assert deny == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": deny["permissionDecisionReason"],
    }
    assert (
        "the same `pytest tests/test_x.py` failed 4 times in a row with the same error"
        in deny["permissionDecisionReason"]
    )
    assert deny["permissionDecisionReason"].endswith("change approach or ask the user.")
    assert answers[5]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert call_hook(pre("s1", "t9", "git diff"), env=env).stdout == b""


def test_poll_whose_output_changes_is_never_stopped(env: dict[str, str]) -> None:
    outs = []
    for i in range(12):
        outs.append(run(["claude-code"], orjson.dumps(pre("poll", f"p{i}", "gh run view 42"))))
        run(["claude-code"], orjson.dumps(post("poll", f"p{i}", "gh run view 42", f"in progress: step {i}/12")))
    assert outs == [None] * 12


def test_a_wait_on_a_running_process_runs_on_and_an_ended_one_is_stopped(env: dict[str, str]) -> None:
    """The same poll with the same "in progress" answer is a wait (the run decides when it ends): never warned or
    denied, however long the agent sleeps first. Once the answer says the run ended, the same poll again is stuck."""
    outs = []
    for i in range(8):
        cmd = f"sleep {10 * (i + 1)} && gh run view 42"
        outs.append(run(["claude-code"], orjson.dumps(pre("wait", f"w{i}", cmd))))
        run(["claude-code"], orjson.dumps(post("wait", f"w{i}", cmd, "status: in_progress")))
    assert outs == [None] * 8
    outs = []
    for i in range(6):
        outs.append(run(["claude-code"], orjson.dumps(pre("ended", f"e{i}", "gh run view 42"))))
        run(["claude-code"], orjson.dumps(post("ended", f"e{i}", "gh run view 42", "status: completed (failure)")))
    assert outs[:2] == [None, None]
    assert any(o and o["hookSpecificOutput"].get("permissionDecision") == "deny" for o in outs)


def test_user_prompt_resets_the_counters(env: dict[str, str]) -> None:
    def loop(sid: str, n: int, start: int) -> list[Any]:
        got = []
        for i in range(start, start + n):
            got.append(run(["claude-code"], orjson.dumps(pre(sid, f"u{i}", "make"))))
            if got[-1] is None or "permissionDecision" not in got[-1]["hookSpecificOutput"]:
                run(["claude-code"], orjson.dumps(post(sid, f"u{i}", "make", "error: x", True)))
        return got

    assert loop("u", 4, 0)[-1] is not None  # warned
    run(
        ["claude-code"],
        orjson.dumps(
            {
                "session_id": "u",
                "hook_event_name": "UserPromptSubmit",
                "prompt": "try again",
                "transcript_path": "/x",
                "cwd": "/",
            }
        ),
    )
    assert loop("u", 2, 10) == [None, None]


def test_post_tool_use_and_subagents_keep_their_own_state(env: dict[str, str]) -> None:
    for i in range(3):
        run(["claude-code"], orjson.dumps(pre("s", f"a{i}", "ls")))
        run(["claude-code"], orjson.dumps(post("s", f"a{i}", "ls", "same", True)))
    sub = {**pre("s", "b0", "ls"), "agent_id": "agent-1", "agent_type": "Explore"}
    assert run(["claude-code"], orjson.dumps(sub)) is None  # the subagent's first ls
    assert run(["claude-code"], orjson.dumps(pre("s", "a3", "ls"))) is not None
    assert sorted(p.name for p in Path(os.environ["LOOPSCOPE_CACHE_DIR"]).iterdir()) == ["s.agent-1.state", "s.state"]


def test_text_rules_read_the_transcript(env: dict[str, str], tmp_path: Path) -> None:
    """pi-anti-doom-loop's text rule sees each message's text, read from the transcript since the last call."""
    tr = tmp_path / "t.jsonl"
    text = "Let me fetch the merge ref and look at the failing test again:"
    answers = []
    for i in range(4):
        line = {
            "type": "assistant",
            "sessionId": "x",
            "message": {
                "id": f"msg_{i}",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": text},
                    {"type": "tool_use", "id": f"x{i}", "name": "Bash", "input": {"command": f"git show {i}"}},
                ],
            },
        }
        with tr.open("ab") as f:
            f.write(orjson.dumps(line) + b"\n")
        answers.append(
            run(
                ["claude-code", "--policy", "pi-anti-doom-loop"],
                orjson.dumps(pre("x", f"x{i}", f"git show {i}", str(tr))),
            )
        )
        run(
            ["claude-code", "--policy", "pi-anti-doom-loop"],
            orjson.dumps(post("x", f"x{i}", f"git show {i}", f"commit {i}")),
        )
    assert answers[:2] == [None, None]
    assert answers[2] is not None and "text" in json.dumps(answers[2]).lower()


# -- fail open ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[1,2]",
        b'{"hook_event_name": "PreToolUse"}',
        b'{"session_id": "s", "hook_event_name": "PreToolUse", "tool_input": {}}',
    ],
)
def test_bad_input_fails_open(raw: bytes, env: dict[str, str]) -> None:
    r = call_hook(None, env=env, raw=raw)
    assert r.returncode == 0 and r.stdout == b""
    assert len(r.stderr.decode().strip().splitlines()) == 1 and "call allowed" in r.stderr.decode()


def test_bad_settings_state_and_arguments_fail_open(env: dict[str, str], tmp_path: Path) -> None:
    payload = pre("s2", "t0", "ls")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    for args in (["--settings", str(bad)], ["--policy", "no-such-guard"], ["--set", "halt=x"], ["--bogus"]):
        r = call_hook(payload, args, env=env)
        assert r.returncode == 0 and r.stdout == b"" and len(r.stderr.splitlines()) == 1
    state = Path(env["LOOPSCOPE_CACHE_DIR"]) / "s2.state"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_bytes(b"\x80garbage")
    r = call_hook(payload, env=env)
    assert r.returncode == 0 and r.stdout == b"" and b"starting fresh" in r.stderr
    os.chmod(state, 0o000)
    try:
        if os.geteuid() != 0:  # root reads anything
            r = call_hook(payload, env=env)
            assert r.returncode == 0 and r.stdout == b""
    finally:
        os.chmod(state, 0o600)


def test_missing_transcript_and_other_events_are_fine(env: dict[str, str]) -> None:
    assert run(["claude-code"], orjson.dumps({**pre("s3", "t", "ls"), "transcript_path": None})) is None
    assert run(["claude-code"], orjson.dumps({"session_id": "s3", "hook_event_name": "Stop"})) is None


def test_parallel_calls_do_not_corrupt_the_state(env: dict[str, str]) -> None:
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: call_hook(pre("par", f"p{i}", f"cat f{i % 3}"), env=env), range(24)))
    assert all(r.returncode == 0 and r.stderr == b"" for r in results)
    r = call_hook(pre("par", "last", "cat f0"), env=env)
    assert r.returncode == 0 and r.stderr == b""
    from analyzer.hook.state import locked, state_path

    with locked(state_path("par")) as box:
        assert box.value.n == 25


# -- settings ----------------------------------------------------------------------------------------------------------
def test_settings_file_chooses_the_thresholds(env: dict[str, str]) -> None:
    assert hook_policy().params["halt"] == 5 and hook_policy().name == "loopscope"
    write_settings("loopscope", {"warn": 2, "halt": 3}, "test")
    assert (hook_policy().params["warn"], hook_policy().params["halt"]) == (2, 3)
    assert hook_policy("open-codesign").params["halt"] == 5  # another policy ignores loopscope's settings
    assert hook_policy(overrides={"halt": "7"}).params["halt"] == 7


# -- install / uninstall -----------------------------------------------------------------------------------------------
def test_install_merges_and_uninstall_removes_only_its_own(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    theirs = {
        "model": "opus",
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard-rm.sh"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        },
    }
    path.write_text(json.dumps(theirs))
    cmd = "/opt/venv/bin/loopscope-hook claude-code"
    removed, added = inst.install(path, cmd)
    assert removed == [] and len(added) == 4
    data = json.loads(path.read_text())
    assert data["model"] == "opus" and data["hooks"]["Stop"] == theirs["hooks"]["Stop"]
    assert data["hooks"]["PreToolUse"][0] == theirs["hooks"]["PreToolUse"][0]
    assert data["hooks"]["PreToolUse"][1] == {
        "matcher": "*",
        "hooks": [{"type": "command", "command": cmd, "timeout": inst.TIMEOUT}],
    }
    assert set(data["hooks"]) == {"PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "Stop"}
    removed, _ = inst.install(path, cmd + " --policy open-codesign")  # again: replaced, not doubled
    assert len(removed) == 4 and len(json.loads(path.read_text())["hooks"]["PreToolUse"]) == 2
    assert len(inst.uninstall(path)) == 4
    assert json.loads(path.read_text()) == theirs
    assert inst.uninstall(path) == []


def test_install_command_prints_what_changed(tmp_path: Path, env: dict[str, str]) -> None:
    from typer.testing import CliRunner

    from analyzer.cli import app

    res = CliRunner().invoke(app, ["hook", "install", "claude-code", "--project", "--project-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    path = tmp_path / ".claude" / "settings.json"
    assert str(path) in res.output and "+ PreToolUse:" in res.output and "guard: loopscope" in res.output
    cmd = json.loads(path.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert cmd.endswith("claude-code")
    r = subprocess.run(cmd, shell=True, input=orjson.dumps(pre("inst", "t", "ls")), capture_output=True, env=env)
    assert r.returncode == 0 and r.stdout == b"" and r.stderr == b""
    res = CliRunner().invoke(app, ["hook", "uninstall", "claude-code", "--project", "--project-dir", str(tmp_path)])
    assert res.exit_code == 0 and "- UserPromptSubmit:" in res.output
    assert json.loads(path.read_text()) == {}
    bad = tmp_path / "b" / ".claude" / "settings.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{oops")
    res = CliRunner().invoke(app, ["hook", "install", "claude-code", "--project", "--project-dir", str(tmp_path / "b")])
    assert res.exit_code != 0 and bad.read_text() == "{oops"


# -- the proof: the hook decides as the replay does --------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Session], dict[tuple[str, str], tuple]]:
    """Every real Claude Code transcript in the repository, in a store: the replay's sessions, and each call's full
    arguments and recorded result."""
    db = tmp_path_factory.mktemp("hookstore") / "s.duckdb"
    ingest_paths(db, *CLAUDE_DIRS)
    con = connection.connect(db, read_only=True)
    try:
        c = load_corpus(con)
        rows = {
            (sid, cid): (tool, args, key, text, err)
            for sid, cid, tool, args, key, text, err in con.execute(
                "SELECT session_id, call_id, tool, args, call_key, result_text, is_error FROM calls"
            ).fetchall()
        }
    finally:
        con.close()
    return c.sessions, rows


def drive(
    s: Session,
    rows: dict[tuple[str, str], tuple],
    hook: Callable[[dict[str, Any]], dict[str, Any] | None],
    transcript: Path,
) -> tuple[set[str], set[str]]:
    """Replay one session through ``hook`` as Claude Code would send it: a UserPromptSubmit per prompt, and for each
    assistant message (written to ``transcript`` first) each call's PreToolUse, then, unless it was denied, its
    PostToolUse (or PostToolUseFailure) with the recorded result. Returns the denied and the warned call ids."""
    denied: set[str] = set()
    warned: set[str] = set()
    base = {"session_id": s.session_id, "transcript_path": str(transcript), "cwd": "/work"}
    for step in s.steps:
        if isinstance(step, UserPrompt):
            hook({**base, "hook_event_name": "UserPromptSubmit", "prompt": "..."})
            continue
        assert isinstance(step, Message)
        calls = [c for c in step.calls if c.parent is None]
        if not calls:
            continue
        content: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text else []
        content += [{"type": "tool_use", "id": c.call_id, "name": c.tool, "input": {}} for c in calls]
        with transcript.open("ab") as f:
            f.write(
                orjson.dumps(
                    {
                        "type": "assistant",
                        "sessionId": s.session_id,
                        "message": {"id": f"msg_{step.turn}", "role": "assistant", "content": content},
                    }
                )
                + b"\n"
            )
        for c in calls:
            tool, args, key, text, err = rows[(s.session_id, c.call_id)]
            tool_input = orjson.loads(args)
            assert call_key(tool, canonical_json(tool_input)) == key  # the hook's key is the store's
            out = hook(
                {
                    **base,
                    "hook_event_name": "PreToolUse",
                    "tool_name": tool,
                    "tool_input": tool_input,
                    "tool_use_id": c.call_id,
                }
            )
            spec = (out or {}).get("hookSpecificOutput", {})
            if spec.get("permissionDecision") == "deny":
                denied.add(c.call_id)
                continue
            if "additionalContext" in spec:
                warned.add(c.call_id)
            if c.result_key is None:
                continue
            if err:
                hook(
                    {
                        **base,
                        "hook_event_name": "PostToolUseFailure",
                        "tool_name": tool,
                        "tool_input": tool_input,
                        "tool_use_id": c.call_id,
                        "error": text or "",
                    }
                )
            else:
                hook(
                    {
                        **base,
                        "hook_event_name": "PostToolUse",
                        "tool_name": tool,
                        "tool_input": tool_input,
                        "tool_use_id": c.call_id,
                        "tool_response": text or "",
                    }
                )
    return denied, warned


def replay_marks(sessions: list[Session], policy: Policy) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    r = replay(load_corpus_like(sessions), [policy], verdicts=True)
    halts: dict[str, set[str]] = {s.session_id: set() for s in sessions}
    warns: dict[str, set[str]] = {s.session_id: set() for s in sessions}
    for sid, cid, level in r.verdicts.select("session_id", "call_id", "level").iter_rows():
        (halts if level == "halt" else warns)[sid].add(cid)
    return halts, warns


def load_corpus_like(sessions: list[Session]) -> Any:
    from analyzer.guards.replay import Corpus

    return Corpus(sessions)


def _check(
    sessions: list[Session],
    rows: dict[tuple[str, str], tuple],
    policy: Policy,
    tmp: Path,
    subprocess_env: dict[str, str] | None,
) -> tuple[int, int, int]:
    halts, warns = replay_marks(sessions, policy)

    def one(s: Session) -> tuple[str, set[str], set[str]]:
        tr = tmp / f"{abs(hash(s.session_id))}.jsonl"
        if subprocess_env is None:

            def hook(p: dict[str, Any]) -> dict[str, Any] | None:
                sets = sum((["--set", f"{k}={v}"] for k, v in policy.changed().items()), [])
                return run(["claude-code", "--policy", policy.name, *sets], orjson.dumps(p))
        else:

            def hook(p: dict[str, Any]) -> dict[str, Any] | None:
                r = call_hook(p, env=subprocess_env)
                assert r.returncode == 0 and r.stderr == b"", r.stderr
                return json.loads(r.stdout) if r.stdout.strip() else None

        d, w = drive(s, rows, hook, tr)
        return s.session_id, d, w

    with ThreadPoolExecutor(8 if subprocess_env is not None else 1) as pool:
        got = list(pool.map(one, sessions))
    for sid, d, w in got:
        assert d == halts[sid], f"{sid}: hook denied {sorted(d)}, replay halted {sorted(halts[sid])}"
        assert w == warns[sid], f"{sid}: hook warned {sorted(w)}, replay warned {sorted(warns[sid])}"
    n_calls = sum(len(s.calls) for s in sessions)
    return len(sessions), n_calls, sum(len(h) for h in halts.values())


@pytest.mark.slow
def test_hook_process_denies_exactly_where_the_replay_halts(corpus: Any, tmp_path: Path, env: dict[str, str]) -> None:
    """Every real Claude Code session in the repository where the replay halts, through the hook run as a subprocess
    (one process per event, as Claude Code runs it) with its state file, under the settings file a calibration would
    write (tight thresholds, so there are halts to match). The in-process proofs below drive every session through
    the same ``run``, state file included; this one adds the process boundary, so it drives the sessions where a
    decision carried from one process to the next matters (each process started costs ~0.1 s: all 28 sessions took
    ~4.5 minutes of the suite)."""
    sessions, rows = corpus
    write_settings("loopscope", {"warn": 2, "halt": 3}, "test")
    policy = PRESETS["loopscope"].with_settings({"warn": 2, "halt": 3}, name="loopscope")
    halts, _ = replay_marks(sessions, policy)
    halting = [s for s in sessions if halts[s.session_id]]
    n_sessions, n_calls, n_halts = _check(halting, rows, policy, tmp_path, env)
    assert len(sessions) == 28 and n_sessions >= 4 and n_halts >= 5, (n_sessions, n_calls, n_halts)


@pytest.mark.parametrize(
    "name,sets",
    [
        ("loopscope", {}),
        ("loopscope", {"warn": 2, "halt": 4}),
        ("open-codesign", {}),
        ("open-codesign", {"warn": 2, "halt": 3}),
    ],
)
def test_hook_decides_as_the_replay_in_process(
    corpus: Any, tmp_path: Path, env: dict[str, str], name: str, sets: dict[str, int]
) -> None:
    sessions, rows = corpus
    policy = PRESETS[name].with_settings(sets, name=name)
    _check(sessions, rows, policy, tmp_path, None)
