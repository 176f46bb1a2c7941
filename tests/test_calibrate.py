"""The calibration sweep on hand-built sessions whose right answer is obvious (tests/calibrate_support.py).

Tokens saved by an open-codesign halt at h (100 tokens per assistant message after the halting one, in its run):
  streak  halts at seq h-1 for h <= 8: (8 - h) call messages + the closing text   -> 100 * (9 - h)
  poll    halts at seq h-1 for h <= 6: (6 - h) call messages + the closing text   -> 100 * (7 - h)   (a false halt)
  cycle   halts at seq 5/8/11/14 for h = 2/3/4/5                                   -> 1000/700/400/100
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest
from calibrate_support import build_store

from analyzer.calibrate.recommend import (
    Grid,
    calibrate_store,
    calibration_for_report,
    latest_calibration,
    parse_range,
    parse_similarities,
    parse_windows,
    policy_for,
    rank,
    verify_setting,
)
from analyzer.calibrate.sweep import load_frames
from analyzer.errors import UsageError
from analyzer.guards.policies import PRESETS
from analyzer.results import Calibration, Recommendation
from analyzer.store import connection
from analyzer.store.filters import SessionFilter


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("calibrate"))


def run(db: Path, base: str = "open-codesign", **kw):  # type: ignore[no-untyped-def]
    con = connection.connect(db, read_only=True)
    try:
        return calibrate_store(con, base, save=False, enough=False, **kw)
    finally:
        con.close()


def row(res, warn: int, halt: int, **more) -> dict:  # type: ignore[no-untyped-def]
    cond = (pl.col("warn") == warn) & (pl.col("halt") == halt)
    for k, v in more.items():
        cond &= pl.col(k).is_null() if v is None else (pl.col(k) == v)
    (r,) = res.sweep.filter(cond).to_dicts()
    return r


EXPECTED_HALTS = {  # halt -> (halts, stuck, progress, tokens saved, calls saved, false-halt sessions)
    2: (3, 2, 1, 700 + 500 + 1000, 6 + 4 + 9, 1),
    3: (3, 2, 1, 600 + 400 + 700, 5 + 3 + 6, 1),
    4: (3, 2, 1, 500 + 300 + 400, 4 + 2 + 3, 1),
    5: (3, 2, 1, 400 + 200 + 100, 3 + 1 + 0, 1),
    6: (2, 1, 1, 300 + 100, 2 + 0, 1),
    7: (1, 1, 0, 200, 1, 0),
    8: (1, 1, 0, 100, 0, 0),
    9: (0, 0, 0, 0, 0, 0),
}


@pytest.mark.parametrize("halt", sorted(EXPECTED_HALTS))
def test_codesign_halts_tokens_and_false_halts(db: Path, halt: int) -> None:
    res = run(db, verify=False)
    r = row(res, 2, halt)
    halts, stuck, progress, tokens, calls, false = EXPECTED_HALTS[halt]
    assert (r["halts"], r["halts_stuck"], r["halts_progress"], r["halts_none"]) == (halts, stuck, progress, 0)
    assert (r["tokens_saved"], r["calls_saved"]) == (tokens, calls)
    assert r["dollars_saved"] == pytest.approx(tokens / 100 * 0.01)
    assert r["false_halt_sessions"] == false and r["sessions"] == 4
    assert r["false_halt_rate"] == pytest.approx(false / 4)


def test_halt_at_5_catches_the_streak_and_saves_calls_6_to_8(db: Path) -> None:
    r = row(run(db, verify=False), 3, 5)
    # The streak halts at its 5th call: calls 6-8 and the closing message (4 messages) never happen.
    assert r["halts_stuck"] == 2 and r["stuck_episodes"] == 2 and r["stuck_caught"] == 2
    # Both stuck episodes get the warning at 3: the streak at its 3rd call, the cycle at its 9th (3 repeats).
    assert r["median_calls_to_detect"] == pytest.approx((3 + 9) / 2)


def test_warnings_count_episodes_caught_and_false_warnings(db: Path) -> None:
    res = run(db, verify=False)
    assert row(res, 7, 7)["stuck_caught"] == 1  # the cycle never repeats 7 times
    assert row(res, 7, 7)["median_calls_to_detect"] == 7
    # warn at 2: the streak at its 2nd call, the cycle at its 6th (the 3-call block seen twice)
    assert row(res, 2, 15)["stuck_caught"] == 2 and row(res, 2, 15)["median_calls_to_detect"] == pytest.approx(4)
    # A warning at 6 or less lands on the poll (a progressing repeat); at 7 it does not.
    assert row(res, 6, 15)["false_warn_sessions"] == 1 and row(res, 7, 15)["false_warn_sessions"] == 0
    assert row(res, 2, 15)["sessions_warned"] == 3  # streak, poll, cycle; never the user's repeated request


def test_a_halt_on_a_waiting_finding_is_a_false_halt(db: Path) -> None:
    # the poll session's `gh run view` calls poll a run still in progress: a wait, never a loop to catch
    con = duckdb.connect(str(db), read_only=True)
    try:
        found = con.execute(
            "SELECT kind, stuck, first_seq, last_seq FROM findings WHERE session_id = 'poll'"
        ).fetchall()
    finally:
        con.close()
    assert found == [("waiting", False, 0, 5)]
    r = row(run(db, verify=False), 2, 3)
    # halting at 3 hits the streak and the cycle (stuck) and the wait: the wait's halt is a false halt
    assert (r["halts"], r["halts_stuck"], r["halts_progress"], r["false_halt_sessions"]) == (3, 2, 1, 1)
    assert r["stuck_episodes"] == 2  # the wait is no episode to catch


def test_repeated_user_requests_never_warn_or_halt(db: Path) -> None:
    con = connection.connect(db, read_only=True)
    try:
        frames = load_frames(con)
    finally:
        con.close()
    repeat = frames.calls.filter(pl.col("session_id") == "repeat")
    assert repeat["streak"].to_list() == [1, 1, 1] and repeat["run"].n_unique() == 3
    res = run(db, verify=False)
    assert res.sweep["sessions_halted"].max() == 3  # streak, poll and cycle at most: never the repeated request


def test_frontier_and_recommendation_under_a_target(db: Path) -> None:
    res = run(db, target=0.01)
    front = res.frontier.select("warn", "halt", "tokens_saved", "false_halt_rate").rows()
    assert front == [(7, 7, 200, 0.0), (2, 2, 2200, 0.25)]
    rec = res.recommended
    assert res.qualified and (rec["warn"], rec["halt"], rec["tokens_saved"]) == (7, 7, 200)
    assert res.sweep.filter(pl.col("recommended")).height == 1
    assert "TOOL_LOOP_HALT_REPEATS = 7;" in res.settings["open-codesign"]
    assert "TOOL_LOOP_WARN_REPEATS = 7;" in res.settings["open-codesign"]
    assert "maxRepeats: 7" in res.settings["gitagent (translation)"]
    assert "PI_ANTI_LOOP_REPEATS=6" in res.settings["pi-anti-doom-loop (translation)"]
    looser = run(db, target=0.25, verify=False)
    assert (looser.recommended["warn"], looser.recommended["halt"], looser.recommended["tokens_saved"]) == (2, 2, 2200)


def test_no_setting_meets_the_target_recommends_the_lowest_rate_flagged(db: Path) -> None:
    res = run(db, target=0.0, grid=Grid(halts=(2, 3, 4)), verify=False)
    assert not res.qualified
    assert res.recommended["false_halt_rate"] == pytest.approx(0.25)
    assert res.recommended["halt"] == 2  # the lowest rate (the same for all), then the most tokens saved
    assert "No setting keeps the false-halt rate" in res.rationale


def test_labels_override_the_proxy(db: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("session_id,label\npoll,stuck\n")
    res = run(db, labels=labels, target=0.0, verify=False)
    r = row(res, 2, 2)
    assert (r["halts_stuck"], r["halts_progress"], r["false_halt_sessions"]) == (3, 0, 0)
    assert r["stuck_episodes"] == 3  # the labelled poll is a stuck episode now
    assert res.qualified and res.recommended["halt"] == 2 and res.recommended["tokens_saved"] == 2200
    assert res.labels is not None and res.labels.rows == 1


def test_a_benign_span_makes_halts_in_it_false(db: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.json"
    labels.write_text(
        '[{"session_id": "streak", "first_call_id": "streak-c0", "last_call_id": "streak-c3", "label": "benign"}]'
    )
    res = run(db, labels=labels, verify=False)
    # A halt at seq 3 (h = 4) lies in the benign span; at seq 4 (h = 5) in the rest of the stuck finding.
    assert (row(res, 2, 4)["halts_benign"], row(res, 2, 4)["halts_stuck"], row(res, 2, 4)["false_halt_sessions"]) == (
        1,
        1,
        2,
    )
    assert (row(res, 2, 5)["halts_benign"], row(res, 2, 5)["halts_stuck"]) == (0, 2)
    assert row(res, 2, 5)["stuck_episodes"] == 1  # the label overlaps the streak's finding: it is set aside


def test_a_loop_free_session_makes_every_halt_in_it_false(db: Path, tmp_path: Path) -> None:
    """The one label format: a person read the cycle and found no loop. Its stuck finding is set aside and each halt
    in it is a false halt; the streak stays stuck (an ``unsure`` label counts nowhere), and a label by seq span and
    session key works as call ids do."""
    from analyzer.evaluate.labels import session_key

    labels = tmp_path / "loopscope-labels.json"
    labels.write_text(
        '{"loopscope_labels": 1, "labels": [{"session_id": "cycle", "label": "loop-free"},\n'
        '{"session_id": "streak", "label": "unsure"},\n'
        f'{{"session_key": "{session_key("poll")}", "label": "loop", "first_seq": 0, "last_seq": 5}}]}}'
    )
    res = run(db, labels=labels, verify=False)
    # h = 5: the streak halts at seq 4 (stuck), the poll at seq 4 (a loop now), the cycle at seq 14 (benign)
    r = row(res, 2, 5)
    assert (r["halts_stuck"], r["halts_benign"], r["halts_progress"], r["false_halt_sessions"]) == (2, 1, 0, 1)
    assert r["stuck_episodes"] == 2  # the streak's finding and the poll's label; the cycle's finding is set aside
    assert res.labels is not None and (res.labels.rows, res.labels.used) == (3, 2)


def test_exact_replay_agrees_with_the_sweep_for_open_codesign(db: Path) -> None:
    con = connection.connect(db, read_only=True)
    try:
        res = calibrate_store(
            con,
            "open-codesign",
            enough=False,
            grid=Grid(warns=(2, 3, 7), halts=(2, 4, 5, 6, 7, 9)),
            save=False,
            verify=False,
        )
        frames = load_frames(con)
        base = PRESETS["open-codesign"]
        for r in res.sweep.to_dicts():
            v = verify_setting(con, policy_for(base, r), SessionFilter(), frames)
            got = {
                k: getattr(v, k)
                for k in (
                    "halts",
                    "halts_stuck",
                    "halts_progress",
                    "halts_none",
                    "false_halt_sessions",
                    "tokens_saved",
                    "calls_saved",
                    "stuck_caught",
                )
            }
            assert got == {k: r[k] for k in got}, (r["warn"], r["halt"])
            assert v.dollars_saved == pytest.approx(r["dollars_saved"])
            assert v.median_calls_to_detect == r["median_calls_to_detect"]
    finally:
        con.close()


def test_recommendation_is_verified_and_printed_both_ways(db: Path) -> None:
    res = run(db)
    v = res.verification
    assert v is not None and v.policy == "open-codesign[warn=7,halt=7]"
    cmp = {f: (a, b) for f, a, b in res.comparison().rows()}
    assert cmp["tokens_saved"] == (200.0, 200.0) and cmp["false_halt_rate"] == (0.0, 0.0)
    assert "Exact replay of this setting: 200 tokens" in res.rationale


@pytest.mark.parametrize(
    "base,setting,halt_seq",
    [
        ("gitagent", {"halt": 5}, {"streak": 4, "poll": 4}),
        ("gemini-cli", {"halt": 5}, {"streak": 4, "poll": 4, "cycle": 14}),
        ("roo-code", {"halt": 4}, {"streak": 3, "poll": 3}),
        # cline's mistake limit: the failing edit is a mistake, but a failing shell command is not and clears the count
        ("cline", {"warn": 3, "halt": 5}, {"streak": 4, "poll": 4}),
        ("pi-anti-doom-loop", {"warn": 3, "window": 10, "similarity": 0.55}, {"streak": 3, "poll": 3, "cycle": 9}),
    ],
)
def test_other_bases_match_their_exact_replay(db: Path, base: str, setting: dict, halt_seq: dict) -> None:
    res = run(db, base, verify=False)
    cond = pl.col("halt") == setting.get("halt", setting.get("warn"))
    for k in ("warn", "window", "similarity"):
        if k in setting:
            cond &= pl.col(k) == setting[k]
    (r,) = res.sweep.filter(cond).to_dicts()
    con = connection.connect(db, read_only=True)
    try:
        v = verify_setting(con, policy_for(PRESETS[base], r), SessionFilter(), load_frames(con, texts=True))
    finally:
        con.close()
    assert (v.halts, v.tokens_saved, v.false_halt_sessions) == (r["halts"], r["tokens_saved"], r["false_halt_sessions"])
    tokens = {"streak": 900, "poll": 700, "cycle": 1600}
    expected = sum(tokens[s] - 100 * (seq + 1) for s, seq in halt_seq.items())  # messages after the halting one
    assert r["tokens_saved"] == expected


def test_pi_grid_sweeps_window_and_similarity(db: Path) -> None:
    res = run(db, "pi", verify=False)
    assert res.base == "pi-anti-doom-loop"
    assert res.sweep.height == 14 * 3 * 4
    assert set(res.sweep["window"].unique().to_list()) == {5, 10, 20}
    assert sorted(res.sweep["similarity"].unique().to_list(), key=lambda v: -1 if v is None else v) == [
        None,
        0.55,
        0.7,
        0.85,
    ]
    assert (res.sweep["warn"] == res.sweep["halt"]).all()
    r = res.recommended
    assert f"PI_ANTI_LOOP_REPEATS={r['warn']}" in res.settings["pi-anti-doom-loop"]
    assert f"PI_ANTI_LOOP_WINDOW={r['window']}" in res.settings["pi-anti-doom-loop"]


def test_result_converts_to_the_report_and_round_trips_through_the_store(tmp_path: Path) -> None:
    db = build_store(tmp_path)
    con = connection.connect(db)
    try:
        assert latest_calibration(con) is None
        res = calibrate_store(con, "open-codesign", enough=False)
        again = calibrate_store(con, "open-codesign", target=0.25, verify=False, enough=False)
        cal = latest_calibration(con)
        runs = con.execute("SELECT count(*), count(DISTINCT base_policy) FROM calibration_runs").fetchall()
        kept = con.execute("SELECT DISTINCT run_id FROM calibration_sweep").fetchall()
    finally:
        con.close()
    assert runs == [(2, 1)] and kept == [(again.run_id,)]  # history of runs, the sweep of the latest only
    mine = res.to_report()
    assert isinstance(mine, Calibration) and isinstance(mine.recommendation, Recommendation)
    assert (mine.recommendation.warn, mine.recommendation.halt) == (7, 7)
    assert mine.recommendation.settings["open-codesign"].endswith("TOOL_LOOP_HALT_REPEATS = 7;")
    assert mine.frontier is not None and mine.frontier.height == 2
    assert cal is not None and cal.recommendation is not None
    assert (cal.recommendation.halt, cal.recommendation.target_false_halt_rate) == (2, 0.25)
    assert cal.sweep.height == again.sweep.height and cal.sweep["window"].is_null().all()
    assert cal.labels is not None and "scan's findings" in cal.labels


def test_filters_limit_the_scope(db: Path) -> None:
    res = run(db, flt=SessionFilter(agent="pi"), verify=False)
    assert res.sessions == 4
    with pytest.raises(UsageError, match="no scanned sessions matching the filter"):
        run(db, flt=SessionFilter(project="no-such-project"), verify=False)


def test_unscanned_store_and_bad_options_are_usage_errors(tmp_path: Path) -> None:
    from helpers import ingest_paths
    from test_replay_support import C, U, pi_session

    db = tmp_path / "s.duckdb"
    ingest_paths(db, pi_session(tmp_path / "a.jsonl", "a", [U, C("read", {"path": "x"})]))
    with pytest.raises(UsageError, match="run `loopscope scan`"):
        run(db, verify=False)
    with pytest.raises(UsageError, match="replay-only"):
        run(db, "opencode")
    with pytest.raises(UsageError, match="between 0 and 1"):
        run(db, target=5)


def test_parsers() -> None:
    assert parse_range("2-5,8", "--halt-range") == (2, 3, 4, 5, 8)
    assert parse_range("4", "--warn-range") == (4,)
    for bad in ("1-3", "x", "5-2", ""):
        with pytest.raises(UsageError):
            parse_range(bad, "--halt-range")
    assert parse_windows("20,5") == (5, 20)
    with pytest.raises(UsageError, match="5, 10, 20"):
        parse_windows("15")
    assert parse_similarities("off,0.7") == (None, 0.7)
    with pytest.raises(UsageError):
        parse_similarities("1.5")


def test_rank_breaks_ties_toward_the_gentler_setting() -> None:
    base = dict(
        tokens_saved=100,
        false_halt_rate=0.0,
        false_warn_rate=0.0,
        stuck_caught=1,
        false_warn_sessions=0,
        median_calls_to_detect=3.0,
        window=None,
        similarity=None,
    )
    sweep = pl.DataFrame(
        [
            {**base, "warn": 3, "halt": 5},
            {**base, "warn": 4, "halt": 5},
            {**base, "warn": 2, "halt": 6, "tokens_saved": 50},
        ]
    )
    out, ok = rank(sweep, 0.01, PRESETS["open-codesign"].params, "open-codesign")
    assert ok
    assert out.filter(pl.col("recommended")).select("warn", "halt").row(0) == (4, 5)
    assert out.filter(pl.col("on_frontier")).height == 1


def test_sweep_is_read_only_without_save(db: Path) -> None:
    run(db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM calibration_runs").fetchall() == [(0,)]
    finally:
        con.close()


def test_report_gets_the_stored_run_of_its_scope_or_a_fresh_sweep(tmp_path: Path) -> None:
    db = build_store(tmp_path)
    con = connection.connect(db)
    try:
        fresh = calibration_for_report(con)  # never calibrated: a fresh, unsaved sweep of open-codesign
        # 4 sessions and 2 stuck loops: too few to calibrate, so the shipped defaults (warn 3, halt 5) are kept
        assert fresh is not None and fresh.recommendation is not None
        assert (fresh.recommendation.warn, fresh.recommendation.halt) == (3, 5)
        assert "Too few loops to calibrate" in (fresh.recommendation.rationale or "")
        assert con.execute("SELECT count(*) FROM calibration_runs").fetchall() == [(0,)]
        res = calibrate_store(con, "gitagent", target=0.25, enough=False)
        stored = calibration_for_report(con)
        other_scope = calibration_for_report(con, SessionFilter(agent="pi"))
    finally:
        con.close()
    assert stored is not None and stored.recommendation is not None
    assert stored.recommendation.settings == res.settings and "gitagent" in stored.recommendation.settings
    assert other_scope is not None and other_scope.recommendation is not None
    assert "open-codesign" in other_scope.recommendation.settings  # a different filter: not the stored run
    assert res.headline().startswith(
        "gitagent: warn 2, halt 2 saves 1,200 tokens ($0.12) at 25.00% sessions"
    )  # no cycles
    assert "exact replay 1,200 tokens" in res.headline()


@pytest.mark.parametrize("base", ["open-codesign", "pi-anti-doom-loop", "gitagent", "cline", "loopscope"])
def test_batches_of_one_session_add_up_to_one_pass(db: Path, base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """calibrate sweeps and replays a batch of sessions at a time (``SESSION_BATCH``): the sums, the per-halt cost
    sums and the medians over batches of one session must be exactly those of one pass over the whole store."""
    import dataclasses

    import analyzer.calibrate.recommend as rec

    one_pass = run(db, base)
    monkeypatch.setattr(rec, "SESSION_BATCH", 1)
    batched = run(db, base)
    assert batched.sessions == one_pass.sessions == 4
    assert batched.sweep.equals(one_pass.sweep)
    assert batched.recommended == one_pass.recommended
    assert batched.verification is not None and one_pass.verification is not None
    assert dataclasses.replace(batched.verification, seconds=0) == dataclasses.replace(one_pass.verification, seconds=0)
    # and both are what the one-load sweep of the frames gives
    con = connection.connect(db, read_only=True)
    try:
        pol = rec.base_policy(base)
        frames = load_frames(con, texts=rec.BASES[pol.engine].text_rules)
        whole = rec.sweep_frames(pol, frames, Grid())
    finally:
        con.close()
    assert whole.equals(one_pass.sweep.drop("on_frontier", "recommended"))


def test_exact_replay_in_worker_processes_equals_one_pass_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact replay of the recommended setting runs in chunks of sessions that lie next to each other in the
    store, in spawned worker processes (``verify_parts``), and each sweep batch's halts are put back in session
    order. With the store's rows in the reverse order of the session ids (the files named the other way round),
    two workers over chunks of one session and sweep batches of two give exactly the figures of one replay of every
    session in this process."""
    import dataclasses

    from calibrate_support import SESSIONS, pi_session
    from helpers import ingest_paths

    import analyzer.calibrate.recommend as rec
    from analyzer.scan.run import scan
    from analyzer.store.connection import in_place_order, record_places

    sids = sorted(SESSIONS)
    files = [pi_session(tmp_path / f"{len(sids) - i:02d}.jsonl", sid, SESSIONS[sid]) for i, sid in enumerate(sids)]
    db = tmp_path / "store.duckdb"
    ingest_paths(db, *files)
    scan(db, workers=1)
    monkeypatch.setattr(rec, "SESSION_BATCH", 2)
    monkeypatch.setattr(rec, "VERIFY_CHUNK", 1)
    pooled = run(db, "pi-anti-doom-loop", workers=2)
    v = pooled.verification
    assert v is not None and v.halts > 0 and v.stuck_caught > 0
    (chosen,) = [
        p for p in (policy_for(PRESETS["pi-anti-doom-loop"], r) for r in pooled.sweep.to_dicts()) if p.name == v.policy
    ]
    con = connection.connect(db, read_only=True)
    try:
        record_places(con)
        assert in_place_order(con, sids) == sids[::-1]
        one = verify_setting(con, chosen, SessionFilter(), load_frames(con, texts=True))
    finally:
        con.close()
    assert dataclasses.replace(v, seconds=0) == dataclasses.replace(one, seconds=0)
