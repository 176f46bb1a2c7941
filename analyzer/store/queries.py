"""Read-side queries over the store, returned as polars frames for the CLI and the reports."""

from __future__ import annotations

import duckdb
import polars as pl

from analyzer.detect.rules import FINDINGS, KINDS, WAITING
from analyzer.errors import UsageError
from analyzer.store.connection import frame, has_table
from analyzer.store.filters import SessionFilter

# The compact table views (they fit a 100-column terminal and lead with money); `--columns` and `--all-columns`
# choose others, and the machine formats carry every column.
SESSION_TABLE_COLUMNS = ["session_id", "format", "project", "cost_usd", "wasted_usd", "loops", "loop"]
FINDING_TABLE_COLUMNS = ["session_id", "kind", "calls", "repeats", "stuck", "cost_usd", "loop"]  # and `why` by name

# Per-session loop columns `loopscope sessions` adds (NULL for a session that was never scanned).
SESSION_LOOP_COLUMNS = {
    "loops": "Findings (loop episodes) in the session.",
    "stuck_loops": "Findings whose repeats made no progress.",
    "wasted_tokens": "Tokens of the turns that repeated a stuck loop (each turn once across the session's findings).",
    "wasted_usd": "Cost of those turns: the money stuck loops wasted.",
    "progress_repeat_tokens": "Tokens of the turns that repeated a loop that made progress (a poll whose result "
    "changed, edits that succeeded): repeats, not waste. Waiting on a running process is neither (`summary`'s "
    "`waiting_tokens`).",
    "loop_estimated_tokens": "Sum of the stuck findings' estimated_tokens (for transcripts without usage).",
}


def _loop_labels(con: duckdb.DuckDBPyConnection, source: str, params: list) -> pl.DataFrame:
    """``finding_id``, ``session_id``, ``stuck``, ``repeats`` and ``loop`` (the repeated call, or a cycle's block, as
    one line: ``Bash: pytest -q ×4``) of the findings ``source`` selects."""
    from analyzer.calltext import loop_text

    df = frame(
        con,
        f"""
        SELECT f.finding_id, f.session_id, f.stuck, f.repeats, f.kind,
               list(c.tool ORDER BY c.seq) FILTER (WHERE c.seq IS NOT NULL) AS c_tools,
               list(left(c.args, 400) ORDER BY c.seq) FILTER (WHERE c.seq IS NOT NULL) AS c_args
        FROM ({source}) f
        LEFT JOIN calls c ON c.session_id = f.session_id AND f.first_seq IS NOT NULL
             AND c.seq BETWEEN f.first_seq AND f.first_seq + greatest(coalesce(f.period, 1), 1) - 1
        GROUP BY ALL""",
        params,
    )
    labels = [
        loop_text(t or [], a or [], r)
        for t, a, r in zip(df["c_tools"].to_list(), df["c_args"].to_list(), df["repeats"].to_list())
    ]
    return df.drop("c_tools", "c_args").with_columns(pl.Series("loop", labels, dtype=pl.String))


def _main_loops(labels: pl.DataFrame) -> pl.DataFrame:
    """Per session, the loop a person would look at first: stuck before progress, then the most repeats."""
    if labels.height == 0:
        return pl.DataFrame(schema={"session_id": pl.String, "loop": pl.String})
    return (
        labels.sort(["stuck", "repeats"], descending=True, nulls_last=True)
        .group_by("session_id", maintain_order=True)
        .first()
        .select("session_id", "loop")
    )


