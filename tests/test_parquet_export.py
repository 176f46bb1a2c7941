"""``loopscope export --format parquet`` and ``loopscope report --from``: the store's tables round-trip through
Parquet, and the report drawn from them is the store's."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES, SAMPLE_DATA
from parquet_support import TABLES, render, rows, same_report
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.ingest.pipeline import ingest
from analyzer.scan.run import scan
from analyzer.store import connection
from analyzer.store.parquet import open_dir


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("export")
    db = tmp / "store.duckdb"
    ingest([SAMPLE_DATA, FIXTURES], db, workers=1)
    scan(db, workers=1)
    res = CliRunner().invoke(app, ["export", "--format", "parquet", str(tmp / "pq"), "--db", str(db)])
    assert res.exit_code == 0, res.output
    return db, tmp / "pq"


def test_export_writes_every_table_partitioned_by_format_and_date(exported: tuple[Path, Path]) -> None:
    _, pq = exported
    for table in TABLES:
        assert (pq / table).is_dir(), table
    assert {p.name for p in (pq / "sessions").iterdir()} >= {"p_format=claude_code", "p_format=pi", "p_format=codex"}
    assert any(p.name.startswith("p_date=20") for p in (pq / "sessions" / "p_format=pi").iterdir())
    assert all(p.name.startswith("p_format=") for p in (pq / "files").iterdir())


def test_parquet_round_trip_keeps_every_row(exported: tuple[Path, Path]) -> None:
    db, pq = exported
    con, back = connection.connect(db, read_only=True), open_dir(pq)
    try:
        for table in TABLES:
            assert rows(back, table) == rows(con, table), table
    finally:
        con.close()
        back.close()


def test_report_from_parquet_is_the_stores_report(exported: tuple[Path, Path], tmp_path: Path) -> None:
    db, pq = exported
    con, back = connection.connect(db, read_only=True), open_dir(pq)
    try:
        render(con, tmp_path / "store")
        render(back, tmp_path / "parquet")
    finally:
        con.close()
        back.close()
    same_report(tmp_path / "store", tmp_path / "parquet")
    res = CliRunner().invoke(app, ["report", "--from", str(pq), "--out", str(tmp_path / "cli"), "-q"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "cli" / "index.html").is_file()


def test_report_from_a_folder_without_results_says_so(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["report", "--from", str(tmp_path / "nothing"), "--out", str(tmp_path / "r")])
    assert res.exit_code != 0
    assert "no Parquet results" in res.output
