"""`loopscope calibrate` through the command line: table, json and csv output, what it saves, and its exit codes."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from calibrate_support import build_store
from typer.testing import CliRunner

from analyzer.calibrate.recommend import latest_calibration
from analyzer.cli import app
from analyzer.store import connection

runner = CliRunner()


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("calcli"))


@pytest.fixture
def db(scanned: Path, tmp_path: Path) -> Path:
    """A fresh copy per test: calibrate writes to the store."""
    return Path(shutil.copy(scanned, tmp_path / "store.duckdb"))


def test_table_shows_frontier_recommendation_both_figures_and_settings(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "cal.txt"
    res = runner.invoke(app, ["calibrate", "--db", str(db), "--force-recommendation", "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert text.index("frontier") < text.index("recommended for a false-halt rate of at most 1.00%: warn 7, halt 7")
    assert "sweep vs exact replay of open-codesign[warn=7,halt=7]" in text
    assert "TOOL_LOOP_WARN_REPEATS = 7;" in text and "TOOL_LOOP_HALT_REPEATS = 7;" in text
    assert "createLoopGuard({ maxRepeats: 7, maxTurns: 50 })" in text
    assert "PI_ANTI_LOOP_REPEATS=6" in text and "translation" in text
    assert "approximation (open-codesign)" in text
    con = connection.connect(db, read_only=True)
    try:
        cal = latest_calibration(con)
    finally:
        con.close()
    assert cal is not None and cal.recommendation is not None and cal.recommendation.halt == 7


def test_json_is_one_object_with_every_sweep_row(db: Path) -> None:
    res = runner.invoke(
        app,
        [
            "calibrate",
            "--db",
            str(db),
            "--force-recommendation",
            "--format",
            "json",
            "--target-false-halt-rate",
            "0.25",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["base_policy"] == "open-codesign" and data["sessions"] == 4 and data["stuck_episodes"] == 2
    assert data["recommendation"]["halt"] == 2 and data["recommendation"]["qualified"] is True
    assert data["verification"]["tokens_saved"] == data["recommendation"]["tokens_saved"] == 2200
    assert len(data["sweep"]) == 105 and sum(r["recommended"] for r in data["sweep"]) == 1
    assert data["grid"]["warn"] == list(range(2, 16)) and data["labels"] is None
    assert set(data["settings"]) == {"open-codesign", "gitagent (translation)", "pi-anti-doom-loop (translation)"}


def test_csv_rows_with_flags_and_ranges(db: Path) -> None:
    res = runner.invoke(
        app,
        [
            "calibrate",
            "--db",
            str(db),
            "--force-recommendation",
            "-f",
            "csv",
            "--warn-range",
            "2-4",
            "--halt-range",
            "3,5,7",
            "--no-verify",
            "--no-save",
        ],
    )
    assert res.exit_code == 0, res.output
    df = pl.read_csv(io.StringIO(res.stdout))
    assert df.height == 2 + 3 + 3  # warn <= halt: (2,3) (3,3); 3 warns at 5 and at 7
    assert {"warn", "halt", "tokens_saved", "false_halt_rate", "on_frontier", "recommended"} <= set(df.columns)
    rec = df.filter(pl.col("recommended"))
    assert rec.select("halt", "tokens_saved").row(0) == (7, 200)
    con = connection.connect(db, read_only=True)
    try:
        assert latest_calibration(con) is None  # --no-save wrote nothing
    finally:
        con.close()


def test_pi_with_labels_and_filters(db: Path, tmp_path: Path) -> None:
    labels = tmp_path / "l.csv"
    labels.write_text("session_id,label\npoll,stuck\n")
    res = runner.invoke(
        app,
        [
            "calibrate",
            "--db",
            str(db),
            "--force-recommendation",
            "-p",
            "pi",
            "--labels",
            str(labels),
            "--agent",
            "pi",
            "--windows",
            "10",
            "--similarities",
            "off,0.55",
            "--format",
            "json",
            "--quiet",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["base_policy"] == "pi-anti-doom-loop" and len(data["sweep"]) == 14 * 2
    assert data["labels"] == {"file": str(labels), "rows": 1, "skipped": 0}
    assert data["scope"] == "agent pi" and data["stuck_episodes"] == 3
    assert data["recommendation"]["false_halt_rate"] == 0.0
    assert "PI_ANTI_LOOP_WINDOW=10" in data["settings"]["pi-anti-doom-loop"]


def test_the_listing_options_arrange_the_sweep_rows(db: Path, tmp_path: Path) -> None:
    """calibrate takes every listing's options: --json, --sort/--order, --columns/--all-columns."""
    base = ["calibrate", "--db", str(db), "--force-recommendation", "--no-verify", "--no-save"]
    res = runner.invoke(
        app, [*base, "--json", "--sort", "tokens_saved", "--order", "asc", "--columns", "warn,halt,tokens_saved"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["base_policy"] == "open-codesign" and len(data["sweep"]) == 105
    assert [list(r) for r in data["sweep"][:1]] == [["warn", "halt", "tokens_saved"]]
    saved = [r["tokens_saved"] for r in data["sweep"]]
    assert saved == sorted(saved)
    rows = runner.invoke(app, [*base, "-f", "ndjson", "--sort", "halt", "--columns", "halt,warn"])
    assert rows.exit_code == 0, rows.output
    halts = [json.loads(line) for line in rows.stdout.splitlines()]
    assert list(halts[0]) == ["halt", "warn"] and [r["halt"] for r in halts] == sorted(
        (r["halt"] for r in halts), reverse=True
    )
    out = tmp_path / "cal.txt"
    table = runner.invoke(
        app, [*base, "--columns", "halt,on_frontier,sessions_halted", "--sort", "halt", "-o", str(out)]
    )
    assert table.exit_code == 0, table.output
    text = out.read_text()
    header = next(line for line in text.splitlines() if "on_frontier" in line)
    assert header.split() == ["rec", "halt", "on_frontier", "sessions_halted"]
    assert "recommended for a false-halt rate" in text
    bad = runner.invoke(app, [*base, "--sort", "nope"])
    assert bad.exit_code == 2 and "--sort: no column 'nope'" in bad.stderr


@pytest.mark.parametrize(
    "args,code,msg",
    [
        (["-p", "opencode"], 2, "replay-only"),
        (["-p", "nope"], 2, "unknown policy"),
        (["--halt-range", "1-5"], 2, "between 2 and 1000"),
        (["--target-false-halt-rate", "2"], 2, "between 0 and 1"),
        (["--windows", "7"], 2, "window counts over 5, 10, 20"),
        (["--since", "yesterday"], 2, "--since"),
    ],
)
def test_bad_options_exit_with_one_line(db: Path, args: list[str], code: int, msg: str) -> None:
    res = runner.invoke(app, ["calibrate", "--db", str(db), "--force-recommendation", *args])
    assert res.exit_code == code
    assert msg in res.stderr and "Traceback" not in res.stderr


def test_missing_or_unscanned_store(tmp_path: Path) -> None:
    res = runner.invoke(app, ["calibrate", "--db", str(tmp_path / "none.duckdb")])
    assert res.exit_code == 2 and "no store at" in res.stderr
    assert not (tmp_path / "none.duckdb").exists()
    from helpers import ingest_paths
    from test_replay_support import C, U, pi_session

    db = tmp_path / "raw.duckdb"
    ingest_paths(db, pi_session(tmp_path / "a.jsonl", "a", [U, C("read", {"path": "x"})]))
    res = runner.invoke(app, ["calibrate", "--db", str(db)])
    assert res.exit_code == 2 and "loopscope scan" in res.stderr


def test_write_settings_hands_the_recommendation_to_the_hook(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--write-settings` calibrates the loopscope guard (unless --policy says otherwise) and writes what the hook
    then runs."""
    from analyzer.hook.settings import hook_policy, settings_path

    monkeypatch.setenv("LOOPSCOPE_CONFIG_DIR", str(tmp_path / "cfg"))
    res = runner.invoke(
        app, ["calibrate", "--db", str(db), "--write-settings", "--no-verify", "-o", str(tmp_path / "cal.txt")]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(settings_path().read_text())
    assert data["policy"] == "loopscope" and set(data["settings"]) == {"warn", "halt"}
    assert "hook settings written to" in res.output
    pol = hook_policy()
    assert pol.engine == "loopscope" and pol.params["halt"] == data["settings"]["halt"]
    res = runner.invoke(
        app,
        [
            "calibrate",
            "--db",
            str(db),
            "--policy",
            "open-codesign",
            "--write-settings",
            "--no-verify",
            "-o",
            str(tmp_path / "cal2.txt"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(settings_path().read_text())["policy"] == "open-codesign"
    assert hook_policy().engine == "open-codesign"
