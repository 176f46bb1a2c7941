"""Ingest on Spark: every file through the single-machine parser and landing SQL in a task, then the set work that
needs every file (duplicate sessions, usage deduplication, session totals) as Spark shuffles.

Files are the unit: a task is handed whole files as bytes (Spark's ``binaryFile`` source: any Hadoop filesystem), the
files one parser reads together in one task (``listing``: an opencode session with its message and part files, an
OpenHands ``events/`` folder, a Gemini legacy chat with its migrated ``.jsonl``, an ``opencode.db`` with its
``-wal``); it parses them with the store's own ``parse_file`` and adapters reading those bytes (``MemoryFiles``), lands
their spool with the store's SQL (``land.landed_sql``: timestamps parsed) in a throwaway in-memory DuckDB, and emits
the rows. A session never splits across tasks.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from analyzer.ingest.land import CALL_TOTALS_SQL, TURN_TOTALS_SQL, USAGE_ORDER, landed_sql, outcome_rows, spool_source
from analyzer.spark.listing import is_uri, shown
from analyzer.spark.session import TaskLog, table_cols, tagged_batch
from analyzer.store.schema import CALLS, FILES, INGEST_ERRORS, SESSIONS, TURNS

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

PARSED = {t.name: table_cols(t) for t in (FILES, INGEST_ERRORS, SESSIONS, TURNS, CALLS)}
# A file handed to a task (``listing.Listed``): ``ignored``: why discovery will not read it (its suffix), as the store
# records it; ``read_with`` and ``read_format``: the file that reads this one as its part, and its format
# (``pipeline.Found``); ``grp``: the key of the files read together (one task gets all of them); the bytes come in a
# ``content`` column beside these (null for an ignored file, which is never read).
TASK_COLS = [
    ("file_id", "INTEGER"),
    ("path", "VARCHAR"),
    ("size", "BIGINT"),
    ("mtime_ns", "BIGINT"),
    ("ignored", "VARCHAR"),
    ("read_with", "VARCHAR"),
    ("read_format", "VARCHAR"),
    ("grp", "VARCHAR"),
    ("uri", "VARCHAR"),
]


class Task(NamedTuple):
    """A listed file as a task row (``TASK_COLS``, in that order)."""

    file_id: int
    path: str
    size: int | None
    mtime_ns: int | None
    ignored: str | None
    read_with: str | None
    read_format: str | None
    grp: str
    uri: str


assert list(Task._fields) == [n for n, _ in TASK_COLS]

CHUNK_FILES = 64  # files landed together in a task: one DuckDB pass per chunk, not per file
CHUNK_BYTES = 32 << 20
NOT_HANDED = "cannot open: Spark's file source did not return it (a name starting with _ or . is hidden to it)"


def parse_chunk(rows: list[dict[str, Any]], con: duckdb.DuckDBPyConnection) -> dict[str, pa.Table]:
    """Whole groups of files, with their bytes -> the store's rows of them (sessions without totals, turns before
    usage dedup, calls, their ``files`` rows and ingest errors), exactly as ``load_chunk`` would land them: the
    store's ``parse_chunk`` parses the bytes (``MemoryFiles``) into the spool, the store's ``landed_sql`` turns it
    into rows."""
    from analyzer.ingest.base import MemoryFiles
    from analyzer.ingest.parse import FileOutcome, FileTask
    from analyzer.ingest.pipeline import Found, companion_outcome
    from analyzer.ingest.worker import parse_chunk as parse_to_spool

    tmp = tempfile.mkdtemp(prefix="loopscope-spark-")
    try:
        data = {r["path"]: r["content"] for r in rows if r["content"] is not None}
        files = MemoryFiles(data, {r["path"]: (r["size"], r["mtime_ns"]) for r in rows if r["path"] in data})
        to_parse = [
            FileTask(r["file_id"], r["path"], r["size"], r["mtime_ns"])
            for r in rows
            if r["ignored"] is None and r["read_with"] is None and r["path"] in data
        ]
        outcomes, spool = parse_to_spool(to_parse, tmp, "spark", files=files)
        for r in rows:
            head = (r["file_id"], shown(r["path"]), r["size"], r["mtime_ns"])
            if r["ignored"] is not None:
                outcomes.append(FileOutcome(*head, status="skipped", reason=r["ignored"]))
            elif r["read_with"] is not None:
                f = Found(r["path"], r["size"], r["mtime_ns"], read_with=r["read_with"], read_format=r["read_format"])
                o = companion_outcome(r["file_id"], f)
                o.path, o.reason = shown(o.path), f"read with {shown(r['read_with'])}"
                outcomes.append(o)
            elif r["path"] not in data:
                outcomes.append(FileOutcome(*head, status="skipped", reason=NOT_HANDED))
        for o in outcomes:
            o.path = shown(o.path)
        out = outcome_rows(outcomes)
        for table in ("sessions", "turns", "calls"):
            out[table] = con.sql(landed_sql(table, spool_source(spool, table))).to_arrow_table()
        if any(is_uri(p) for p in data):  # a non-local file: its URI, not the path the parsers saw
            import pyarrow.compute as pc

            col = out["sessions"].column("source_path")
            fixed = pc.replace_substring_regex(col, r"^([A-Za-z][A-Za-z0-9+.-]+):/([^/])", r"\1://\2")
            out["sessions"] = out["sessions"].set_column(
                out["sessions"].schema.get_field_index("source_path"), "source_path", fixed
            )
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _groups(batches: Iterator[pa.RecordBatch]) -> Iterator[list[dict[str, Any]]]:
    """The rows of a partition sorted by group, a whole group at a time."""
    cur: list[dict[str, Any]] = []
    for batch in batches:
        for r in batch.to_pylist():
            if cur and r["grp"] != cur[0]["grp"]:
                yield cur
                cur = []
            if cur and r["file_id"] == cur[-1]["file_id"]:
                continue  # a file the source returned twice: read once
            cur.append(r)
    if cur:
        yield cur


def _chunks(batches: Iterator[pa.RecordBatch]) -> Iterator[list[dict[str, Any]]]:
    """Whole groups, gathered up to ``CHUNK_FILES`` files or ``CHUNK_BYTES`` bytes (a group is never split)."""
    cur: list[dict[str, Any]] = []
    size = 0
    for group in _groups(batches):
        n = sum(len(r["content"] or b"") for r in group)
        if cur and (len(cur) + len(group) > CHUNK_FILES or size + n > CHUNK_BYTES):
            yield cur
            cur, size = [], 0
        cur.extend(group)
        size += n
    if cur:
        yield cur


def parse_task(log: TaskLog):  # noqa: ANN201 - a mapInArrow function
    """The ``mapInArrow`` function: files with their bytes in (``TASK_COLS`` and ``content``, sorted by group),
    tagged rows of every table out (``session.tagged_schema``)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import duckdb

        pid = os.getpid()
        con = duckdb.connect()
        try:
            con.execute("SET TimeZone = 'UTC'")  # as the store: transcript timestamps without a zone are UTC
            con.execute("SET threads = 1")  # Spark runs one task per core
            for chunk in _chunks(batches):
                t0 = time.perf_counter()
                tables = parse_chunk(chunk, con)
                log.parse_seconds.add(time.perf_counter() - t0)
                log.files.add(len(chunk))
                log.bytes.add(sum(len(r["content"] or b"") for r in chunk))
                log.calls.add(tables["calls"].num_rows)
                log.pids.add(frozenset([pid]))
                for name, rows in tables.items():
                    if rows.num_rows:
                        yield tagged_batch(PARSED, name, rows)
        finally:
            con.close()

    return run