def _wasted_turns(source: str, group: str | None, stuck: bool = True, waiting: bool = False) -> str:
    """SQL: the counted usage of the distinct repeat turns of the stuck findings in ``source`` (``stuck=False``: of
    the findings that made progress, less the turns a stuck finding already counts; ``waiting``: of the ``waiting``
    findings, less those turns too), per ``group`` column (or in all). Findings can share a turn (two loops issued
    from one message); summing their tokens would count it twice. Waiting is neither waste nor progress: its own
    figure."""
    g = f"{group}, " if group and group != "session_id" else ""
    if waiting:
        stuck, which = False, f"kind = '{WAITING}'"
    else:
        which = "stuck" if stuck else f"NOT stuck AND kind <> '{WAITING}'"
    turns = f"SELECT DISTINCT {g}session_id, unnest(turn_ids) AS turn_id FROM {source} WHERE {which}"
    if not stuck:
        turns = (
            f"SELECT * FROM ({turns}) p WHERE NOT EXISTS (SELECT 1 FROM (SELECT session_id, unnest(turn_ids) "
            f"AS turn_id FROM {source} WHERE stuck) q WHERE q.session_id = p.session_id "
            f"AND q.turn_id = p.turn_id)"
        )
    return f"""
        SELECT {f"w.{group}, " if group else ""}sum(t.total_tokens) AS tokens, sum(coalesce(t.cost_usd, 0)) AS cost
        FROM ({turns}) w
        JOIN turns t ON t.session_id = w.session_id AND t.turn_id = w.turn_id AND t.usage_counted
        {f"GROUP BY w.{group}" if group else ""}
    """


