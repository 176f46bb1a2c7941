"""The sweep's model of the guards' less common rules, each checked against the exact replay on a session built for it:
gitagent's stop at the end of a batch, cline's mistake limit, pi's text rules (steer, then abort)."""

from __future__ import annotations

from pathlib import Path

import pytest
from calibrate_support import build_store
from test_replay_support import C, T, U

from analyzer.calibrate.recommend import Grid, calibrate_store, policy_for, verify_setting
from analyzer.calibrate.sweep import load_frames
from analyzer.guards.policies import PRESETS
from analyzer.store import connection
from analyzer.store.filters import SessionFilter

READ = C("read", {"path": "src/app.py"}, result="def login(): ...")
SAY = "Let me check the build status before going on."

SESSIONS = {
    # gitagent: the 5th identical read is the 2nd call of its message, so the run stops after the next batch.
    "batch": [U, READ, READ, READ, T(None, [READ, READ]), T(None, [READ]), T("Done reading.")],
    # the same, but no batch follows the trip: the run is never stopped.
    "last": [U, READ, READ, READ, T(None, [READ, READ]), T("Done reading.")],
    # cline: three failing edits in a row (different arguments) are three mistakes.
    "edits": [U]
    + [
        C("edit", {"path": "a.py", "old": f"x{i}", "new": "y"}, result="old text not found", error=True)
        for i in range(4)
    ]
    + [T("The edit does not apply.")],
    # pi: the same sentence in every message; the 3rd steers, the 4th aborts (before its call runs).
    "chant": [U]
    + [T(SAY, [C("read", {"path": f"f{i}.py"}, result=f"file {i}")]) for i in range(6)]
    + [T("All files read.")],
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("guards"), SESSIONS)


def sweep_row(db: Path, base: str, **setting: object) -> tuple[dict, object]:
    con = connection.connect(db, read_only=True)
    try:
        res = calibrate_store(
            con,
            base,
            save=False,
            verify=False,
            grid=Grid(
                warns=(setting.get("warn", setting.get("halt")),),
                halts=(setting.get("halt", setting.get("warn")),),
                windows=(10,),
                similarities=(0.55,),
            ),
        )
        (row,) = res.sweep.to_dicts()
        exact = verify_setting(con, policy_for(PRESETS[base], row), SessionFilter(), load_frames(con, texts=True))
    finally:
        con.close()
    return row, exact


def halts_by_session(db: Path, base: str, **settings: object) -> dict[str, int]:
    from analyzer.guards.replay import replay_store

    con = connection.connect(db, read_only=True)
    try:
        rep = replay_store(con, [PRESETS[base].with_settings(settings)])
    finally:
        con.close()
    return dict(rep.halts.select("session_id", "halt_seq").rows())


def test_gitagent_stops_after_the_next_batch(db: Path) -> None:
    row, exact = sweep_row(db, "gitagent", halt=5)
    assert halts_by_session(db, "gitagent", halt=5) == {"batch": 5}  # "last" has no batch left to terminate
    assert (row["halts"], row["tokens_saved"], row["calls_saved"]) == (1, 100, 0)
    assert (exact.halts, exact.tokens_saved, exact.calls_saved) == (1, 100, 0)


def test_cline_mistake_limit(db: Path) -> None:
    row, exact = sweep_row(db, "cline", warn=14, halt=15)
    assert halts_by_session(db, "cline", warn=14, halt=15) == {"edits": 2}
    assert (row["halts"], row["tokens_saved"]) == (exact.halts, exact.tokens_saved) == (1, 200)


def test_pi_text_rules_abort_whatever_the_repeat_threshold(db: Path) -> None:
    got = halts_by_session(db, "pi-anti-doom-loop", warn=15)
    assert got["chant"] == 3  # the 4th message hits again: its call is where the run stops
    row, exact = sweep_row(db, "pi-anti-doom-loop", warn=15)
    chant_tokens = 100 * 3  # messages 5 and 6 and the closing one
    assert row["halts"] == exact.halts
    assert row["tokens_saved"] == exact.tokens_saved
    # The halt lands in the scan's text finding, which made no stuck repeats: a false halt.
    assert row["halts_progress"] == exact.halts_progress == 1
    assert row["false_halt_sessions"] == exact.false_halt_sessions == 1
    assert row["tokens_saved"] >= chant_tokens


def test_pi_note_when_text_rules_alone_miss_the_target(db: Path) -> None:
    con = connection.connect(db, read_only=True)
    try:
        res = calibrate_store(con, "pi", save=False, verify=False, grid=Grid(windows=(10,), similarities=(None,)))
    finally:
        con.close()
    assert any("text rules" in n and "PI_ANTI_LOOP_TEXT_REPEATS" in n for n in res.notes)
    assert (res.sweep["false_halt_sessions"] >= 1).all()
