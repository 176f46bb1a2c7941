"""The Codex CLI and Gemini CLI hooks: the proof that each decides as the replay does on the calls its agent's hooks
see (real transcripts of that agent driven event by event, as the agent would send them), the protocol through the
hook process, fail-open, parallel hook processes, per-agent settings, and install/uninstall round trips."""

from __future__ import annotations

import json
import os
import re
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

from analyzer.detect.keys import call_key, canonical_json, ordered_json, result_key, shallow_sorted_json
from analyzer.guards import Call, Message, UserPrompt
from analyzer.guards.policies import PRESETS, Policy
from analyzer.guards.replay import Corpus, Session, load_corpus, replay
from analyzer.hook import agent_install as ai
from analyzer.hook.agents import CODEX, GEMINI, live_call, stored_call
from analyzer.hook.main import run
from analyzer.hook.settings import hook_policy, write_settings
from analyzer.store import connection

DIRS = {
    CODEX: (ROOT / "tests" / "realdata" / "codex", FIXTURES / "codex", SAMPLE_DATA / "codex"),
    GEMINI: (FIXTURES / "gemini", SAMPLE_DATA / "gemini"),
}
TIGHT = {"warn": 2, "halt": 3}
_EXEC_HEADER = re.compile(
    r"\A(?:(?:Chunk ID|Wall time|Process exited with code|Process running with session ID|"
    r"Original token count|Total output lines|Exit code):[^\n]*\n)+Output:\n?"
)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    e = {
        "LOOPSCOPE_CACHE_DIR": str(tmp_path / "cache"),
        "LOOPSCOPE_CONFIG_DIR": str(tmp_path / "config"),
        "HOME": str(tmp_path / "home"),
    }
    for k, v in e.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)
    return {**os.environ, **e}


# -- what each agent sends for a stored call ---------------------------------------------------------------------------
def live_result(agent: str, tool: str, text: str, err: bool) -> Any:
    """The result event's ``tool_response`` the agent sends for a stored call's result, or None when its hooks get
    none (Codex 0.124/0.125: a failed shell_command/shell/apply_patch/MCP call has no PostToolUse)."""
    if agent == GEMINI:
        if err:
            return {"llmContent": text, "returnDisplay": text, "error": {"message": text, "type": "x"}}
        return {"llmContent": text, "returnDisplay": text}
    if tool == "exec_command":  # the output alone, without the rollout's exec header
        return _EXEC_HEADER.sub("", text, count=1)
    if err:
        return None
    if tool == "apply_patch":
        return orjson.dumps({"output": text, "metadata": {"exit_code": 0, "duration_seconds": 0.0}}).decode()
    if tool.startswith("mcp__"):
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return _EXEC_HEADER.sub("", text, count=1)


EVENT = {
    CODEX: ("UserPromptSubmit", "PreToolUse", "PostToolUse"),
    GEMINI: ("BeforeAgent", "BeforeTool", "AfterTool"),
}


def drive(
    agent: str, s: Session, rows: dict[tuple[str, str], tuple], hook: Callable[[dict[str, Any]], dict[str, Any] | None]
) -> tuple[set[str], set[str], int]:
    """One stored session through ``hook`` as the agent sends it: a prompt event per user prompt; per assistant
    message, each visible call's before-event, then each result event the agent sends. Returns the denied and warned
    call ids, and the events sent."""
    denied: set[str] = set()
    warned: set[str] = set()
    n = 0
    prompt_ev, call_ev, result_ev = EVENT[agent]
    base = {"session_id": s.session_id, "transcript_path": "/nonexistent", "cwd": "/work"}
    for step in s.steps:
        if isinstance(step, UserPrompt):
            hook({**base, "hook_event_name": prompt_ev, "prompt": "..."})
            n += 1
            continue
        assert isinstance(step, Message)
        sent = []
        for c in step.calls:
            tool, args, _key, text, err = rows[(s.session_id, c.call_id)]
            live = live_call(agent, tool, orjson.loads(args)) if c.parent is None else None
            if live is None:
                continue
            p = {**base, "hook_event_name": call_ev, "tool_name": live[0], "tool_input": live[1]}
            if agent == CODEX:
                p["tool_use_id"] = c.call_id
            out = hook(p) or {}
            n += 1
            if out.get("decision") == "deny" or out.get("hookSpecificOutput", {}).get("permissionDecision") == "deny":
                denied.add(c.call_id)
                continue
            if "systemMessage" in out:
                warned.add(c.call_id)
            sent.append((c, p, tool, text, err))
        for c, p, tool, text, err in sent:
            if c.result_key is None:
                continue
            resp = live_result(agent, tool, text or "", bool(err))
            if resp is None:
                continue
            out = hook({**p, "hook_event_name": result_ev, "tool_response": resp})
            n += 1
            ctx = (out or {}).get("hookSpecificOutput", {}).get("additionalContext", "")
            assert (c.call_id in warned) == ("warning" in ctx), (c.call_id, out)  # the model reads the warning
    return denied, warned, n


