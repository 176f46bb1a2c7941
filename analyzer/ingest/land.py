"""Land a chunk of parsed files in the store: the workers' spool (keys already hashed) goes into ``sessions``, ``turns``
and ``calls`` in one transaction, with usage deduplicated across files and session totals refreshed; plus the
bookkeeping of ``files`` that makes re-ingest incremental."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import duckdb

from analyzer.store.connection import one, transaction
from analyzer.store.schema import CALLS, FILES, INGEST_ERRORS, SESSIONS, TURNS
from analyzer.tables import Table

if TYPE_CHECKING:
    import pyarrow as pa

    from analyzer.ingest.parse import FileOutcome


def _ts(col: str) -> str:
    """The transcript's timestamp text as a UTC TIMESTAMP; NULL when it is not a timestamp."""
    return f"timezone('UTC', TRY_CAST({col} AS TIMESTAMPTZ))"


def spool_source(spool: dict[str, list[str]], table: str) -> str:
    """A FROM-clause source for a spool table: its Parquet files, or an empty relation of the same columns."""
    paths = spool.get(table) or []
    if paths:
        return "read_parquet([" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "])"
    from analyzer.ingest.rows import SPOOL  # pyarrow loads only when there is a chunk to land

    cols = ", ".join(f"NULL::{sql} AS {n}" for n, sql in SPOOL[table])
    return f"(SELECT {cols} LIMIT 0)"


def landed_sql(table: str, source: str, where: str = "") -> str:
    """The SELECT that turns spool rows of ``table`` (from ``source``, aliased ``t``, filtered by ``where``) into the
    store's rows: timestamps parsed; session totals are zero until ``TOTALS_SQL`` fills them. Shared by
    the store's load and the Spark path (``analyzer.spark``), which runs it with DuckDB inside each task."""
    if table == "sessions":
        return f"""
            SELECT session_id, format, source_path, file_id, parent_session_id, agent_version,
                   {_ts("first_ts")} AS started_at, {_ts("last_ts")} AS ended_at, cwd, models,
                   0 AS user_turns, 0 AS turns, 0 AS calls, 0 AS error_calls, 0 AS input_tokens, 0 AS output_tokens,
                   0 AS cache_read_tokens, 0 AS cache_write_tokens, 0 AS total_tokens, 0.0 AS cost_usd
            FROM {source} t {where}"""
    spec = TURNS if table == "turns" else CALLS
    cols = ", ".join(_ts(c) + " AS " + c if c in ("ts", "result_ts") else c for c in spec.names)
    return f"SELECT {cols} FROM {source} t {where}"


# One counted row per API response (``usage_key``): non-sidechain first, then the largest total, as ccusage.
USAGE_ORDER = "is_sidechain, total_tokens DESC, file_id, line, turn_index"

# Session totals from turns and from calls, for the sessions ``{where}`` selects (a clause on ``session_id``). Plain
# SQL that DuckDB and Spark SQL both run: the store refreshes totals with it, the Spark path computes them with it.
TURN_TOTALS_SQL = """
    SELECT session_id,
           count(*) FILTER (WHERE role = 'user') AS user_turns,
           count(*) AS turns,
           coalesce(sum(input_tokens) FILTER (WHERE usage_counted), 0) AS input_tokens,
           coalesce(sum(output_tokens) FILTER (WHERE usage_counted), 0) AS output_tokens,
           coalesce(sum(cache_read_tokens) FILTER (WHERE usage_counted), 0) AS cache_read_tokens,
           coalesce(sum(cache_write_tokens) FILTER (WHERE usage_counted), 0) AS cache_write_tokens,
           coalesce(sum(total_tokens) FILTER (WHERE usage_counted), 0) AS total_tokens,
           coalesce(sum(cost_usd) FILTER (WHERE usage_counted), 0) AS cost_usd,
           min(ts) AS first_ts, max(ts) AS last_ts
    FROM {turns} {where} GROUP BY session_id"""
