"""Hand-built sessions for the calibration tests, whose right answers can be worked out by hand (no tests here).

Every assistant message costs 100 tokens and $0.01, so "tokens saved" is 100 x the messages after the halting one in
its run. Each session opens with one user prompt; all but ``repeat`` end with a text-only message.

  streak  8 identical failing `pytest` calls (seq 0-7)              stuck finding 0-7
  poll    6 identical `gh run view` calls, the status changing       waiting finding 0-5 (never stuck)
  cycle   (read, failing edit, failing pytest) x 5 (seq 0-14)        stuck finding 0-14
  repeat  the user asks three times for the same test run            no finding

open-codesign's measure max(streak, cycle2, cycle3): streak 1..8 at seq 0..7; poll 1..6; the cycle reaches 2, 3, 4, 5
at seq 5, 8, 11, 14; repeat stays 1 (a new user turn each time).
"""

from __future__ import annotations

from pathlib import Path

from helpers import ingest_paths
from test_replay_support import CYCLE, PYTEST, STATUS, C, T, U, pi_session

from analyzer.scan.run import scan

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
        T("Still passing."),
    ],
}


def build_store(folder: Path, sessions: dict | None = None) -> Path:
    """Ingest and scan the sessions into ``folder/store.duckdb``."""
    files = [pi_session(folder / f"{sid}.jsonl", sid, events) for sid, events in (sessions or SESSIONS).items()]
    db = folder / "store.duckdb"
    ingest_paths(db, *files)
    scan(db, workers=1)
    return db
