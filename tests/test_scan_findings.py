"""Findings end to end: pi transcripts are written, ingested and scanned; the findings are what a reviewer reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import ingest_paths, query, write_jsonl

from analyzer.detect.stream.calls import Config
from analyzer.scan.run import scan
from analyzer.store import connection, queries


@dataclass
class Call:
    tool: str
    args: dict[str, Any]
    result: str | None = "ok"
    error: bool = False
    parent: str | None = None
    id: str | None = None


class Pi:
    """A pi v3 session built step by step: user prompts and assistant messages with tool calls and usage."""

    def __init__(self, session_id: str = "sess") -> None:
        self.session_id = session_id
        self.records: list[dict[str, Any]] = [
            {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-01-01T00:00:00Z", "cwd": "/repo"}
        ]
        self.n = 0
        self.calls = 0

    def _ts(self) -> str:
        self.n += 1
        return f"2026-01-01T{self.n // 3600:02d}:{self.n // 60 % 60:02d}:{self.n % 60:02d}Z"

    def user(self, text: str = "please fix it") -> Pi:
        self.records.append(
            {
                "type": "message",
                "id": f"u{self.n}",
                "timestamp": self._ts(),
                "message": {"role": "user", "content": text},
            }
        )
        return self

    def say(self, text: str = "", *calls: Call, tokens: int = 1000) -> Pi:
        ts = self._ts()
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for c in calls:
            c.id = c.id or f"call{self.calls}"
            self.calls += 1
            block = {"type": "toolCall", "id": c.id, "name": c.tool, "arguments": c.args}
            if c.parent:
                block["parentToolCallId"] = c.parent
            content.append(block)
        self.records.append(
            {
                "type": "message",
                "id": f"a{self.n}",
                "timestamp": ts,
                "message": {
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": content,
                    "usage": {
                        "input": tokens,
                        "output": 0,
                        "cacheRead": 0,
                        "cacheWrite": 0,
                        "cost": {"total": tokens / 1_000_000},
                    },
                },
            }
        )
        for c in calls:
            if c.result is None:
                continue
            self.records.append(
                {
                    "type": "message",
                    "id": f"r{c.id}",
                    "timestamp": ts,
                    "message": {
                        "role": "toolResult",
                        "toolCallId": c.id,
                        "toolName": c.tool,
                        "content": [{"type": "text", "text": c.result}],
                        "isError": c.error,
                    },
                }
            )
        return self

    def each(self, *calls: Call, text: str = "", tokens: int = 1000) -> Pi:
        """One assistant message per call."""
        for c in calls:
            self.say(text, c, tokens=tokens)
        return self

    def write(self, folder: Path) -> Path:
        return write_jsonl(folder / f"{self.session_id}.jsonl", self.records)


def scanned(tmp_path: Path, *sessions: Pi, config: Config | None = None) -> list[dict[str, Any]]:
    db = tmp_path / "store.duckdb"
    ingest_paths(db, *(s.write(tmp_path / "t") for s in sessions))
    scan(db, config)
    con = connection.connect(db, read_only=True)
    try:
        return queries.findings(con).to_dicts()
    finally:
        con.close()


def bash(command: str, result: str = "ok", error: bool = False, **kw: Any) -> Call:
    return Call("bash", {"command": command}, result, error, **kw)


def test_identical_streak_costs_the_turns_after_the_first(tmp_path: Path) -> None:
    pi = Pi().user().each(*[bash("grep -rn foo src", "nothing found") for _ in range(5)], tokens=2000)
    (f,) = scanned(tmp_path, pi)
    assert (f["kind"], f["period"], f["repeats"], f["stuck"], f["user_turn"]) == ("streak", 1, 5, True, 0)
    assert f["call_ids"] == ["call0", "call1", "call2", "call3", "call4"]
    assert (f["first_seq"], f["last_seq"]) == (0, 4)
    assert f["wasted_tokens"] == 4 * 2000 and abs(f["cost_usd"] - 4 * 0.002) < 1e-9
    assert f["tools"] == ["bash"]
    assert f["estimated_tokens"] > 0


def test_a_poll_with_changing_results_is_not_stuck(tmp_path: Path) -> None:
    pi = (
        Pi()
        .user()
        .each(*[bash("gh run view 42 --json status", s) for s in ("queued", "running", "running", "completed")])
    )
    (f,) = scanned(tmp_path, pi)
    assert (f["kind"], f["repeats"], f["stuck"]) == ("streak", 4, False)


def test_a_poll_of_a_run_still_queued_is_waiting_and_of_a_run_that_ended_is_stuck(tmp_path: Path) -> None:
    # the status never changes, but the run has not started: waiting, never stuck (docs/detectors.md, "Waiting")
    pi = Pi().user().each(*[bash("gh run view 42 --json status", "queued") for _ in range(4)])
    (f,) = scanned(tmp_path, pi)
    assert (f["kind"], f["stuck"], f["wasted_tokens"]) == ("waiting", False, 0) and f["repeat_tokens"] > 0
    # the run is over and the agent keeps looking: nothing left to wait for, a stuck loop
    done = Pi("done").user().each(*[bash("gh run view 42 --json status", "completed") for _ in range(4)])
    (f,) = scanned(tmp_path / "done", done)
    assert (f["kind"], f["stuck"]) == ("streak", True)


def test_an_edit_build_cycle_whose_edits_differ_is_no_finding(tmp_path: Path) -> None:
    pi = Pi().user()
    for i, out in enumerate(["error: x undefined", "error: y undefined", "error: z undefined", "ok"]):
        pi.each(
            Call(
                "edit",
                {"path": "src/main.rs", "old": f"let v{i} = 1;", "new": f"let v{i} = 2;"},
                "Successfully replaced text in src/main.rs",
            ),
            bash("cargo build", out, error=out != "ok"),
        )
    assert scanned(tmp_path, pi) == []


def test_an_identical_edit_build_cycle_is_a_stuck_cycle(tmp_path: Path) -> None:
    pi = Pi().user()
    for _ in range(4):
        pi.each(
            Call("edit", {"path": "a.py", "old": "x = 1", "new": "x = 2"}, "old text not found", True),
            bash("pytest -x", "1 failed", True),
        )
    (f,) = scanned(tmp_path, pi)
    assert (f["kind"], f["period"], f["repeats"], f["stuck"]) == ("cycle", 2, 4, True)
    assert f["tools"] == ["edit", "bash"] and len(f["call_ids"]) == 8
    assert f["wasted_tokens"] == 6 * 1000  # everything after the first full cycle


def test_a_failing_edit_retried_unchanged_is_a_stuck_streak(tmp_path: Path) -> None:
    edit = {"path": "app.py", "old_string": "def main(:", "new_string": "def main():"}
    pi = Pi().user().each(*[Call("edit", edit, "Could not find the exact text in app.py", True) for _ in range(4)])
    (f,) = scanned(tmp_path, pi)
    assert (f["kind"], f["repeats"], f["stuck"]) == ("streak", 4, True)


def test_different_failing_commands_are_debugging_not_a_failure_loop(tmp_path: Path) -> None:
    cmds = ["npm run build", "yarn build", "pnpm build", "npx vite build"]
    pi = Pi().user().each(*[bash(c, "command failed: exit 1", True) for c in cmds])
    assert scanned(tmp_path, pi) == []


def test_one_target_failing_again_with_drifted_flags_is_a_failure_loop(tmp_path: Path) -> None:
    cmds = ["make all", "make -j2 all", "make -k all", "make -B all"]
    pi = Pi().user().each(*[bash(c, "make: *** [all] Error 2", True) for c in cmds])
    (f,) = scanned(tmp_path, pi)  # near-identical calls: claimed as drift, before the failure run
    assert (f["kind"], f["repeats"], f["stuck"]) == ("drift", 4, True)
    assert "failing the same way each time" in f["why"]
    assert f["wasted_tokens"] == f["repeat_tokens"] > 0


def test_repeats_across_user_prompts_are_never_one_finding(tmp_path: Path) -> None:
    same = [bash("make", "ok") for _ in range(6)]
    pi = Pi().user().each(*same[:3]).user("again please").each(*same[3:])
    found = scanned(tmp_path, pi)
    assert [(f["kind"], f["user_turn"], f["repeats"]) for f in found] == [("streak", 0, 3), ("streak", 1, 3)]
    # two calls before the prompt and two after are no loop at all
    pi2 = Pi("s2").user().each(bash("make"), bash("make")).user().each(bash("make"), bash("make"))
    assert scanned(tmp_path / "b", pi2) == []


def test_without_reset_counters_continue_but_episodes_still_split_at_prompts(tmp_path: Path) -> None:
    pi = Pi().user().each(bash("make"), bash("make")).user().each(bash("make"), bash("make"))
    assert scanned(tmp_path, pi, config=Config(reset_on_user=False)) == []
    db = tmp_path / "store.duckdb"
    assert [r[0] for r in query(db, "SELECT streak FROM signals ORDER BY seq")] == [1, 2, 3, 4]


def test_a_sleep_wrapper_does_not_change_the_action_so_its_repeats_are_a_streak(tmp_path: Path) -> None:
    pi = (
        Pi()
        .user()
        .each(*[bash(f"sleep {s} && curl -s http://ci/api/build", '{"build": 17}') for s in (30, 60, 90, 120)])
    )
    (f,) = scanned(tmp_path, pi)
    assert (f["kind"], f["repeats"], f["stuck"]) == ("streak", 4, True)


def test_a_tail_is_no_new_action_but_an_extra_flag_drifts(tmp_path: Path) -> None:
    tail = Pi("tail").user().each(*[bash(f"npm test 2>&1 | tail -{n}", "FAIL src/app.test.ts") for n in (20, 50, 100)])
    flag = (
        Pi("flag")
        .user()
        .each(
            bash("python -m pytest tests unit", "1 failed", True),
            bash("python -m pytest tests unit --verbose", "1 failed", True),
            bash("python -m pytest tests unit --verbose --color", "1 failed", True),
        )
    )
    found = scanned(tmp_path, tail, flag)
    assert sorted((f["session_id"], f["kind"], f["repeats"], f["stuck"]) for f in found) == [
        ("flag", "drift", 3, True),
        ("tail", "streak", 3, True),
    ]


def test_identical_and_drifted_repeats_mixed_are_one_drift(tmp_path: Path) -> None:
    # two identical polls (the sleep wrapper is no new action), then the same poll with more flags: one loop
    commands = [
        "sleep 5 && curl -sS --retry 3 http://staging/healthz",
        "sleep 10 && curl -sS --retry 3 http://staging/healthz",
        "curl -sS --retry 3 http://staging/healthz",
        "curl -sS --retry 3 --max-time 10 http://staging/healthz",
        "sleep 30 && curl -sS --retry 5 --max-time 10 http://staging/healthz",
    ]
    pi = Pi().user().each(*[bash(c, "curl: (7) Failed to connect to staging port 80", True) for c in commands])
    (f,) = scanned(tmp_path, pi)
    assert (f["kind"], f["repeats"], f["stuck"]) == ("drift", 5, True)


def test_identical_calls_only_stay_a_streak(tmp_path: Path) -> None:
    pi = Pi().user().each(*[bash("pytest -q tests/unit", "1 failed", True) for _ in range(4)])
    (f,) = scanned(tmp_path, pi)
    assert (f["kind"], f["repeats"]) == ("streak", 4)


def test_near_identical_edits_that_all_succeed_are_work_not_a_loop(tmp_path: Path) -> None:
    pi = (
        Pi()
        .user()
        .each(
            *[
                Call(
                    "edit",
                    {
                        "path": "client.py",
                        "old": f"timeout = {i} seconds for the payment gateway",
                        "new": f"timeout = {i + 1} seconds for the payment gateway",
                    },
                    "Successfully replaced text in client.py",
                )
                for i in range(4)
            ]
        )
    )
    assert scanned(tmp_path, pi) == []


def test_window_repeat_without_change_in_between(tmp_path: Path) -> None:
    reads = [Call("read", {"path": p}, f"contents of {p}") for p in ("a", "b", "a", "c", "a", "d", "a")]
    (f,) = scanned(tmp_path, Pi().user().each(*reads))
    assert (f["kind"], f["repeats"], f["stuck"]) == ("window", 4, True)
    assert f["call_ids"] == ["call0", "call2", "call4", "call6"]


def test_a_chanting_message(tmp_path: Path) -> None:
    chant = " ".join(["I will now fix the failing test."] * 6)
    (f,) = scanned(tmp_path, Pi().user().say(chant))
    assert (f["kind"], f["repeats"], f["stuck"], f["call_ids"], f["first_seq"]) == ("text", 6, True, [], None)
    assert f["estimated_tokens"] > 0 and f["wasted_tokens"] == 0


def test_narration_before_different_calls_is_not_a_text_loop(tmp_path: Path) -> None:
    pi = Pi().user()
    for i in range(4):
        pi.say("Let me look at the next file:", Call("read", {"path": f"f{i}.py"}, f"body {i}"), tokens=500)
    assert scanned(tmp_path, pi) == []


def test_the_same_reply_again_and_again_is_a_text_loop_with_its_calls(tmp_path: Path) -> None:
    pi = Pi().user()
    for i in range(4):
        pi.say(
            "The build still fails on the same import, so I will try the build once more now.",
            Call("read", {"path": f"f{i}.py"}, f"body {i}"),
            tokens=500,
        )
    (f,) = scanned(tmp_path, pi)
    assert (f["kind"], f["repeats"]) == ("text", 4)
    assert f["call_ids"] == ["call0", "call1", "call2", "call3"]
    assert f["stuck"] is False  # each message read a new file: the calls made progress
    assert (f["wasted_tokens"], f["repeat_tokens"]) == (0, 3 * 500)


def test_narration_of_a_call_loop_is_not_a_second_finding(tmp_path: Path) -> None:
    pi = Pi().user()
    for _ in range(4):
        pi.say("Let me fetch the merge ref:", bash("git fetch origin pull/7/merge", "fatal: couldn't find ref", True))
    found = scanned(tmp_path, pi)
    assert [f["kind"] for f in found] == ["streak"]


def test_nested_calls_inside_one_script(tmp_path: Path) -> None:
    script = Call(
        "codemode",
        {"code": "for (let i = 0; i < 5; i++) await tools.read({path: 'status.json'})"},
        "done",
        id="script1",
    )
    polls = [Call("read", {"path": "status.json"}, '{"state": "running"}', parent="script1") for _ in range(5)]
    pi = Pi().user().say("Polling in a script.", script, *polls)
    (f,) = scanned(tmp_path, pi)
    assert (f["kind"], f["repeats"], f["stuck"], f["tools"]) == ("nested", 5, True, ["read"])
    assert len(f["call_ids"]) == 5 and "script1" not in f["call_ids"]
    # the nested reads never entered the top-level window
    db = tmp_path / "store.duckdb"
    assert query(db, "SELECT max(window_count), max(nested_repeat) FROM signals WHERE nested") == [(0, 5)]


def test_reading_different_files_with_one_command_is_not_drift(tmp_path: Path) -> None:
    # `sed -n '1,200p' <path>` shares only `sed` (paths carry punctuation): the same program, not the same call
    pi = Pi().user().each(*[bash(f"sed -n '1,200p' src/mod_{i}.py", f"contents {i}") for i in range(5)])
    assert scanned(tmp_path, pi) == []


def test_short_filler_messages_are_not_a_text_loop(tmp_path: Path) -> None:
    pi = Pi().user()
    for i in range(5):
        pi.say("Let me look.", Call("read", {"path": f"f{i}.py"}, f"body {i}"))
    assert scanned(tmp_path, pi) == []


def test_scripts_are_compared_by_identity_only(tmp_path: Path) -> None:
    # three different one-off scripts share JS boilerplate (similar by tokens) but are exploration, not drift
    pi = Pi().user()
    for i, fn in enumerate(("parseConfig", "loadPlugins", "resolvePaths")):
        sid = f"script{i}"
        pi.say(
            "",
            Call("codemode", {"code": f"const r = await tools.grep({{q: '{fn}'}}); return r"}, "x", id=sid),
            Call("grep", {"q": fn}, "hits", parent=sid),
        )
    assert scanned(tmp_path, pi) == []
