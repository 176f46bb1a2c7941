"""``loopscope spark run``: the pipeline on Apache Spark, over Parquet (the ``loopscope[spark]`` extra)."""

from __future__ import annotations

from typing import Annotated

import typer

from analyzer.commands.common import QuietOpt, handle_errors, out

app = typer.Typer(
    help="The pipeline on Apache Spark (pip install 'loopscope[spark]' and a Java runtime).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.command("run")
@handle_errors
def run(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Transcript files or folders: local paths or any URI Spark reads (file://, hdfs://, s3a://, gs://, "
            "abfss://); listed on the driver, read by the executors."
        ),
    ],
    out_dir: Annotated[
        str,
        typer.Option(
            "--out",
            help="Folder for the Parquet tables (DIR/<table>/): a path, or a URL Spark writes (hdfs://, s3a://).",
        ),
    ],
    master: Annotated[
        str | None,
        typer.Option(
            "--master",
            help="Spark master URL (local[4], spark://host:7077, yarn, ...). Default: what spark-submit "
            "set, else local[*].",
            show_default=False,
        ),
    ] = None,
    reset_on_user: Annotated[
        bool,
        typer.Option(
            "--reset-on-user/--no-reset-on-user",
            help="Restart every counter at each user prompt (as almost every guard does).",
        ),
    ] = True,
    quiet: QuietOpt = False,
) -> None:
    """Ingest and scan on Spark: the same adapters and detector core as `loopscope ingest` and `scan`, every table
    written as Parquet under --out (read it with `loopscope report --from DIR`)."""
    from analyzer.detect.stream.calls import Config
    from analyzer.spark.run import run as spark_run

    s = spark_run(paths, out_dir, master=master, config=Config(reset_on_user=reset_on_user))
    if quiet:
        return
    r = s.rows
    mb = s.bytes / 1e6
    out.print(
        f"{s.files:,} files ({mb:,.1f} MB) on {s.master} ({s.cores} cores): {r.get('sessions', 0):,} sessions, "
        f"{r.get('calls', 0):,} calls, {r.get('findings', 0):,} findings, {r.get('ingest_errors', 0):,} ingest "
        f"errors\n{s.files_parsed_in_tasks:,} files parsed, {s.files_reused:,} unchanged since the last run; "
        f"{s.sessions_scanned_in_tasks:,} sessions scanned; {s.partitions_rewritten:,} of {s.partitions_total:,} "
        f"partitions rewritten\n"
        f"ingest {s.ingest_seconds:.1f} s ({mb / max(s.ingest_seconds, 1e-9):,.1f} MB/s), scan "
        f"{s.scan_seconds:.1f} s ({r.get('calls', 0) / max(s.scan_seconds, 1e-9):,.0f} calls/s); "
        f"wrote {out_dir}",
        soft_wrap=True,
        markup=False,
    )
