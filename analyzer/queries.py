"""Read-side queries over the store, returned as polars frames for the CLI and the reports."""

from __future__ import annotations

import duckdb
import polars as pl

from .filters import SessionFilter
from .store import frame

SESSION_TABLE_COLUMNS = [
    "session_id", "format", "started_at", "cwd", "models", "user_turns", "calls", "error_calls", "total_tokens",
    "cost_usd",
]


def sessions(con: duckdb.DuckDBPyConnection, flt: SessionFilter = SessionFilter(), limit: int | None = None) -> pl.DataFrame:
    where, params = flt.where("s")
    sql = f"SELECT s.* EXCLUDE (file_id) FROM sessions s WHERE {where} ORDER BY s.cost_usd DESC, s.total_tokens DESC, s.session_id"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return frame(con, sql, params)
