"""Waiting (polls of a process that still runs) and the stuck run before a success, in both engines: a constructed
session per rule, the reference (``detect.stream``) and the scan (``detect.vector``) held to the same rows."""

from __future__ import annotations

from typing import Any

from test_detect_vector import build, reference, vectorised

from analyzer.detect.judge import CallView, poll_state
from analyzer.detect.rules import FINDINGS, KINDS, WAITING
from analyzer.detect.stream.calls import Config

KIND, STUCK, REPEATS, WASTED, REPEAT_TOKENS = (
    FINDINGS.names.index(c) for c in ("kind", "stuck", "repeats", "wasted_tokens", "repeat_tokens")
)
FIRST, LAST = FINDINGS.names.index("first_seq"), FINDINGS.names.index("last_seq")


def _session(calls: list[tuple[str, dict[str, Any], tuple[str, bool]]]) -> list[list[tuple]]:
    """One session, one call per assistant message (100 tokens each)."""
    return [[("block", [("", [c], 100, 0.1) for c in calls], 1)]]


def _found(calls: list[tuple[str, dict[str, Any], tuple[str, bool]]]) -> list[tuple]:
    data = build(_session(calls))
    _, _, ref = reference(data, Config())
    _, _, vec = vectorised(data, Config())
    assert ref == vec  # both engines, the same rows
    return sorted(ref, key=lambda f: f[FIRST])


RUNNING = "<retrieval_status>timeout</retrieval_status><task_id>b1</task_id><status>running</status>"
DONE = "<retrieval_status>success</retrieval_status><task_id>b1</task_id><status>completed</status><exit_code>0"


def test_waiting_is_declared_once_as_a_kind():
    assert WAITING in KINDS


def test_polls_of_a_running_task_are_waiting_not_stuck():
    calls = [("TaskOutput", {"task_id": "b1", "timeout": 30000 * (i + 1)}, (RUNNING, False)) for i in range(5)]
    calls.append(("TaskOutput", {"task_id": "b1", "timeout": 600000}, (DONE, False)))
    (f,) = _found(calls)
    assert f[KIND] == WAITING and f[STUCK] is False
    assert f[REPEATS] == 6 and (f[FIRST], f[LAST]) == (0, 5)  # up to the poll that says it ended
    assert f[WASTED] == 0 and f[REPEAT_TOKENS] == 500  # its cost shown, never waste


def test_a_lengthened_sleep_before_a_status_view_is_still_waiting():
    calls = [
        (
            "Bash",
            {"command": f"sleep {n} && gh run view 123", "description": f"wait {n}s"},
            ("* main CI · 123 in progress", False),
        )
        for n in (30, 60, 120, 240)
    ]
    (f,) = _found(calls)
    assert f[KIND] == WAITING and not f[STUCK] and f[REPEATS] == 4


def test_a_background_shell_polled_between_sleeps_that_echo_is_waiting():
    """BashOutput of a running install, then ``sleep 30 && echo "Wait complete"`` (an echo of fixed words looks at
    nothing: a bare wait), round after round: waiting, as with a bare ``sleep``, not a stuck cycle."""
    calls = []
    for _ in range(5):
        calls.append(
            ("BashOutput", {"bash_id": "722599"}, ("<status>running</status>\n<stdout>Resolving</stdout>", False))
        )
        calls.append(("Bash", {"command": 'sleep 30 && echo "Wait complete"'}, ("Wait complete", False)))
    (f,) = _found(calls)
    assert f[KIND] == WAITING and not f[STUCK] and f[WASTED] == 0


def test_codex_empty_write_stdin_on_a_running_session_is_waiting():
    out = "Chunk ID: {i}\nWall time: {i}.0 seconds\nProcess running with session ID 7\nOriginal token count: 3\n"
    calls = [
        ("write_stdin", {"session_id": 7, "chars": "", "yield_time_ms": 1000 * (i + 1)}, (out.format(i=i), False))
        for i in range(4)
    ]
    (f,) = _found(calls)
    assert f[KIND] == WAITING and not f[STUCK]