def hook_view(agent: str, sessions: list[Session], rows: dict[tuple[str, str], tuple]) -> list[Session]:
    """The sessions as the agent's hooks see them: only the calls they see, keyed from what they report (mapped onto
    the transcript's names), with the results they deliver; messages with no such call dropped."""
    out = []
    for s in sessions:
        steps: list[Any] = []
        calls: list[Call] = []
        for step in s.steps:
            if isinstance(step, UserPrompt):
                steps.append(step)
                continue
            msg = Message(step.turn, step.turn_id, step.user_turn, step.text)
            for c in step.calls:
                tool, args, _key, text, err = rows[(s.session_id, c.call_id)]
                live = live_call(agent, tool, orjson.loads(args)) if c.parent is None else None
                if live is None:
                    continue
                name, a = stored_call(agent, *live)
                resp = live_result(agent, tool, text or "", bool(err)) if c.result_key is not None else None
                if resp is None:
                    rk, e = None, None
                elif agent == GEMINI:
                    rk, e = result_key(text or "", bool(err)), bool(err)
                else:
                    from analyzer.hook.agents import codex_result

                    t, e = codex_result(name, resp)
                    rk = result_key(t, e)
                canon = canonical_json(a)
                nc = Call(
                    len(calls),
                    c.seq,
                    c.call_id,
                    c.turn,
                    c.user_turn,
                    name,
                    canon,
                    call_key(name, canon),
                    call_key(name, ordered_json(a)),
                    call_key(name, shallow_sorted_json(a)),
                    rk,
                    e,
                    None,
                )
                calls.append(nc)
                msg.calls.append(nc)
            if msg.calls:
                steps.append(msg)
        out.append(Session(s.session_id, steps, calls, s.turn_ids, s.turn_user, s.turn_tokens, s.turn_cost))
    return out


def replay_marks(sessions: list[Session], policy: Policy) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    r = replay(Corpus(sessions), [policy], verdicts=True)
    halts: dict[str, set[str]] = {s.session_id: set() for s in sessions}
    warns: dict[str, set[str]] = {s.session_id: set() for s in sessions}
    for sid, cid, level in r.verdicts.select("session_id", "call_id", "level").iter_rows():
        (halts if level == "halt" else warns)[sid].add(cid)
    return halts, warns


def load(agent: str, tmp: Path) -> tuple[list[Session], dict[tuple[str, str], tuple]]:
    db = tmp / f"{agent}.duckdb"
    ingest_paths(db, *DIRS[agent])
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


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[Session], dict]]:
    tmp = tmp_path_factory.mktemp("agents")
    return {a: load(a, tmp) for a in (CODEX, GEMINI)}


def in_process(agent: str, policy: Policy) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    sets = sum((["--set", f"{k}={v}"] for k, v in policy.changed().items()), [])
    return lambda p: run([agent, "--policy", policy.name, *sets], orjson.dumps(p))


def check(agent: str, corpora: dict, policy: Policy, hook_for: Callable[[Session], Callable] | None = None) -> tuple:
    sessions, rows = corpora[agent]
    view = hook_view(agent, sessions, rows)
    halts, warns = replay_marks(view, policy)
    if agent == GEMINI:  # Gemini's hooks see every call as the chat file records it: the store's own replay agrees
        assert replay_marks(sessions, policy) == (halts, warns)
    hook = in_process(agent, policy)
    events = 0
    for s in sessions:
        d, w, n = drive(agent, s, rows, hook_for(s) if hook_for else hook)
        events += n
        assert d == halts[s.session_id], f"{s.session_id}: hook denied {sorted(d)}, replay halted {halts[s.session_id]}"
        assert w == warns[s.session_id], f"{s.session_id}: hook warned {sorted(w)}, replay warned {warns[s.session_id]}"
    return sum(len(h) for h in halts.values()), sum(len(w) for w in warns.values()), events


