"""`loopscope policies` and `loopscope replay` through the command line (a local app registering the two commands)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import typer
from helpers import ingest_paths
from test_replay_support import C, T, U, pi_session
from typer.testing import CliRunner

from analyzer.commands import replay as replay_cmds

app = typer.Typer(pretty_exceptions_enable=False)
app.command("policies")(replay_cmds.policies)
app.command("replay")(replay_cmds.replay)
runner = CliRunner()

PYTEST = C("bash", {"command": "pytest"}, result="1 failed", error=True)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cli")
    path = tmp / "store.duckdb"
    ingest_paths(
        path,
        pi_session(tmp / "stuck.jsonl", "stuck", [U] + [PYTEST] * 8 + [T("Giving up.")]),
        pi_session(tmp / "fine.jsonl", "fine", [U, C("read", {"path": "a"}), T("Done.")]),
    )
    return path


def test_policies_lists_the_presets_with_their_semantics() -> None:
    res = runner.invoke(app, ["policies", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["policy"] for r in rows][:4] == [
        "open-codesign",
        "gitagent",
        "pi-anti-doom-loop",
        "pi-anti-doom-loop@0.0.7",
    ]
    assert len(rows) == 10 and rows[-1]["policy"] == "loopscope" and all(r["escalation"] for r in rows)
    one = runner.invoke(app, ["policies", "--policy", "roo-code", "--format", "csv"])
    assert one.exit_code == 0 and one.stdout.splitlines()[0] == "setting,value,default,meaning"
    table = runner.invoke(app, ["policies"])
    assert table.exit_code == 0 and "gemini-cli" in table.stdout


def test_replay_json_rows(db: Path) -> None:
    res = runner.invoke(app, ["replay", "--db", str(db), "--policy", "open-codesign", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["session_id"]: r for r in json.loads(res.stdout)}
    assert rows["stuck"]["halt_call_id"] == "stuck-c4" and rows["stuck"]["first_warn_call_id"] == "stuck-c2"
    assert rows["stuck"]["calls_after_halt"] == 3 and rows["stuck"]["tokens_after_halt"] == 400
    assert rows["fine"]["halts"] == 0 and rows["fine"]["halt_call_id"] is None
    assert "run `loopscope scan`" in res.stderr  # the store was never scanned: halt_on is empty, and we say why


def test_replay_several_policies_totals_and_flags(db: Path) -> None:
    res = runner.invoke(
        app,
        ["replay", "--db", str(db), "-p", "gitagent", "-p", "roo-code", "--halt", "3", "--totals", "--format", "csv"],
    )
    assert res.exit_code == 0, res.output
    import io

    tot = pl.read_csv(io.StringIO(res.stdout))
    assert tot["policy"].to_list() == ["gitagent[halt=3]", "roo-code[halt=3]"]
    assert tot["sessions_halted"].to_list() == [1, 1]
    assert tot["calls_after_halt"].to_list() == [5, 5]  # both stop at the 3rd identical call


def test_replay_table_shows_rows_then_totals(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "replay.txt"
    res = runner.invoke(app, ["replay", "--db", str(db), "-p", "pi", "--halted", "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    # Calls are numbered from 1, as a person counts them, not by the transcript's ids (stuck-c3 is seq 3).
    assert "stuck-c3" not in text and " #4 " in text and "fine" not in text.split("totals")[0]
    assert text.index("replay") < text.index("totals")


def test_replay_parquet_and_custom_policy_file(db: Path, tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text('[policies.late]\nbase = "open-codesign"\nhalt = 8\n')
    out = tmp_path / "r.parquet"
    res = runner.invoke(
        app, ["replay", "--db", str(db), "--policy-file", str(f), "-p", "late", "-f", "parquet", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    df = pl.read_parquet(out)
    assert df.filter(pl.col("session_id") == "stuck")["halt_call_id"].to_list() == ["stuck-c7"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["replay", "-p", "nope"], "unknown policy 'nope'"),
        (["replay"], "--policy is required"),
        (["replay", "-p", "gitagent", "--warn", "2"], "gitagent has no setting 'warn'"),
        (["replay", "-p", "pi", "--scope", "forever"], "--scope"),
        (["replay", "-p", "pi", "--totals", "--calls"], "choose one"),
        (["replay", "-p", "pi", "--policy-file", "/nonexistent.toml"], "does not exist"),
        (["replay", "-p", "pi", "--since", "last week"], "--since"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(db: Path, args: list[str], message: str) -> None:
    res = runner.invoke(app, args + ["--db", str(db)])
    assert res.exit_code == 2, res.output
    assert message in res.stderr and "Traceback" not in res.output


def test_missing_store_is_a_store_error(tmp_path: Path) -> None:
    res = runner.invoke(app, ["replay", "-p", "pi", "--db", str(tmp_path / "none.duckdb")])
    assert res.exit_code == 2 and "loopscope ingest" in res.stderr


def test_replay_calls_lists_each_verdict(db: Path) -> None:
    res = runner.invoke(app, ["replay", "--db", str(db), "-p", "open-codesign", "--calls", "--format", "ndjson"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(r["seq"], r["level"], r["action"]) for r in rows] == [
        (2, "warn", "warn"),
        (3, "warn", "warn"),
        (4, "halt", "halt"),
        (5, "halt", "halt"),
        (6, "halt", "halt"),
        (7, "halt", "halt"),
    ]
    assert {r["session_id"] for r in rows} == {"stuck"} and rows[0]["reason"] == "the same call repeated 3 times"
