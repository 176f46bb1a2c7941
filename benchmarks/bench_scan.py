#!/usr/bin/env python3
"""Scan benchmark: detector throughput in calls per second, and the scan's time as a share of the cold ingest.

    python benchmarks/bench_scan.py CORPUS [--size-mb 400] [--workers N] [--store-dir DIR] [--scan-runs N]

CORPUS is a folder of transcripts; when it does not exist, gen_corpus.py writes a synthetic multi-format corpus
there (``--size-mb``). One run, each step its own process, as a user would type it:

1. cold ingest: ``loopscope ingest CORPUS --db <fresh store>``;
2. cold scan: ``loopscope scan --db <store>`` (every session is new); with ``--scan-runs N``, N times, each on a
   fresh copy of the just-ingested store, and the median counts (a small shared machine varies by ~10% run to run);
3. no-change rescan: the same command again.

The scan's wall time includes everything the command does (start-up, reading the store, the detector, writing
signals and findings), so calls/s is what a user sees. Prints the figures and a markdown table with the targets
(>= 200,000 calls/s; <= 25% of the cold ingest).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import Run, loopscope, mb, verdict  # noqa: E402
from gen_corpus import ensure  # noqa: E402

TARGET_RATE = 200_000
TARGET_SHARE = 0.25


def store_counts(db: Path) -> dict[str, int]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        q = {
            "sessions": "SELECT count(*) FROM sessions",
            "calls": "SELECT count(*) FROM calls",
            "messages": "SELECT count(*) FROM turns WHERE role = 'assistant'",
            "signals": "SELECT count(*) FROM signals",
            "findings": "SELECT count(*) FROM findings",
            "stuck": "SELECT count(*) FROM findings WHERE stuck",
        }
        return {k: int(con.execute(sql).fetchone()[0]) for k, sql in q.items()}
    finally:
        con.close()


def findings_by_kind(db: Path) -> str:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT kind, count(*) FROM findings GROUP BY kind ORDER BY 2 DESC").fetchall()
    finally:
        con.close()
    return ", ".join(f"{k} {n:,}" for k, n in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path, help="folder of transcripts (generated there when missing)")
    ap.add_argument("--size-mb", type=float, default=400, help="corpus size when it has to be generated")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=None, help="passed to ingest and scan (default: one per core)")
    ap.add_argument("--store-dir", type=Path, default=None, help="where to put the store (default: a temp dir)")
    ap.add_argument("--keep-store", action="store_true")
    ap.add_argument("--scan-runs", type=int, default=1, help="cold scans, each on a fresh copy (median reported)")
    args = ap.parse_args()

    if not args.corpus.exists():
        ensure(args.corpus, args.size_mb, args.seed)
    size = sum(p.stat().st_size for p in args.corpus.rglob("*") if p.is_file() and not p.name.startswith("."))
    workers = ["--workers", str(args.workers)] if args.workers is not None else []

    store_dir = Path(tempfile.mkdtemp(prefix="loopscope-bench-scan-", dir=args.store_dir))
    db = store_dir / "store.duckdb"
    try:
        ingest = loopscope("ingest", str(args.corpus), "--db", str(db), "--quiet", *workers)
        counts = store_counts(db)
        print(f"corpus: {args.corpus}  {mb(size)}, {counts['sessions']:,} sessions, {counts['calls']:,} calls, "
              f"{counts['messages']:,} assistant messages", flush=True)
        print(f"cold ingest: {ingest.seconds:.2f} s", flush=True)
        pristine = store_dir / "ingested.duckdb"
        if args.scan_runs > 1:
            shutil.copyfile(db, pristine)
        runs: list[Run] = []
        for i in range(max(1, args.scan_runs)):
            if i:
                shutil.copyfile(pristine, db)
            runs.append(loopscope("scan", "--db", str(db), "--quiet", *workers))
            if args.scan_runs > 1:
                print(f"cold scan run {i + 1}: {runs[-1].seconds:.2f} s", flush=True)
        cold = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
        counts = store_counts(db)
        assert counts["signals"] == counts["calls"], counts
        rate = counts["calls"] / cold.seconds
        share = cold.seconds / ingest.seconds
        label = f"cold scan (median of {len(runs)})" if len(runs) > 1 else "cold scan"
        print(f"{label}: {cold.seconds:.2f} s = {rate:,.0f} calls/s, {share:.1%} of the cold ingest; peak RSS "
              f"{mb(cold.peak_tree_rss)} over up to {cold.max_processes} processes; {counts['findings']:,} findings "
              f"({counts['stuck']:,} stuck): {findings_by_kind(db)}", flush=True)
        again = loopscope("scan", "--db", str(db), "--quiet", *workers)
        print(f"no-change rescan: {again.seconds:.2f} s ({again.seconds / cold.seconds:.1%} of the cold scan)",
              flush=True)
    finally:
        if args.keep_store:
            print(f"store kept at {db}")
        else:
            shutil.rmtree(store_dir, ignore_errors=True)

    print()
    print(f"| scan benchmark ({mb(size)}, {counts['sessions']:,} sessions, {counts['calls']:,} calls, "
          f"{counts['messages']:,} messages) | figure | target | met |")
    print("|---|---|---|---|")
    spread = (f" (median of {len(runs)}: {min(r.seconds for r in runs):.2f}-{max(r.seconds for r in runs):.2f} s)"
              if len(runs) > 1 else "")
    print(f"| cold `loopscope scan` | {cold.seconds:.2f} s = {rate:,.0f} calls/s{spread} | >= {TARGET_RATE:,} "
          f"calls/s | {verdict(rate >= TARGET_RATE)} |")
    print(f"| scan / cold ingest ({ingest.seconds:.2f} s) | {share:.1%} | <= {TARGET_SHARE:.0%} | "
          f"{verdict(share <= TARGET_SHARE)} |")
    print(f"| no-change rescan | {again.seconds:.2f} s | | |")
    print(f"| peak RSS of the scan | {mb(cold.peak_tree_rss)} | | |")


if __name__ == "__main__":
    main()
