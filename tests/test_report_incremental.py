"""The report is rebuilt incrementally (issue 13): a session page is rewritten only when its session changed, the
pages over the whole scope whenever anything in the store did, nothing at all when nothing did; an option change
rewrites everything, a session that left the scope loses its page; and pages written by worker processes are the
same bytes as pages written in one process."""

from __future__ import annotations

import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import SAMPLE_DATA
from helpers import query

from analyzer.analyze import replay_cache_path, write_report
from analyzer.ingest.pipeline import ingest
from analyzer.scan.run import scan
from analyzer.store import connection
from analyzer.store.filters import SessionFilter
from reports.data import ReportData
from reports.paths import session_page_path
from reports.render import render_report

OLD = 1_000_000_000  # a file time long before any run of the tests: a page still carrying it was not rewritten

GENERATED = re.compile(r"generated \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC")  # the footer's generation time


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("incremental")
    data = work / "data"
    shutil.copytree(SAMPLE_DATA, data, ignore=shutil.ignore_patterns("*.py", "*.md", "__pycache__"))
    db = work / "store.duckdb"
    ingest_and_scan(data, db)
    return data, db


def report(db: Path, out: Path, **kw: object):  # noqa: ANN201 - ReportResult
    con = connection.connect(db, read_only=True)
    try:
        return write_report(con, out, workers=1, cache=replay_cache_path(db), **kw)  # type: ignore[arg-type]
    finally:
        con.close()


def age(out: Path) -> None:
    for p in out.rglob("*.html"):
        os.utime(p, (OLD, OLD))


def rewritten(out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in out.rglob("*.html") if p.stat().st_mtime != OLD}


def ingest_and_scan(data: Path, db: Path) -> None:
    ingest([data], db, workers=1)
    scan(db, workers=1)


