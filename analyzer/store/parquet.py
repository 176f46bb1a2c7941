"""The store's tables as Parquet: ``loopscope export --format parquet DIR`` writes them, ``loopscope spark run``
writes the same layout, and ``loopscope report --from DIR`` reads either back through DuckDB views named like the
store's tables.

Layout: ``DIR/<table>/p_format=<format>/p_date=<YYYY-MM-DD>/*.parquet``. Every file holds the table's own columns, as
the store declares them (``store/schema.py``, ``detect/rules.py``); the partition keys are extra columns derived from
the session (its format and start date; ``unknown`` where there is none), so partition pruning works for Spark and
DuckDB alike and a reader that ignores them still sees the documented schema. ``files`` and ``ingest_errors`` are
partitioned by format only; the calibration tables are not partitioned.

``DIR`` may be a local path or any URL pyarrow's filesystem layer reads (``s3://bucket/prefix``, ``gs://...``,
``hdfs://...``, with that filesystem's usual credentials); only local paths are tested.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from analyzer.store.schema import ALL_TABLES, SCHEMA_VERSION
from analyzer.tables import Table

if TYPE_CHECKING:
    import pyarrow.dataset as pads

# The partition keys, as SQL over the row (``format``, ``started_at`` of its session) that DuckDB and Spark SQL both
# run: the export and the Spark path cannot disagree on where a row goes.
P_FORMAT = "coalesce(format, 'unknown')"
P_DATE = "coalesce(CAST(CAST(started_at AS DATE) AS STRING), 'unknown')"  # STRING: both dialects
PARTITION_KEYS = ("p_format", "p_date")


def partition_keys(table: str) -> tuple[str, ...]:
    """The partition columns of ``table`` in the Parquet layout."""
    if table in ("files", "ingest_errors"):
        return ("p_format",)
    if table.startswith("calibration_"):
        return ()
    return PARTITION_KEYS


def by_session(table: Table) -> bool:
    return "session_id" in table.names and table.name != "ingest_errors"


def export(con: duckdb.DuckDBPyConnection, out: str | Path) -> dict[str, int]:
    """Write every table of the store as Parquet under ``out``; rows per table."""
    from analyzer.store.connection import has_table, one

    out = str(out).rstrip("/")
    Path(out).mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for t in ALL_TABLES:
        if not has_table(con, t.name):
            continue
        cols = ", ".join(f'x."{c}"' for c in t.names)
        keys = partition_keys(t.name)
        if t.name == "sessions":
            src = f"SELECT {cols}, {P_FORMAT} AS p_format, {P_DATE} AS p_date FROM sessions x"
        elif by_session(t):
            src = (
                f"SELECT {cols}, {P_FORMAT} AS p_format, {P_DATE} AS p_date FROM {t.name} x "
                f"LEFT JOIN (SELECT session_id AS _sid, format, started_at FROM sessions) s ON s._sid = x.session_id"
            )
        elif t.name == "files":
            src = f"SELECT {cols}, {P_FORMAT} AS p_format FROM files x"
        elif t.name == "ingest_errors":
            src = (
                f"SELECT {cols}, {P_FORMAT} AS p_format FROM ingest_errors x "
                f"LEFT JOIN (SELECT file_id AS _fid, format FROM files) f ON f._fid = x.file_id"
            )
        else:
            src = f"SELECT {cols} FROM {t.name} x"
        target = f"{out}/{t.name}"
        row = one(con, f"SELECT count(*) FROM {t.name}")
        counts[t.name] = int(row[0]) if row else 0
        if keys:
            con.execute(
                f"COPY ({src}) TO '{_q(target)}' (FORMAT parquet, PARTITION_BY ({', '.join(keys)}), "
                "OVERWRITE_OR_IGNORE)"
            )
        else:
            Path(target).mkdir(parents=True, exist_ok=True)
            con.execute(f"COPY ({src}) TO '{_q(target)}/part-0.parquet' (FORMAT parquet)")
    return counts


def _q(text: str) -> str:
    return text.replace("'", "''")


def _dataset(root: str, table: str) -> pads.Dataset | None:
    """The table's Parquet files under ``root`` (local path or filesystem URL), or None when there are none."""
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    fs, base = pafs.FileSystem.from_uri(root) if "://" in root else (pafs.LocalFileSystem(), str(Path(root).resolve()))
    path = f"{base.rstrip('/')}/{table}"
    info = fs.get_file_info(path)
    if info.type != pafs.FileType.Directory:
        return None
    d = ds.dataset(path, filesystem=fs, format="parquet", partitioning="hive")
    return d if d.files else None


def open_dir(root: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection whose views, named like the store's tables, read the Parquet tables under
    ``root``: the report (``ReportData``), replay and calibration read it as they read the store. A table with no
    files is an empty table of the declared schema."""
    from analyzer.errors import StoreError

    root = str(root)
    if "://" not in root and not Path(root).is_dir():
        raise StoreError(
            f"no Parquet results at {root}: run `loopscope export --format parquet` or `loopscope spark run` first"
        )
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TABLE loopscope_meta (key VARCHAR, value VARCHAR)")
    con.execute("INSERT INTO loopscope_meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
    found = 0
    for t in ALL_TABLES:
        d = _dataset(root, t.name)
        if d is None:
            con.execute(t.ddl())
            continue
        found += 1
        raw = f"_parquet_{t.name}"
        con.register(raw, d)
        have = set(d.schema.names)
        cols = ", ".join(
            (f'CAST("{c.name}" AS {c.sql})' if c.name in have else f"CAST(NULL AS {c.sql})") + f' AS "{c.name}"'
            for c in t.columns
        )
        con.execute(f"CREATE VIEW {t.name} AS SELECT {cols} FROM {raw}")
    if not found:
        con.close()
        raise StoreError(f"no loopscope tables under {root} (expected folders such as sessions/, calls/)")
    return con