CALL_TOTALS_SQL = """
    SELECT session_id, count(*) AS calls, count(*) FILTER (WHERE is_error) AS error_calls,
           min(ts) AS first_ts, greatest(max(ts), max(result_ts)) AS last_ts
    FROM {calls} {where} GROUP BY session_id"""


def load_chunk(
    con: duckdb.DuckDBPyConnection,
    outcomes: Sequence[FileOutcome],
    spool: dict[str, list[str]],
) -> None:
    """Replace the rows of ``outcomes``' files with the parsed ones, in one transaction: after a kill the store holds
    either all of a chunk or none of it, and the ``files`` rows (with their hashes) commit with their data, so the next
    run picks up exactly the files that did not land."""
    ids = [o.file_id for o in outcomes]
    con.execute(f"CREATE TEMP TABLE IF NOT EXISTS {PENDING} (file_id INTEGER)")
    with transaction(con):
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _chunk_files AS SELECT unnest($ids::INTEGER[]) AS file_id", {"ids": ids}
        )
        con.execute(f"DELETE FROM {PENDING} WHERE file_id IN (SELECT file_id FROM _chunk_files)")
        # Usage keys the old rows held: their winners may change once those rows are gone.
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _keys AS SELECT DISTINCT usage_key FROM turns "
            "WHERE file_id IN (SELECT file_id FROM _chunk_files) AND usage_key IS NOT NULL"
        )
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _touched AS SELECT DISTINCT session_id FROM turns "
            "WHERE usage_key IN (SELECT usage_key FROM _keys)"
        )
        for table in ("calls", "turns", "sessions", "ingest_errors", "files"):
            con.execute(f"DELETE FROM {table} WHERE file_id IN (SELECT file_id FROM _chunk_files)")

        # Turns and calls stream straight from the spool into their tables; only the small sessions spool is
        # materialised, for the duplicate check.
        con.execute(f"CREATE OR REPLACE TEMP TABLE _new_sessions AS SELECT * FROM {spool_source(spool, 'sessions')}")

        # A session id already in the store from another file (an archived copy, a duplicated dataset row) is
        # recorded as an error and not loaded twice; within the chunk the lowest file id wins. A copy stored from a
        # file this ingest reads again and has not landed yet (``PENDING``) does not count: it is replaced now (its
        # rows go, it is read again when its file lands), so of the copies an ingest reads, landed in file-id order,
        # the lowest file id is kept, unless a copy from a file it does not read is stored (that one stays).
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE _early AS
            SELECT DISTINCT s.session_id, s.file_id FROM sessions s
            WHERE s.session_id IN (SELECT session_id FROM _new_sessions)
              AND s.file_id IN (SELECT file_id FROM {PENDING})
        """)
        if (one(con, "SELECT count(*) FROM _early") or (0,))[0]:  # rare; each DELETE scans a table
            con.execute(
                "INSERT INTO _keys SELECT DISTINCT usage_key FROM turns "
                "WHERE (session_id, file_id) IN (SELECT (session_id, file_id) FROM _early) AND usage_key IS NOT NULL"
            )
            for table in ("calls", "turns", "sessions"):
                con.execute(
                    f"DELETE FROM {table} WHERE (session_id, file_id) IN (SELECT (session_id, file_id) FROM _early)"
                )
        con.execute("""
            CREATE OR REPLACE TEMP TABLE _dup AS
            SELECT n.session_id, n.file_id,
                   coalesce(
                     (SELECT min(s.source_path) FROM sessions s WHERE s.session_id = n.session_id),
                     (SELECT arg_min(m.source_path, m.file_id) FROM _new_sessions m
                       WHERE m.session_id = n.session_id AND m.file_id < n.file_id)) AS other_path
            FROM _new_sessions n
            WHERE EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = n.session_id)
               OR EXISTS (SELECT 1 FROM _new_sessions m WHERE m.session_id = n.session_id AND m.file_id < n.file_id)
        """)
        keep = "WHERE NOT EXISTS (SELECT 1 FROM _dup d WHERE d.session_id = t.session_id AND d.file_id = t.file_id)"
        for table, spec in (("sessions", SESSIONS), ("turns", TURNS), ("calls", CALLS)):
            source = "_new_sessions" if table == "sessions" else spool_source(spool, table)
            con.execute(f"INSERT INTO {table} ({', '.join(spec.names)}) {landed_sql(table, source, keep)}")

        _drop_replayed_calls(con)
        con.execute(
            "INSERT INTO _keys SELECT DISTINCT usage_key FROM turns "
            "WHERE file_id IN (SELECT file_id FROM _chunk_files) AND usage_key IS NOT NULL"
        )
        con.execute("INSERT INTO _touched SELECT DISTINCT session_id FROM _new_sessions")
        _dedup_usage(con)
        _refresh_totals(con)

        for table, rows in outcome_tuples(outcomes).items():
            if rows:
                _insert_rows(con, table, rows)
        con.execute(f"""
            INSERT INTO ingest_errors
            SELECT d.file_id, s.source_path, NULL,
                   '{DUPLICATE}' || d.session_id || ': already ingested from ' || d.other_path ||
                   '; this copy was not loaded', d.session_id
            FROM _dup d JOIN _new_sessions s USING (session_id, file_id)
        """)
        con.execute("""
            UPDATE files SET errors = errors + x.n, sessions = sessions - x.n
            FROM (SELECT file_id, count(*) AS n FROM _dup GROUP BY file_id) x WHERE files.file_id = x.file_id
        """)
        for t in ("_new_sessions", "_dup", "_early", "_keys", "_touched", "_chunk_files"):
            con.execute(f"DROP TABLE IF EXISTS {t}")


def outcome_tuples(outcomes: Sequence[FileOutcome]) -> dict[Table, list[tuple]]:
    """The ``files`` and ``ingest_errors`` rows of parsed files (before duplicate sessions are counted), as tuples in
    their tables' column order."""
    now = datetime.now(UTC).replace(tzinfo=None)
    file_rows = [
        (
            o.file_id,
            o.path,
            o.format,
            o.status,
            o.reason,
            o.size,
            o.mtime_ns,
            o.content_hash,
            o.sessions,
            o.calls,
            o.error_count,
            now,
            o.full_results,
        )
        for o in outcomes
    ]
    err_rows = []
    for o in outcomes:
        err_rows.extend((o.file_id, o.path, line, reason, text) for line, reason, text in o.errors)
        if o.error_count > len(o.errors):
            err_rows.append(
                (o.file_id, o.path, None, f"{o.error_count - len(o.errors)} more errors in this file not listed", "")
            )
    return {FILES: file_rows, INGEST_ERRORS: err_rows}