# -- the proof ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("agent", [CODEX, GEMINI])
def test_hook_denies_and_warns_exactly_where_the_replay_does(agent: str, corpora: dict, env: dict[str, str]) -> None:
    """Every committed real session of the agent, event by event through the hook's entry function and its state
    file, under tight settings (warn 2, halt 3): denials and warnings fall exactly on the calls where the replay of
    the same settings halts and warns on the calls the agent's hooks see."""
    policy = PRESETS["loopscope"].with_settings(TIGHT, name="loopscope")
    n_halts, n_warns, _ = check(agent, corpora, policy)
    assert n_halts >= 5, n_halts


@pytest.mark.parametrize("agent", [CODEX, GEMINI])
def test_other_policies_and_defaults_agree_too(agent: str, corpora: dict, env: dict[str, str]) -> None:
    for name, sets in (("loopscope", {}), ("open-codesign", TIGHT)):
        check(agent, corpora, PRESETS[name].with_settings(sets, name=name))


def test_codex_hook_view_keeps_most_of_the_store_replays_halts(corpora: dict) -> None:
    """What Codex's hooks hide (write_stdin polls, update_plan, exit codes) costs some halts; the mapped keys keep
    the rest: most of the store replay's halts on visible calls are halts of the hook's view too."""
    sessions, rows = corpora[CODEX]
    policy = PRESETS["loopscope"].with_settings(TIGHT, name="loopscope")
    full, _ = replay_marks(sessions, policy)
    view, _ = replay_marks(hook_view(CODEX, sessions, rows), policy)
    visible = {
        (sid, cid) for sid, ids in full.items() for cid in ids if live_call(CODEX, rows[(sid, cid)][0], {}) is not None
    }
    kept = {(sid, cid) for sid, ids in view.items() for cid in ids} & visible
    assert len(kept) >= len(visible) // 2, (len(kept), len(visible))


@pytest.mark.slow
@pytest.mark.parametrize("agent", [CODEX, GEMINI])
def test_hook_process_protocol(agent: str, corpora: dict, env: dict[str, str]) -> None:
    """The same proof through the hook run as a subprocess per event (as the agents run it), sessions in parallel,
    under the settings file's section for the agent: a few hundred events."""
    write_settings("loopscope", TIGHT, "test", agent=agent)
    write_settings("loopscope", {"warn": 9, "halt": 12}, "test")  # the top level is not what the agent reads
    policy = PRESETS["loopscope"].with_settings(TIGHT, name="loopscope")
    cmd = [sys.executable, "-m", "analyzer.hook", agent]

    def hook(p: dict[str, Any]) -> dict[str, Any] | None:
        r = subprocess.run(cmd, input=orjson.dumps(p), capture_output=True, env=env, cwd=ROOT, timeout=60)
        assert r.returncode == 0 and r.stderr == b"", r.stderr
        return json.loads(r.stdout) if r.stdout.strip() else None

    sessions, rows = corpora[agent]
    view = hook_view(agent, sessions, rows)
    halts, warns = replay_marks(view, policy)

    def one(s: Session) -> tuple[str, set[str], set[str], int]:
        d, w, n = drive(agent, s, rows, hook)
        return s.session_id, d, w, n

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(one, sessions))
    for sid, d, w, _ in got:
        assert (d, w) == (halts[sid], warns[sid]), sid
    assert sum(n for *_, n in got) >= 200


# -- protocol details --------------------------------------------------------------------------------------------------
def codex_pre(sid: str, tid: str, command: str) -> dict[str, Any]:
    return {
        "session_id": sid,
        "turn_id": "t",
        "transcript_path": None,
        "cwd": "/w",
        "hook_event_name": "PreToolUse",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": tid,
    }


def gemini_before(sid: str, command: str) -> dict[str, Any]:
    return {
        "session_id": sid,
        "transcript_path": "",
        "cwd": "/w",
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-03-12T10:15:07.412Z",
        "tool_name": "run_shell_command",
        "tool_input": {"command": command},
    }


