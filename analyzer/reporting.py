"""What the report reads from the store, as polars frames.

The report knows the store's tables (sessions, turns, calls, findings, ingest_errors) and nothing about transcript
formats. The session filter is applied once: ``prepare`` materialises the filtered sessions (and their findings) in
temp tables, which every later query joins. Transcript text is read clipped in SQL, so one huge tool result never
lands in memory whole; redaction happens after (reports/episodes.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import polars as pl

from analyzer.store.filters import SessionFilter
from analyzer.results import Totals
from analyzer.store.db import columns as _columns, frame, has_table, one

FINDINGS_COLUMNS = ("finding_id", "session_id", "kind", "period", "tools", "call_ids", "first_seq", "last_seq",
                    "repeats", "stuck", "user_turn", "wasted_tokens", "estimated_tokens", "cost_usd")

TEXT_CLIP = 8000
"""Characters of an argument, result or message read from the store; pages show fewer (episodes.SHOW_CHARS), and
the margin lets a secret that straddles the shown part still be recognised whole by the redactor."""


@dataclass(frozen=True)
class Scope:
    """The filtered store as the report sees it."""

    sessions: int
    has_findings: bool


def _scanned(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``loopscope scan`` has run: findings in the contract's shape, and (when the store tracks scans in
    ``scan_state``) at least one scanned session. An empty findings table alone only means the schema exists."""
    if not set(FINDINGS_COLUMNS) <= _columns(con, "findings"):
        return False
    if has_table(con, "scan_state"):
        row = one(con, "SELECT count(*) FROM scan_state")
        return bool(row and row[0])
    return True


def prepare(con: duckdb.DuckDBPyConnection, flt: SessionFilter) -> Scope:
    """Materialise the filtered sessions (``_r_sessions``) and, when ``loopscope scan`` has run, their findings with
    the dimensions the index breaks loops down by (``_r_findings``)."""
    where, params = flt.where("s")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _r_sessions AS SELECT s.* FROM sessions s WHERE {where}", params)
    usable = _scanned(con)
    if usable:
        cols = ", ".join(f"f.{c}" for c in FINDINGS_COLUMNS)
        # turn_ids (the turns counted in wasted_tokens) lets the totals count a turn once across findings.
        turn_ids = "f.turn_ids" if "turn_ids" in _columns(con, "findings") else "CAST(NULL AS VARCHAR[])"
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE _r_findings AS
            SELECT {cols}, {turn_ids} AS turn_ids, s.format, s.cwd,
                   coalesce(t.model, s.models[1]) AS model,
                   CAST(coalesce(c.ts, s.started_at) AS DATE) AS day
            FROM findings f
            JOIN _r_sessions s USING (session_id)
            LEFT JOIN calls c ON c.session_id = f.session_id AND c.seq = f.first_seq
            LEFT JOIN (SELECT session_id, turn_id, any_value(model) AS model FROM turns
                       WHERE role = 'assistant' GROUP BY ALL) t
                   ON t.session_id = c.session_id AND t.turn_id = c.turn_id
        """)
    n = one(con, "SELECT count(*) FROM _r_sessions")
    return Scope(sessions=int(n[0]) if n else 0, has_findings=usable)


def totals(con: duckdb.DuckDBPyConnection, scope: Scope) -> Totals:
    s = one(con, "SELECT count(*), coalesce(sum(calls), 0), coalesce(sum(total_tokens), 0), "
                 "coalesce(sum(cost_usd), 0) FROM _r_sessions")
    assert s is not None
    loops = (0, 0, 0, 0.0, 0)
    if scope.has_findings:
        # Calls count once even if two episodes share them. Tokens and dollars: each finding's own, unless the
        # findings name their turns, in which case a turn shared by two findings counts once.
        row = one(con, """
            WITH dedup AS (
                SELECT sum(t.total_tokens) AS tokens, sum(coalesce(t.cost_usd, 0)) AS cost
                FROM (SELECT DISTINCT session_id, unnest(turn_ids) AS turn_id FROM _r_findings) u
                JOIN turns t ON t.session_id = u.session_id AND t.turn_id = u.turn_id AND t.usage_counted)
            SELECT count(DISTINCT session_id),
                   (SELECT count(*) FROM (SELECT DISTINCT session_id, unnest(call_ids) FROM _r_findings)),
                   CASE WHEN count(turn_ids) = count(*) AND count(*) > 0 THEN (SELECT coalesce(tokens, 0) FROM dedup)
                        ELSE coalesce(sum(wasted_tokens), 0) END,
                   CASE WHEN count(turn_ids) = count(*) AND count(*) > 0 THEN (SELECT coalesce(cost, 0) FROM dedup)
                        ELSE coalesce(sum(cost_usd), 0) END,
                   coalesce(sum(estimated_tokens) FILTER (WHERE coalesce(wasted_tokens, 0) = 0), 0)
            FROM _r_findings""")
        assert row is not None
        loops = row
    return Totals(int(s[0]), int(s[1]), int(s[2]), float(s[3]), int(loops[0]), int(loops[1]), int(loops[2]),
                  float(loops[3]), int(loops[4]))


def findings(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every finding in scope with its session's format, project (cwd), model and day."""
    return frame(con, "SELECT * FROM _r_findings ORDER BY session_id, first_seq, finding_id")


