"""Read-side queries over the store, returned as polars frames for the CLI and the reports."""

from __future__ import annotations

import duckdb
import polars as pl

from analyzer.errors import UsageError
from analyzer.store.filters import SessionFilter
from analyzer.detect.rules import FINDINGS, KINDS
from analyzer.store.db import frame, has_table

SESSION_TABLE_COLUMNS = [
    "session_id", "format", "started_at", "cwd", "models", "user_turns", "calls", "error_calls", "total_tokens",
    "cost_usd", "loops", "wasted_tokens",
]
FINDING_TABLE_COLUMNS = [
    "session_id", "kind", "period", "repeats", "stuck", "first_seq", "last_seq", "tools", "wasted_tokens",
    "cost_usd", "why",
]

# Per-session loop columns `loopscope sessions` adds (NULL for a session that was never scanned).
SESSION_LOOP_COLUMNS = {
    "loops": "Findings (loop episodes) in the session.",
    "stuck_loops": "Findings whose repeats made no progress.",
    "wasted_tokens": "Tokens of the turns that repeated a stuck loop (each turn once across the session's findings).",
    "wasted_cost_usd": "Cost of those turns.",
    "progress_repeat_tokens": "Tokens of the turns that repeated a loop that made progress (a poll whose result "
                              "changed, edits that succeeded): repeats, not waste.",
    "loop_estimated_tokens": "Sum of the stuck findings' estimated_tokens (for transcripts without usage).",
}


def _wasted_turns(source: str, group: str | None, stuck: bool = True) -> str:
    """SQL: the counted usage of the distinct repeat turns of the stuck findings in ``source`` (``stuck=False``: of
    the findings that made progress, less the turns a stuck finding already counts), per ``group`` column (or in
    all). Findings can share a turn (two loops issued from one message); summing their tokens would count it
    twice."""
    g = f"{group}, " if group and group != "session_id" else ""
    turns = f"SELECT DISTINCT {g}session_id, unnest(turn_ids) AS turn_id FROM {source} WHERE {'' if stuck else 'NOT '}stuck"
    if not stuck:
        turns = (f"SELECT * FROM ({turns}) p WHERE NOT EXISTS (SELECT 1 FROM (SELECT session_id, unnest(turn_ids) "
                 f"AS turn_id FROM {source} WHERE stuck) q WHERE q.session_id = p.session_id "
                 f"AND q.turn_id = p.turn_id)")
    return f"""
        SELECT {f"w.{group}, " if group else ""}sum(t.total_tokens) AS tokens, sum(coalesce(t.cost_usd, 0)) AS cost
        FROM ({turns}) w
        JOIN turns t ON t.session_id = w.session_id AND t.turn_id = w.turn_id AND t.usage_counted
        {f"GROUP BY w.{group}" if group else ""}
    """


