#!/usr/bin/env python3
"""Ingest benchmark: cold ingest against DuckDB's bare JSON parse, no-change re-ingest, and peak memory.

    python benchmarks/bench_ingest.py [--corpus /tmp/loopscope-corpus] [--size-mb 500] [--workers N]

Generates the corpus with gen_corpus.py when the folder is missing. Every measured step runs as its own process with
a warm page cache (the corpus was just written or read), so the figures compare parsing, not disk reads:

1. bare parse: DuckDB reads every line of every ``*.jsonl`` file and extracts one field (the floor for "read all the
   JSON"; it uses all cores, as the ingest does);
2. cold ingest: ``loopscope ingest CORPUS --db <fresh store>``, with peak RSS of its whole process tree;
3. re-ingest: the same command again, nothing changed.

Prints the figures and a markdown table with the targets (cold <= 3x bare parse, re-ingest <= 2% of cold,
peak RSS < 1 GB) for the README.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import CHECKOUT, Run, mb, verdict  # noqa: E402
from _references import bare_parse  # noqa: E402
from gen_corpus import ensure  # noqa: E402

GB = 1 << 30


def ingest(corpus: Path, db: Path, workers: int | None, quiet: bool = True) -> Run:
    args = ["ingest", str(corpus), "--db", str(db)] + (["--quiet"] if quiet else [])
    if workers is not None:
        args += ["--workers", str(workers)]
    return CHECKOUT.run(*args)


def store_summary(db: Path) -> dict:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        files = dict(con.execute("SELECT coalesce(format, 'skipped'), count(*) FROM files GROUP BY 1").fetchall())
        sessions, calls = con.execute("SELECT count(*), coalesce(sum(calls), 0) FROM sessions").fetchone()
        errors = con.execute("SELECT count(*) FROM ingest_errors").fetchone()[0]
        by_fmt = dict(con.execute("SELECT format, count(*) FROM sessions GROUP BY 1").fetchall())
    finally:
        con.close()
    return {"files": files, "sessions": sessions, "calls": calls, "errors": errors, "sessions_by_format": by_fmt}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=Path("/tmp/loopscope-corpus"))
    ap.add_argument("--size-mb", type=float, default=500, help="corpus size when it has to be generated")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=None, help="passed to loopscope ingest (default: its own)")
    ap.add_argument("--store-dir", type=Path, default=None, help="where to put the store (default: a temp dir)")
    ap.add_argument("--keep-store", action="store_true")
    args = ap.parse_args()

    manifest = ensure(args.corpus, args.size_mb, args.seed)
    size = manifest["bytes"]
    print(
        f"corpus: {args.corpus}  {mb(size)}, {manifest['files']:,} files, {sum(manifest['sessions'].values()):,} "
        f"sessions ({', '.join(f'{k} {mb(v)}' for k, v in manifest['bytes_by_format'].items())})",
        flush=True,
    )

    best = min(bare_parse(args.corpus), key=lambda b: b.seconds)
    parse_s, objects = best.seconds, best.objects
    print(
        f"bare parse (DuckDB read_json_objects + one field): {parse_s:.2f} s, {objects:,} JSON objects, "
        f"{size / 1e6 / parse_s:,.0f} MB/s",
        flush=True,
    )

    store_dir = Path(tempfile.mkdtemp(prefix="loopscope-bench-", dir=args.store_dir))
    db = store_dir / "store.duckdb"
    try:
        cold = ingest(args.corpus, db, args.workers)
        summary = store_summary(db)
        print(
            f"cold ingest: {cold.seconds:.2f} s ({size / 1e6 / cold.seconds:,.1f} MB/s), "
            f"peak RSS {mb(cold.peak_tree_rss)}"
            f" over up to {cold.max_processes} processes (largest single process {mb(cold.max_process_rss)}; main "
            f"{mb(cold.main_rss)}, largest worker {mb(cold.workers_rss)}); "
            f"store: {summary}",
            flush=True,
        )
        again = ingest(args.corpus, db, args.workers, quiet=False)
        # The command prints its own time ("... MB in 0.10 s"): the ingest proper, without the ~0.3 s the
        # interpreter takes to start and import typer, rich and DuckDB, a fixed cost whatever the corpus size.
        own = float(re.search(r"MB in ([0-9.]+) s", again.stdout).group(1))
        print(
            f"no-change re-ingest: {again.seconds:.2f} s for the command ({again.seconds / cold.seconds:.1%} of "
            f"cold), {own:.2f} s of ingest ({own / cold.seconds:.1%}), peak RSS {mb(again.peak_tree_rss)}",
            flush=True,
        )
        store_mb = db.stat().st_size
    finally:
        if not args.keep_store:
            shutil.rmtree(store_dir, ignore_errors=True)
        else:
            print(f"store kept at {db}")

    ratio = cold.seconds / parse_s
    share = again.seconds / cold.seconds
    own_share = own / cold.seconds
    print()
    print(
        f"| ingest benchmark ({mb(size)}, {manifest['files']:,} files, {summary['sessions']:,} sessions, "
        f"{summary['calls']:,} calls) | figure | target | met |"
    )
    print("|---|---|---|---|")
    print(f"| DuckDB bare parse (`read_json_objects`, one field) | {parse_s:.2f} s | | |")
    print(
        f"| cold `loopscope ingest` | {cold.seconds:.2f} s = {ratio:.1f}x bare parse | <= 3x | {verdict(ratio <= 3)} |"
    )
    print(
        f"| no-change re-ingest: the ingest's own time | {own:.2f} s = {own_share:.1%} of cold | <= 2% | "
        f"{verdict(own_share <= 0.02)} |"
    )
    print(
        f"| no-change re-ingest: the whole command, interpreter start included | {again.seconds:.2f} s = "
        f"{share:.1%} of cold | <= 2% | {verdict(share <= 0.02)} |"
    )
    print(
        f"| peak RSS of the ingest (all {cold.max_processes} processes) | {mb(cold.peak_tree_rss)} "
        f"(main {mb(cold.main_rss)}, largest worker {mb(cold.workers_rss)}) | < 1 GB | "
        f"{verdict(cold.peak_tree_rss < GB)} |"
    )
    print(f"| store size | {mb(store_mb)} | | |")
    print(f"| ingest errors | {summary['errors']:,} | | |")


if __name__ == "__main__":
    main()
