"""The ``Store``: one object for the DuckDB file, as sqlite-utils has ``Database``. It opens the file the one way every
command opens it (so a missing, locked, corrupt or foreign file gives the same one-line error everywhere), closes it
as a context manager, and answers the read-side questions the CLI and the report ask."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from analyzer.store import db
from analyzer.store.filters import SessionFilter

if TYPE_CHECKING:
    import duckdb
    import polars as pl


class Store:
    """``with Store(path, read_only=True) as store: store.sessions(flt)``."""

    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.con: duckdb.DuckDBPyConnection = db.connect(self.path, read_only=read_only)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()

    def has_table(self, name: str) -> bool:
        return db.has_table(self.con, name)

    def frame(self, sql: str, params: Sequence[object] | None = None) -> "pl.DataFrame":
        return db.frame(self.con, sql, params)

    def one(self, sql: str, params: Sequence[object] | None = None) -> tuple | None:
        return db.one(self.con, sql, params)

    def sessions(self, flt: SessionFilter = SessionFilter(), limit: int | None = None) -> "pl.DataFrame":
        from analyzer.store import queries

        return queries.sessions(self.con, flt, limit)

    def findings(self, flt: SessionFilter = SessionFilter(), **kw: Any) -> "pl.DataFrame":
        from analyzer.store import queries

        return queries.findings(self.con, flt, **kw)

    def summary(self, flt: SessionFilter = SessionFilter()) -> "dict[str, pl.DataFrame]":
        from analyzer.store import queries

        return queries.summary(self.con, flt)
