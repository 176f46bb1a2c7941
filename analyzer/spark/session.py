"""The SparkSession, the Java check, the Spark schemas of the store's tables, and what tasks report back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from analyzer.errors import UsageError
from analyzer.tables import Table, arrow_type

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

SHUFFLE_PARTITIONS = 8  # the corpus is files: a few large partitions beat Spark's default 200 tiny ones


def missing() -> str | None:
    """Why the Spark path cannot run here (no pyspark, no Java), or None."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed: pip install 'loopscope[spark]'"
    java = (
        shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin"))
        if os.environ.get("JAVA_HOME")
        else shutil.which("java")
    )
    if java is None:
        return "no Java runtime (java not on PATH and no JAVA_HOME): Spark needs Java 17 or later"
    try:
        subprocess.run([java, "-version"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"java does not run: {exc}"
    return None


def spark_session(master: str | None = None, shuffle_partitions: int | None = None) -> SparkSession:
    """The active SparkSession, or a new one on ``master`` (default: what ``spark-submit`` set, else
    ``$LOOPSCOPE_SPARK_MASTER``, else ``local[*]``)."""
    why = missing()
    if why:
        raise UsageError(why)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    # Under spark-submit the JVM is already up with its --master: leave it be. Otherwise default to local mode.
    submitted = bool(os.environ.get("PYSPARK_GATEWAY_PORT"))
    if master is None and not submitted:
        master = os.environ.get("LOOPSCOPE_SPARK_MASTER", "local[*]")
    if master is not None and master.startswith("local"):
        # Local Python workers run this interpreter (the one with loopscope installed); a cluster sets its own.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = SparkSession.builder.appName("loopscope")
    if master is not None:
        b = b.master(master)
    return (
        b.config("spark.sql.shuffle.partitions", str(shuffle_partitions or SHUFFLE_PARTITIONS))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .getOrCreate()
    )


def arrow_schema(cols: Iterable[tuple[str, str]], large: bool = True) -> pa.Schema:
    """The Arrow schema of (name, SQL type) columns (``analyzer.tables``); ``large=False``: strings as Spark's Arrow
    exchange wants them (``string``, not ``large_string``)."""
    import pyarrow as pa

    def small(t: pa.DataType) -> pa.DataType:
        if t == pa.large_string():
            return pa.string()
        if pa.types.is_list(t):
            return pa.list_(small(t.value_type))
        return t

    return pa.schema([(n, arrow_type(sql) if large else small(arrow_type(sql))) for n, sql in cols])


def table_cols(table: Table) -> list[tuple[str, str]]:
    return [(c.name, c.sql) for c in table.columns]


def spark_schema(cols: Iterable[tuple[str, str]]) -> StructType:
    """The Spark schema of (name, SQL type) columns, through their Arrow types (``analyzer.tables``): timestamps are
    the store's naive UTC ``TIMESTAMP_NTZ``."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    return StructType(
        [StructField(f.name, from_arrow_type(f.type, prefer_timestamp_ntz=True), True) for f in arrow_schema(cols)]
    )


def tagged_schema(parts: dict[str, list[tuple[str, str]]]) -> StructType:
    """One row shape for several tables out of one task: ``_t`` names the table, one struct column per table holds
    the row (the others are NULL). Tasks emit it; ``run`` writes it partitioned by ``_t`` and reads each table back."""
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType(
        [StructField("_t", StringType(), False)]
        + [StructField(name, spark_schema(cols), True) for name, cols in parts.items()]
    )


def tagged_batch(parts: dict[str, list[tuple[str, str]]], name: str, rows: pa.Table) -> pa.RecordBatch:
    """``rows`` of table ``name`` as a batch of ``tagged_schema(parts)``."""
    import pyarrow as pa

    n = rows.num_rows
    cols = [pa.array([name] * n, pa.string())]
    for other, spec in parts.items():
        st = pa.struct(list(arrow_schema(spec, large=False)))
        if other == name:
            table = rows.select([c for c, _ in spec]).cast(arrow_schema(spec, large=False)).combine_chunks()
            cols.append(
                pa.StructArray.from_arrays(
                    [
                        table.column(i).chunk(0)
                        if table.column(i).num_chunks
                        else pa.array([], table.schema.field(i).type)
                        for i in range(table.num_columns)
                    ],
                    fields=list(st),
                )
            )
        else:
            cols.append(pa.nulls(n, st))
    return pa.RecordBatch.from_arrays(cols, names=["_t", *parts])


class TaskLog:
    """What the tasks did, added up on the driver through accumulators: files parsed, sessions scanned, and the
    process ids of the Python workers that did it (proof that the work ran in executors, not on the driver)."""

    def __init__(self, spark: SparkSession) -> None:
        from pyspark.accumulators import AccumulatorParam

        class SetParam(AccumulatorParam):
            def zero(self, value: frozenset) -> frozenset:
                return frozenset()

            def addInPlace(self, a: frozenset, b: frozenset) -> frozenset:
                return frozenset(a) | frozenset(b)

        sc = spark.sparkContext
        self.files = sc.accumulator(0)
        self.calls = sc.accumulator(0)  # calls parsed in tasks
        self.bytes = sc.accumulator(0)
        self.sessions = sc.accumulator(0)
        self.parse_seconds = sc.accumulator(0.0)  # time tasks spent parsing and landing files (the per-file work)
        self.scan_seconds = sc.accumulator(0.0)  # time tasks spent in the detector core (the per-session work)
        self.pids = sc.accumulator(frozenset(), SetParam())
