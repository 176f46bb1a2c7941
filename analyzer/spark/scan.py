"""The scan on Spark: whole sessions per group (``groupBy(bucket).applyInArrow``, the bucket a hash of the session id),
each group through the scan's own code: ``scan_io.read_group`` and its lookups over a throwaway in-memory DuckDB
holding the group's calls and turns, then ``scan_group``, the vectorised detector core. Row for row what
``loopscope scan`` writes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from analyzer.detect.rules import FINDINGS, SIGNALS, TEXT_SIGNALS
from analyzer.spark.session import TaskLog, arrow_schema, table_cols, tagged_batch
from analyzer.store.schema import CALLS, SCAN_STATE, TURNS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from analyzer.detect.stream.calls import Config

SCANNED = {t.name: table_cols(t) for t in (SIGNALS, TEXT_SIGNALS, FINDINGS, SCAN_STATE)}
SESSION_COLS = [("session_id", "VARCHAR"), ("file_id", "INTEGER"), ("fingerprint", "VARCHAR")]
CALLS_PER_GROUP = 50_000  # calls per applyInArrow group, on average: big enough for the vectorised core to pay off


class _Todo(NamedTuple):
    session_id: str
    fingerprint: str
    calls: int
    file_id: int


def scan_rows(calls: pa.Table, turns: pa.Table, sessions: pa.Table, config: Config) -> dict[str, pa.Table]:
    """One group of whole sessions (their calls, turns and fingerprints) -> the rows of ``signals``,
    ``text_signals``, ``findings`` and ``scan_state`` (less ``detector`` and ``scanned_at``)."""
    import duckdb

    from analyzer.scan import io as scan_io
    from analyzer.scan.batch import scan_group
    from analyzer.store.connection import record_places

    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET threads = 1")
        con.register("calls", calls)
        con.register("turns", turns)
        record_places(con)  # none: registered tables have no rowids, so the group's reads are bounded by ids alone
        rows = sorted(
            zip(*(sessions.column(n).to_pylist() for n in ("file_id", "session_id", "fingerprint"))),
            key=lambda r: (r[0] or 0, r[1]),
        )
        group = [_Todo(sid, fp, 0, fid or 0) for fid, sid, fp in rows]
        heads, turn_info = scan_io.lookups(con, group)
        s, c, t = scan_io.read_group(con, group, words=False)
        out = scan_group(s, c, t, config, heads, turn_info)
        return {name: frame.to_arrow() for name, frame in out.items()}
    finally:
        con.close()


def scan_task(log: TaskLog, config: Config) -> Callable[[pa.Table], pa.Table]:
    """The ``applyInArrow`` function: a group's tagged rows (``_t``: ``c`` calls, ``t`` turns, ``s`` sessions) in,
    tagged rows of the scan's tables out."""

    def run(group: pa.Table) -> pa.Table:
        import pyarrow as pa
        import pyarrow.compute as pc

        def part(tag: str, cols: list[tuple[str, str]]) -> pa.Table:
            return group.filter(pc.equal(group.column("_t"), tag)).select([n for n, _ in cols]).cast(arrow_schema(cols))

        t0 = time.perf_counter()
        sessions = part("s", SESSION_COLS)
        out = scan_rows(part("c", table_cols(CALLS)), part("t", table_cols(TURNS)), sessions, config)
        log.scan_seconds.add(time.perf_counter() - t0)
        log.sessions.add(sessions.num_rows)
        log.pids.add(frozenset([os.getpid()]))
        state = out["scan_state"]
        n = state.num_rows
        out["scan_state"] = state.append_column("detector", pa.array([None] * n, pa.large_string())).append_column(
            "scanned_at", pa.array([None] * n, pa.timestamp("us"))
        )
        batches = [tagged_batch(SCANNED, name, rows) for name, rows in out.items() if rows.num_rows]
        return pa.Table.from_batches(batches) if batches else pa.Table.from_batches([], schema=batch_schema())

    return run


def batch_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [("_t", pa.string())]
        + [(name, pa.struct(list(arrow_schema(cols, large=False)))) for name, cols in SCANNED.items()]
    )


def grouped_input(sessions: DataFrame, calls: DataFrame, turns: DataFrame, buckets: int) -> DataFrame:
    """Calls, turns and sessions of the store in one frame, tagged, with the bucket (``_b``) of their session."""
    from pyspark.sql import functions as F

    def tag(df: DataFrame, t: str) -> DataFrame:
        return df.withColumn("_t", F.lit(t)).withColumn(
            "_b", F.pmod(F.xxhash64("session_id"), F.lit(buckets)).cast("int")
        )

    return (
        tag(calls, "c")
        .unionByName(tag(turns, "t"), allowMissingColumns=True)
        .unionByName(tag(sessions.select([n for n, _ in SESSION_COLS]), "s"), allowMissingColumns=True)
    )