def outcome_rows(outcomes: Sequence[FileOutcome]) -> dict[str, pa.Table]:
    """``outcome_tuples`` as Arrow tables, by table name (the Spark path's tasks return Arrow)."""
    import pyarrow as pa

    return {
        table.name: pa.table(
            {c.name: pa.array(list(v), type=c.arrow) for c, v in zip(table.columns, _columns(table, rows))}
        )
        for table, rows in outcome_tuples(outcomes).items()
    }


def _columns(table: Table, rows: Sequence[tuple]) -> list[tuple]:
    """Rows of ``table`` turned into its columns, in order (empty ones when there are no rows)."""
    return list(zip(*rows)) if rows else [() for _ in table.columns]


def _insert_rows(con: duckdb.DuckDBPyConnection, table: Table, rows: Sequence[tuple]) -> None:
    """Bulk insert of Python rows in one statement: each column is one list parameter, ``unnest`` zips them back
    into rows. ``executemany`` costs ~2 ms a row; an Arrow table built from Python lists makes pyarrow import pandas
    (when installed) just to ask whether a list is a pandas object, ~0.5 s of CPU."""
    select = ", ".join(f'unnest(${i + 1}::{c.sql}[]) AS "{c.name}"' for i, c in enumerate(table.columns))
    con.execute(f"INSERT INTO {table.name} SELECT {select}", [list(v) for v in _columns(table, rows)])


