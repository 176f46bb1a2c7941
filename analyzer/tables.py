"""How a table is declared, and every type map, once: a column is a name, a SQL type and a doc line; Arrow (bulk
loads, the ingest spool) and polars (the vectorised scan) types are looked up here from the SQL type.

The store's tables are declared in ``store/schema.py``; the detector's output tables in ``detect/rules.py``. The
README's schema section is generated from those declarations (``store/schema_doc.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

SQL_TYPES = ("VARCHAR", "BIGINT", "INTEGER", "DOUBLE", "BOOLEAN", "TIMESTAMP", "VARCHAR[]")


def arrow_type(sql: str) -> pa.DataType:
    """The Arrow type a SQL column is loaded from (pyarrow is imported only by bulk loads)."""
    import pyarrow as pa

    return {
        "VARCHAR": pa.large_string(),
        "BIGINT": pa.int64(),
        "INTEGER": pa.int32(),
        "DOUBLE": pa.float64(),
        "BOOLEAN": pa.bool_(),
        "TIMESTAMP": pa.timestamp("us"),
        "VARCHAR[]": pa.list_(pa.large_string()),
    }[sql]


def polars_type(sql: str) -> pl.DataType:
    """The polars type of a SQL column, to shape frames like the tables they land in."""
    import polars as pl

    return {
        "VARCHAR": pl.String(),
        "BIGINT": pl.Int64(),
        "INTEGER": pl.Int32(),
        "DOUBLE": pl.Float64(),
        "BOOLEAN": pl.Boolean(),
        "TIMESTAMP": pl.Datetime("us"),
        "VARCHAR[]": pl.List(pl.String()),
    }[sql]


COMPRESSIONS = ("zstd",)
"""Compressions a column may ask for instead of DuckDB's own choice (``Column.compression``)."""


@dataclass(frozen=True)
class Column:
    name: str
    sql: str
    doc: str
    # DuckDB's compression for the column in a store (``USING COMPRESSION``), when its own choice is the wrong one;
    # None: DuckDB picks per segment.
    compression: str | None = None

    def __post_init__(self) -> None:
        assert self.sql in SQL_TYPES, f"{self.name}: unknown SQL type {self.sql}"
        assert self.compression in (None, *COMPRESSIONS), f"{self.name}: unknown compression {self.compression}"

    @property
    def ddl(self) -> str:
        using = f" USING COMPRESSION {self.compression}" if self.compression else ""
        return f'"{self.name}" {self.sql}{using}'  # quoted: a column may be a keyword

    @property
    def arrow(self) -> pa.DataType:
        return arrow_type(self.sql)

    @property
    def polars(self) -> pl.DataType:
        return polars_type(self.sql)


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]

    def ddl(self) -> str:
        cols = ",\n  ".join(c.ddl for c in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {cols}\n)"

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def polars_schema(self) -> dict[str, Any]:
        return {c.name: c.polars for c in self.columns}


def table(name: str, doc: str, *cols: tuple[str, str, str] | tuple[str, str, str, str]) -> Table:
    return Table(name, doc, tuple(Column(*c) for c in cols))
