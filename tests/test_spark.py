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


REALDATA = ROOT / "tests" / "realdata"
# the committed part of the realdata set: every folder of transcripts a fresh clone holds (``fetched`` is not)
REALDATA_DIRS = sorted(
    p for p in REALDATA.iterdir() if p.is_dir() and p.name not in ("fetched", "labels", "sources", "tools")
)


@pytest.fixture(scope="module")
def both(spark, corpus: list[Path], tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):  # noqa: ANN001, ANN201
    """The store from ``ingest`` + ``scan``, and ``spark run``'s Parquet, over the same corpus (the sample data, the
    fixtures, a generated corpus, the committed realdata), half of it named by ``file://`` URIs and half by plain
    paths; the Spark run with the driver's parser and detector replaced by bombs and every ``open`` of a file under
    the corpus failing on the driver: tasks read the bytes Spark's file source hands them."""
    import builtins
    import io

    import analyzer.ingest.parse as parse
    import analyzer.scan.batch as batch
    from analyzer.ingest.pipeline import ingest
    from analyzer.scan.run import scan
    from analyzer.spark.run import run

    # every fixture, those copied from a realdata source too: a session id in two files is kept from the lowest
    # file id by both paths
    roots = [*corpus, *REALDATA_DIRS]
    tmp = tmp_path_factory.mktemp("spark")
    db = tmp / "store.duckdb"
    ingest(roots, db, workers=1)
    scan(db, workers=1)

    def bomb(*_a: object, **_k: object) -> None:
        raise AssertionError("ran on the driver")

    inside = tuple(str(r.resolve()) for r in roots)
    real_open = builtins.open
    opened: list[str] = []

    def guarded_open(file: object, *a: object, **k: object) -> object:
        if isinstance(file, (str, Path)) and str(Path(file).resolve()).startswith(inside):
            opened.append(str(file))
            raise PermissionError(13, "the driver must not open a transcript", str(file))
        return real_open(file, *a, **k)  # type: ignore[call-overload]

    mp = pytest.MonkeyPatch()
    mp.setattr(parse, "parse_file", bomb)
    mp.setattr(batch, "scan_group", bomb)
    mp.setattr(builtins, "open", guarded_open)
    mp.setattr(io, "open", guarded_open)
    given = [r.resolve().as_uri() if i % 2 == 0 else str(r) for i, r in enumerate(roots)]
    try:
        summary = run(given, tmp / "out", spark=spark)
    finally:
        mp.undo()
    assert not opened, opened[:3]
    assert any(g.startswith("file://") for g in given) and any(not g.startswith("file:") for g in given)
    return db, tmp / "out", summary