def _drop_replayed_calls(con: duckdb.DuckDBPyConnection) -> None:
    """A resumed Claude Code session copies the earlier session's lines, tool_use ids included, into its own file
    under a new session id: each call is counted once. Of the calls sharing a ``toolu_`` id across sessions, the one in
    the session whose calls ended first (the original) stays, and the later copy is dropped (ties: the lower file id
    stays). Tokens need nothing here: the copies share usage keys, deduplicated by ``_dedup_usage``. Runs over the
    chunk's call ids, so an original ingested after its resume drops the resume's copies already in the store."""
    con.execute("""
        CREATE OR REPLACE TEMP TABLE _replayed AS
        WITH ids AS (
            SELECT DISTINCT c.call_id FROM calls c
            WHERE c.file_id IN (SELECT file_id FROM _chunk_files) AND c.call_id LIKE 'toolu\\_%' ESCAPE '\\'
        ), hits AS (
            SELECT c.session_id, c.seq, c.call_id, c.file_id FROM calls c JOIN sessions s USING (session_id)
            WHERE c.call_id IN (SELECT call_id FROM ids) AND s.format = 'claude_code'
        ), span AS (
            SELECT session_id, max(greatest(ts, result_ts)) AS last_ts FROM calls
            WHERE session_id IN (SELECT session_id FROM hits) GROUP BY session_id
        ), winner AS (
            SELECT call_id, arg_min(session_id, (last_ts IS NULL, last_ts, file_id, session_id)) AS session_id
            FROM hits JOIN span USING (session_id) GROUP BY call_id HAVING count(DISTINCT session_id) > 1
        )
        SELECT h.session_id, h.seq FROM hits h JOIN winner w USING (call_id) WHERE h.session_id <> w.session_id
    """)
    con.execute("DELETE FROM calls WHERE (session_id, seq) IN (SELECT (session_id, seq) FROM _replayed)")
    con.execute("INSERT INTO _touched SELECT DISTINCT session_id FROM _replayed")
    con.execute("DROP TABLE _replayed")


def _dedup_usage(con: duckdb.DuckDBPyConnection) -> None:
    """One counted row per API response (``usage_key``), ordered by ``USAGE_ORDER``."""
    con.execute(f"""
        UPDATE turns SET usage_counted = (r.rn = 1)
        FROM (
            SELECT session_id, turn_index,
                   row_number() OVER (PARTITION BY usage_key ORDER BY {USAGE_ORDER}) AS rn
            FROM turns WHERE usage_key IN (SELECT usage_key FROM _keys)
        ) r
        WHERE turns.session_id = r.session_id AND turns.turn_index = r.turn_index
    """)
    con.execute(
        "INSERT INTO _touched SELECT DISTINCT session_id FROM turns WHERE usage_key IN (SELECT usage_key FROM _keys)"
    )


def _refresh_totals(con: duckdb.DuckDBPyConnection) -> None:
    where = "WHERE session_id IN (SELECT session_id FROM _touched)"
    con.execute(f"""
        UPDATE sessions SET
            user_turns = t.user_turns, turns = t.turns,
            input_tokens = t.input_tokens, output_tokens = t.output_tokens,
            cache_read_tokens = t.cache_read_tokens, cache_write_tokens = t.cache_write_tokens,
            total_tokens = t.total_tokens, cost_usd = t.cost_usd,
            started_at = least(sessions.started_at, t.first_ts), ended_at = greatest(sessions.ended_at, t.last_ts)
        FROM ({TURN_TOTALS_SQL.format(turns="turns", where=where)}) t
        WHERE sessions.session_id = t.session_id
    """)
    con.execute(f"""
        UPDATE sessions SET calls = c.calls, error_calls = c.error_calls,
            started_at = least(sessions.started_at, c.first_ts), ended_at = greatest(sessions.ended_at, c.last_ts)
        FROM ({CALL_TOTALS_SQL.format(calls="calls", where=where)}) c
        WHERE sessions.session_id = c.session_id
    """)