def sessions(
    con: duckdb.DuckDBPyConnection, flt: SessionFilter = SessionFilter(), limit: int | None = None
) -> pl.DataFrame:
    where, params = flt.where("s")
    if has_table(con, "scan_state") and has_table(con, "findings"):
        sql = f"""
            WITH f AS (SELECT * FROM findings WHERE session_id IN (SELECT session_id FROM sessions s WHERE {where})),
            agg AS (SELECT session_id, count(*) AS loops, count(*) FILTER (WHERE stuck) AS stuck_loops,
                           sum(estimated_tokens) FILTER (WHERE stuck) AS est FROM f GROUP BY session_id),
            wasted AS ({_wasted_turns("f", "session_id")}),
            progress AS ({_wasted_turns("f", "session_id", stuck=False)})
            SELECT s.* EXCLUDE (file_id),
                   CASE WHEN st.session_id IS NULL THEN NULL ELSE coalesce(agg.loops, 0) END::INTEGER AS loops,
                   CASE WHEN st.session_id IS NULL THEN NULL ELSE coalesce(agg.stuck_loops, 0) END::INTEGER
                       AS stuck_loops,
                   CASE WHEN st.session_id IS NULL THEN NULL ELSE coalesce(wasted.tokens, 0) END::BIGINT
                       AS wasted_tokens,
                   CASE WHEN st.session_id IS NULL THEN NULL ELSE coalesce(wasted.cost, 0) END::DOUBLE
                       AS wasted_usd,
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
        scanned = True
    else:
        scanned = False
        nulls = ", ".join(
            f"NULL::{'BIGINT' if 'tokens' in c else 'DOUBLE' if 'usd' in c else 'INTEGER'} AS {c}"
            for c in SESSION_LOOP_COLUMNS
        )
        sql = (
            f"SELECT s.* EXCLUDE (file_id), {nulls} FROM sessions s WHERE {where} "
            "ORDER BY s.cost_usd DESC, s.total_tokens DESC, s.session_id"
        )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    df = frame(con, sql, params)
    df = df.with_columns(pl.col("cwd").map_elements(_project, return_dtype=pl.String).alias("project"))
    if df.height:
        src = frame(
            con,
            """
            SELECT session_id, list(DISTINCT cost_source ORDER BY cost_source) AS cost_sources FROM turns
            WHERE usage_counted AND cost_source IS NOT NULL GROUP BY ALL""",
        )
        df = df.join(src, on="session_id", how="left", maintain_order="left")
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.List(pl.String)).alias("cost_sources"))
    if scanned and df.height:
        ids = df["session_id"].to_list()
        con.execute("CREATE OR REPLACE TEMP TABLE _q_ids (session_id VARCHAR)")
        con.executemany("INSERT INTO _q_ids VALUES (?)", [[i] for i in ids])
        try:
            main = _main_loops(
                _loop_labels(con, "SELECT * FROM findings WHERE session_id IN (SELECT session_id FROM _q_ids)", [])
            )
        finally:
            con.execute("DROP TABLE IF EXISTS _q_ids")
        df = df.join(main, on="session_id", how="left")
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("loop"))
    return df


def _project(cwd: str | None) -> str | None:
    """The project as people name it: the last part of the working directory."""
    if not cwd:
        return None
    return cwd.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1] or cwd


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
    sql = (
        f"SELECT {cols} FROM findings f JOIN sessions s ON s.session_id = f.session_id "
        f"WHERE {' AND '.join(conds)} "
        "ORDER BY s.started_at NULLS LAST, f.session_id, f.user_turn, coalesce(f.first_seq, -1), "
        "f.first_turn_index, f.kind"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    df = frame(con, sql, params)
    if df.height == 0:
        return df.with_columns(
            pl.lit(None, dtype=pl.String).alias("calls"), pl.lit(None, dtype=pl.String).alias("loop")
        )
    ids = df["finding_id"].to_list()
    con.execute("CREATE OR REPLACE TEMP TABLE _q_f (finding_id VARCHAR)")
    con.executemany("INSERT INTO _q_f VALUES (?)", [[i] for i in ids])
    try:
        labels = _loop_labels(con, "SELECT * FROM findings WHERE finding_id IN (SELECT finding_id FROM _q_f)", [])
    finally:
        con.execute("DROP TABLE IF EXISTS _q_f")
    # Calls numbered from 1, as a person counts them (the store's seq is 0-based).
    calls = (
        pl.when(pl.col("first_seq").is_null())
        .then(pl.lit("—"))
        .otherwise(pl.format("#{}–#{}", pl.col("first_seq") + 1, pl.col("last_seq") + 1))
    )
    return df.with_columns(calls.alias("calls")).join(
        labels.select("finding_id", "loop"), on="finding_id", how="left", maintain_order="left"
    )


def summary(con: duckdb.DuckDBPyConnection, flt: SessionFilter = SessionFilter()) -> dict[str, pl.DataFrame]:
    """Corpus totals (one row), loops by kind and loops by tool, over the sessions the filter selects."""
    _need_findings(con)
    where, params = flt.where("s")
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _sum_s AS SELECT s.session_id, s.total_tokens, s.cost_usd,
                        s.session_id IN (SELECT session_id FROM scan_state) AS scanned
                    FROM sessions s WHERE {where}""",
        params,
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _sum_f AS SELECT f.* FROM findings f "
        "WHERE f.session_id IN (SELECT session_id FROM _sum_s)"
    )
    # Tool names that differ only by an agent's convention (Bash/bash) count as one tool; `names` keeps each
    # agent's own spelling.
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _sum_ft AS SELECT f.*, lower(trim(u.tool)) AS tool, u.tool AS tool_name "
        "FROM _sum_f f, (SELECT DISTINCT unnest(f.tools) AS tool) u"
    )
    try:
        totals = frame(
            con,
            f"""
            WITH w AS ({_wasted_turns("_sum_f", None)}),
            pr AS ({_wasted_turns("_sum_f", None, stuck=False)}),
            wt AS ({_wasted_turns("_sum_f", None, waiting=True)}),
            s AS (SELECT count(*) AS sessions, count(*) FILTER (WHERE scanned) AS scanned_sessions,
                         coalesce(sum(total_tokens), 0) AS total_tokens, coalesce(sum(cost_usd), 0) AS total_cost
                  FROM _sum_s),
            f AS (SELECT count(DISTINCT session_id) AS with_loops, count(*) AS loops,
                         count(*) FILTER (WHERE stuck) AS stuck_loops,
                         count(*) FILTER (WHERE kind = '{WAITING}') AS waits,
                         coalesce(sum(len(call_ids)), 0) AS loop_calls,
                         coalesce(sum(estimated_tokens) FILTER (WHERE stuck), 0) AS est FROM _sum_f)
            SELECT s.sessions::BIGINT AS sessions, s.scanned_sessions::BIGINT AS scanned_sessions,
                   f.with_loops::BIGINT AS sessions_with_loops, f.loops::BIGINT AS loops,
                   f.stuck_loops::BIGINT AS stuck_loops, f.waits::BIGINT AS waits,
                   f.loop_calls::BIGINT AS loop_calls,
                   s.total_tokens::BIGINT AS total_tokens,
                   coalesce((SELECT tokens FROM w), 0)::BIGINT AS wasted_tokens,
                   coalesce((SELECT tokens FROM w), 0) / nullif(s.total_tokens, 0) AS wasted_token_share,
                   coalesce((SELECT tokens FROM pr), 0)::BIGINT AS progress_repeat_tokens,
                   s.total_cost::DOUBLE AS total_cost_usd,
                   coalesce((SELECT cost FROM w), 0)::DOUBLE AS wasted_usd,
                   coalesce((SELECT cost FROM w), 0) / nullif(s.total_cost, 0) AS wasted_cost_share,
                   coalesce((SELECT cost FROM pr), 0)::DOUBLE AS progress_repeat_cost_usd,
                   coalesce((SELECT tokens FROM wt), 0)::BIGINT AS waiting_tokens,
                   coalesce((SELECT cost FROM wt), 0)::DOUBLE AS waiting_cost_usd,
                   f.est::BIGINT AS estimated_tokens
            FROM s, f
        """,
        )
        by_kind = _grouped(con, "_sum_f", "kind")
        by_tool = _grouped(con, "_sum_ft", "tool")
        names = frame(
            con, "SELECT tool, list(DISTINCT tool_name ORDER BY tool_name) AS names FROM _sum_ft GROUP BY tool"
        )
        by_tool = by_tool.join(names, on="tool", how="left", maintain_order="left")
    finally:
        for t in ("_sum_s", "_sum_f", "_sum_ft"):
            con.execute(f"DROP TABLE IF EXISTS {t}")
    return {"totals": totals, "by_kind": by_kind, "by_tool": by_tool}


