"""``loopscope spark run``: ingest and scan on Spark, every table written as Parquet under ``out/<table>/`` in the
layout of ``analyzer.store.parquet`` (what ``loopscope report --from`` reads).

The driver lists the files through Hadoop's filesystem layer (``listing``: classified as ``loopscope ingest`` does, so
file ids and skips agree) and plans; it opens no transcript, and rows never pass through it: the bytes reach the
tasks through Spark's ``binaryFile`` source, tasks parse and scan, Spark shuffles and writes. What each run parsed is
kept under ``out/_ingest`` (the next run over the same ``out`` parses only new and changed files); a staging folder
under ``out/_stage`` holds the scan's tagged output so each detector runs exactly once per session.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from analyzer.errors import LoopscopeError, NothingToIngestError, UsageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from analyzer.detect.stream.calls import Config
    from analyzer.spark.listing import Listed
    from analyzer.spark.session import TaskLog


COUNTED = (
    "files",
    "ingest_errors",
    "sessions",
    "calls",
    "findings",
)  # the tables the summary counts (a Spark job each)


@dataclass
class SparkSummary:
    files: int = 0
    bytes: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    files_parsed_in_tasks: int = 0  # files read this run (new or changed, and the files read with them)
    files_reused: int = 0  # unchanged since a previous run over the same --out: their parsed rows kept
    calls_parsed_in_tasks: int = 0
    bytes_parsed_in_tasks: int = 0
    sessions_scanned_in_tasks: int = 0
    task_parse_seconds: float = 0.0  # summed over tasks: the per-file work itself, without Spark's job overheads
    task_scan_seconds: float = 0.0
    task_pids: frozenset[int] = frozenset()
    ingest_seconds: float = 0.0
    scan_seconds: float = 0.0
    seconds: float = 0.0
    master: str = ""
    cores: int = 0


def run(
    paths: Sequence[str | Path],
    out: str | Path,
    master: str | None = None,
    config: Config | None = None,
    spark: SparkSession | None = None,
    keep_stage: bool = False,
) -> SparkSummary:
    """Ingest and scan the transcripts under ``paths`` on Spark; write the tables under ``out`` (a local folder or
    any URL Spark writes, e.g. ``s3a://bucket/prefix``). Without pyspark or Java (and no ``spark`` given), a
    ``UsageError`` naming what to install, before anything imports pyspark."""
    from analyzer.spark.session import missing

    if spark is None and (why := missing()):
        raise UsageError(why)
    try:
        return _run(paths, out, master, config, spark, keep_stage)
    except LoopscopeError:
        raise
    except Exception as exc:
        if type(exc).__module__.split(".")[0] not in ("py4j", "pyspark"):
            raise
        from analyzer.spark.errors import spark_error

        raise spark_error(exc, str(out)) from None


def _run(
    paths: Sequence[str | Path],
    out: str | Path,
    master: str | None,
    config: Config | None,
    spark: SparkSession | None,
    keep_stage: bool,
) -> SparkSummary:
    from pyspark.sql import functions as F

    from analyzer.detect.stream.calls import Config
    from analyzer.scan.run import detector_text
    from analyzer.spark import ingest, scan
    from analyzer.spark.listing import list_files
    from analyzer.spark.session import TaskLog, spark_session, tagged_schema

    t0 = time.perf_counter()
    config = config or Config()
    spark = spark or spark_session(master)
    sc = spark.sparkContext
    summary = SparkSummary(master=sc.master, cores=sc.defaultParallelism)
    listed = list_files(spark, [str(p) for p in paths])
    if not listed:
        raise NothingToIngestError(f"no files found under {', '.join(map(str, paths))}")
    summary.files = len(listed)
    summary.bytes = sum(x.bytes for x in listed if x.found.ignored is None)
    out = str(out).rstrip("/")
    stage = f"{out}/_stage"
    log = TaskLog(spark)

    # -- ingest: the new and changed groups of files, their bytes handed to tasks a group at a time
    parsed = _parse(spark, listed, out, log, summary)
    tables = ingest.settle(spark, parsed)
    _write(tables["sessions"], tables["sessions"], out, "sessions", summary)
    sessions = _read(spark, out, "sessions", tables["sessions"])
    for name in ("files", "ingest_errors", "turns", "calls"):
        _write(tables[name], sessions, out, name, summary, files=tables["files"])
    summary.ingest_seconds = time.perf_counter() - t0
    summary.files_parsed_in_tasks, summary.bytes_parsed_in_tasks = log.files.value, log.bytes.value
    summary.calls_parsed_in_tasks = log.calls.value

    # -- scan: whole sessions per group, a group per ~CALLS_PER_GROUP calls
    t1 = time.perf_counter()
    calls, turns, files = (_read(spark, out, n, tables[n]) for n in ("calls", "turns", "files"))
    detector = detector_text(config)
    fp = sessions.join(files.select("file_id", "content_hash", "ingested_at"), "file_id", "left").select(
        "session_id",
        "file_id",
        F.md5(
            F.concat_ws(
                "|",
                F.coalesce("content_hash", F.lit("")),
                F.coalesce(F.col("ingested_at").cast("string"), F.lit("")),
                "file_id",
                "calls",
                "turns",
                "user_turns",
                "total_tokens",
                "cost_usd",
                F.lit(detector),
            )
        ).alias("fingerprint"),
    )
    buckets = max(sc.defaultParallelism, summary.rows.get("calls", 0) // scan.CALLS_PER_GROUP + 1)
    grouped = scan.grouped_input(fp, calls, turns, buckets)
    (
        grouped.groupBy("_b")
        .applyInArrow(scan.scan_task(log, config), tagged_schema(scan.SCANNED))
        .write.mode("overwrite")
        .partitionBy("_t")
        .parquet(f"{stage}/scanned")
    )
    for name in scan.SCANNED:
        df = _tagged(spark, f"{stage}/scanned", scan.SCANNED, name)
        if name == "scan_state":
            df = df.withColumn("detector", F.lit(detector)).withColumn(
                "scanned_at", F.current_timestamp().cast("timestamp_ntz")
            )
        _write(df, sessions, out, name, summary)
    summary.scan_seconds = time.perf_counter() - t1
    summary.sessions_scanned_in_tasks = log.sessions.value
    summary.task_parse_seconds, summary.task_scan_seconds = log.parse_seconds.value, log.scan_seconds.value
    summary.task_pids = frozenset(log.pids.value)
    if not keep_stage:
        _delete(spark, stage)
    summary.seconds = time.perf_counter() - t0
    return summary


INGEST = "_ingest"  # under --out: what each run parsed, kept so the next run parses only what changed


def _parse(
    spark: SparkSession, listed: list[Listed], out: str, log: TaskLog, summary: SparkSummary
) -> dict[str, DataFrame]:
    """The parsed rows of every listed file (``ingest.PARSED`` tables, file ids of this listing). A file whose path,
    size and mtime match what a previous run over ``out`` parsed keeps that run's rows (its file id renumbered);
    the groups with a new, changed or removed file are parsed in tasks, from their bytes (``binaryFile``), and
    their rows kept under ``out/_ingest/`` for the next run."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from analyzer.spark import ingest
    from analyzer.spark.session import spark_schema, tagged_schema

    sc = spark.sparkContext
    runs, parsed_dir = f"{out}/{INGEST}/runs", f"{out}/{INGEST}/parsed"
    run_id = str(time.time_ns() // 1000)
    rows = [
        (
            i,
            x.found.path,
            x.found.size,
            x.found.mtime_ns,
            x.found.ignored,
            x.found.read_with,
            x.found.read_format,
            x.group,
            x.uri,
        )
        for i, x in enumerate(listed, start=1)
    ]
    # What earlier runs parsed, latest first: path -> (run, file id, size, mtime, group, read_with). Listing-sized
    # metadata, never a transcript's rows.
    before: dict[str, tuple] = {}
    earlier: set[str] = set()
    if _exists(spark, runs):
        for r in (
            spark.read.parquet(runs).select("run", "file_id", "path", "size", "mtime_ns", "grp", "read_with").collect()
        ):
            rec = (str(r["run"]), r["file_id"], r["size"], r["mtime_ns"], r["grp"], r["read_with"])
            earlier.add(rec[0])
            if r["path"] not in before or before[r["path"]][0] < rec[0]:
                before[r["path"]] = rec
    changed = set()
    now = {r[1] for r in rows}
    for r in rows:
        b = before.get(r[1])
        if b is None or (b[2], b[3], b[4], b[5]) != (r[2], r[3], r[7], r[5]):
            changed.add(r[7])
    changed.update(b[4] for p, b in before.items() if p not in now)  # a file gone from a group: the group again
    todo = [r for r in rows if r[7] in changed]
    summary.files_reused = len(rows) - len(todo)
    if todo:
        plan = _frame(spark, todo, spark_schema(ingest.TASK_COLS))
        # Spark's file source never returns a name starting with _ or . (its hidden files): such a file is recorded
        # as not handed over (``ingest.NOT_HANDED``), and not asked for, which would make it list the folder again
        uris = [r[8] for r in todo if r[4] is None and not r[8].rsplit("/", 1)[-1].startswith(("_", "."))]
        if uris:
            content = (
                spark.read.format("binaryFile")
                .option("__globPaths__", "false")  # a path is a path: [ or * in a name is not a pattern
                .load(uris)
                .select(F.col("path").alias("uri"), "content")
            )
            plan = plan.join(content, "uri", "left")
        else:
            plan = plan.withColumn("content", F.lit(None).cast("binary"))
        slices = max(1, min(len(todo), sc.defaultParallelism * 2))
        # files with their bytes: a few per Arrow batch handed to a task, not Spark's default 10,000
        batch = "spark.sql.execution.arrow.maxRecordsPerBatch"
        before_batch = spark.conf.get(batch, None)
        spark.conf.set(batch, str(ingest.CHUNK_FILES))
        try:
            (
                plan.select(*[n for n, _ in ingest.TASK_COLS], "content")
                .repartition(slices, "grp")
                .sortWithinPartitions("grp", "file_id")
                .mapInArrow(ingest.parse_task(log), tagged_schema(ingest.PARSED))
                .write.mode("overwrite")
                .partitionBy("_t")
                .parquet(f"{parsed_dir}/run={run_id}")
            )
        finally:
            if before_batch is None:
                spark.conf.unset(batch)
            else:
                spark.conf.set(batch, before_batch)
        _frame(spark, todo, spark_schema(ingest.TASK_COLS)).drop("uri").write.mode("overwrite").parquet(
            f"{runs}/run={run_id}"
        )
    # where each file's rows are: (run, file id then) -> file id now
    where = [(run_id, r[0], r[0]) if r[7] in changed else (before[r[1]][0], before[r[1]][1], r[0]) for r in rows]
    for old in earlier - {w[0] for w in where}:  # a run none of whose rows are used any more
        _delete(spark, f"{parsed_dir}/run={old}")
        _delete(spark, f"{runs}/run={old}")
    keep = _frame(
        spark,
        where,
        StructType(
            [StructField("run", StringType()), StructField("_old", IntegerType()), StructField("_new", IntegerType())]
        ),
    )
    schema = tagged_schema(ingest.PARSED).add("run", StringType())
    frame = spark.read.schema(schema).option("basePath", parsed_dir).parquet(parsed_dir)
    out_tables = {}
    for name in ingest.PARSED:
        df = frame.where(F.col("_t") == name).select(f"{name}.*", "run")
        cols = [c for c in df.columns if c != "run"]
        df = df.join(F.broadcast(keep), (df["run"] == keep["run"]) & (df["file_id"] == keep["_old"]))
        out_tables[name] = df.select(*[F.col("_new").alias(c) if c == "file_id" else df[c] for c in cols])
    return out_tables


def _frame(spark: SparkSession, rows: list[tuple], schema: StructType) -> DataFrame:
    """Rows made on the driver (the listing, never a transcript's rows) as a frame: through an RDD of a few slices,
    so a listing of millions of files is not planted in every task's plan."""
    sc = spark.sparkContext
    return spark.createDataFrame(
        sc.parallelize(rows, max(1, min(len(rows) // 10_000 + 1, sc.defaultParallelism))), schema
    )


def _exists(spark: SparkSession, path: str) -> bool:
    jvm, conf = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    p = jvm.org.apache.hadoop.fs.Path(path)
    return bool(p.getFileSystem(conf).exists(p))


def _tagged(spark: SparkSession, stage: str, parts: dict[str, list[tuple[str, str]]], name: str) -> DataFrame:
    """Table ``name``'s rows out of a staging folder of tagged rows (partition pruning reads only its folder; the
    schema is given, so a table no task emitted reads as empty)."""
    from analyzer.spark.session import tagged_schema

    return spark.read.schema(tagged_schema(parts)).parquet(stage).where(f"_t = '{name}'").select(f"{name}.*")


def _delete(spark: SparkSession, path: str) -> None:
    """Remove a folder through Hadoop's filesystem layer (local, HDFS or an object store alike)."""
    jvm, conf = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    p = jvm.org.apache.hadoop.fs.Path(path)
    p.getFileSystem(conf).delete(p, True)


def _write(
    df: DataFrame, sessions: DataFrame, out: str, name: str, summary: SparkSummary, files: DataFrame | None = None
) -> None:
    """Write table ``name`` under ``out/name`` with the partition keys of ``analyzer.store.parquet``."""
    from pyspark.sql import functions as F

    from analyzer.store.parquet import P_DATE, P_FORMAT, partition_keys

    cols = df.columns
    keys = partition_keys(name)
    if name == "sessions":
        df = df.withColumn("p_format", F.expr(P_FORMAT)).withColumn("p_date", F.expr(P_DATE))
    elif name == "files":
        df = df.withColumn("p_format", F.expr(P_FORMAT))
    elif name == "ingest_errors":
        assert files is not None
        df = df.join(F.broadcast(files.select("file_id", "format")), "file_id", "left").withColumn(
            "p_format", F.expr(P_FORMAT)
        )
    elif keys:
        parts = sessions.select("session_id", F.expr(P_FORMAT).alias("p_format"), F.expr(P_DATE).alias("p_date"))
        df = df.join(F.broadcast(parts), "session_id", "left").fillna("unknown", subset=list(keys))
    df = df.select(*cols, *keys)
    if keys:
        df = df.repartition(*keys)
    df.write.mode("overwrite").partitionBy(*keys).parquet(f"{out}/{name}")
    if name in COUNTED:
        summary.rows[name] = _read(df.sparkSession, out, name, df.drop(*keys)).count()


def _read(spark: SparkSession, out: str, name: str, like: DataFrame) -> DataFrame:
    """Table ``name`` as written under ``out`` (its own columns; the schema is given, so an empty table reads)."""
    return spark.read.schema(like.schema).parquet(f"{out}/{name}").select(*like.columns)
