"""``loopscope spark run`` (local[2]) against the DuckDB pipeline on the sample data, the public fixtures and ~30
generated sessions: the same rows in every table, the adapters and detectors run in Spark tasks (never on the
driver), and the same report drawn from either. Skips, saying why, without pyspark or Java."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, SAMPLE_DATA
from parquet_support import TABLES, render, rows, same_report

from analyzer.spark.session import missing

WHY = missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(WHY is not None, reason=f"Spark tests skipped: {WHY}")]


@pytest.fixture(scope="module")
def spark():  # noqa: ANN201 - one SparkSession for the module
    from analyzer.spark.session import spark_session

    s = spark_session("local[2]", shuffle_partitions=4)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    gen = tmp_path_factory.mktemp("gen") / "corpus"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gen_corpus.py"),
            "--size-mb",
            "1.5",
            "--out",
            str(gen),
            "--seed",
            "7",
        ],
        check=True,
        capture_output=True,
    )
    # A resumed Claude Code session (a new session id repeating the earlier responses: usage counts once across
    # files) and an archived copy of a session (the same id twice: one is loaded, the other is an ingest error).
    src = next((SAMPLE_DATA / "claude_code").glob("*/9e3d5b17-*.jsonl"))
    extra = gen.parent / "extra"
    (extra / "resumed").mkdir(parents=True)
    (extra / "zz-archive").mkdir()
    new_id = "5a1e0c3d-7b9f-4e21-8d6a-2f4c8b0e9a17"
    (extra / "resumed" / f"{new_id}.jsonl").write_text(src.read_text().replace(src.stem, new_id))
    (extra / "zz-archive" / src.name).write_bytes(src.read_bytes())
    return [SAMPLE_DATA, FIXTURES, gen, extra]


@pytest.fixture(scope="module")
def both(spark, corpus: list[Path], tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):  # noqa: ANN001, ANN201
    """The store from ``ingest`` + ``scan``, and ``spark run``'s Parquet, over the same corpus; the Spark run with
    the driver's parser and detector replaced by bombs and its row-collecting calls forbidden."""
    from pyspark import RDD
    from pyspark.sql import DataFrame

    import analyzer.ingest.parse as parse
    import analyzer.scan.batch as batch
    from analyzer.ingest.pipeline import ingest
    from analyzer.scan.run import scan
    from analyzer.spark.run import run

    tmp = tmp_path_factory.mktemp("spark")
    db = tmp / "store.duckdb"
    ingest(corpus, db, workers=1)
    scan(db, workers=1)

    def bomb(*_a: object, **_k: object) -> None:
        raise AssertionError("ran on the driver")

    mp = pytest.MonkeyPatch()
    mp.setattr(parse, "parse_file", bomb)
    mp.setattr(batch, "scan_group", bomb)
    for name in ("collect", "toPandas", "toArrow", "toLocalIterator", "take", "head", "first", "tail"):
        mp.setattr(DataFrame, name, bomb)
    mp.setattr(RDD, "collect", bomb)
    try:
        summary = run(corpus, tmp / "out", spark=spark)
    finally:
        mp.undo()
    return db, tmp / "out", summary


def test_spark_run_gives_the_stores_rows(both) -> None:  # noqa: ANN001
    from analyzer.store import connection
    from analyzer.store.parquet import open_dir

    db, out, summary = both
    con, pq = connection.connect(db, read_only=True), open_dir(out)
    try:
        for table in TABLES:
            assert rows(pq, table) == rows(con, table), table
        n = con.execute("SELECT count(*), sum(calls), sum(total_tokens) FROM sessions").fetchone()
        assert n[0] >= 95 and n[1] > 1000 and n[2] > 0
        assert summary.rows["sessions"] == n[0] and summary.rows["calls"] == n[1]
        assert con.execute("SELECT count(*) FROM findings").fetchone()[0] > 30
        # the resumed session repeats another file's responses: each counts once, whichever file it came from
        shared = con.execute("""
            SELECT count(*), count(*) FILTER (WHERE counted <> 1) FROM (
                SELECT usage_key, count(DISTINCT session_id) AS sessions, count(*) FILTER (WHERE usage_counted) AS counted
                FROM turns WHERE usage_key IS NOT NULL GROUP BY usage_key) WHERE sessions > 1""").fetchone()  # noqa: E501 (SQL text kept as is)
        assert shared[0] > 0 and shared[1] == 0
        # and the archived copy of a session is loaded once
        assert (
            con.execute("SELECT count(*) FROM ingest_errors WHERE reason LIKE 'duplicate session id%'").fetchone()[0]
            == 1
        )
    finally:
        con.close()
        pq.close()


def test_adapters_and_detectors_ran_in_spark_tasks(both) -> None:  # noqa: ANN001
    db, out, summary = both
    assert summary.files_parsed_in_tasks == summary.files
    assert summary.bytes_parsed_in_tasks == summary.bytes
    assert summary.sessions_scanned_in_tasks == summary.rows["sessions"]
    assert summary.task_pids and os.getpid() not in summary.task_pids
    assert not (out / "_stage").exists()


def test_report_from_spark_results_is_the_stores_report(both, tmp_path: Path) -> None:  # noqa: ANN001
    from analyzer.store import connection
    from analyzer.store.parquet import open_dir

    db, out, _ = both
    con, pq = connection.connect(db, read_only=True), open_dir(out)
    try:
        render(con, tmp_path / "store")
        render(pq, tmp_path / "spark")
    finally:
        con.close()
        pq.close()
    same_report(tmp_path / "store", tmp_path / "spark")


def test_spark_run_command_writes_the_tables(spark, tmp_path: Path) -> None:  # noqa: ANN001
    from typer.testing import CliRunner

    from analyzer.cli import app

    res = CliRunner().invoke(app, ["spark", "run", str(FIXTURES / "pi"), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "sessions" in res.output and "findings" in res.output
    for table in ("sessions", "calls", "findings", "ingest_errors"):
        assert (tmp_path / "out" / table).is_dir(), table
    res = CliRunner().invoke(app, ["report", "--from", str(tmp_path / "out"), "--out", str(tmp_path / "report"), "-q"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "report" / "index.html").is_file()