def test_a_poll_killed_at_its_time_limit_during_its_sleep_waited():
    """``sleep 180 && gh run list`` under a two-minute limit is killed before the look runs: the notice is all it
    returns, and it waited as a bare ``sleep`` does. Between looks that say the run is in progress it is part of the
    wait, not the same result three times."""
    cut = ("Command timed out after 2m 0.0s", True)
    running = ("in_progress\t\tFix tests\tCI\tmain\tpull_request\t17004170963\t2m27s", False)
    calls = [
        ("Bash", {"command": "sleep 180 && gh run list --limit 2"}, cut),
        ("Bash", {"command": "gh run list --limit 2"}, running),
        ("Bash", {"command": "sleep 180 && gh run list --limit 2"}, cut),
        ("Bash", {"command": "gh run list --limit 2"}, running),
        ("Bash", {"command": "sleep 60 && gh run list --limit 2"}, running),
        ("Bash", {"command": "sleep 240 && gh run list --limit 2"}, cut),
    ]
    found = _found(calls)
    assert found and all(f[KIND] == WAITING and not f[STUCK] for f in found)
    # what it printed before the cut is a result: no wait
    view = CallView("Bash", '{"command":"sleep 30 && gh run list"}', "Command timed out after 30s\nX main CI", True)
    assert poll_state(view) != "wait"


def test_polling_a_process_that_has_ended_is_stuck():
    # the wait ended at the first poll that said so; the same "completed" again and again is a stuck loop
    calls = [("BashOutput", {"bash_id": "b1"}, ("<status>running</status>", False)) for _ in range(3)]
    calls += [("BashOutput", {"bash_id": "b1"}, ("<status>completed</status><exit_code>0</exit_code>", False))] * 4
    wait, stuck = _found(calls)
    assert wait[KIND] == WAITING and (wait[FIRST], wait[LAST]) == (0, 3)
    assert stuck[KIND] == "streak" and stuck[STUCK] and (stuck[FIRST], stuck[LAST]) == (4, 6)
    only_ended = [("BashOutput", {"bash_id": "b1"}, ("<status>failed</status><exit_code>1", False))] * 4
    (f,) = _found(only_ended)
    assert f[KIND] == "streak" and f[STUCK]


def test_a_command_that_is_no_poll_stays_stuck():
    calls = [("Bash", {"command": "pytest -q"}, ("1 failed, still running the others: pending", False))] * 4
    (f,) = _found(calls)
    assert f[KIND] == "streak" and f[STUCK]


def test_poll_state():
    assert poll_state(CallView("BashOutput", '{"bash_id":"1"}', "<status>running</status>", False)) == "running"
    assert poll_state(CallView("Bash", '{"command":"sleep 30"}', "", False)) == "wait"
    assert poll_state(CallView("Bash", '{"command":"sleep 9 && echo \\"waited\\""}', "waited", False)) == "wait"
    assert poll_state(CallView("Bash", '{"command":"sleep 9 && echo $(cat log)"}', "x", False)) is None
    assert poll_state(CallView("Bash", '{"command":"make"}', "in progress", False)) is None
    cut = "Exit code: 124\nWall time: 120 seconds\nOutput:\ncommand timed out after 120000 milliseconds\n"
    assert (
        poll_state(CallView("shell", '{"command":["bash","-lc","sleep 200 && gh pr checks 7"]}', cut, True)) == "wait"
    )
    assert poll_state(CallView("Bash", '{"command":"npm test"}', "Command timed out after 2m 0.0s", True)) is None
    assert poll_state(CallView("write_stdin", '{"chars":"y\\n","session_id":1}', "Process running", False)) is None


ERR = ("Error: connect ECONNREFUSED 127.0.0.1:8080\nexit code 7", True)


def test_the_stuck_run_before_a_success_is_a_stuck_finding_that_ends_before_it():
    curl = ("Bash", {"command": "curl -s localhost:8080/health"})
    calls = [(*curl, ERR)] * 4 + [(*curl, ('{"ok": true}', False))]
    (f,) = _found(calls)
    assert f[KIND] == "streak" and f[STUCK] and f[REPEATS] == 4
    assert (f[FIRST], f[LAST]) == (0, 3)  # the success is not in it
    assert f[WASTED] == f[REPEAT_TOKENS] == 300  # waste counted up to there


def test_a_short_failing_run_before_a_success_stays_progress():
    curl = ("Bash", {"command": "curl -s localhost:8080/health"})
    (f,) = _found([(*curl, ERR)] * 2 + [(*curl, ('{"ok": true}', False))])
    assert f[KIND] == "streak" and not f[STUCK] and f[REPEATS] == 3


