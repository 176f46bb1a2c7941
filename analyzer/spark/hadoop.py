"""Spark-side helpers of ``spark run``: frames made on the driver from listing-sized rows, and folders handled through
Hadoop's filesystem layer (local, HDFS or an object store alike)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def frame(spark: SparkSession, rows: list[tuple], schema: StructType) -> DataFrame:
    """Rows made on the driver (the listing, never a transcript's rows) as a frame: through an RDD of a few slices,
    so a listing of millions of files is not planted in every task's plan."""
    sc = spark.sparkContext
    return spark.createDataFrame(
        sc.parallelize(rows, max(1, min(len(rows) // 10_000 + 1, sc.defaultParallelism))), schema
    )


def exists(spark: SparkSession, path: str) -> bool:
    fs, p = filesystem(spark, path)
    return bool(fs.exists(p))


def delete(spark: SparkSession, path: str) -> None:
    """Remove a folder through Hadoop's filesystem layer (local, HDFS or an object store alike)."""
    fs, p = filesystem(spark, path)
    fs.delete(p, True)


def filesystem(spark: SparkSession, path: str):  # noqa: ANN202 - a Hadoop FileSystem and Path
    jvm, conf = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    p = jvm.org.apache.hadoop.fs.Path(path)
    return p.getFileSystem(conf), p


def children(spark: SparkSession, path: str) -> list[str]:
    """The names in a folder (none when it does not exist), sorted; Spark's own hidden files left out."""
    fs, p = filesystem(spark, path)
    if not fs.exists(p):
        return []
    names = (str(st.getPath().getName()) for st in fs.listStatus(p))
    return sorted(n for n in names if not n.startswith(("_", ".")))


def mark(spark: SparkSession, path: str, on: bool) -> None:
    fs, p = filesystem(spark, path)
    if on:
        fs.create(p, True).close()
    else:
        fs.delete(p, False)


def rename(spark: SparkSession, src: str, dst: str) -> None:
    fs, p = filesystem(spark, src)
    _, q = filesystem(spark, dst)
    fs.rename(p, q)
