"""Replay over a real store: hand-built pi sessions whose right answer is obvious, checked for every preset.

Every assistant message costs 100 tokens and $0.01, so "tokens after the halt" is 100 x the messages after it.
Sessions (each opens with one user prompt and ends with a text-only message):
  streak  8 identical failing `pytest` calls                         finding seq 0-7,  stuck
  poll    6 identical `gh run view` calls, the status changing       finding seq 0-5,  progress
  cycle   (read, failing edit, failing pytest) x 5                   finding seq 0-14, stuck
  repeat  the user asks for the same test run three times            no finding
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from helpers import ingest_paths
from test_replay_support import CYCLE, PYTEST, STATUS, C, T, U, pi_session

from analyzer.guards.policies import PRESETS, resolve
from analyzer.guards.replay import load_corpus, replay, replay_store
from analyzer.store import connection

SESSIONS = {
    "streak": [U] + [PYTEST] * 8 + [T("I could not fix it.")],
    "poll": [U]
    + [C("bash", {"command": "gh run view 42 --json status"}, result=f"status: {s}") for s in STATUS]
    + [T("The run completed.")],
    "cycle": [U] + CYCLE * 5 + [T("Still failing.")],
    "repeat": [
        (U, "run the tests"),
        C("bash", {"command": "pytest"}, result="3 passed"),
        T("All tests pass."),
        (U, "run the tests again"),
        C("bash", {"command": "pytest"}, result="3 passed"),
        T("All tests pass."),
        (U, "and once more"),
        C("bash", {"command": "pytest"}, result="3 passed"),
        T("All tests pass."),
    ],
}
FINDINGS = [("streak", 0, 7, True), ("poll", 0, 5, False), ("cycle", 0, 14, True)]

# session -> preset -> (first_warn_seq, halt_seq, calls_after_halt, tokens_after_halt, halt_on); None = no halt.
EXPECTED: dict[str, dict[str, tuple | None]] = {
    "streak": {
        "open-codesign": (2, 4, 3, 400, "stuck"),
        "gitagent": (None, 4, 3, 400, "stuck"),
        "pi-anti-doom-loop": (2, 3, 4, 500, "stuck"),  # blocked at 3, the re-issue aborts
        "pi-anti-doom-loop@0.0.7": (2, 3, 4, 500, "stuck"),  # identical calls: the same as the seed here
        "gemini-cli": (None, 4, 3, 400, "stuck"),
        "cline": (2, 4, 3, 400, "stuck"),
        "roo-code": (None, 3, 4, 500, "stuck"),
        "opencode": None,  # one call per message never trips it
        "openhands": (None, 2, 5, 600, "stuck"),  # 3 identical actions, each an error
        "loopscope": (2, 4, 3, 400, "stuck"),  # the 5th attempt after 4 identical failures
    },
    "poll": {
        "open-codesign": (2, 4, 1, 200, "progress"),
        "gitagent": (None, 4, 1, 200, "progress"),
        "pi-anti-doom-loop": (2, 3, 2, 300, "progress"),
        "pi-anti-doom-loop@0.0.7": (2, 3, 2, 300, "progress"),
        "gemini-cli": (None, 4, 1, 200, "progress"),
        "cline": (2, 4, 1, 200, "progress"),
        "roo-code": (None, 3, 2, 300, "progress"),
        "opencode": None,
        "openhands": (None, 3, 2, 300, "progress"),  # commands compare by exit status: the poll looks stuck
        "loopscope": None,  # the status changes on every call: progress, never stuck
    },
    "cycle": {
        "open-codesign": (8, 14, 0, 100, "stuck"),
        "gitagent": None,
        "pi-anti-doom-loop": (6, 9, 5, 600, "stuck"),  # read, edit, bash each blocked once, then read aborts
        "pi-anti-doom-loop@0.0.7": (6, 9, 5, 600, "stuck"),  # identical calls: the same as the seed here
        "gemini-cli": (None, 14, 0, 100, "stuck"),  # a 3-cycle trips at call 15
        "cline": None,
        "roo-code": None,
        "opencode": None,
        "openhands": None,
        "loopscope": None,  # the first block read something new: 4 stuck repeats after it, warned from the 4th block
    },
    "repeat": {name: None for name in PRESETS},
}
REPEAT_WARNS = {"cline": 2}  # Cline counts identical calls across user prompts: the third run gets the notice
NO_HALT_WARNS = {("cycle", "loopscope"): 9}


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("replay")
    files = [pi_session(tmp / f"{sid}.jsonl", sid, events) for sid, events in SESSIONS.items()]
    db = tmp / "store.duckdb"
    ingest_paths(db, *files)
    con = duckdb.connect(str(db))
    # What `loopscope scan` would write for these sessions (only the columns the replay reads).
    con.executemany(
        "INSERT INTO findings (finding_id, session_id, first_seq, last_seq, stuck) VALUES (?, ?, ?, ?, ?)",
        [[f"f{i}", sid, a, b, s] for i, (sid, a, b, s) in enumerate(FINDINGS)],
    )
    con.executemany("INSERT INTO scan_state (session_id) VALUES (?)", [[sid] for sid in SESSIONS])
    con.close()
    return db


@pytest.fixture(scope="module")
def result(corpus_db: Path):  # type: ignore[no-untyped-def]
    con = connection.connect(corpus_db, read_only=True)
    try:
        return replay_store(con, list(PRESETS.values()), workers=1)
    finally:
        con.close()


CASES = [(sid, name) for sid in SESSIONS for name in PRESETS]


@pytest.mark.parametrize("sid,name", CASES, ids=[f"{s}-{n}" for s, n in CASES])
def test_each_preset_on_each_session(result, sid: str, name: str) -> None:  # type: ignore[no-untyped-def]
    rows = result.sessions.filter((result.sessions["session_id"] == sid) & (result.sessions["policy"] == name))
    (row,) = rows.to_dicts()
    exp = EXPECTED[sid][name]
    if exp is None:
        assert (row["halts"], row["halt_call_id"], row["calls_after_halt"], row["halt_on"]) == (0, None, None, None)
        warn_seq = REPEAT_WARNS.get(name) if sid == "repeat" else NO_HALT_WARNS.get((sid, name))
        assert row["first_warn_seq"] == warn_seq
        return
    first_warn, halt_seq, calls_after, tokens_after, halt_on = exp
    assert row["first_warn_seq"] == first_warn
    assert row["halt_seq"] == halt_seq
    assert row["halt_call_id"] == f"{sid}-c{halt_seq}"
    assert row["halts"] == 1
    assert row["calls_after_halt"] == calls_after
    assert row["tokens_after_halt"] == tokens_after
    assert row["cost_after_halt_usd"] == pytest.approx(tokens_after / 100 * 0.01)
    assert row["halt_on"] == halt_on


def test_totals_per_policy(result) -> None:  # type: ignore[no-untyped-def]
    tot = {r["policy"]: r for r in result.totals().to_dicts()}
    cod = tot["open-codesign"]
    assert (cod["sessions"], cod["sessions_halted"], cod["halts"]) == (4, 3, 3)
    assert (cod["halts_stuck"], cod["halts_progress"], cod["halts_none"]) == (2, 1, 0)
    assert cod["calls_after_halt"] == 4 and cod["tokens_after_halt"] == 700
    assert cod["tokens"] == 900 + 700 + 1600 + 600
    assert cod["calls"] == 8 + 6 + 15 + 3
    assert cod["sessions_warned"] == 3
    assert tot["opencode"]["halts"] == 0 and tot["opencode"]["tokens_after_halt"] == 0
    assert tot["openhands"]["halts_progress"] == 1


def test_halt_rows_for_calibration(result) -> None:  # type: ignore[no-untyped-def]
    h = result.halts.filter(result.halts["policy"] == "pi-anti-doom-loop").sort("session_id").to_dicts()
    assert [(r["session_id"], r["halt_seq"], r["action"], r["halt_on"]) for r in h] == [
        ("cycle", 9, "abort", "stuck"),
        ("poll", 3, "abort", "progress"),
        ("streak", 3, "abort", "stuck"),
    ]
    assert h[0]["session_tokens"] == 1600


def test_scope_session_counts_everything_after_the_first_halt(tmp_path: Path) -> None:
    events = [U] + [PYTEST] * 6 + [T("Stuck.")] + [U] + [PYTEST] * 6 + [T("Still stuck.")]
    db = tmp_path / "s.duckdb"
    ingest_paths(db, pi_session(tmp_path / "two.jsonl", "two", events))
    con = connection.connect(db, read_only=True)
    try:
        corpus = load_corpus(con)
    finally:
        con.close()
    pol = [PRESETS["open-codesign"]]
    (run,) = replay(corpus, pol, scope="run").sessions.to_dicts()
    assert (run["halts"], run["halt_seq"], run["calls_after_halt"], run["tokens_after_halt"]) == (2, 4, 2, 400)
    assert run["halt_on"] is None  # never scanned
    (whole,) = replay(corpus, pol, scope="session").sessions.to_dicts()
    assert (whole["halts"], whole["halt_seq"], whole["calls_after_halt"], whole["tokens_after_halt"]) == (1, 4, 7, 900)


def test_parallel_replay_matches_serial(corpus_db: Path) -> None:
    con = connection.connect(corpus_db, read_only=True)
    try:
        corpus = load_corpus(con)
    finally:
        con.close()
    pols = list(PRESETS.values())
    serial = replay(corpus, pols, workers=1)
    parallel = replay(corpus, pols, workers=2)
    key = ["policy", "session_id"]
    assert serial.sessions.sort(key).equals(parallel.sessions.sort(key))
    assert serial.halts.sort(key).equals(parallel.halts.sort(key))


def test_filters_and_custom_policy(corpus_db: Path) -> None:
    from analyzer.store.filters import SessionFilter

    con = connection.connect(corpus_db, read_only=True)
    try:
        res = replay_store(
            con, resolve(["open-codesign"], overrides={"halt": "7"}), SessionFilter(agent="pi"), verdicts=True
        )
    finally:
        con.close()
    rows = {r["session_id"]: r for r in res.sessions.to_dicts()}
    assert rows["streak"]["policy"] == "open-codesign[halt=7]"
    assert rows["streak"]["halt_seq"] == 6 and rows["poll"]["halts"] == 0
    v = res.verdicts.filter(res.verdicts["session_id"] == "streak")
    assert v["level"].to_list() == ["warn"] * 4 + ["halt", "halt"] and v["seq"].to_list() == [2, 3, 4, 5, 6, 7]


def test_the_loopscope_guard_lets_a_wait_on_a_running_process_run_on(tmp_path: Path) -> None:
    """Six identical `gh run view` polls whose status says the run is still in progress are a wait, not a loop: the
    loopscope guard never warns or halts them. The same six polls of a run that has ended, unchanged, are stuck: it
    warns and halts as on any streak. (The replay reads only the polls' results, from the store.)"""
    poll = "gh run view 42 --json status"
    sessions = {
        "wait": [U] + [C("bash", {"command": poll}, result="status: in_progress")] * 6 + [T("Done.")],
        "ended": [U] + [C("bash", {"command": poll}, result="status: completed, conclusion: failure")] * 6 + [T("x")],
        "slept": [U]
        + [C("bash", {"command": f"sleep {30 * (i + 1)} && {poll}"}, result="status: queued") for i in range(6)]
        + [T("Still queued.")],
    }
    db = tmp_path / "store.duckdb"
    ingest_paths(db, *[pi_session(tmp_path / f"{sid}.jsonl", sid, ev) for sid, ev in sessions.items()])
    con = connection.connect(db, read_only=True)
    try:
        corpus = load_corpus(con)
        r = replay_store(con, [PRESETS["loopscope"]], workers=1, verdicts=True)
    finally:
        con.close()
    waiting = {s.session_id: [c.waiting for c in s.calls] for s in corpus.sessions}
    assert waiting == {"wait": [True] * 6, "ended": [False] * 6, "slept": [True] * 6}
    levels = {sid: sorted(r.verdicts.filter(r.verdicts["session_id"] == sid)["level"].to_list()) for sid in sessions}
    assert levels["wait"] == [] and levels["slept"] == []
    assert "halt" in levels["ended"] and "warn" in levels["ended"]