def test_the_stuck_run_before_a_success_in_a_window():
    curl = ("Bash", {"command": "curl -s localhost:8080/health"})
    other = [("Read", {"file_path": f"/a/{i}.py"}, (f"text {i}", False)) for i in range(6)]
    calls = []
    for i in range(4):
        calls += [(*curl, ERR), other[i]]
    calls += [(*curl, ('{"ok": true}', False))]
    (f,) = _found(calls)
    assert f[KIND] == "window" and f[STUCK] and f[REPEATS] == 4 and f[LAST] == 6


def test_a_stuck_run_that_ends_in_another_error_is_still_stuck():
    """A sandboxed test failing the same way three times, then the same command run with more permissions failing on a
    real test: the three were stuck (the same action, the same error, no fix), whatever came after them."""
    run = ("shell", {"command": ["bash", "-lc", "go test ./internal/auth -v"]})
    sandbox = ("failed in sandbox: ", True)
    real = ("--- FAIL: TestService_RegisterLoginRefresh (0.01s)\nFAIL\nexit status 1", True)
    found = _found([(*run, sandbox)] * 3 + [(*run, real)])
    stuck = [f for f in found if f[STUCK]]
    assert [(f[FIRST], f[LAST], f[REPEATS]) for f in stuck] == [(0, 2, 3)]


def test_a_stuck_run_at_the_end_of_a_changing_streak_is_stuck():
    """A health check that answered once and then failed the same way three times: the failing run is stuck."""
    curl = ("Bash", {"command": "curl -s localhost:8080/health"})
    found = _found([(*curl, ('{"ok": true}', False))] + [(*curl, ERR)] * 3)
    stuck = [f for f in found if f[STUCK]]
    assert [(f[FIRST], f[LAST]) for f in stuck] == [(1, 3)]


def test_empty_reads_of_a_background_tasks_output_are_waiting():
    """A dev server started in the background, its output file read three times while it boots (empty each time, the
    last with `|| echo "No output yet"`): waiting, not a stuck streak."""
    path = "/tmp/claude/-home-u-app/tasks/b8c5d29.output"
    calls = [
        ("Bash", {"command": f"sleep 5 && cat {path}"}, ("", False)),
        ("Bash", {"command": f"cat {path}"}, ("", False)),
        ("Bash", {"command": f'cat {path} 2>/dev/null || echo "No output yet"'}, ("", False)),
    ]
    (f,) = _found(calls)
    assert f[KIND] == WAITING and not f[STUCK]


def test_answers_that_came_back_before_a_failing_run_are_still_judged():
    """A health check answering A, B, A, B, A (answers it already had), then failing the same way three times: both the
    run of answers that came back and the failing run are stuck, each on its own."""
    curl = ("Bash", {"command": "curl -s localhost:8080/health"})
    answers = [(*curl, (f'{{"state": "{x}"}}', False)) for x in "ABABA"]
    found = _found(answers + [(*curl, ERR)] * 3)
    assert [(f[FIRST], f[LAST]) for f in found if f[STUCK]] == [(2, 4), (5, 7)]


TEAM_BUSY = (
    '{"success":false,"message":"Cannot cleanup team with 1 active member(s): classif-fix. Use requestShutdown to '
    'gracefully terminate teammates first.","team_name":"eq-type-fixes"}'
)


def test_deleting_a_team_while_a_teammate_runs_is_waiting():
    """Claude Code's ``TeamDelete`` is refused while a teammate still runs; sent again between shutdown requests and
    sleeps (as in ahmedarafa994/eq-prediction's 20b71268, calls 82-96), it waits for the teammate to exit: waiting,
    not a stuck window. Once it works, the wait has ended."""
    shutdown = ("SendMessage", {"to": "classif-fix", "message": "shut down"}, ('{"success":true}', False))
    busy = ("TeamDelete", {}, (TEAM_BUSY, False))
    calls = [busy, shutdown, busy, ("Bash", {"command": "sleep 3"}, ("", False)), busy, shutdown, busy]
    calls.append(("TeamDelete", {}, ('{"success":true,"message":"Cleaned up team eq-type-fixes"}', False)))
    (f,) = _found(calls)
    assert f[KIND] == WAITING and not f[STUCK] and (f[FIRST], f[LAST]) == (0, 7)
    assert poll_state(CallView("TeamDelete", "{}", TEAM_BUSY, False)) == "running"
    # the same refusal from a tool that is no poll says nothing of a wait; no active member is no wait
    assert poll_state(CallView("Bash", '{"command":"make"}', TEAM_BUSY, False)) is None
    idle = TEAM_BUSY.replace("1 active member(s): classif-fix", "0 active members")
    assert poll_state(CallView("TeamDelete", "{}", idle, False)) != "running"