def test_codex_answers_stay_inside_its_schema(env: dict[str, str]) -> None:
    """Codex rejects unknown output fields and (0.124/0.125) PreToolUse additionalContext: a warning is a
    systemMessage, then PostToolUse additionalContext for the same call; a halt is a permissionDecision deny."""
    hook = in_process(CODEX, PRESETS["loopscope"].with_settings(TIGHT, name="loopscope"))
    pres, posts = [], []
    for i in range(4):  # no exit code: the first run is judged by its output (new: progress), then repeats count
        a = hook(codex_pre("cx", f"c{i}", "ruff check src"))
        pres.append(a)
        if a is None or "hookSpecificOutput" not in a:
            post = {**codex_pre("cx", f"c{i}", "ruff check src"), "hook_event_name": "PostToolUse"}
            posts.append(hook({**post, "tool_response": "src/a.py:1:1: F401 unused import\nFound 1 error."}))
    assert pres[:2] == [None, None] and posts[:2] == [None, None]
    assert set(pres[2]) == {"systemMessage"} and "warning" in pres[2]["systemMessage"]
    assert set(posts[2]) == {"hookSpecificOutput"}
    assert posts[2]["hookSpecificOutput"] == {
        "hookEventName": "PostToolUse",
        "additionalContext": pres[2]["systemMessage"],
    }
    deny = pres[3]["hookSpecificOutput"]
    assert set(deny) == {"hookEventName", "permissionDecision", "permissionDecisionReason"} and len(posts) == 3
    assert deny["permissionDecision"] == "deny" and "ruff check src" in deny["permissionDecisionReason"]


def test_gemini_pairs_results_without_ids_and_denies_with_a_decision(env: dict[str, str]) -> None:
    hook = in_process(GEMINI, PRESETS["loopscope"].with_settings(TIGHT, name="loopscope"))
    # a parallel batch of two different calls: results come back in the other order
    assert hook(gemini_before("g", "ls a")) is None and hook(gemini_before("g", "ls b")) is None
    for cmd, out in (("ls b", "b1"), ("ls a", "a1")):
        ev = {**gemini_before("g", cmd), "hook_event_name": "AfterTool", "tool_response": {"llmContent": out}}
        assert hook(ev) is None
    pres, posts = [], []
    for _ in range(4):
        a = hook(gemini_before("g", "npm run build"))
        pres.append(a)
        if a is None or a.get("decision") != "deny":
            ev = {
                **gemini_before("g", "npm run build"),
                "hook_event_name": "AfterTool",
                "tool_response": {"llmContent": "Output: ERR\nExit Code: 1"},
            }
            posts.append(hook(ev))
    assert pres[:2] == [None, None] and set(pres[2]) == {"systemMessage"}
    assert posts[2]["hookSpecificOutput"]["hookEventName"] == "AfterTool"
    assert set(pres[3]) == {"decision", "reason"} and pres[3]["decision"] == "deny"
    # a new prompt resets the counters
    hook({"session_id": "g", "hook_event_name": "BeforeAgent", "prompt": "again", "cwd": "/w", "transcript_path": ""})
    assert hook(gemini_before("g", "npm run build")) is None


@pytest.mark.parametrize("agent", [CODEX, GEMINI])
@pytest.mark.parametrize("raw", [b"", b"not json", b"[1]", b'{"hook_event_name": "PreToolUse"}'])
def test_bad_input_fails_open_and_is_logged(agent: str, raw: bytes, env: dict[str, str]) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "analyzer.hook", agent], input=raw, capture_output=True, env=env, cwd=ROOT, timeout=60
    )
    assert r.returncode == 0 and r.stdout == b"" and b"call allowed" in r.stderr
    log = (Path(env["LOOPSCOPE_CACHE_DIR"]) / "hook-log.jsonl").read_text()
    assert json.loads(log.splitlines()[-1])["kind"] == "error" and json.loads(log.splitlines()[-1])["agent"] == agent