def _grouped(con: duckdb.DuckDBPyConnection, source: str, col: str) -> pl.DataFrame:
    return frame(
        con,
        f"""
        WITH w AS ({_wasted_turns(source, col)}), pr AS ({_wasted_turns(source, col, stuck=False)}),
        wt AS ({_wasted_turns(source, col, waiting=True)})
        SELECT g.{col}, g.loops::BIGINT AS loops, g.stuck_loops::BIGINT AS stuck_loops,
               g.sessions::BIGINT AS sessions, g.loop_calls::BIGINT AS loop_calls,
               coalesce(w.tokens, 0)::BIGINT AS wasted_tokens, coalesce(w.cost, 0)::DOUBLE AS wasted_usd,
               coalesce(pr.tokens, 0)::BIGINT AS progress_repeat_tokens,
               coalesce(wt.tokens, 0)::BIGINT AS waiting_tokens, coalesce(wt.cost, 0)::DOUBLE AS waiting_usd,
               g.est::BIGINT AS estimated_tokens
        FROM (SELECT {col}, count(*) AS loops, count(*) FILTER (WHERE stuck) AS stuck_loops,
                     count(DISTINCT session_id) AS sessions, sum(len(call_ids)) AS loop_calls,
                     sum(estimated_tokens) FILTER (WHERE stuck) AS est
              FROM {source} GROUP BY {col}) g
        LEFT JOIN w ON w.{col} = g.{col}
        LEFT JOIN pr ON pr.{col} = g.{col}
        LEFT JOIN wt ON wt.{col} = g.{col}
        ORDER BY wasted_tokens DESC, loops DESC, g.{col}
    """,
    )
