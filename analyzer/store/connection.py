"""The connection to the DuckDB store: opening it (one writer at a time, its schema created or checked), the helpers
every stage runs its SQL with (``one``, ``frame``, ``transaction``, ...), and DuckDB's errors as the library's own
(``store_errors``).

The library's one object is ``analyzer.library.Store``, which holds such a connection; the stages below it (ingest,
scan, replay, calibrate, the report's reads) take the connection itself. The store is a public contract: users
query it with SQL, so every table and column is documented (schema.py, README).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import duckdb

from analyzer.errors import StoreError, StoreInUseError
from analyzer.store.schema import ALL_TABLES, DERIVED_TABLES, KEYS_VERSION, SCHEMA_VERSION, old_keys

if TYPE_CHECKING:
    import polars as pl


DEFAULT_DB = "loopscope.duckdb"
T = TypeVar("T")


def default_db_path() -> Path:
    return Path(os.environ.get("LOOPSCOPE_DB") or DEFAULT_DB)


_LOCK = re.compile(r"Could not set lock|Conflicting lock|database is locked", re.I)


def connect(db: str | Path, read_only: bool = False, rebuild_old: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the store; a held lock becomes ``StoreInUseError``, anything else ``StoreError``. Creates the schema when
    opening for writing. A store older than ``KEYS_VERSION`` is emptied for a rebuild with ``rebuild_old`` (the
    ingest, which then reads the transcripts again), else refused (``old_store_message``). A newer one whose findings
    an older schema wrote (``scan_is_stale``) is refused for reading (``stale_scan_message``); opening it for writing
    drops the derived tables, which the scan rebuilds."""
    path = Path(db)
    if read_only and not path.exists():
        raise StoreError(f"no store at {path}: run `loopscope ingest` first (or pass --db)")
    if not read_only and path.parent and not path.parent.exists():
        raise StoreError(f"cannot create the store {path}: folder {path.parent} does not exist")
    if not read_only and not path.exists():
        _create(path)
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        msg = str(exc)
        if _LOCK.search(msg):
            pid = re.search(r"PID (\d+)", msg)
            who = f" by process {pid.group(1)}" if pid else ""
            raise StoreInUseError(f"store {path} is in use{who}; wait for it to finish and try again") from None
        raise StoreError(f"cannot open store {path}: {msg.splitlines()[0]}") from None
    except duckdb.Error as exc:
        raise StoreError(f"cannot open store {path}: {str(exc).splitlines()[0]}") from None
    try:
        con.execute("SET TimeZone = 'UTC'")
        # Row order in the tables carries no meaning (every query orders by seq/turn_index), and letting DuckDB
        # insert in parallel makes loading a chunk about a third faster.
        con.execute("SET preserve_insertion_order = false")
        _check_schema(con, path, read_only)
        version = stored_version(con)
        if version is not None and version < KEYS_VERSION and not rebuild_old:
            raise StoreError(old_store_message(path, version))
        if read_only and scan_is_stale(version):
            raise StoreError(stale_scan_message(path, version))  # type: ignore[arg-type]
        if not read_only:
            ensure_schema(con)
        _probe(con)
    except duckdb.Error as exc:
        con.close()
        raise StoreError(f"{path} is not a loopscope store (or it is damaged): {_first_line(exc)}") from None
    except StoreError:
        con.close()
        raise
    return con


def tune_for_bulk_load(con: duckdb.DuckDBPyConnection, whole_results: bool = False) -> None:
    """Settings for a long run of chunk transactions. Checkpointing at every commit (the default once the WAL passes
    16 MB) cost more than all the inserts; a checkpoint every 64 MB of WAL does not, now that long results are
    clipped, and it keeps the process flat: until a checkpoint the rows stay in memory, which grew the main process
    with the corpus (370 MB at 500 MB of transcripts with one checkpoint at the end; ~300 MB, flat, with this). The
    memory limit bounds the rest: a bulk load only appends, so the table blocks DuckDB would keep cached up to its
    limit are never read again (on 2.4 GB of transcripts the main process peaked at 453 MB with 256 MB, 328 MB with
    128 MB and 295 MB with 96 MB, the whole ingest at 945, 760 and 730 MB, for ~3% more CPU at 96 MB than at 128),
    and a huge file's single transaction spills to disk instead of growing the process past the budget (800 MB for
    the whole ingest). With ``whole_results`` (``ingest --full-results``) the transactions carry whole results and
    spill below 256 MB: 16.5 s of CPU at 256 MB, 20.6 s at 128 MB on 600 MB."""
    con.execute("SET checkpoint_threshold = '64MB'")
    con.execute(f"SET memory_limit = '{'256MB' if whole_results else '96MB'}'")


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