def test_parallel_hook_processes_lose_no_update(env: dict[str, str]) -> None:
    """24 hook processes for one Codex session at once (Codex starts parallel calls' hooks together): every call is
    counted, the state file stays readable, and the denials' log lines are whole."""
    write_settings("loopscope", TIGHT, "test", agent=CODEX)
    cmd = [sys.executable, "-m", "analyzer.hook", CODEX]

    def one(i: int) -> subprocess.CompletedProcess[bytes]:
        p = codex_pre("par", f"p{i}", "cat f0")
        return subprocess.run(cmd, input=orjson.dumps(p), capture_output=True, env=env, cwd=ROOT, timeout=60)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(24)))
    assert all(r.returncode == 0 and r.stderr == b"" for r in results)
    from analyzer.hook.state import locked, state_path

    with locked(state_path("codex-par")) as box:
        assert box.value.n == 24
    denials = sum(1 for r in results if b'"deny"' in r.stdout)
    lines = (Path(env["LOOPSCOPE_CACHE_DIR"]) / "hook-log.jsonl").read_text().splitlines()
    assert denials >= 20 and len(lines) == denials and all(json.loads(x)["kind"] == "deny" for x in lines)


def test_settings_have_a_section_per_agent(env: dict[str, str]) -> None:
    write_settings("loopscope", {"warn": 4, "halt": 8}, "top")
    write_settings("loopscope", {"warn": 2, "halt": 3}, "codex", agent=CODEX)
    assert hook_policy(agent=CODEX).params["halt"] == 3
    assert hook_policy(agent=GEMINI).params["halt"] == 8  # no section: the top level
    assert hook_policy().params["halt"] == 8
    write_settings("loopscope", {"warn": 5, "halt": 9}, "top again")  # keeps the sections
    assert hook_policy(agent=CODEX).params["halt"] == 3 and hook_policy().params["halt"] == 9


# -- install / uninstall -----------------------------------------------------------------------------------------------
CODEX_THEIRS = {
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [{"type": "command", "command": "python3 ~/.codex/hooks/pre_tool_use_policy.py"}],
            }
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "python3 ~/.codex/hooks/stop.py", "timeout": 30}]}],
    }
}
GEMINI_JSONC = """{
  // the user's own settings, with comments
  "theme": "GitHub",
  "hooksConfig": {"enabled": false, "notifications": true},
  "hooks": {
    /* their guard */
    "BeforeTool": [{"matcher": "write_file|replace", "hooks": [{"name": "lint", "type": "command",
                    "command": "./lint.sh", "timeout": 5000}]}],
    "SessionEnd": [{"hooks": [{"type": "command", "command": "notify-send bye"}]}],
  },
}
"""


def test_codex_install_then_uninstall_leaves_the_file_as_it_was(tmp_path: Path, env: dict[str, str]) -> None:
    home = Path(env["HOME"]) / ".codex"
    home.mkdir(parents=True)
    path = home / "hooks.json"
    path.write_text(json.dumps(CODEX_THEIRS))
    (home / "config.toml").write_text('model = "gpt-5"\n\n[features]\nhooks = false # off for now\n')
    cmd = "/opt/venv/bin/loopscope-hook codex"
    res = ai.install(CODEX, path, cmd)
    data = json.loads(path.read_text())
    assert set(data) == {"hooks"}  # newer Codex rejects any other top-level key
    assert data["hooks"]["PreToolUse"][0] == CODEX_THEIRS["hooks"]["PreToolUse"][0]  # theirs keep their position
    assert data["hooks"]["PreToolUse"][1] == {
        "matcher": "*",
        "hooks": [{"type": "command", "command": cmd, "timeout": 10}],
    }
    assert [s["what"] for s in res["switched"]] == ["[features] hooks"]
    assert "hooks = true # off for now" in (home / "config.toml").read_text()
    again = ai.install(CODEX, path, cmd)  # identical entries stay where they are (their trust is kept)
    assert again["added"] == [] and len(again["kept"]) == 3 and json.loads(path.read_text()) == data
    todo = [t for item in ai.status(CODEX) if item["scope"] == "user" for t in item["todo"]]
    assert any("review and trust" in t for t in todo)
    ai.uninstall(CODEX, path)
    assert json.loads(path.read_text()) == CODEX_THEIRS
    assert (home / "config.toml").read_text() == 'model = "gpt-5"\n\n[features]\nhooks = false # off for now\n'
    # a file install created is removed
    proj = tmp_path / "proj" / ".codex" / "hooks.json"
    ai.install(CODEX, proj, cmd)
    assert proj.exists()
    ai.uninstall(CODEX, proj)
    assert not proj.exists()