def _drop_replayed_calls(sessions: DataFrame, calls: DataFrame) -> DataFrame:
    """``land._drop_replayed_calls`` over the whole corpus: a resumed Claude Code session repeats earlier calls under
    their ``toolu_`` ids; the copy in the session whose calls ended first stays (ties: the lower file id)."""
    from pyspark.sql import functions as F

    claude = sessions.where(F.col("format") == "claude_code").select("session_id")
    hits = (
        calls.join(claude, "session_id")
        .where(F.col("call_id").startswith("toolu_"))
        .select("session_id", "seq", "call_id", "file_id")
    )
    multi = hits.groupBy("call_id").agg(F.countDistinct("session_id").alias("_n")).where("_n > 1").select("call_id")
    span = calls.groupBy("session_id").agg(F.max(F.greatest("ts", "result_ts")).alias("_last"))
    cand = hits.join(multi, "call_id").join(span, "session_id")
    winner = cand.groupBy("call_id").agg(
        F.min_by(
            "session_id", F.struct(F.col("_last").isNull(), F.col("_last"), F.col("file_id"), F.col("session_id"))
        ).alias("_winner")
    )
    drop = cand.join(winner, "call_id").where(F.col("session_id") != F.col("_winner")).select("session_id", "seq")
    return calls.join(drop, ["session_id", "seq"], "left_anti")


