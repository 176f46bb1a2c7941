"""The pipeline on Apache Spark, over Parquet (``loopscope spark run``, the ``loopscope[spark]`` extra).

The same adapters, the same landing SQL and the same detector core as the single-machine store, run in Spark tasks;
only the set work that needs the whole corpus (duplicate sessions, usage deduplication across files, session totals)
is Spark's own, as shuffles over the parsed rows. One module per stage:

- ``session``: the SparkSession (local mode or ``--master``), the Java check, and the Spark schemas of the tables;
- ``listing``: the input's files, listed through Hadoop's filesystem layer (any URI Spark reads), classified as
  ``loopscope ingest`` classifies them and grouped by the files one parser reads together;
- ``ingest``: files' bytes -> rows, whole groups per task (``mapInArrow``), then the cross-file set work;
- ``errors``: pyspark's and the JVM's errors as one line saying what to fix;
- ``scan``: sessions -> signals and findings, whole sessions per group (``groupBy(...).applyInArrow``);
- ``incremental``: what a run over a previous run's output parses, scans and rewrites (file ids kept, only the
  partitions that change written);
- ``hadoop``: frames of driver-side rows, and folders through Hadoop's filesystem layer;
- ``run``: the job end to end, writing every table as Parquet in the layout of ``analyzer.store.parquet``.
"""
