"""The report's batch reads are bounded by where their sessions' rows lie (``record_places``): each batch reads its
own sessions' span of rows and nothing else, and what it reads is what an unbounded read gives."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from test_report_corpus import build_store

from analyzer.guards.replay import read_corpus
from analyzer.store import connection
from analyzer.store.filters import SessionIds
from reports.data import ReportData


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("places"))


@pytest.fixture()
def con(corpus: Path) -> duckdb.DuckDBPyConnection:
    c = connection.connect(corpus, read_only=True)
    yield c
    c.close()


def _ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("SELECT session_id FROM sessions ORDER BY session_id").fetchall()]


def test_a_sessions_row_bound_holds_its_rows_and_no_other_sessions(con: duckdb.DuckDBPyConnection) -> None:
    connection.record_places(con)
    for table in ("calls", "turns"):
        bounded = 0
        for sid in _ids(con):
            n = connection.one(con, f"SELECT count(*) FROM {table} WHERE session_id = ?", [sid])[0]
            rows = connection.rows_of(con, table, "SELECT ?", [sid])
            if not n:  # no rows there: nothing to bound
                assert rows == "TRUE"
                continue
            own, other = connection.one(
                con,
                f"SELECT count(*) FILTER (WHERE session_id = ?), "
                f"count(*) FILTER (WHERE session_id <> ?) FROM {table} WHERE {rows}",
                [sid, sid],
            )
            assert (own, other) == (n, 0)
            bounded += 1
        assert bounded >= 3


def test_a_page_batch_scans_its_table_within_its_rows(con: duckdb.DuckDBPyConnection) -> None:
    """Joined on the session alone, every batch scanned the whole table: the scan itself carries the rowid bound."""
    data = ReportData(con)
    data.session_batch(_ids(con)[:1])
    for view in ("_r_batch_calls", "_r_batch_turns"):
        plan = "".join(r[1] for r in con.execute(f"EXPLAIN SELECT * FROM {view}").fetchall())
        assert "rowid" in plan


def test_batches_in_read_order_read_what_batches_of_one_session_read(con: duckdb.DuckDBPyConnection) -> None:
    data = ReportData(con)
    ids = _ids(con)
    order = data.read_order(list(reversed(ids)))
    assert sorted(order) == ids
    whole = data.session_batch(order)
    for sid in order:
        one = data.session_batch([sid])
        for name, frame in whole.items():
            mine = frame.filter(frame["session_id"] == sid)
            assert mine.equals(one[name]), (sid, name)


def test_replay_reads_bounded_by_places_equal_unbounded_reads(con: duckdb.DuckDBPyConnection) -> None:
    connection.record_places(con)
    ids = connection.in_place_order(con, _ids(con))
    for chunk in ([ids[0]], ids[:2], ids[1:], ids):
        a = read_corpus(con, SessionIds(tuple(chunk)), placed=True)
        b = read_corpus(con, SessionIds(tuple(chunk)))
        assert a.turns.equals(b.turns) and a.calls.equals(b.calls) and a.turns.height
        assert (a.findings, a.scanned) == (b.findings, b.scanned)