def sessions(con: duckdb.DuckDBPyConnection, flt: SessionFilter = SessionFilter(), limit: int | None = None) -> pl.DataFrame:
    where, params = flt.where("s")
    if has_table(con, "scan_state") and has_table(con, "findings"):
        sql = f"""
            WITH f AS (SELECT * FROM findings WHERE session_id IN (SELECT session_id FROM sessions s WHERE {where})),
            agg AS (SELECT session_id, count(*) AS loops, count(*) FILTER (WHERE stuck) AS stuck_loops,
                           sum(estimated_tokens) FILTER (WHERE stuck) AS est FROM f GROUP BY session_id),
            wasted AS ({_wasted_turns('f', 'session_id')}),
            progress AS ({_wasted_turns('f', 'session_id', stuck=False)})
            SELECT s.* EXCLUDE (file_id),
                   CASE WHEN st.session_id IS NULL THEN NULL ELSE coalesce(agg.loops, 0) END::INTEGER AS loops,
                   CASE WHEN st.session_id IS NULL THEN NULL ELSE coalesce(agg.stuck_loops, 0) END::INTEGER
                       AS stuck_loops,
                   CASE WHEN st.session_id IS NULL THEN NULL ELSE coalesce(wasted.tokens, 0) END::BIGINT
                       AS wasted_tokens,
                   CASE WHEN st.session_id IS NULL THEN NULL ELSE coalesce(wasted.cost, 0) END::DOUBLE
                       AS wasted_cost_usd,
                   CASE WHEN st.session_id IS NULL THEN NULL ELSE coalesce(progress.tokens, 0) END::BIGINT
                       AS progress_repeat_tokens,
                   CASE WHEN st.session_id IS NULL THEN NULL ELSE coalesce(agg.est, 0) END::BIGINT
                       AS loop_estimated_tokens
            FROM sessions s
            LEFT JOIN scan_state st ON st.session_id = s.session_id
            LEFT JOIN agg ON agg.session_id = s.session_id
            LEFT JOIN wasted ON wasted.session_id = s.session_id
            LEFT JOIN progress ON progress.session_id = s.session_id
            WHERE {where}
            ORDER BY s.cost_usd DESC, s.total_tokens DESC, s.session_id
        """
        params = params + params
    else:
        nulls = ", ".join(f"NULL::{'BIGINT' if 'tokens' in c else 'DOUBLE' if 'usd' in c else 'INTEGER'} AS {c}"
                          for c in SESSION_LOOP_COLUMNS)
        sql = (f"SELECT s.* EXCLUDE (file_id), {nulls} FROM sessions s WHERE {where} "
               "ORDER BY s.cost_usd DESC, s.total_tokens DESC, s.session_id")
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return frame(con, sql, params)


def _need_findings(con: duckdb.DuckDBPyConnection) -> None:
    if not has_table(con, "findings"):
        raise UsageError("this store has no findings yet: run `loopscope scan` first")


def findings(
    con: duckdb.DuckDBPyConnection,
    flt: SessionFilter = SessionFilter(),
    kind: str | None = None,
    min_repeats: int | None = None,
    session: str | None = None,
    stuck: bool | None = None,
    limit: int | None = None,
) -> pl.DataFrame:
    """Findings in the order they happened (session start, then position in the session)."""
    _need_findings(con)
    where, params = flt.where("s")
    conds = [where]
    if kind is not None:
        k = kind.strip().lower()
        if k not in KINDS:
            raise UsageError(f"--kind: unknown kind {kind!r}; choose from {', '.join(KINDS)}")
        conds.append("f.kind = ?")
        params.append(k)
    if min_repeats is not None:
        conds.append("f.repeats >= ?")
        params.append(int(min_repeats))
    if session is not None:
        conds.append("f.session_id = ?")
        params.append(session)
    if stuck is not None:
        conds.append("f.stuck = ?")
        params.append(stuck)
    cols = ", ".join(f"f.{c}" for c in FINDINGS.names)
    sql = (f"SELECT {cols} FROM findings f JOIN sessions s ON s.session_id = f.session_id "
           f"WHERE {' AND '.join(conds)} "
           "ORDER BY s.started_at NULLS LAST, f.session_id, f.user_turn, coalesce(f.first_seq, -1), "
           "f.first_turn_index, f.kind")
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return frame(con, sql, params)