@contextmanager
def store_errors() -> Iterator[None]:
    """DuckDB's own errors (a disk full inside a transaction, a damaged page) raised in the block, as the library's
    ``StoreError``: one line, ``store: <DuckDB's first line>``. The library's own errors pass unchanged. Usable as a
    decorator too (``@store_errors()``)."""
    try:
        yield
    except duckdb.Error as exc:
        raise StoreError(f"store: {_first_line(exc)}") from None


def _create(path: Path) -> None:
    """Create a new store whole: the schema is written to a temporary file that is then renamed into place, so a run
    killed while creating it leaves no store rather than an empty DuckDB file that is not one."""
    tmp = path.with_name(f".{path.name}.creating-{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)
        con = duckdb.connect(str(tmp))
        try:
            ensure_schema(con)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        Path(f"{tmp}.wal").unlink(missing_ok=True)
        try:
            os.link(tmp, path)  # never replaces: a store another run created meanwhile is kept and opened
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not path.exists():
                os.rename(tmp, path)
        tmp.unlink(missing_ok=True)
    except (OSError, duckdb.Error) as exc:
        tmp.unlink(missing_ok=True)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else _first_line(exc)
        raise StoreError(f"cannot create the store {path}: {reason}") from None


def _check_schema(con: duckdb.DuckDBPyConnection, path: Path, read_only: bool) -> None:
    """A loopscope store has ``loopscope_meta``; any other DuckDB file (one with a ``sessions`` table of its own, say)
    is refused rather than read or written into. An empty file DuckDB made (a store whose creation was killed by an
    older loopscope) is taken as a new store when opened for writing."""
    row = one(con, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'loopscope_meta'")
    if row and row[0]:
        return
    others = one(con, "SELECT count(*) FROM information_schema.tables")
    if others and others[0]:
        raise StoreError(f"{path} is not a loopscope store: a DuckDB file with other tables (no loopscope_meta)")
    if read_only:
        raise StoreError(f"{path} is not a loopscope store (no loopscope_meta table)")


def _probe(con: duckdb.DuckDBPyConnection) -> None:
    """Read every table's row count, so a truncated or damaged file fails here, as one error, rather than in the
    middle of a command."""
    for table in ALL_TABLES:
        if has_table(con, table.name):
            con.execute(f"SELECT count(*) FROM {table.name}").fetchall()


def old_store_message(path: str | Path, version: int) -> str:
    """The one line that refuses a store whose keys this loopscope cannot mix with its own."""
    return (
        f"{path} was written by an older loopscope (store schema v{version}, {old_keys(version)}): rebuild it from the "
        f"transcripts with `loopscope ingest PATHS --db {path}` (or `loopscope analyze PATHS --db {path}`)"
    )


def stale_scan_message(path: str | Path, version: int) -> str:
    """The one line that refuses to read a store whose findings an older loopscope computed (its transcripts are
    kept; only the derived tables are rebuilt, by the next write)."""
    return (
        f"{path} was scanned by an older loopscope (store schema v{version}): its findings were made by older rules; "
        f"rebuild them with `loopscope scan --db {path}` (the transcripts it holds are kept)"
    )


def scan_is_stale(version: int | None) -> bool:
    """A store whose ingested tables this loopscope keeps but whose derived ones (findings, signals, calibration)
    an older schema wrote: its first write drops them, and the scan rebuilds them."""
    return version is not None and KEYS_VERSION <= version < SCHEMA_VERSION


def stored_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The store's schema version; None for a store being created."""
    if not has_table(con, "loopscope_meta"):
        return None
    row = one(con, "SELECT value FROM loopscope_meta WHERE key = 'schema_version'")
    return int(row[0]) if row is not None else None


def schema_version(db: str | Path) -> int | None:
    """The schema version of the store at ``db``; None when there is no store there (or it cannot be read: opening
    it properly says why)."""
    if not Path(db).exists():
        return None
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error:
        return None
    try:
        return stored_version(con)
    except (duckdb.Error, ValueError):
        return None
    finally:
        con.close()


def get_setting(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    """A setting the store keeps in ``loopscope_meta`` (None when never set)."""
    row = one(con, "SELECT value FROM loopscope_meta WHERE key = ?", [key])
    return row[0] if row else None


def set_setting(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    with transaction(con):
        con.execute("DELETE FROM loopscope_meta WHERE key = ?", [key])
        con.execute("INSERT INTO loopscope_meta VALUES (?, ?)", [key, value])


STORE_ID = "store_id"
"""The ``loopscope_meta`` key of the store's id: what a person's labels are kept under (the report's local storage,
the labels file's header), so that labels made on one store are not shown as another's."""


def derived_store_id(con: duckdb.DuckDBPyConnection) -> str | None:
    """The id of a store that has transcripts but was written before stores kept an id: a UUID derived from its first
    ``files`` row (``file_id`` and path, which no later ingest changes or removes), so that it is the same however
    often the store is read without being written, wherever the file is copied, and the id its next write records.
    None for a store without files."""
    if not has_table(con, "files"):
        return None
    row = one(con, "SELECT file_id, path FROM files ORDER BY file_id LIMIT 1")
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"loopscope-store:{row[0]}:{row[1]}")) if row else None


def store_id(con: duckdb.DuckDBPyConnection) -> str:
    """The store's id (``loopscope_meta`` key ``store_id``, a UUID recorded at the first write once the store holds
    files). Reading it never writes: a store without one yet gets ``derived_store_id`` (the one its next write
    keeps, and the one a Parquet export of it derives), and an empty store the nil UUID."""
    if has_table(con, "loopscope_meta"):
        row = one(con, "SELECT value FROM loopscope_meta WHERE key = ?", [STORE_ID])
        if row is not None and row[0]:
            return str(row[0])
    return derived_store_id(con) or str(uuid.UUID(int=0))


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE IF NOT EXISTS loopscope_meta (key VARCHAR, value VARCHAR)")
    row = one(con, "SELECT value FROM loopscope_meta WHERE key = 'schema_version'")
    if row is not None and int(row[0]) > SCHEMA_VERSION:
        raise StoreError(f"store schema v{row[0]} is newer than this loopscope (v{SCHEMA_VERSION}); upgrade loopscope")
    with transaction(con):
        if row is not None and int(row[0]) < SCHEMA_VERSION:
            # An older store. Before KEYS_VERSION its keys are not ours (another hash, no action keys): every
            # table goes (``connect`` only lets the ingest get here, and it reads the transcripts again). Otherwise
            # the ingested tables are unchanged; the derived ones are dropped and rebuilt by the next scan and
            # calibrate (their rows were computed by older rules anyway).
            old = int(row[0]) < KEYS_VERSION
            for table in ALL_TABLES if old else DERIVED_TABLES:
                con.execute(f"DROP TABLE IF EXISTS {table.name}")
            con.execute("UPDATE loopscope_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
        for table in ALL_TABLES:
            con.execute(table.ddl())
        if row is None:
            con.execute("INSERT INTO loopscope_meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        # The id is the one derived from the store's first file, recorded once the store has one: a report drawn from
        # the store's Parquet export (which has the files, not loopscope_meta's id) then derives the same id.
        derived = derived_store_id(con)
        if derived is not None and one(con, "SELECT value FROM loopscope_meta WHERE key = ?", [STORE_ID]) is None:
            con.execute("INSERT INTO loopscope_meta VALUES (?, ?)", [STORE_ID, derived])


def one(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[object] | None = None) -> tuple | None:
    """The first row of a query, with the result fully consumed (DuckDB 2 refuses new work on a connection while a
    result is still open)."""
    rows = con.execute(sql, list(params or [])).fetchall()
    return rows[0] if rows else None


def base_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The names of the store's own tables (not views: a Parquet export's tables are views over its files, and
    registered frames are neither)."""
    return {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND database_name = current_database()"
        ).fetchall()
    }


PLACES = "_places"
"""The temp table of where each session's rows lie (``record_places``)."""


def record_places(con: duckdb.DuckDBPyConnection) -> None:
    """``PLACES``: each session's first and last rowid in ``calls`` and in ``turns`` (NULL where it has none).
    Ingest writes a session's rows together, so sessions next to each other there are read from a few row groups
    when the read is bounded by their rowids (``rows_of``): DuckDB skips the row groups outside. Bounded by the
    session ids alone, every batch decompressed the whole table's session column, and a report's batch reads grew
    with the square of its sessions. One pass over each table's session column; none over a source whose tables are
    views (a Parquet export), which has no rowids: its reads stay unbounded."""
    tables = base_tables(con)

    def spans(table: str) -> str:
        if table in tables:
            return f"SELECT session_id, min(rowid) AS lo, max(rowid) AS hi FROM {table} GROUP BY session_id"
        return "SELECT NULL::VARCHAR AS session_id, NULL::BIGINT AS lo, NULL::BIGINT AS hi WHERE false"

    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE {PLACES} AS
        SELECT session_id, c.lo AS calls_lo, c.hi AS calls_hi, t.lo AS turns_lo, t.hi AS turns_hi
        FROM ({spans("calls")}) c FULL JOIN ({spans("turns")}) t USING (session_id)""")


def in_place_order(con: duckdb.DuckDBPyConnection, ids: Sequence[str]) -> list[str]:
    """``ids`` in the order of their rows (``PLACES``), so that a batch cut from it reads the fewest row groups."""
    return [
        r[0]
        for r in con.execute(
            f"SELECT session_id FROM unnest(?::VARCHAR[]) AS i(session_id) LEFT JOIN {PLACES} USING (session_id) "
            f"ORDER BY calls_lo NULLS LAST, turns_lo NULLS LAST, session_id",
            [list(ids)],
        ).fetchall()
    ]


def rows_of(
    con: duckdb.DuckDBPyConnection,
    table: str,
    sessions: str,
    params: Sequence[object] | None = None,
    alias: str | None = None,
) -> str:
    """A condition on ``table`` (``calls`` or ``turns``; named ``alias`` in the query, if given) true of every row of
    the sessions that ``sessions`` (a query of session ids) selects, which DuckDB checks against each row group's
    bounds: their rowids' span in ``PLACES`` (``record_places``, recorded since the table last changed). ``TRUE``
    when no span is known."""
    row = one(con, f"SELECT min({table}_lo), max({table}_hi) FROM {PLACES} WHERE session_id IN ({sessions})", params)
    return f"{alias or table}.rowid BETWEEN {int(row[0])} AND {int(row[1])}" if row and row[0] is not None else "TRUE"


@contextmanager
def duckdb_settings(con: duckdb.DuckDBPyConnection, settings: dict[str, str]) -> Iterator[None]:
    """``settings`` for the duration, then the connection's own back (the settings are global to the database
    instance; a source that is no DuckDB store, or lacks a setting, is left alone). A setting goes back by RESET when
    that restores it: a value read back as text comes back rounded ("2.7 GiB" for 3 GB)."""
    saved: dict[str, str] = {}
    try:
        for name, value in settings.items():
            row = one(con, "SELECT current_setting(?)", [name])
            con.execute(f"SET {name} = '{value}'")
            saved[name] = str(row[0]) if row else value
    except (duckdb.Error, AttributeError):
        pass
    try:
        yield
    finally:
        for name, value in saved.items():
            try:
                con.execute(f"RESET {name}")
                row = one(con, "SELECT current_setting(?)", [name])
                if not row or str(row[0]) != value:
                    con.execute(f"SET {name} = '{value}'")
            except duckdb.Error:
                pass


def read_capped(con: duckdb.DuckDBPyConnection, cap: dict[str, str] | None, read: Callable[[], T]) -> T:
    """``read()`` under DuckDB settings ``cap`` (a memory limit), and again without them if it needs more. Uncapped,
    DuckDB keeps every block a read touched cached up to its limit (80% of RAM), so a process that reads the whole
    store grows with it; the cap bounds that cache, never what one read may use. ``read`` must have no effect on the
    store: after running out of memory it runs a second time."""
    if not cap:
        return read()
    try:
        with duckdb_settings(con, cap):
            return read()
    except duckdb.OutOfMemoryException:
        return read()


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the store has table ``name`` (older stores lack the scan and calibration tables)."""
    row = one(
        con, "SELECT count(*) FROM information_schema.tables WHERE table_name = ? AND table_schema = 'main'", [name]
    )
    return bool(row and row[0])


def columns(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    """The column names of ``table`` as the store has them."""
    return {
        r[0]
        for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? AND table_schema = 'main'", [table]
        ).fetchall()
    }


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def frame(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[object] | None = None) -> pl.DataFrame:
    """Run a query and return a polars frame (through Arrow, no copy of the columns)."""
    return con.sql(sql, params=list(params) if params else None).pl()
