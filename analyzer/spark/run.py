"""``loopscope spark run``: ingest and scan on Spark, every table written as Parquet under ``out/<table>/`` in the
layout of ``analyzer.store.parquet`` (what ``loopscope report --from`` reads).

The driver lists the files (the same walk as ``loopscope ingest``, so file ids and skips agree) and plans; rows never
pass through it: tasks parse and scan, Spark shuffles and writes. Two staging folders under ``out/_stage`` hold the
tasks' tagged output so each adapter and detector runs exactly once per file and session.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from analyzer.errors import NothingToIngestError, UsageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from analyzer.detect.stream.calls import Config


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
    files_parsed_in_tasks: int = 0
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
    paths: Sequence[Path],
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
    from pyspark.sql import functions as F

    from analyzer.detect.stream.calls import Config
    from analyzer.ingest.pipeline import discover
    from analyzer.scan.run import detector_text
    from analyzer.spark import ingest, scan
    from analyzer.spark.session import TaskLog, spark_schema, spark_session, tagged_schema

    t0 = time.perf_counter()
    config = config or Config()
    spark = spark or spark_session(master)
    sc = spark.sparkContext
    summary = SparkSummary(master=sc.master, cores=sc.defaultParallelism)
    found = discover(paths)
    if not found:
        raise NothingToIngestError(f"no files found under {', '.join(map(str, paths))}")
    summary.files, summary.bytes = len(found), sum(f.size for f in found)
    out = str(out).rstrip("/")
    stage = f"{out}/_stage"
    log = TaskLog(spark)

    # -- ingest: one task call per file, biggest files first, spread round-robin over the slices
    tasks = [
        (i, f.path, f.size, f.mtime_ns, f.ignored, f.read_with, f.read_format) for i, f in enumerate(found, start=1)
    ]
    slices = max(1, min(len(tasks), sc.defaultParallelism * 2))
    order = sorted(tasks, key=lambda t: -t[2])
    rdd = sc.parallelize([order[i::slices] for i in range(slices)], slices).flatMap(lambda x: x)
    files_df = spark.createDataFrame(rdd, spark_schema(ingest.TASK_COLS))
    (
        files_df.mapInArrow(ingest.parse_task(log), tagged_schema(ingest.PARSED))
        .write.mode("overwrite")
        .partitionBy("_t")
        .parquet(f"{stage}/parsed")
    )
    parsed = {name: _tagged(spark, f"{stage}/parsed", ingest.PARSED, name) for name in ingest.PARSED}
    tables = ingest.settle(spark, parsed)
    _write(tables["sessions"], tables["sessions"], out, "sessions", summary)
    sessions = _read(spark, out, "sessions", tables["sessions"])
    for name in ("files", "ingest_errors", "turns", "calls"):
        _write(tables[name], sessions, out, name, summary, files=tables["files"])
    summary.ingest_seconds = time.perf_counter() - t0
    summary.files_parsed_in_tasks, summary.bytes_parsed_in_tasks = log.files.value, log.bytes.value

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