def loop_sessions(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Sessions with at least one finding, worst (most wasted tokens) first."""
    return frame(con, """
        SELECT s.session_id, s.format, s.cwd, s.started_at, s.calls, s.total_tokens, s.cost_usd,
               count(*) AS episodes, count(*) FILTER (WHERE f.stuck) AS stuck_episodes,
               coalesce(sum(f.wasted_tokens), 0) AS wasted_tokens,
               coalesce(sum(f.estimated_tokens), 0) AS estimated_tokens,
               coalesce(sum(f.cost_usd), 0) AS loop_cost_usd
        FROM _r_findings f JOIN _r_sessions s USING (session_id)
        GROUP BY ALL
        ORDER BY wasted_tokens DESC, estimated_tokens DESC, s.session_id""")


def ingest_errors(con: duckdb.DuckDBPyConnection, limit: int) -> tuple[int, pl.DataFrame]:
    """All ingest errors are shown whatever the filter: they belong to files, not to sessions."""
    row = one(con, "SELECT count(*) FROM ingest_errors")
    n = int(row[0]) if row else 0
    df = frame(con, f"SELECT path, line, reason, excerpt FROM ingest_errors ORDER BY path, line NULLS FIRST "
                    f"LIMIT {int(limit)}")
    return n, df


def skipped_files(con: duckdb.DuckDBPyConnection, limit: int) -> tuple[int, pl.DataFrame]:
    """Files found but not read (unknown format, binary, empty, read with another file), with the reason; like ingest
    errors they belong to files, so no session filter applies."""
    row = one(con, "SELECT count(*) FROM files WHERE status = 'skipped'")
    n = int(row[0]) if row else 0
    return n, frame(con, f"SELECT path, reason FROM files WHERE status = 'skipped' ORDER BY path LIMIT {int(limit)}")


def _ids_table(con: duckdb.DuckDBPyConnection, ids: Sequence[str]) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE _r_batch (session_id VARCHAR)")
    con.executemany("INSERT INTO _r_batch VALUES (?)", [[i] for i in ids])


def session_batch(con: duckdb.DuckDBPyConnection, ids: Sequence[str]) -> dict[str, pl.DataFrame]:
    """Everything the session pages of ``ids`` need, in a handful of queries for the whole batch:

    - ``sessions``: the session rows;
    - ``calls``: every call, without text (the timeline);
    - ``turns``: assistant turns with counted usage (cumulative tokens) and which call they end at;
    - ``findings``: the batch's findings;
    - ``episode_calls``: the calls named by the findings, with clipped args and result text;
    - ``texts``: clipped text of the looping assistant messages of text findings, with their ``finding_id``.
    """
    _ids_table(con, ids)
    out: dict[str, pl.DataFrame] = {}
    out["sessions"] = frame(con, "SELECT s.* EXCLUDE (file_id) FROM _r_sessions s JOIN _r_batch USING (session_id)")
    out["calls"] = frame(con, """
        SELECT c.session_id, c.seq, c.call_id, c.turn_id, c.user_turn, c.tool, c.is_error
        FROM calls c JOIN _r_batch USING (session_id) ORDER BY c.session_id, c.seq""")
    out["turns"] = frame(con, """
        SELECT t.session_id, t.turn_index, t.turn_id, t.model,
               CASE WHEN t.usage_counted THEN coalesce(t.total_tokens, 0) ELSE 0 END AS tokens, m.last_seq
        FROM turns t JOIN _r_batch USING (session_id)
        LEFT JOIN (SELECT c.session_id, c.turn_id, max(c.seq) AS last_seq
                   FROM calls c JOIN _r_batch USING (session_id) GROUP BY ALL) m
               ON m.session_id = t.session_id AND m.turn_id = t.turn_id
        WHERE t.role = 'assistant'
        ORDER BY t.session_id, t.turn_index""")
    out["findings"] = frame(con, """
        SELECT f.* FROM _r_findings f JOIN _r_batch USING (session_id)
        ORDER BY f.session_id, f.first_seq, f.finding_id""")
    out["episode_calls"] = frame(con, f"""
        WITH wanted AS (
            SELECT DISTINCT f.session_id, unnest(f.call_ids) AS call_id, f.first_seq, f.last_seq
            FROM _r_findings f JOIN _r_batch USING (session_id))
        SELECT DISTINCT c.session_id, c.seq, c.call_id, c.turn_id, c.tool, c.call_key, c.result_key, c.is_error,
               left(c.args, {TEXT_CLIP}) AS args, length(c.args) AS args_len,
               left(c.result_text, {TEXT_CLIP}) AS result_text, length(c.result_text) AS result_len
        FROM calls c JOIN wanted w
          ON c.session_id = w.session_id AND c.call_id = w.call_id AND c.seq BETWEEN w.first_seq AND w.last_seq
        ORDER BY c.session_id, c.seq""")
    # The messages of text loops: named by text_signals when the scan recorded them, else the messages that issued
    # the finding's calls.
    by_calls = """
        SELECT DISTINCT w.finding_id, w.session_id, c.turn_id
        FROM (SELECT f.finding_id, f.session_id, unnest(f.call_ids) AS call_id
              FROM _r_findings f JOIN _r_batch USING (session_id) WHERE f.kind = 'text') w
        JOIN calls c USING (session_id, call_id)"""
    if "finding_id" in _columns(con, "text_signals"):
        looping = f"""
            WITH named AS (
                SELECT DISTINCT x.finding_id, x.session_id, x.turn_id
                FROM text_signals x JOIN _r_batch USING (session_id)
                WHERE x.finding_id IN (SELECT finding_id FROM _r_findings f JOIN _r_batch USING (session_id)
                                       WHERE f.kind = 'text'))
            SELECT * FROM named
            UNION ALL
            SELECT * FROM ({by_calls}) b WHERE b.finding_id NOT IN (SELECT finding_id FROM named)"""
    else:
        looping = by_calls
    out["texts"] = frame(con, f"""
        SELECT l.finding_id, t.session_id, t.turn_id, t.turn_index,
               left(t.text, {TEXT_CLIP}) AS text, length(t.text) AS text_len
        FROM ({looping}) l JOIN turns t ON t.session_id = l.session_id AND t.turn_id = l.turn_id
        WHERE t.role = 'assistant'
        ORDER BY t.session_id, t.turn_index""")
    return out


class ReportData:
    """What the report reads from the store, for the sessions ``flt`` selects: the report renders from this object
    and never touches the store itself. Opening it materialises the scope (``_r_sessions``, ``_r_findings``)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, flt: SessionFilter = SessionFilter()) -> None:
        self.con = con
        self.filter = flt
        self.scope = prepare(con, flt)

    def totals(self) -> Totals:
        return totals(self.con, self.scope)

    def findings(self) -> pl.DataFrame:
        return findings(self.con)

    def loop_sessions(self) -> pl.DataFrame:
        return loop_sessions(self.con)

    def ingest_errors(self, limit: int) -> tuple[int, pl.DataFrame]:
        return ingest_errors(self.con, limit)

    def skipped_files(self, limit: int) -> tuple[int, pl.DataFrame]:
        """How many files were skipped, and the first ``limit`` of them (``path``, ``reason``)."""
        return skipped_files(self.con, limit)

    def session_ids(self) -> pl.DataFrame:
        """The ``session_id`` of every session in scope."""
        return frame(self.con, "SELECT session_id FROM _r_sessions")

    def session_batch(self, ids: Sequence[str]) -> dict[str, pl.DataFrame]:
        return session_batch(self.con, ids)