def table_rows(con, table: str) -> list[tuple]:  # noqa: ANN001
    """``rows``, with ``files.mtime_ns`` in milliseconds: Hadoop's listing (the Spark path's) keeps no finer."""
    got = rows(con, table)
    if table == "files":
        i = 6  # mtime_ns, after file_id, path, format, status, reason, size (``ingested_at`` left out by ``rows``)
        got = sorted(r[:i] + (r[i] // 1_000_000 if r[i] is not None else None,) + r[i + 1 :] for r in got)
    return got


def test_spark_run_gives_the_stores_rows(both) -> None:  # noqa: ANN001
    from analyzer.store import connection
    from analyzer.store.parquet import open_dir

    db, out, summary = both
    con, pq = connection.connect(db, read_only=True), open_dir(out)
    try:
        for table in TABLES:
            assert table_rows(pq, table) == table_rows(con, table), table
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
        # and the archived copy of a session is loaded once, as is each fixture copied from the realdata set: both
        # paths keep the copy of the lowest file id
        dups = con.execute("""
            SELECT e.excerpt, min(s.file_id) < min(e.file_id)
            FROM ingest_errors e JOIN sessions s ON s.session_id = e.excerpt
            WHERE e.reason LIKE 'duplicate session id %: already ingested from %' GROUP BY e.excerpt""").fetchall()
        assert sum(sid.startswith("9e3d5b17-") for sid, _ in dups) == 1
        assert len(dups) > 10 and all(lower for _, lower in dups)
    finally:
        con.close()
        pq.close()


def test_adapters_and_detectors_ran_in_spark_tasks(both) -> None:  # noqa: ANN001
    db, out, summary = both
    assert summary.files_parsed_in_tasks == summary.files and summary.files_reused == 0
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


def spark_submit(args: list[str], tmp_path: Path) -> str:
    """``spark-submit --master local[2] --py-files loopscope.zip analyzer/cli.py ARGS``, as the README shows for a
    cluster (the package shipped to the executors as a zip); its stdout."""
    import shutil
    import zipfile

    submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent)) or shutil.which("spark-submit")
    assert submit is not None, "pyspark ships spark-submit"
    pkg = tmp_path / "loopscope.zip"
    with zipfile.ZipFile(pkg, "w") as z:
        for f in (ROOT / "analyzer").rglob("*.py"):
            z.write(f, f.relative_to(ROOT))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    cmd = [submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false", "--py-files", str(pkg)]
    proc = subprocess.run(
        [*cmd, str(ROOT / "analyzer" / "cli.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def by_path(con, table: str) -> list[tuple]:  # noqa: ANN001
    """``rows`` with each ``file_id`` replaced by its file's path (runs over other listings number files otherwise)."""
    from analyzer.store.schema import ALL_TABLES

    spec = next(t for t in ALL_TABLES if t.name == table)
    if "file_id" not in spec.names:
        return rows(con, table)
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW _by_path AS SELECT * REPLACE ((SELECT f.path FROM files f WHERE "
        f"f.file_id = t.file_id) AS file_id) FROM {table} t"
    )
    got = con.execute("SELECT * FROM _by_path").fetchall()
    names = [d[0] for d in con.execute("SELECT * FROM _by_path LIMIT 0").description]
    drop = {names.index(c) for c in ("ingested_at",) if table == "files"}
    return sorted(tuple(v for i, v in enumerate(r) if i not in drop) for r in got)


def parquet_files(out: Path) -> dict[str, int]:
    """Every Parquet file of the tables under ``out`` (not ``_ingest``, not ``_stage``) and its mtime."""
    return {
        str(p.relative_to(out)): p.stat().st_mtime_ns
        for p in out.rglob("*.parquet")
        if not p.relative_to(out).parts[0].startswith("_")
    }


def test_a_second_run_parses_and_rewrites_only_what_changed(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """Over an ``--out`` that holds a run's results (the first run through ``spark-submit``, the README's cluster
    entry point), a run after adding a file, rewriting one, removing one and touching an opencode part file parses
    those (the part file's whole session: the group read together) and nothing else, scans only the sessions whose
    fingerprint changed, rewrites only the partitions holding them (every other partition's files untouched), and
    writes the tables of the store after the same two ingests and a scan (file ids included; the store keeps the
    removed file's rows: left out), and those of a fresh run (up to file ids). A session id in two files (one chunk
    a file for the store, the higher file id parsed and landed first before) is kept from the lower file id by both,
    and from the other copy once the kept one's file no longer holds it. The second run is the command's."""
    import shutil

    from helpers import pi_records, write_jsonl
    from typer.testing import CliRunner

    import analyzer.ingest.pipeline as pipeline
    from analyzer.cli import app
    from analyzer.scan.run import scan
    from analyzer.spark.run import run
    from analyzer.store import connection
    from analyzer.store.parquet import open_dir

    src, out, db = tmp_path / "src", tmp_path / "out", tmp_path / "store.duckdb"
    shutil.copytree(SAMPLE_DATA / "pi", src / "pi")
    shutil.copytree(SAMPLE_DATA / "opencode", src / "opencode")
    write_jsonl(src / "twin" / "a.jsonl", pi_records("twin", n_calls=1))
    write_jsonl(src / "twin" / "b.jsonl", pi_records("twin", n_calls=9))  # bigger: the store parsed it first
    n = sum(1 for p in src.rglob("*") if p.is_file())
    mp = pytest.MonkeyPatch()
    mp.setattr(pipeline, "CHUNK_FILES", 1)  # a chunk a file, landed in file-id order
    mp.setattr(pipeline, "CHUNK_BYTES_MIN", 1)
    try:
        pipeline.ingest([src], db, workers=1)
        said = spark_submit(["spark", "run", src.as_uri(), "--out", str(out)], tmp_path)
        assert "on local[2] (2 cores)" in said and f"{n:,} files parsed, 0 unchanged since the last run" in said, said
        pq = open_dir(out)
        try:
            twin = "SELECT f.path, s.calls FROM sessions s JOIN files f USING (file_id) WHERE session_id = 'twin'"
            assert pq.execute(twin).fetchall() == [(str(src / "twin" / "a.jsonl"), 1)]
            assert connection.connect(db, read_only=True).execute(twin).fetchall() == pq.execute(twin).fetchall()
            part = sorted((src / "opencode").rglob("prt_*.json"))[0]
            (session,) = pq.execute(
                "SELECT reason[length('read with ') + 1:] FROM files WHERE path = ?", [str(part)]
            ).fetchone()
            group = pq.execute(
                "SELECT count(*) FROM files WHERE path = ? OR reason = ?", [session, f"read with {session}"]
            )
            in_group = group.fetchone()[0]
            pi = sorted((src / "pi").rglob("*.jsonl"))
            (removed_id,) = pq.execute("SELECT file_id FROM files WHERE path = ?", [str(pi[1])]).fetchone()
            sessions_before = pq.execute("SELECT count(*) FROM sessions").fetchone()[0]
        finally:
            pq.close()
        before = parquet_files(out)

        lines = pi[0].read_text().splitlines(keepends=True)
        pi[0].write_text("".join(lines[: len(lines) // 2]))  # rewritten: fewer calls
        pi[1].unlink()
        shutil.copy(FIXTURES / "pi" / "earendil-pi_prompt-cache-replay-session.jsonl", src / "pi" / "added.jsonl")
        part.write_text(part.read_text() + "\n")
        write_jsonl(src / "twin" / "a.jsonl", pi_records("renamed", n_calls=1))  # the kept copy's file: another id
        pipeline.ingest([src], db, workers=1)
        scan(db, workers=1)
    finally:
        mp.undo()

    res = CliRunner().invoke(app, ["spark", "run", str(src), "--out", str(out)])  # the command
    assert res.exit_code == 0, res.output
    parsed = 3 + in_group  # pi[0], added.jsonl and twin/a.jsonl, and the opencode session's group
    assert f"{n:,} files" in res.output
    assert f"{parsed:,} files parsed, {n - parsed:,} unchanged since the last run" in res.output
    # rescanned: pi[0]'s, added.jsonl's, the opencode session, renamed and twin (now from b.jsonl)
    assert "5 sessions scanned" in res.output, res.output
    after = parquet_files(out)
    kept = {f for f in before if f in after and after[f] == before[f]}
    assert kept and len(kept) < len(before)
    touched = {f.rsplit("/", 1)[0] for f in set(before) - kept} | {f.rsplit("/", 1)[0] for f in set(after) - kept}
    assert not any(f.rsplit("/", 1)[0] in touched for f in kept)  # a partition is rewritten whole or not at all
    assert all("p_format=pi" in f or "p_format=opencode" in f for f in touched), sorted(touched)

    pq, con = open_dir(out), connection.connect(db)
    try:
        assert pq.execute("SELECT count(*) FROM sessions").fetchone()[0] == sessions_before + 1  # added, renamed; gone
        assert pq.execute(twin).fetchall() == [(str(src / "twin" / "b.jsonl"), 9)]
        con.execute(f"CREATE TEMP TABLE gone AS SELECT session_id FROM sessions WHERE file_id = {removed_id}")
        for table in TABLES:
            key = (
                "session_id IN (SELECT session_id FROM gone)"
                if table not in ("files", "ingest_errors")
                else (f"file_id = {removed_id}")
            )
            con.execute(f"DELETE FROM {table} WHERE {key}")
            assert table_rows(pq, table) == table_rows(con, table), table
    finally:
        con.close()
        pq.close()

    assert run([src], tmp_path / "fresh", spark=spark).files_parsed_in_tasks == n
    a, b = open_dir(out), open_dir(tmp_path / "fresh")
    try:
        for table in TABLES:
            assert by_path(a, table) == by_path(b, table), table
        assert rows(a, "calls") != [] and rows(a, "files") != []
    finally:
        a.close()
        b.close()
    res = CliRunner().invoke(app, ["report", "--from", str(out), "--out", str(tmp_path / "report"), "-q"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "report" / "index.html").is_file()


def test_filesystem_errors_are_one_line_saying_what_to_fix(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """A scheme without its connector names the package to add; a path that does not exist says so; both exit 2
    (the README's table), with no traceback."""
    from typer.testing import CliRunner

    from analyzer.cli import app

    for given, says in (
        ("s3a://no-such-bucket/trajectories", "add its connector, --packages org.apache.hadoop:hadoop-aws:3.4.1"),
        (str(tmp_path / "nowhere"), f"no such file or folder: {tmp_path / 'nowhere'}"),
    ):
        res = CliRunner().invoke(app, ["spark", "run", given, "--out", str(tmp_path / "out")])
        assert res.exit_code == 2, res.output
        assert "Traceback" not in res.output
        (line,) = res.output.strip().splitlines()
        assert says in line, line
