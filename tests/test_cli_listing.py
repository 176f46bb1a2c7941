"""Listings a person reads in a terminal: `sessions` and `findings` fit 100 columns and lead with money and the
repeated call; `--sort/--order/--columns/--all-columns/--json` on every listing; errors said plainly; tool names
that differ only by agent convention grouped."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from conftest import SAMPLE_DATA
from helpers import ingest_paths
from typer.testing import CliRunner

from analyzer.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from analyzer.scan.run import scan

    db = tmp_path_factory.mktemp("cli") / "store.duckdb"
    ingest_paths(db, SAMPLE_DATA)
    scan(db)
    return db


def run(*args: str, columns: int = 100) -> str:
    res = runner.invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize(
    "command,heads",
    [
        ("sessions", ["session_id", "format", "project", "cost_usd", "wasted_usd", "loops", "loop"]),
        ("findings", ["session_id", "kind", "calls", "repeats", "stuck", "cost_usd", "loop"]),
    ],
)
def test_listings_fit_100_columns_and_show_money(sample_db: Path, command: str, heads: list[str]) -> None:
    text = run(command, "--db", str(sample_db))
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 100, text
    header = next(line for line in lines if "session_id" in line)
    for h in heads:
        assert h in header.split(), (h, header)
    assert "$0." in text
    # The repeated call, numbered calls and money are there, with no column squeezed away.
    assert "bash: npm test -- check" in text
    if command == "findings":
        assert "#1–#7" in text and "toolu_" not in text


def test_sort_order_columns_json(sample_db: Path) -> None:
    rows = orjson.loads(
        run(
            "sessions",
            "--db",
            str(sample_db),
            "--json",
            "--sort",
            "wasted_usd",
            "--limit",
            "3",
            "--columns",
            "session_id,wasted_usd,input_tokens,output_tokens,cache_read_tokens,cache_write_tokens",
        )
    )
    assert [list(r) for r in rows] == [
        ["session_id", "wasted_usd", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]
    ] * 3
    wasted = [r["wasted_usd"] for r in rows]
    assert wasted == sorted(wasted, reverse=True) and wasted[0] > 0
    asc = orjson.loads(run("findings", "--db", str(sample_db), "--json", "--sort", "repeats", "--order", "asc"))
    assert [r["repeats"] for r in asc] == sorted(r["repeats"] for r in asc)
    wide = run("sessions", "--db", str(sample_db), "--all-columns", columns=400)
    assert "cache_read_tokens" in wide and "user_turns" in wide


@pytest.mark.parametrize(
    "args,message",
    [
        (["sessions", "--format", "xml"], "'xml' is not one of 'table', 'json'"),
        (["sessions", "--limit", "abc"], "'abc' is not a whole number"),
        (["sessions", "--sort", "nope"], "--sort: no column 'nope'; choose from"),
        (["sessions", "--columns", "session_id,nope"], "--columns: no column 'nope'"),
    ],
)
def test_errors_are_written_for_people(sample_db: Path, args: list[str], message: str) -> None:
    res = runner.invoke(app, [*args, "--db", str(sample_db)])
    assert res.exit_code != 0
    assert message in res.output
    assert "Value error" not in res.output and "Input should be" not in res.output


def test_policy_help_names_its_value() -> None:
    res = runner.invoke(app, ["replay", "--help"], env={"COLUMNS": "200"})
    assert "<list[str]>" not in res.output and "--policy NAME" in res.output.replace("<", "").replace(">", "")


def test_by_tool_groups_agent_spellings(sample_db: Path) -> None:
    data = orjson.loads(run("summary", "--db", str(sample_db), "--json"))
    tools = {r["tool"]: r for r in data["by_tool"]}
    assert "Bash" not in tools and set(tools["bash"]["names"]) == {"Bash", "bash"}
    assert set(tools["read"]["names"]) == {"Read", "read"}


def test_an_inexact_or_unknown_price_is_never_silent(sample_db: Path, tmp_path: Path) -> None:
    import shutil

    import duckdb

    db = tmp_path / "copy.duckdb"
    shutil.copyfile(sample_db, db)
    con = duckdb.connect(str(db))
    sid = con.execute("SELECT session_id FROM sessions WHERE format = 'codex' ORDER BY session_id LIMIT 1").fetchone()[
        0
    ]
    con.execute(
        "UPDATE turns SET cost_source = 'genai-prices~openai/gpt-5' WHERE session_id = ? AND usage_counted", [sid]
    )
    con.close()
    res = CliRunner().invoke(app, ["sessions", "--db", str(db)], env={"COLUMNS": "100"})
    assert res.exit_code == 0
    assert "1 session(s) priced as openai/gpt-5 by an inexact model match" in res.stderr
    rows = orjson.loads(run("sessions", "--db", str(db), "--json"))
    assert [r["cost_sources"] for r in rows if r["session_id"] == sid] == [["genai-prices~openai/gpt-5"]]


@pytest.mark.parametrize("columns", [None, "300"])
def test_policies_fit_100_columns_piped_and_carry_every_field(columns: str | None) -> None:
    """`loopscope policies | cat` printed rows of 200 columns: the cards wrap their sentences to 100 columns (piped,
    to a wide terminal, or not), every field still whole in them, and `--format json` carries every field as is."""
    from analyzer.guards.policies import policies_frame, resolve

    res = runner.invoke(app, ["policies"], env={"COLUMNS": columns})  # CliRunner's stdout is not a terminal
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    rows = orjson.loads(runner.invoke(app, ["policies", "--format", "json"], env={"COLUMNS": columns}).stdout)
    expected = policies_frame(resolve(["all"], None)).to_dicts()
    assert rows == expected and len(rows) >= 9
    flat = " ".join(res.stdout.split())
    for row in rows:
        for field in ("description", "unit", "key", "window", "reset", "escalation", "thresholds", "source"):
            assert " ".join(str(row[field]).split()) in flat, (row["policy"], field)
    one = runner.invoke(app, ["policies", "--policy", "pi-anti-doom-loop"], env={"COLUMNS": columns})
    assert one.exit_code == 0 and max(len(line) for line in one.stdout.splitlines()) <= 100, one.stdout
    settings = orjson.loads(
        runner.invoke(app, ["policies", "--policy", "pi-anti-doom-loop", "--format", "json"]).stdout
    )
    assert all("…" not in s["meaning"] for s in settings) and any(len(s["meaning"]) > 60 for s in settings)