def settle(
    spark: SparkSession,
    parsed: dict[str, DataFrame],
    kept: DataFrame | None = None,
    read_again: DataFrame | None = None,
) -> dict[str, DataFrame]:
    """The parsed files' rows -> the store's tables, across files: a session id seen in several files is kept from
    one copy (an error row for each other copy, as the store records it); usage counts once per ``usage_key`` over
    the whole corpus (a window over the key: a shuffle); session totals are summed with the store's own SQL.

    The copy kept is the store's (``land.load_chunk``): the copy a previous run kept (``kept``: session id, file id)
    if its file is not read again (``read_again``: file ids); else the lowest file id among the copies in files read
    again; a first run reads every file, so the lowest file id."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from analyzer.spark.session import spark_schema

    sessions, turns, calls = parsed["sessions"], parsed["turns"], parsed["calls"]
    files, errors = parsed["files"], parsed["ingest_errors"]

    rank = F.lit(1)
    if read_again is not None:
        again = F.broadcast(read_again.select("file_id", F.lit(True).alias("_again")))
        sessions = sessions.join(again, "file_id", "left")
        rank = F.when(F.col("_again"), 1).otherwise(2)
        if kept is not None:
            k = kept.select("session_id", "file_id", F.lit(True).alias("_kept"))
            sessions = sessions.join(k, ["session_id", "file_id"], "left")
            rank = F.when(F.col("_kept") & F.col("_again").isNull(), 0).otherwise(rank)
    w = Window.partitionBy("session_id").orderBy("_rank", "file_id")
    ranked = (
        sessions.withColumn("_rank", rank)
        .withColumn("_rn", F.row_number().over(w))
        .withColumn("_other", F.first("source_path").over(w))
        .drop(*[c for c in ("_again", "_kept") if c in sessions.columns])
    )
    dup = ranked.where("_rn > 1").select("session_id", "file_id", "source_path", "_other").cache()
    sessions = ranked.where("_rn = 1").drop("_rn", "_other", "_rank")
    drop = dup.select("session_id", "file_id")
    turns = turns.join(F.broadcast(drop), ["session_id", "file_id"], "left_anti")
    calls = calls.join(F.broadcast(drop), ["session_id", "file_id"], "left_anti")
    dup_errors = dup.select(
        "file_id",
        F.col("source_path").alias("path"),
        F.lit(None).cast("bigint").alias("line"),
        F.concat(
            F.lit("duplicate session id "),
            F.col("session_id"),
            F.lit(": already ingested from "),
            F.col("_other"),
            F.lit("; this copy was not loaded"),
        ).alias("reason"),
        F.col("session_id").alias("excerpt"),
    )
    errors = errors.unionByName(dup_errors)
    per_file = dup.groupBy("file_id").agg(F.count("*").cast("int").alias("_n"))
    files = (
        files.join(per_file, "file_id", "left")
        .withColumn("errors", F.col("errors") + F.coalesce("_n", F.lit(0)))
        .withColumn("sessions", F.col("sessions") - F.coalesce("_n", F.lit(0)))
        .drop("_n")
    )

    calls = _drop_replayed_calls(sessions, calls)

    turns = turns.withColumn(
        "usage_counted",
        F.expr(
            "CASE WHEN usage_key IS NULL THEN usage_counted "
            f"ELSE row_number() OVER (PARTITION BY usage_key ORDER BY {USAGE_ORDER}) = 1 END"
        ),
    )

    turns.createOrReplaceTempView("_ls_turns")
    calls.createOrReplaceTempView("_ls_calls")
    t = spark.sql(TURN_TOTALS_SQL.format(turns="_ls_turns", where=""))
    c = spark.sql(CALL_TOTALS_SQL.format(calls="_ls_calls", where=""))
    zero = [n for n in SESSIONS.names[SESSIONS.names.index("user_turns") :]]
    s = sessions.drop(*zero).alias("s")
    joined = s.join(t.alias("t"), "session_id", "left").join(c.alias("c"), "session_id", "left")
    sums = {n: F.coalesce(F.col(f"t.{n}"), F.lit(0)) for n in zero if n not in ("calls", "error_calls")}
    sums.update({n: F.coalesce(F.col(f"c.{n}"), F.lit(0)) for n in ("calls", "error_calls")})
    sessions = joined.select(
        *[F.col(f"s.{n}") for n in SESSIONS.names[: SESSIONS.names.index("started_at")]],
        F.least("s.started_at", "t.first_ts", "c.first_ts").alias("started_at"),
        F.greatest("s.ended_at", "t.last_ts", "c.last_ts").alias("ended_at"),
        "s.cwd",
        "s.models",
        *[sums[n].alias(n) for n in zero],
    )
    out = {"files": files, "ingest_errors": errors, "sessions": sessions, "turns": turns, "calls": calls}
    return {
        name: df.select([F.col(f.name).cast(f.dataType) for f in spark_schema(PARSED[name])])
        for name, df in out.items()
    }
