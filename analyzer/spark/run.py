"""``loopscope spark run``: ingest and scan on Spark, every table written as Parquet under ``out/<table>/`` in the
layout of ``analyzer.store.parquet`` (what ``loopscope report --from`` reads).

The driver lists the files through Hadoop's filesystem layer (``listing``: classified as ``loopscope ingest`` does, so
file ids and skips agree) and plans; it opens no transcript, and rows never pass through it: the bytes reach the
tasks through Spark's ``binaryFile`` source, tasks parse and scan, Spark shuffles and writes. What each run parsed is
kept under ``out/_ingest`` (the next run over the same ``out`` parses, scans and rewrites only what changed:
``incremental``); a staging folder under ``out/_stage`` holds the scan's tagged output so each detector runs exactly
once per session.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from analyzer.errors import LoopscopeError, NothingToIngestError, UsageError
from analyzer.spark.hadoop import children as _children
from analyzer.spark.hadoop import delete as _delete
from analyzer.spark.hadoop import exists as _exists
from analyzer.spark.hadoop import frame as _frame
from analyzer.spark.hadoop import mark as _mark
from analyzer.spark.hadoop import rename as _rename
from analyzer.store.parquet import P_DATE, P_FORMAT, PARTITION_KEYS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from analyzer.detect.stream.calls import Config
    from analyzer.spark.incremental import Plan
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
    partitions_rewritten: int = 0  # partition folders written, summed over the tables (all of them on a first run)
    partitions_total: int = 0
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
    from analyzer.spark import incremental, ingest, scan
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
    plan = incremental.plan(spark, listed, out)
    parsed, old = _parse(spark, plan, out, log, summary)
    prev = None  # the previous run's sessions: which copy of each id it kept, and where each session was
    if _exists(spark, f"{out}/sessions"):
        cols = ["session_id", "file_id", F.col("p_format").cast("string"), F.col("p_date").cast("string")]
        spark.read.parquet(f"{out}/sessions").select(*cols).write.mode("overwrite").parquet(f"{stage}/prev")
        prev = spark.read.parquet(f"{stage}/prev")
    again = incremental.again(parsed, prev, plan.read_again, spark)
    tables = ingest.settle(spark, parsed, prev, incremental.ids(spark, again) if prev is not None else None)
    only = only_files = None  # the partitions to write: all of them on a full run
    if not plan.full and prev is not None and not plan.read_again:
        only, only_files = set(), set()  # nothing read again: no ingest table changes
    elif not plan.full and prev is not None:
        sessions_new = tables["sessions"]
        hit, copies = incremental.affected(spark, parsed, old, again)
        hit.write.mode("overwrite").parquet(f"{stage}/affected")
        hit = spark.read.parquet(f"{stage}/affected")
        places = prev.join(hit, "session_id").select("p_format", "p_date")
        places = places.unionByName(
            sessions_new.join(hit, "session_id").select(
                F.expr(P_FORMAT).alias("p_format"), F.expr(P_DATE).alias("p_date")
            )
        )
        only = {(r[0], r[1]) for r in places.distinct().collect()}
        held = [t.join(copies, "session_id").select("file_id") for t in (parsed["sessions"], old["sessions"])]
        fids = held[0].unionByName(held[1]).unionByName(incremental.ids(spark, again)).distinct()
        fmts = tables["files"].join(fids, "file_id").select(F.expr(P_FORMAT).alias("p_format"))
        if _exists(spark, f"{out}/files"):
            was = spark.read.parquet(f"{out}/files").join(fids, "file_id")
            fmts = fmts.unionByName(was.select(F.col("p_format").cast("string")))
        only_files = {(r[0],) for r in fmts.distinct().collect()}
    _mark(spark, f"{out}/{incremental.INGEST}/{incremental.RUNNING}", True)
    _write(tables["sessions"], tables["sessions"], out, "sessions", summary, only=only)
    sessions = _read(spark, out, "sessions", tables["sessions"])
    for name in ("files", "ingest_errors", "turns", "calls"):
        part = only_files if name in ("files", "ingest_errors") else only
        _write(tables[name], sessions, out, name, summary, files=tables["files"], only=part)
    summary.ingest_seconds = time.perf_counter() - t0
    summary.files_parsed_in_tasks, summary.bytes_parsed_in_tasks = log.files.value, log.bytes.value
    summary.calls_parsed_in_tasks = log.calls.value

    # -- scan: the sessions whose fingerprint changed (all of them on a full run), whole sessions per group
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
    scan_only = None
    state = f"{out}/scan_state"
    if only is not None and _exists(spark, state):
        was = spark.read.parquet(state).select("session_id", "fingerprint")
        fp = fp.join(was, ["session_id", "fingerprint"], "left_anti")
        fp.write.mode("overwrite").parquet(f"{stage}/todo")
        fp = spark.read.parquet(f"{stage}/todo")
        gone = was.join(sessions, "session_id", "left_anti").select("session_id")
        places = (
            prev.join(fp.select("session_id").unionByName(gone), "session_id")
            .select("p_format", "p_date")
            .unionByName(
                sessions.join(fp, "session_id").select(
                    F.expr(P_FORMAT).alias("p_format"), F.expr(P_DATE).alias("p_date")
                )
            )
        )
        scan_only = only | {(r[0], r[1]) for r in places.distinct().collect()}
        calls, turns = (t.join(fp.select("session_id"), "session_id", "left_semi") for t in (calls, turns))
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
        if scan_only is not None and _exists(spark, f"{out}/{name}"):  # the other sessions' rows, as they were
            kept = _read(spark, out, name, df, partitions=True)
            kept = kept.join(F.broadcast(_partitions(spark, scan_only)), ["p_format", "p_date"], "left_semi")
            kept = kept.join(sessions.select("session_id"), "session_id", "left_semi")
            kept = kept.join(fp.select("session_id"), "session_id", "left_anti").select(*df.columns)
            df = df.unionByName(kept)
        _write(df, sessions, out, name, summary, only=scan_only if only is not None else None)
    summary.scan_seconds = time.perf_counter() - t1
    summary.sessions_scanned_in_tasks = log.sessions.value
    summary.task_parse_seconds, summary.task_scan_seconds = log.parse_seconds.value, log.scan_seconds.value
    summary.task_pids = frozenset(log.pids.value)
    _finish(spark, plan, out)
    if not keep_stage:
        _delete(spark, stage)
    summary.seconds = time.perf_counter() - t0
    return summary


def _parse(
    spark: SparkSession, plan: Plan, out: str, log: TaskLog, summary: SparkSummary
) -> tuple[dict[str, DataFrame], dict[str, DataFrame]]:
    """The parsed rows of every listed file (``ingest.PARSED`` tables), and the rows a previous run parsed of the
    files parsed again now or gone (``plan.stale``). A file whose path, size and mtime match what a previous run
    over ``out`` parsed keeps that run's rows; the groups with a new, changed or removed file are parsed in tasks,
    from their bytes (``binaryFile``), and their rows kept under ``out/_ingest/parsed/`` for the next run."""
    from pyspark.sql import functions as F

    from analyzer.spark import incremental, ingest
    from analyzer.spark.session import spark_schema, tagged_schema

    sc = spark.sparkContext
    parsed_dir = f"{out}/{incremental.INGEST}/parsed"
    todo = plan.todo
    summary.files_reused = len(plan.rows) - len(todo)
    if todo:
        plan_df = _frame(spark, todo, spark_schema(ingest.TASK_COLS))
        # Spark's file source never returns a name starting with _ or . (its hidden files): such a file is recorded
        # as not handed over (``ingest.NOT_HANDED``), and not asked for, which would make it list the folder again
        uris = [r.uri for r in todo if r.ignored is None and not r.uri.rsplit("/", 1)[-1].startswith(("_", "."))]
        if uris:
            content = (
                spark.read.format("binaryFile")
                .option("__globPaths__", "false")  # a path is a path: [ or * in a name is not a pattern
                .load(uris)
                .select(F.col("path").alias("uri"), "content")
            )
            plan_df = plan_df.join(content, "uri", "left")
        else:
            plan_df = plan_df.withColumn("content", F.lit(None).cast("binary"))
        slices = max(1, min(len(todo), sc.defaultParallelism * 2))
        # files with their bytes: a few per Arrow batch handed to a task, not Spark's default 10,000
        batch = "spark.sql.execution.arrow.maxRecordsPerBatch"
        before_batch = spark.conf.get(batch, None)
        spark.conf.set(batch, str(ingest.CHUNK_FILES))
        try:
            (
                plan_df.select(*[n for n, _ in ingest.TASK_COLS], "content")
                .repartition(slices, "grp")
                .sortWithinPartitions("grp", "file_id")
                .mapInArrow(ingest.parse_task(log), tagged_schema(ingest.PARSED))
                .write.mode("overwrite")
                .partitionBy("_t")
                .parquet(f"{parsed_dir}/run={plan.run_id}")
            )
        finally:
            if before_batch is None:
                spark.conf.unset(batch)
            else:
                spark.conf.set(batch, before_batch)
    from pyspark.sql.types import StringType

    schema = tagged_schema(ingest.PARSED).add("run", StringType())
    frame = (
        spark.read.schema(schema).option("basePath", parsed_dir).parquet(parsed_dir)
        if _exists(spark, parsed_dir)
        else spark.createDataFrame([], schema)
    )
    tables: tuple[dict[str, DataFrame], dict[str, DataFrame]] = ({}, {})
    for which, rows in zip(tables, (plan.current, plan.stale)):
        keep = F.broadcast(incremental.pairs(spark, rows))
        for name in ingest.PARSED:
            df = frame.where(F.col("_t") == name).select(f"{name}.*", "run")
            which[name] = df.join(keep, ["run", "file_id"], "left_semi").drop("run")
    return tables


def _finish(spark: SparkSession, plan: Plan, out: str) -> None:
    """The run's manifest written, then the parsed runs no file uses any more removed, then the mark of a run
    rewriting tables: a run stopped before this point leaves the previous manifest (its changes are parsed again)
    and the mark (every table is written whole next time)."""
    from analyzer.spark import incremental
    from analyzer.spark.session import spark_schema

    base = f"{out}/{incremental.INGEST}"
    _frame(spark, plan.manifest, spark_schema(incremental.MANIFEST_COLS)).write.mode("overwrite").parquet(
        f"{base}/manifest.new"
    )
    _delete(spark, f"{base}/manifest")
    _rename(spark, f"{base}/manifest.new", f"{base}/manifest")
    used = {f"run={r}" for r, _ in plan.current}
    for name in _children(spark, f"{base}/parsed"):
        if name not in used:
            _delete(spark, f"{base}/parsed/{name}")
    _mark(spark, f"{base}/{incremental.RUNNING}", False)


def _tagged(spark: SparkSession, stage: str, parts: dict[str, list[tuple[str, str]]], name: str) -> DataFrame:
    """Table ``name``'s rows out of a staging folder of tagged rows (partition pruning reads only its folder; the
    schema is given, so a table no task emitted reads as empty)."""
    from analyzer.spark.session import tagged_schema

    return spark.read.schema(tagged_schema(parts)).parquet(stage).where(f"_t = '{name}'").select(f"{name}.*")


def _write(
    df: DataFrame,
    sessions: DataFrame,
    out: str,
    name: str,
    summary: SparkSummary,
    files: DataFrame | None = None,
    only: set[tuple[str, ...]] | None = None,
) -> None:
    """Write table ``name`` under ``out/name`` with the partition keys of ``analyzer.store.parquet``: whole, or only
    the partitions ``only`` names (dynamic partition overwrite: every other partition's files are left as they are;
    a partition of ``only`` left without rows is removed)."""
    from pyspark.sql import functions as F

    from analyzer.store.parquet import partition_keys

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
    spark = df.sparkSession
    target = f"{out}/{name}"
    if only is not None and keys and not only and _exists(spark, target):
        pass  # no partition to write: the table stays as it is
    elif only is not None and keys and _exists(spark, target):
        df = df.join(F.broadcast(_partitions(spark, only, keys)), list(keys), "left_semi")
        folders = [f"{target}/{_folder(spark, keys, p)}" for p in sorted(only)]
        before = {f: _children(spark, f) for f in folders}
        df.repartition(*keys).write.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy(
            *keys
        ).parquet(target)
        for f, names in before.items():
            if names and _children(spark, f) == names:  # no row went there: its old files would stay
                _delete(spark, f)
        summary.partitions_rewritten += len(only)
    else:
        if keys:
            df = df.repartition(*keys)
        df.write.mode("overwrite").option("partitionOverwriteMode", "static").partitionBy(*keys).parquet(target)
        summary.partitions_rewritten += sum(1 for _ in _leaves(spark, target, len(keys)))
    summary.partitions_total += sum(1 for _ in _leaves(spark, target, len(keys)))
    if name in COUNTED:
        summary.rows[name] = _read(spark, out, name, df.drop(*keys)).count()


def _read(spark: SparkSession, out: str, name: str, like: DataFrame, partitions: bool = False) -> DataFrame:
    """Table ``name`` as written under ``out`` (its own columns; the schema is given, so an empty table reads);
    ``partitions``: with its partition keys."""
    from pyspark.sql.types import StringType, StructField, StructType

    from analyzer.store.parquet import partition_keys

    keys = partition_keys(name) if partitions else ()
    schema = StructType([*like.schema.fields, *(StructField(k, StringType()) for k in keys)])  # (add() mutates)
    return spark.read.schema(schema).parquet(f"{out}/{name}").select(*like.columns, *keys)


def _partitions(spark: SparkSession, only: set[tuple[str, ...]], keys: Sequence[str] = PARTITION_KEYS) -> DataFrame:
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField(k, StringType()) for k in keys])
    return spark.createDataFrame(sorted(only), schema)


def _folder(spark: SparkSession, keys: Sequence[str], values: tuple[str, ...]) -> str:
    """A partition's folder, its values escaped as Spark escapes them."""
    esc = spark.sparkContext._jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils  # type: ignore[union-attr]
    return "/".join(f"{k}={esc.escapePathName(v)}" for k, v in zip(keys, values))


def _leaves(spark: SparkSession, path: str, depth: int) -> list[str]:
    """The partition folders ``depth`` levels under ``path``."""
    level = [path]
    for _ in range(depth):
        level = [f"{p}/{n}" for p in level for n in _children(spark, p) if "=" in n]
    return level if depth else []