def reported_copy(data: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the transcripts under ``tmp_path/data``, ingested, scanned and reported: its store and report."""
    shutil.copytree(data, tmp_path / "data")
    local, out = tmp_path / "store.duckdb", tmp_path / "r"
    ingest_and_scan(tmp_path / "data", local)
    report(local, out)
    return local, out


def one_session_file(db: Path) -> tuple[str, Path]:
    """A transcript that holds exactly one session, which has findings."""
    ((sid, path),) = query(
        db,
        """
        SELECT any_value(s.session_id), s.source_path FROM sessions s GROUP BY s.source_path
        HAVING count(*) = 1 AND any_value(s.session_id) IN (SELECT session_id FROM findings)
        ORDER BY s.source_path LIMIT 1""",
    )
    return sid, Path(path)


def test_an_unchanged_store_keeps_the_whole_report(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    _, db = corpus
    out = tmp_path / "r"
    first = report(db, out)
    assert first.session_pages_written == first.session_pages > 0 and not first.kept
    manifest = (out / ".loopscope-report.json").read_bytes()
    age(out)
    again = report(db, out)
    assert again.kept and again.session_pages_written == 0 and again.session_pages == first.session_pages
    assert rewritten(out) == set()
    assert (out / ".loopscope-report.json").read_bytes() == manifest
    assert sorted(again.files) == sorted(first.files) and again.generated_at == first.generated_at


def test_a_missing_page_an_option_or_a_calibration_rebuilds_the_pages_over_the_scope(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    """The whole report is kept only while every file it wrote is there and it was made under the same options from
    the same store: a deleted session page is written again; a calibration saved since rewrites the pages over the
    whole scope (the calibration page draws it), not the session pages."""
    from analyzer.calibrate.recommend import DEFAULT_BASE, calibrate_store

    data, _ = corpus
    local = tmp_path / "store.duckdb"
    shutil.copy(corpus[1], local)
    out = tmp_path / "r"
    first = report(local, out)
    gone = out / session_page_path(one_session_file(local)[0])
    gone.unlink()
    age(out)
    again = report(local, out)
    assert not again.kept and again.session_pages_written == 1
    assert rewritten(out) == {"index.html", "calibration.html", "sessions.html", gone.relative_to(out).as_posix()}
    assert report(local, out).kept
    con = connection.connect(local)
    try:
        calibrate_store(con, DEFAULT_BASE, SessionFilter(), workers=1)
    finally:
        con.close()
    age(out)
    third = report(local, out)
    assert not third.kept and third.session_pages_written == 0
    assert rewritten(out) == {"index.html", "calibration.html", "sessions.html"}
    assert first.session_pages == third.session_pages


def test_a_new_file_that_is_no_transcript_rewrites_the_index_and_keeps_the_session_pages(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    """A change that touches no session (a new file that is no transcript) still changes what the index shows (its
    files not read): the pages over the scope are rewritten, no session page is."""
    local, out = reported_copy(corpus[0], tmp_path)
    skipped = "SELECT count(*) FROM files WHERE status = 'skipped'"
    ((before,),) = query(local, skipped)
    (tmp_path / "data" / "claude_code" / "broken.jsonl").write_text('{"type": "user", "sessionId": \n')
    ingest_and_scan(tmp_path / "data", local)
    ((after,),) = query(local, skipped)
    assert after == before + 1
    age(out)
    again = report(local, out)
    assert not again.kept and again.session_pages_written == 0
    assert rewritten(out) == {"index.html", "calibration.html", "sessions.html"}


def test_a_changed_transcript_rewrites_its_page_and_the_index_only(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    local, out = reported_copy(corpus[0], tmp_path)
    sid, path = one_session_file(local)
    path.write_bytes(path.read_bytes() + b"\n")  # new content: ingested again, scanned again
    ingest_and_scan(tmp_path / "data", local)
    age(out)
    again = report(local, out)
    assert again.session_pages_written == 1
    assert rewritten(out) == {"index.html", "calibration.html", "sessions.html", session_page_path(sid)}


def test_an_option_change_rewrites_every_page(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    _, db = corpus
    out = tmp_path / "r"
    first = report(db, out)
    age(out)
    unredacted = report(db, out, redact=False)
    assert unredacted.session_pages_written == first.session_pages
    assert len(rewritten(out)) == first.session_pages + 3
    assert "Not redacted" in (out / session_page_path(one_session_file(db)[0])).read_text()


def test_a_session_that_leaves_the_scope_loses_its_page(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    _, db = corpus
    out = tmp_path / "r"
    report(db, out)
    # Every session has a page, with findings or without.
    pi = {sid for (sid,) in query(db, "SELECT session_id FROM sessions WHERE format = 'pi'")}
    others = {sid for (sid,) in query(db, "SELECT session_id FROM sessions")} - pi
    assert pi and others and len(list((out / "sessions").glob("*.html"))) == len(pi | others)
    narrowed = report(db, out, flt=SessionFilter(agent="pi"))
    pages = {p.relative_to(out).as_posix() for p in (out / "sessions").glob("*.html")}
    assert pages == {session_page_path(s) for s in pi}
    assert narrowed.session_pages_written == 0  # the pi pages themselves did not change


def test_pages_from_worker_processes_are_byte_identical_to_serial_ones(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    _, db = corpus
    when = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)
    con = connection.connect(db, read_only=True)
    try:
        serial = render_report(ReportData(con), tmp_path / "serial", generated_at=when, workers=1)
        parallel = render_report(ReportData(con), tmp_path / "parallel", generated_at=when, workers=2, batch=4)
    finally:
        con.close()
    assert parallel.session_pages_written == serial.session_pages_written == serial.session_pages > 8
    names = sorted(
        p.relative_to(tmp_path / "serial").as_posix() for p in (tmp_path / "serial").rglob("*") if p.is_file()
    )
    assert names == sorted(
        p.relative_to(tmp_path / "parallel").as_posix() for p in (tmp_path / "parallel").rglob("*") if p.is_file()
    )
    for name in names:
        assert (tmp_path / "serial" / name).read_bytes() == (tmp_path / "parallel" / name).read_bytes(), name


def test_replays_from_the_cache_and_in_chunks_equal_one_fresh_replay(
    corpus: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report replays only sessions whose fingerprint changed and, cold, a chunk of sessions at a time: both
    rest on a session's replay depending on that session alone."""
    import analyzer.analyze as analyze
    from analyzer.analyze import replay_presets

    _, db = corpus
    con = connection.connect(db, read_only=True)
    try:
        fresh = replay_presets(con, workers=1)
        monkeypatch.setattr(analyze, "REPLAY_CHUNK", 3)
        cache = tmp_path / "replay.parquet"
        chunked = replay_presets(con, workers=1, cache=cache)
        cached = replay_presets(con, workers=1, cache=cache)
    finally:
        con.close()
    assert fresh is not None and chunked is not None and cached is not None
    assert fresh.frame.height >= 8 * 25
    assert chunked.frame.equals(fresh.frame) and cached.frame.equals(fresh.frame)


def test_a_replay_in_worker_processes_equals_one_in_this_process(
    corpus: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cold, the report's replay reads each chunk of sessions here and replays it in spawned workers: the rows are
    the same as replaying every session in this process."""
    import analyzer.analyze as analyze
    from analyzer.analyze import replay_presets

    _, db = corpus
    con = connection.connect(db, read_only=True)
    try:
        serial = replay_presets(con, workers=1)
        monkeypatch.setattr(analyze, "REPLAY_CHUNK", 3)
        pooled = replay_presets(con, workers=2)
    finally:
        con.close()
    assert serial is not None and pooled is not None
    assert pooled.frame.equals(serial.frame)


def test_the_calibration_is_computed_after_the_session_pages(corpus: tuple[Path, Path], tmp_path: Path) -> None:
    """A folder report computes a lazily given calibration only once its session pages are written (so the sweep's
    memory never adds to the page workers'), and the pages are the same as with the calibration given up front."""
    from analyzer.calibrate.recommend import calibration_for_report

    _, db = corpus
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    seen: list[int] = []
    con = connection.connect(db, read_only=True)
    try:
        cal = calibration_for_report(con)

        def late() -> object:
            seen.append(len(list((tmp_path / "late" / "sessions").glob("*.html"))))
            return cal

        eager = render_report(ReportData(con), tmp_path / "eager", generated_at=when, calibration=cal, workers=1)
        lazy = render_report(
            ReportData(con),
            tmp_path / "late",
            generated_at=when,
            calibration=late,  # type: ignore[arg-type]
            workers=1,
        )
    finally:
        con.close()
    assert seen == [lazy.session_pages] and lazy.session_pages > 0
    assert [p.relative_to(tmp_path / "late") for p in lazy.files] == [
        p.relative_to(tmp_path / "eager") for p in eager.files
    ]
    for p in eager.files:
        assert (tmp_path / "late" / p.relative_to(tmp_path / "eager")).read_bytes() == p.read_bytes(), p


@pytest.mark.parametrize("limit", [None, "3GiB"])
def test_the_pages_are_read_under_duckdbs_page_cap_and_the_limit_comes_back(
    corpus: tuple[Path, Path], tmp_path: Path, limit: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report reads its page batches, the sessions it replays the guards on and the calibration's sweep with
    DuckDB capped (``PAGE_READS``: uncapped, the blocks it cached made the report of a large store peak far above a
    small one's), and the connection's own limit is back afterwards."""
    import analyzer.calibrate.recommend
    import analyzer.guards.replay
    import reports.data
    from reports.data import PAGE_READS

    _, db = corpus
    seen: dict[str, list[str]] = {"pages": [], "replay": [], "calibration": []}

    def spy(name: str, real: Any) -> Any:
        def read(con: duckdb.DuckDBPyConnection, *args: Any, **kwargs: Any) -> Any:
            seen[name].append(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
            return real(con, *args, **kwargs)

        return read

    monkeypatch.setattr(reports.data, "session_batch", spy("pages", reports.data.session_batch))
    monkeypatch.setattr(analyzer.guards.replay, "read_corpus", spy("replay", analyzer.guards.replay.read_corpus))
    monkeypatch.setattr(
        analyzer.calibrate.recommend,
        "calibration_for_report",
        spy("calibration", analyzer.calibrate.recommend.calibration_for_report),
    )
    con = connection.connect(db, read_only=True)
    try:
        if limit:
            con.execute(f"SET memory_limit = '{limit}'")
        before = con.execute("SELECT current_setting('memory_limit')").fetchone()
        con.execute(f"SET memory_limit = '{PAGE_READS['memory_limit']}'")
        capped = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        con.execute(f"SET memory_limit = '{before[0]}'" if limit else "RESET memory_limit")
        write_report(con, tmp_path / "r", workers=1)
        assert con.execute("SELECT current_setting('memory_limit')").fetchone() == before
    finally:
        con.close()
    assert {name: set(values) for name, values in seen.items()} == {name: {capped} for name in seen}


def test_a_page_batch_that_needs_more_than_the_cap_is_read_without_it(
    corpus: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap bounds DuckDB's cache, never what a batch may use: a batch (of pages, of sessions to replay, the
    calibration's sweep) that runs out of memory under it is read again uncapped, and the report is the report an
    uncapped read writes."""
    import reports.data

    _, db = corpus
    outs = {}
    for name, cap in (("tiny", {"memory_limit": "1MB"}), ("none", {})):
        monkeypatch.setattr(reports.data, "PAGE_READS", cap)
        con = connection.connect(db, read_only=True)
        try:
            if cap:  # the cap really is too small for a batch
                ids = [r[0] for r in con.execute("SELECT session_id FROM sessions").fetchall()]
                ReportData(con)  # the scope the batch reads from
                with pytest.raises(duckdb.OutOfMemoryException), connection.duckdb_settings(con, cap):
                    reports.data.session_batch(con, ids)
            write_report(con, tmp_path / name, workers=1)
        finally:
            con.close()
        # The two reports may be written a minute apart (seen on a slow machine): the footer's time aside.
        outs[name] = {
            p.relative_to(tmp_path / name): GENERATED.sub("generated", p.read_text())
            for p in (tmp_path / name / "sessions").iterdir()
        }
    assert outs["tiny"] and outs["tiny"] == outs["none"]


def test_an_unchanged_analyze_does_not_load_the_secret_rules(tmp_path: Path) -> None:
    """Whether the report is current is read from its manifest: the secret rules (detect-secrets, which brings
    ``requests``: a tenth of an unchanged ``analyze``) load only when a page is written. Each run is a process of its
    own, as a user's is."""
    import subprocess
    import sys

    data = tmp_path / "data"
    shutil.copytree(SAMPLE_DATA / "pi", data / "pi")
    script = f"""
import sys
from analyzer.cli import main
sys.argv = ["loopscope", "analyze", {str(data)!r}, "--db", {str(tmp_path / "s.duckdb")!r}, "--out",
            {str(tmp_path / "report")!r}, "-q"]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
print("detect_secrets" in sys.modules)
"""
    runs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300) for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    # The first run wrote the pages (and redacted them); the second found the report current.
    assert [r.stdout.split()[-1] for r in runs] == ["True", "False"]