def test_gemini_install_then_uninstall_on_a_file_with_comments(env: dict[str, str]) -> None:
    path = Path(env["HOME"]) / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(GEMINI_JSONC)
    before = json.loads(ai.strip_comments(GEMINI_JSONC))
    res = ai.install(GEMINI, path, "/opt/venv/bin/loopscope-hook gemini-cli")
    assert res["comments"] and [s["what"] for s in res["switched"]] == ["hooksConfig.enabled"]
    data = json.loads(path.read_text())
    assert data["hooksConfig"]["enabled"] is True and data["theme"] == "GitHub"
    assert data["hooks"]["BeforeTool"][0] == before["hooks"]["BeforeTool"][0]
    ours = data["hooks"]["BeforeTool"][1]["hooks"][0]
    assert ours["name"] == "loopscope" and ours["timeout"] == 10_000  # milliseconds
    assert set(data["hooks"]) == {"BeforeTool", "AfterTool", "BeforeAgent", "SessionEnd"}
    ai.uninstall(GEMINI, path)
    assert path.read_text() == GEMINI_JSONC  # restored with its comments
    # the user edited the file meanwhile: only our entries and switch go, their edit stays
    ai.install(GEMINI, path, "/opt/venv/bin/loopscope-hook gemini-cli")
    edited = json.loads(path.read_text())
    edited["theme"] = "Dracula"
    path.write_text(json.dumps(edited))
    ai.uninstall(GEMINI, path)
    assert json.loads(path.read_text()) == {**before, "theme": "Dracula"}


def test_install_and_status_commands(tmp_path: Path, env: dict[str, str]) -> None:
    from typer.testing import CliRunner

    from analyzer.cli import app

    for agent, rel in ((CODEX, ".codex/hooks.json"), (GEMINI, ".gemini/settings.json")):
        res = CliRunner().invoke(app, ["hook", "install", agent, "--project", "--project-dir", str(tmp_path)])
        assert res.exit_code == 0, res.output
        path = tmp_path / rel
        assert str(path) in res.output and "(created)" in res.output and "guard: loopscope" in res.output
        data = json.loads(path.read_text())
        cmd = data["hooks"][EVENT[agent][1]][0]["hooks"][0]["command"]
        payload = codex_pre("inst", "t", "ls") if agent == CODEX else gemini_before("inst", "ls")
        r = subprocess.run(cmd, shell=True, input=orjson.dumps(payload), capture_output=True, env=env)
        assert r.returncode == 0 and r.stdout == b"" and r.stderr == b""
    res = CliRunner().invoke(app, ["hook", "status", "--project-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert f"project: {tmp_path / '.codex/hooks.json'}: installed (3 entries)" in res.output
    assert "is not trusted" in res.output  # the project is not a trusted Codex project
    for agent, rel in ((CODEX, ".codex/hooks.json"), (GEMINI, ".gemini/settings.json")):
        res = CliRunner().invoke(app, ["hook", "uninstall", agent, "--project", "--project-dir", str(tmp_path)])
        assert res.exit_code == 0 and "removed the file" in res.output, res.output
        assert not (tmp_path / rel).exists()


def test_calibrate_writes_the_agents_section_from_its_sessions(tmp_path: Path, env: dict[str, str]) -> None:
    """`calibrate --agent codex --write-settings` sweeps only the Codex sessions and writes only codex's section."""
    from typer.testing import CliRunner

    from analyzer.cli import app

    db = str(tmp_path / "s.duckdb")
    runner = CliRunner()
    for args in (
        ["ingest", str(SAMPLE_DATA / "codex"), str(SAMPLE_DATA / "claude_code"), "--db", db, "-q"],
        ["scan", "--db", db, "-q"],
    ):
        assert runner.invoke(app, args).exit_code == 0
    res = runner.invoke(
        app, ["calibrate", "--db", db, "--agent", "codex", "--write-settings", "--no-verify", "-o", str(tmp_path / "c")]
    )
    assert res.exit_code == 0, res.output
    assert "(codex's section)" in res.output
    data = json.loads((Path(env["LOOPSCOPE_CONFIG_DIR"]) / "hook-settings.json").read_text())
    assert set(data) == {"agents"} and set(data["agents"]) == {"codex"}
    assert " 3 codex sessions" in data["agents"]["codex"]["source"]  # sample_data holds 3 Codex sessions
    pol = hook_policy(agent=CODEX)
    assert pol.engine == "loopscope" and pol.params["halt"] == data["agents"]["codex"]["settings"]["halt"]