# Reasons of a skip that says nothing about the file's content: such a file is read again on the next run even when
# its size and mtime are unchanged (``chmod`` does not change mtime).
RETRY_REASONS = ("cannot open", "cannot read")


def file_states(con: duckdb.DuckDBPyConnection, full_results: bool) -> dict[str, tuple[int, int, int, str | None, str]]:
    """path -> (file_id, size, mtime_ns, content_hash, status) of every file the store has seen. A file skipped
    because it could not be read, or ingested with results stored otherwise than ``full_results`` asks, has size -1,
    so it never looks unchanged."""
    retry = " OR ".join(f"starts_with(coalesce(reason, ''), '{r}')" for r in RETRY_REASONS)
    rows = con.execute(
        f"SELECT path, file_id, CASE WHEN status = 'skipped' AND ({retry}) THEN -1 "
        "WHEN status = 'ingested' AND full_results IS DISTINCT FROM $full THEN -1 ELSE size END, "
        "mtime_ns, content_hash, status FROM files",
        {"full": full_results},
    ).fetchall()
    return {r[0]: (r[1], r[2], r[3], r[4], r[5]) for r in rows}


PENDING = "_ingest_pending"  # temp table: the files an ingest reads that have not landed yet (``load_chunk``)
DUPLICATE = "duplicate session id "  # how ``ingest_errors.reason`` of a copy not loaded begins


def pending(con: duckdb.DuckDBPyConnection, ids: Sequence[int]) -> None:
    """Record the files this ingest is about to read (``PENDING``). Their stored ``files`` rows get size -1 until
    they land, so that after a kill the next ingest reads them again (a file read again for a duplicate session
    (``other_copies``) is unchanged on disk)."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {PENDING} AS SELECT unnest($1::INTEGER[]) AS file_id", [list(ids)])
    con.execute(f"UPDATE files SET size = -1 WHERE file_id IN (SELECT file_id FROM {PENDING})")


def other_copies(con: duckdb.DuckDBPyConnection, ids: Sequence[int]) -> list[tuple[int, str]]:
    """(file id, path) of the files holding a copy not loaded (an ingest error ``DUPLICATE``…) of a session stored
    from one of the files ``ids``: read again with them, the session is decided again among every copy."""
    return [
        (int(r[0]), r[1])
        for r in con.execute(
            f"""
            SELECT DISTINCT f.file_id, f.path FROM ingest_errors e JOIN files f USING (file_id)
            WHERE e.reason LIKE '{DUPLICATE}%: already ingested from %' AND e.excerpt IN (
                SELECT session_id FROM sessions WHERE file_id IN (SELECT unnest($1::INTEGER[])))
            ORDER BY 1""",
            [list(ids)],
        ).fetchall()
    ]


def next_file_id(con: duckdb.DuckDBPyConnection) -> int:
    row = one(con, "SELECT coalesce(max(file_id), 0) FROM files")
    return int(row[0]) + 1 if row else 1


def touch_files(con: duckdb.DuckDBPyConnection, rows: Sequence[tuple[int, int, int]]) -> None:
    """Record new size/mtime for files whose content hash proved unchanged."""
    if rows:
        ids, sizes, mtimes = zip(*rows)
        con.execute(
            "UPDATE files SET size = t.size, mtime_ns = t.mtime_ns FROM (SELECT unnest($1::INTEGER[]) AS "
            "file_id, unnest($2::BIGINT[]) AS size, unnest($3::BIGINT[]) AS mtime_ns) t "
            "WHERE files.file_id = t.file_id",
            [list(ids), list(sizes), list(mtimes)],
        )
