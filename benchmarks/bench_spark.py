#!/usr/bin/env python3
"""Spark benchmark: ``loopscope spark run`` next to the single-machine pipeline (``ingest`` + ``scan``) on the same
generated corpus, and a check that both give the same rows in every table.

    python benchmarks/bench_spark.py [--sessions 600] [--size-mb 600] [--corpus DIR] [--master local[2]]

The corpus comes from gen_corpus.py; the default is the 600-session benchmark corpus (``--sessions 600 --size-mb
600``, ~1 MB sessions); ``--size-mb 27`` keeps the 600 sessions at ~45 KB each, for a quick run.
Spark's session start is timed apart (paid once per job, not per file). Throughput is files/s and calls/s, end to
end (ingest, scan) and inside the Spark tasks (the parsing and the detectors alone, summed task time), overall and
per core; the cores are Spark's ``defaultParallelism`` and, for the single-machine path, the workers it ran with.
A second ``spark run`` over the same output times the incremental path twice: nothing changed, then one file
rewritten (half its lines); the store ingests and scans the same change, and every table is compared after it too.
The runs read a copy of the corpus, so the generated one is never changed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from gen_corpus import ensure  # noqa: E402


def ms(got: list[tuple], table: str) -> list[tuple]:
    """``files.mtime_ns`` in milliseconds: Hadoop's listing (the Spark path's) keeps no finer."""
    if table != "files":
        return got
    return sorted(r[:6] + (None if r[6] is None else r[6] // 1_000_000,) + r[7:] for r in got)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=600, help="corpus size in MB (default 600)")
    ap.add_argument("--sessions", type=int, default=600, help="sessions in the corpus (default 600)")
    ap.add_argument("--corpus", type=Path, default=None, help="corpus folder (default /tmp/loopscope-spark-<size>mb)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--master", default=None, help="Spark master (default local[N], N = --cores)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="cores for both paths (default: all)")
    args = ap.parse_args()

    from parquet_support import TABLES, rows

    from analyzer.ingest.pipeline import ingest
    from analyzer.scan.run import scan
    from analyzer.spark.run import run
    from analyzer.spark.session import missing, spark_session
    from analyzer.store import connection
    from analyzer.store.parquet import open_dir

    why = missing()
    if why:
        raise SystemExit(f"cannot run Spark here: {why}")
    corpus = args.corpus or Path(f"/tmp/loopscope-spark-{args.sessions}s-{args.size_mb:g}mb")
    ensure(corpus, args.size_mb, args.seed, args.sessions)
    work = Path(tempfile.mkdtemp(prefix="loopscope-bench-spark-"))
    try:
        corpus = Path(shutil.copytree(corpus, work / "corpus"))
        db = work / "store.duckdb"
        t = time.perf_counter()
        ing = ingest([corpus], db, workers=args.cores)
        t_ingest = time.perf_counter() - t
        t = time.perf_counter()
        scan(db, workers=args.cores)
        t_scan = time.perf_counter() - t
        con = connection.connect(db, read_only=True)
        try:
            n = con.execute("SELECT count(*), sum(calls), sum(total_tokens) FROM sessions").fetchone()
            findings = con.execute("SELECT count(*) FROM findings").fetchone()[0]
        finally:
            con.close()

        t = time.perf_counter()
        spark = spark_session(args.master or f"local[{args.cores}]")
        t_start = time.perf_counter() - t
        s = run([corpus], work / "out", spark=spark)
        t = time.perf_counter()
        again = run([corpus], work / "out", spark=spark)
        t_again = time.perf_counter() - t
        changed = sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix == ".jsonl")[0]
        lines = changed.read_bytes().splitlines(keepends=True)
        changed.write_bytes(b"".join(lines[: len(lines) // 2]))
        t = time.perf_counter()
        one = run([corpus], work / "out", spark=spark)
        t_one = time.perf_counter() - t
        spark.stop()
        ingest([corpus], db, workers=args.cores)
        scan(db, workers=args.cores)

        con, pq = connection.connect(db, read_only=True), open_dir(work / "out")
        try:
            diff = [t for t in TABLES if ms(rows(pq, t), t) != ms(rows(con, t), t)]
        finally:
            con.close()
            pq.close()

        mb = ing.bytes / 1e6
        calls = int(n[1])
        print(
            f"corpus: {corpus} ({mb:,.1f} MB, {s.files:,} files, {n[0]:,} sessions, {calls:,} calls, "
            f"{int(n[2]):,} tokens, {findings:,} findings)"
        )
        print(f"spark session start: {t_start:.1f} s ({s.master}, {s.cores} cores)")
        print()
        files = s.files
        print(
            "| path | cores | ingest s | files/s | files/s per core | calls/s | calls/s per core "
            "| scan s | scan calls/s | calls/s per core |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, cores, ti, ts in (
            ("DuckDB store (ingest + scan), end to end", args.cores, t_ingest, t_scan),
            ("Spark (spark run), end to end", s.cores, s.ingest_seconds, s.scan_seconds),
            ("Spark, inside tasks (summed task time)", 1, s.task_parse_seconds, s.task_scan_seconds),
        ):
            print(
                f"| {name} | {cores} | {ti:.1f} | {files / ti:,.1f} | {files / ti / cores:,.1f} | {calls / ti:,.0f} "
                f"| {calls / ti / cores:,.0f} | {ts:.1f} | {calls / ts:,.0f} | {calls / ts / cores:,.0f} |"
            )
        print()
        print(
            f"inside the Spark tasks (the per-file and per-session work, without Spark's job and shuffle "
            f"overheads), per core: parsing {files / s.task_parse_seconds:,.1f} files/s, "
            f"{calls / s.task_parse_seconds:,.0f} calls/s ({mb / s.task_parse_seconds:,.2f} MB/s); detectors "
            f"{calls / s.task_scan_seconds:,.0f} calls/s"
        )
        for what, took, r in (("nothing changed", t_again, again), ("one file changed", t_one, one)):
            print(
                f"second spark run, {what}: {took:.1f} s (first run {s.seconds:.1f} s), {r.files_parsed_in_tasks:,} "
                f"files parsed, {r.files_reused:,} unchanged, {r.sessions_scanned_in_tasks:,} sessions scanned, "
                f"{r.partitions_rewritten:,} of {r.partitions_total:,} partitions rewritten "
                f"(first run: {s.partitions_rewritten:,})"
            )
        print(
            f"tasks: {s.files_parsed_in_tasks:,} files parsed and {s.sessions_scanned_in_tasks:,} sessions scanned "
            f"in {len(s.task_pids)} executor Python processes (driver pid {os.getpid()} not among them: "
            f"{os.getpid() not in s.task_pids})"
        )
        if diff:
            raise SystemExit(f"NOT EQUAL: tables {', '.join(diff)} differ between the store and the Spark runs")
        print(f"equal: {', '.join(TABLES)} hold the same rows in the store and the Spark runs (after the change)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