def summary(con: duckdb.DuckDBPyConnection, flt: SessionFilter = SessionFilter()) -> dict[str, pl.DataFrame]:
    """Corpus totals (one row), loops by kind and loops by tool, over the sessions the filter selects."""
    _need_findings(con)
    where, params = flt.where("s")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _sum_s AS SELECT s.session_id, s.total_tokens, s.cost_usd,
                        s.session_id IN (SELECT session_id FROM scan_state) AS scanned
                    FROM sessions s WHERE {where}""", params)
    con.execute("CREATE OR REPLACE TEMP TABLE _sum_f AS SELECT f.* FROM findings f "
                "WHERE f.session_id IN (SELECT session_id FROM _sum_s)")
    con.execute("CREATE OR REPLACE TEMP TABLE _sum_ft AS SELECT f.*, unnest(f.tools) AS tool FROM _sum_f f")
    try:
        totals = frame(con, f"""
            WITH w AS ({_wasted_turns('_sum_f', None)}),
            pr AS ({_wasted_turns('_sum_f', None, stuck=False)}),
            s AS (SELECT count(*) AS sessions, count(*) FILTER (WHERE scanned) AS scanned_sessions,
                         coalesce(sum(total_tokens), 0) AS total_tokens, coalesce(sum(cost_usd), 0) AS total_cost
                  FROM _sum_s),
            f AS (SELECT count(DISTINCT session_id) AS with_loops, count(*) AS loops,
                         count(*) FILTER (WHERE stuck) AS stuck_loops,
                         coalesce(sum(len(call_ids)), 0) AS loop_calls,
                         coalesce(sum(estimated_tokens) FILTER (WHERE stuck), 0) AS est FROM _sum_f)
            SELECT s.sessions::BIGINT AS sessions, s.scanned_sessions::BIGINT AS scanned_sessions,
                   f.with_loops::BIGINT AS sessions_with_loops, f.loops::BIGINT AS loops,
                   f.stuck_loops::BIGINT AS stuck_loops, f.loop_calls::BIGINT AS loop_calls,
                   s.total_tokens::BIGINT AS total_tokens,
                   coalesce((SELECT tokens FROM w), 0)::BIGINT AS wasted_tokens,
                   coalesce((SELECT tokens FROM w), 0) / nullif(s.total_tokens, 0) AS wasted_token_share,
                   coalesce((SELECT tokens FROM pr), 0)::BIGINT AS progress_repeat_tokens,
                   s.total_cost::DOUBLE AS total_cost_usd,
                   coalesce((SELECT cost FROM w), 0)::DOUBLE AS wasted_cost_usd,
                   coalesce((SELECT cost FROM w), 0) / nullif(s.total_cost, 0) AS wasted_cost_share,
                   coalesce((SELECT cost FROM pr), 0)::DOUBLE AS progress_repeat_cost_usd,
                   f.est::BIGINT AS estimated_tokens
            FROM s, f
        """)
        by_kind = _grouped(con, "_sum_f", "kind")
        by_tool = _grouped(con, "_sum_ft", "tool")
    finally:
        for t in ("_sum_s", "_sum_f", "_sum_ft"):
            con.execute(f"DROP TABLE IF EXISTS {t}")
    return {"totals": totals, "by_kind": by_kind, "by_tool": by_tool}


def _grouped(con: duckdb.DuckDBPyConnection, source: str, col: str) -> pl.DataFrame:
    return frame(con, f"""
        WITH w AS ({_wasted_turns(source, col)}), pr AS ({_wasted_turns(source, col, stuck=False)})
        SELECT g.{col}, g.loops::BIGINT AS loops, g.stuck_loops::BIGINT AS stuck_loops,
               g.sessions::BIGINT AS sessions, g.loop_calls::BIGINT AS loop_calls,
               coalesce(w.tokens, 0)::BIGINT AS wasted_tokens, coalesce(w.cost, 0)::DOUBLE AS wasted_cost_usd,
               coalesce(pr.tokens, 0)::BIGINT AS progress_repeat_tokens,
               g.est::BIGINT AS estimated_tokens
        FROM (SELECT {col}, count(*) AS loops, count(*) FILTER (WHERE stuck) AS stuck_loops,
                     count(DISTINCT session_id) AS sessions, sum(len(call_ids)) AS loop_calls,
                     sum(estimated_tokens) FILTER (WHERE stuck) AS est
              FROM {source} GROUP BY {col}) g
        LEFT JOIN w ON w.{col} = g.{col}
        LEFT JOIN pr ON pr.{col} = g.{col}
        ORDER BY wasted_tokens DESC, loops DESC, g.{col}
    """)
