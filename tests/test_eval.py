"""``loopscope eval``: the findings and the guards measured on a person's labels, on the hand-built sessions of
tests/calibrate_support.py, whose right answers can be worked out by hand:

  streak  8 identical failing `pytest` calls (seq 0-7)       stuck finding 0-7      labelled not_loop (a false finding)
  poll    6 identical `gh run view` calls, status changing  progressing finding    labelled loop-free
  cycle   (read, failing edit, failing pytest) x 5 (0-14)    stuck finding 0-14     labelled loop on 0-14 (found)
  repeat  the user asks three times for the same test run   no finding             labelled loop on 0-1 (missed)

and one label on a session the store does not hold (skipped). Every assistant message costs 100 tokens and $0.01.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from calibrate_support import SESSIONS, build_store
from test_replay_support import pi_session
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.evaluate.labels import session_key
from analyzer.guards.policies import PRESETS
from analyzer.library import Store
from analyzer.store import connection

runner = CliRunner()

LABELS = {
    "loopscope_labels": 1,
    "labels": [
        {"session_key": session_key("streak"), "label": "not_loop", "first_seq": 0, "last_seq": 7, "note": "flaky"},
        {"session_id": "cycle", "label": "loop", "first_seq": 0, "last_seq": 14},
        {"session_id": "repeat", "label": "stuck", "first_seq": 0, "last_seq": 1, "note": "the same run twice"},
        {"session_id": "poll", "label": "loop-free"},
        {"session_id": "elsewhere", "label": "loop"},
    ],
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("eval"))


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    p = tmp_path / "loopscope-labels.json"
    p.write_text(json.dumps(LABELS), encoding="utf-8")
    return p


def run_json(db: Path, *args: str) -> dict:
    res = runner.invoke(app, ["eval", "--db", str(db), *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_figures_and_every_disagreement(db: Path, labels: Path) -> None:
    data = run_json(db, "--labels", str(labels))
    (overall,) = data["figures"]
    # stuck findings on labels: streak's (not_loop) and cycle's (loop); loops: cycle (found), repeat (missed);
    # healthy labels: streak's span (flagged) and the loop-free poll (its finding made progress: not stuck).
    assert (overall["stuck_on_labels"], overall["on_loop"], overall["precision"]) == (2, 1, 0.5)
    assert (overall["loops"], overall["found"], overall["recall"]) == (2, 1, 0.5)
    assert (overall["healthy"], overall["kept"], overall["healthy_kept"]) == (2, 1, 0.5)
    assert data["labels"]["skipped"] == {"session not in the store": 1}
    assert data["labels"]["counts"] == {"not_loop": 1, "loop": 2, "loop-free": 1}
    rows = [(d["disagreement"], d["session_id"], d["calls"], d["label"], d["show"]) for d in data["disagreements"]]
    show = f"loopscope show --db {db}"
    assert rows == [
        ("false finding", "streak", "0–7", "not_loop", f"{show} streak:0"),
        ("missed loop", "repeat", "0–1", "loop", f"{show} repeat:0"),
    ]
    assert data["disagreements"][0]["note"] == "flaky" and data["disagreements"][1]["note"] == "the same run twice"
    assert data["disagreements"][1]["session_key"] == session_key("repeat")


def test_the_show_command_of_a_disagreement_prints_its_call(db: Path, labels: Path) -> None:
    data = run_json(db, "--labels", str(labels))
    cmd = data["disagreements"][0]["show"].split()
    assert cmd[:2] == ["loopscope", "show"]
    res = runner.invoke(app, cmd[1:])
    assert res.exit_code == 0 and "pytest" in res.stdout


def test_guard_scorecard_on_the_same_labels(db: Path, labels: Path) -> None:
    """open-codesign (warn 3, halt 5, measure max(streak, cycle2, cycle3)) halts the streak at seq 4 (on its not_loop
    span: false), the poll at seq 4 (a loop-free session: false) and the cycle at seq 14, where cycle3 reaches 5: the
    loop on 0-14 is halted 15 calls after it started, and the halt saves the closing message (100 tokens, $0.01).
    The false halts cut 4 messages of the streak's run and 2 of the poll's. The repeat session never halts."""
    data = run_json(db, "--labels", str(labels))
    rows = {r["policy"]: r for r in data["guards"]}
    assert set(rows) >= {"open-codesign", "gitagent", "pi-anti-doom-loop", "cline", "roo-code", "loopscope"}
    oc = rows["open-codesign"]
    assert (oc["loops"], oc["loops_halted"], oc["median_calls_to_halt"]) == (2, 1, 15.0)
    assert (oc["healthy"], oc["healthy_halted"], oc["false_halts"], oc["false_halt_sessions"]) == (2, 2, 2, 2)
    assert (oc["tokens_saved"], oc["dollars_saved"], oc["tokens_cut"], oc["other_halts"]) == (100, 0.01, 600, 0)
    assert oc["halted_share"] == 0.5


def test_set_and_policy_file_policies_join_the_presets(db: Path, labels: Path, tmp_path: Path) -> None:
    data = run_json(db, "--labels", str(labels), "--policy", "open-codesign", "--set", "halt=8")
    rows = {r["policy"]: r for r in data["guards"]}
    changed = rows["open-codesign[halt=8]"]
    # halt 8: the cycle never gets there (5 blocks), the streak does at seq 7 (false), the poll never (6 calls)
    assert (changed["loops_halted"], changed["false_halts"]) == (0, 1) and "open-codesign" in rows
    toml = tmp_path / "p.toml"
    toml.write_text('[policies.early]\nbase = "open-codesign"\nwarn = 2\nhalt = 2\n')
    rows = {r["policy"]: r for r in run_json(db, "--labels", str(labels), "--policy-file", str(toml))["guards"]}
    assert rows["early"]["loops_halted"] == 1 and len(rows) == len(PRESETS) + 1
    res = runner.invoke(app, ["eval", "--db", str(db), "--labels", str(labels), "--set", "halt=8"])
    assert res.exit_code == 2 and "--policy" in res.stderr


def test_groups_by_format_kind_and_tool(db: Path, labels: Path) -> None:
    data = run_json(db, "--labels", str(labels), "--by", "kind,tool,format")
    got = {(r["group"], r["value"]): r for r in data["figures"]}
    kinds = [("kind", "cycle"), ("kind", "none"), ("kind", "streak"), ("kind", "waiting")]
    assert [k for k in got if k[0] == "kind"] == kinds
    # the missed loop met no finding: its kind is none; the false finding's is streak; the loop-free poll session
    # met its wait (polls of a CI run in progress), which is never a stuck finding
    assert got[("kind", "waiting")]["stuck_on_labels"] == 0
    assert (got[("kind", "none")]["loops"], got[("kind", "none")]["found"]) == (1, 0)
    assert (got[("kind", "streak")]["stuck_on_labels"], got[("kind", "streak")]["on_loop"]) == (1, 0)
    assert got[("format", "pi")]["loops"] == 2 and ("tool", "bash") in got
    res = runner.invoke(app, ["eval", "--db", str(db), "--labels", str(labels), "--by", "agent"])
    assert res.exit_code == 2 and "--by: unknown group(s) 'agent'" in res.stderr


def test_the_table_view_and_one_listing(db: Path, labels: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["eval", "--db", str(db), "--labels", str(labels)])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "precision 0.50 (1 of 2 stuck findings on labels), recall 0.50 (1 of 2 loops)" in out
    assert "false finding" in out and "missed loop" in out and f"loopscope show --db {db} repeat:0" in out, out
    assert "guard scorecard" in out and "open-codesign" in out
    assert "1 session not in the store" in res.stderr
    csv = tmp_path / "d.csv"
    res = runner.invoke(
        app,
        ["eval", "--db", str(db), str(labels), "--rows", "disagreements", "--format", "csv", "--output", str(csv)],
    )
    assert res.exit_code == 0, res.output
    lines = csv.read_text().splitlines()
    assert lines[0].startswith("disagreement,session_id,") and len(lines) == 3
    res = runner.invoke(app, ["eval", "--db", str(db), "--labels", str(labels), "--rows", "scorecard", "--json"])
    assert [r["policy"] for r in json.loads(res.stdout)][0] == "open-codesign"
    res = runner.invoke(app, ["eval", "--db", str(db), "--labels", str(labels), "--no-guards", "--json"])
    assert json.loads(res.stdout)["guards"] is None


@pytest.mark.parametrize(
    "args,msg",
    [
        ([], "--labels FILE is required"),
        (["--labels", "nope.json"], "labels file nope.json does not exist"),
        (["--labels", "BAD"], "line 2: label must be loop, not_loop, unsure or loop-free"),
        (["--labels", "LATE"], "first_seq 40 is not a call of session 'streak' (its calls are 0-7)"),
    ],
)
def test_errors_are_one_line_and_exit_2(db: Path, tmp_path: Path, args: list[str], msg: str) -> None:
    bad = {"BAD": '[{"session_id": "streak", "label": "loop"},\n {"session_id": "poll", "label": "progress"}]'}
    bad["LATE"] = '[{"session_id": "streak", "label": "loop", "first_seq": 40}]'
    if args and args[-1] in bad:
        (tmp_path / "l.json").write_text(bad[args[-1]])
        args = [args[0], str(tmp_path / "l.json")]
    res = runner.invoke(app, ["eval", "--db", str(db), *args])
    assert res.exit_code == 2 and "Traceback" not in res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and msg in lines[0], res.stderr


def test_a_store_never_scanned(tmp_path: Path, labels: Path) -> None:
    from helpers import ingest_paths

    f = pi_session(tmp_path / "streak.jsonl", "streak", SESSIONS["streak"])
    ingest_paths(tmp_path / "raw.duckdb", f)
    res = runner.invoke(app, ["eval", "--db", str(tmp_path / "raw.duckdb"), "--labels", str(labels)])
    assert res.exit_code == 2 and "run `loopscope scan` first" in res.stderr


def test_session_filters_leave_labels_out(db: Path, labels: Path) -> None:
    data = run_json(db, "--labels", str(labels), "--agent", "codex")
    assert data["figures"][0]["loops"] == 0
    assert data["labels"]["skipped"]["outside the session filters"] == 4


# -- the store's id ----------------------------------------------------------------------------------------------------
def test_store_id_is_recorded_once_and_read_without_writing(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    db = build_store(folder, {"streak": SESSIONS["streak"]})
    with Store.open(db) as store:
        first = store.store_id
    assert len(first) == 36 and first.count("-") == 4
    with Store.open(db, write=True) as store:  # another write keeps it
        store.scan()
        assert store.store_id == first
    # A store from before ids were kept: reading it derives the same id (the recorded one is derived from the store's
    # first file, so a Parquet export of it derives it too) and writes nothing; its next write records that one.
    con = duckdb.connect(str(db))
    con.execute("DELETE FROM loopscope_meta WHERE key = 'store_id'")
    con.close()
    copy = tmp_path / "copy.duckdb"
    shutil.copy(db, copy)
    before = (db.stat().st_size, db.stat().st_mtime_ns)
    with Store.open(db) as store:
        derived = store.store_id
    assert derived == first and (db.stat().st_size, db.stat().st_mtime_ns) == before
    with Store.open(copy) as store:
        assert store.store_id == derived  # derived from the store's content, not its place
    con = connection.connect(db)  # the next write
    con.close()
    rows = (
        duckdb.connect(str(db), read_only=True)
        .execute("SELECT value FROM loopscope_meta WHERE key = 'store_id'")
        .fetchall()
    )
    assert rows == [(derived,)]


def test_a_label_file_from_another_store_is_matched_by_session(db: Path, tmp_path: Path) -> None:
    p = tmp_path / "other.json"
    p.write_text(json.dumps({**LABELS, "store_id": "00000000-0000-0000-0000-00000000abcd"}))
    res = runner.invoke(app, ["eval", "--db", str(db), "--labels", str(p), "--json"])
    assert res.exit_code == 0 and "exported from another store" in res.stderr
    assert json.loads(res.stdout)["figures"][0]["loops"] == 2


# -- analyze --labels: the report's Evaluation page ------------------------------------------------------------------
def test_analyze_with_labels_calibrates_on_them_and_adds_an_evaluation_page(tmp_path: Path, labels: Path) -> None:
    src = tmp_path / "sessions"
    src.mkdir()
    for sid, events in SESSIONS.items():
        pi_session(src / f"{sid}.jsonl", sid, events)
    db, out = tmp_path / "a.duckdb", tmp_path / "report"
    res = runner.invoke(app, ["analyze", str(src), "--db", str(db), "--out", str(out), "--labels", str(labels)])
    assert res.exit_code == 0, res.output
    assert "eval: 4 of 5 label rows resolved" in res.stdout and f"stuck from labels file {labels}" in res.stdout
    page = (out / "evaluation.html").read_text()
    assert "precision 0.50 (1 of 2 stuck findings on labels)" in page
    assert "false finding" in page and "missed loop" in page and "open-codesign" in page
    assert 'href="sessions/' in page  # each disagreement links its session's page
    index = (out / "index.html").read_text()
    assert 'href="evaluation.html"' in index
    assert f"labels file {labels}" in (out / "calibration.html").read_text()
    assert not any("evaluation.html" in p.read_text() for p in (out / "sessions").glob("*.html"))
    # without labels: no Evaluation page, and the calibration's truth is the scan's proxy again
    res = runner.invoke(app, ["analyze", str(src), "--db", str(db), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert not (out / "evaluation.html").exists() and 'href="evaluation.html"' not in (out / "index.html").read_text()
    assert "(a halt in a stuck finding is right; in a progressing one" in (out / "calibration.html").read_text()


def test_analyze_refuses_a_bad_labels_file_before_any_work(tmp_path: Path) -> None:
    bad = tmp_path / "l.json"
    bad.write_text('[{"session_id": "x", "label": "maybe"}]')
    db = tmp_path / "a.duckdb"
    res = runner.invoke(
        app, ["analyze", str(tmp_path), "--db", str(db), "--out", str(tmp_path / "r"), "--labels", str(bad)]
    )
    assert res.exit_code == 2 and "line 1: label must be" in res.stderr and not db.exists()
