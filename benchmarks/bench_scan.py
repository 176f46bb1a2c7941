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
signals and findings), so calls/s is what a user sees. One more cold scan, on another fresh copy, runs ``scan()`` in a
child process that reports where its time went (``ScanSummary``): start-up (interpreter, imports, opening the store,
planning) apart from the steady state (reading the groups, the detectors, landing the rows), each with its calls/s,
and the peak RSS of the process. Prints the figures and a markdown table with the targets (whole command >= 100,000
calls/s, steady state >= 200,000 calls/s; <= 25% of the cold ingest).
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

from _measure import CHECKOUT, Run, loopscope, mb, run, verdict  # noqa: E402
from gen_corpus import ensure  # noqa: E402

TARGET_RATE = 100_000  # the whole command, start-up included
TARGET_STEADY = 200_000  # reading, detecting and landing the groups
TARGET_SHARE = 0.25
# The scan in-process, its phases printed as JSON: the interpreter's own start-up is the command's wall time minus
# what ``scan()`` measured.
_PHASES = """
import dataclasses, json, sys, time
t0 = time.perf_counter()
from analyzer.scan.run import scan
s = scan(sys.argv[1], workers=int(sys.argv[2]) if sys.argv[2] else None)
print(json.dumps({**dataclasses.asdict(s), "imports": time.perf_counter() - t0 - s.seconds}))
"""


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


def scan_phases(pristine: Path, store_dir: Path, workers: int | None) -> dict[str, float]:
    """A cold scan of a fresh copy of the ingested store in a child process: ``ScanSummary``'s fields, plus its wall
    time and peak RSS."""
    import json

    copy = store_dir / "phases.duckdb"
    shutil.copyfile(pristine, copy)
    r = run([sys.executable, "-c", _PHASES, str(copy), "" if workers is None else str(workers)])
    if r.returncode:
        raise SystemExit(f"in-process scan failed ({r.returncode}):\n{r.stderr[-4000:]}")
    copy.unlink()
    return {**json.loads(r.stdout.strip().splitlines()[-1]), "_wall": r.seconds, "_rss": r.peak_tree_rss}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path, help="folder of transcripts (generated there when missing)")
    ap.add_argument("--size-mb", type=float, default=400, help="corpus size when it has to be generated")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=None, help="passed to ingest and scan (default: one per core)")
    ap.add_argument("--store-dir", type=Path, default=None, help="where to put the store (default: a temp dir)")
    ap.add_argument("--keep-store", action="store_true")
    ap.add_argument("--scan-runs", type=int, default=1, help="cold scans, each on a fresh copy (median reported)")
    ap.add_argument(
        "--from-store",
        type=Path,
        default=None,
        help="an ingested, unscanned store of CORPUS to copy instead of ingesting (no ingest figures)",
    )
    args = ap.parse_args()

    if not args.corpus.exists():
        ensure(args.corpus, args.size_mb, args.seed)
    size = sum(p.stat().st_size for p in args.corpus.rglob("*") if p.is_file() and not p.name.startswith("."))
    workers = ["--workers", str(args.workers)] if args.workers is not None else []
    CHECKOUT.compile()

    store_dir = Path(tempfile.mkdtemp(prefix="loopscope-bench-scan-", dir=args.store_dir))
    db = store_dir / "store.duckdb"
    try:
        if args.from_store:
            shutil.copyfile(args.from_store, db)
            ingest = None
        else:
            ingest = loopscope("ingest", str(args.corpus), "--db", str(db), "--quiet", *workers)
        counts = store_counts(db)
        print(
            f"corpus: {args.corpus}  {mb(size)}, {counts['sessions']:,} sessions, {counts['calls']:,} calls, "
            f"{counts['messages']:,} assistant messages",
            flush=True,
        )
        if ingest:
            print(f"cold ingest: {ingest.seconds:.2f} s", flush=True)
        pristine = store_dir / "ingested.duckdb"
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
        phases = scan_phases(pristine, store_dir, args.workers)
        assert counts["signals"] == counts["calls"], counts
        rate = counts["calls"] / cold.seconds
        share = cold.seconds / ingest.seconds if ingest else None
        label = f"cold scan (median of {len(runs)})" if len(runs) > 1 else "cold scan"
        of_ingest = f", {share:.1%} of the cold ingest" if share is not None else ""
        print(
            f"{label}: {cold.seconds:.2f} s = {rate:,.0f} calls/s{of_ingest}; peak RSS "
            f"{mb(cold.peak_tree_rss)} over up to {cold.max_processes} processes; {counts['findings']:,} findings "
            f"({counts['stuck']:,} stuck): {findings_by_kind(db)}",
            flush=True,
        )
        steady = phases["read"] + phases["detect"] + phases["land"]
        startup = phases["_wall"] - steady  # what does not grow with the store: start-up, and the end
        close = phases["seconds"] - phases["startup"] - steady  # the last checkpoint
        print(
            f"phases (one more cold scan, in-process): start-up and end {startup:.2f} s (interpreter, imports "
            f"and exit {phases['_wall'] - phases['seconds']:.2f} s, store and plan {phases['startup']:.2f} s, last "
            f"checkpoint and close {close:.2f} s), read "
            f"{phases['read']:.2f} s, detect {phases['detect']:.2f} s = {counts['calls'] / phases['detect']:,.0f} "
            f"calls/s, land {phases['land']:.2f} s; steady state {counts['calls'] / steady:,.0f} calls/s; "
            f"peak RSS {mb(phases['_rss'])}",
            flush=True,
        )
        again = loopscope("scan", "--db", str(db), "--quiet", *workers)
        print(
            f"no-change rescan: {again.seconds:.2f} s ({again.seconds / cold.seconds:.1%} of the cold scan)", flush=True
        )
    finally:
        if args.keep_store:
            print(f"store kept at {db}")
        else:
            shutil.rmtree(store_dir, ignore_errors=True)

    print()
    print(
        f"| scan benchmark ({mb(size)}, {counts['sessions']:,} sessions, {counts['calls']:,} calls, "
        f"{counts['messages']:,} messages) | figure | target | met |"
    )
    print("|---|---|---|---|")
    spread = (
        f" (median of {len(runs)}: {min(r.seconds for r in runs):.2f}-{max(r.seconds for r in runs):.2f} s)"
        if len(runs) > 1
        else ""
    )
    print(
        f"| cold `loopscope scan` | {cold.seconds:.2f} s = {rate:,.0f} calls/s{spread} | >= {TARGET_RATE:,} "
        f"calls/s | {verdict(rate >= TARGET_RATE)} |"
    )
    print(f"| start-up and end (interpreter, imports, store, plan; last checkpoint) | {startup:.2f} s | | |")
    print(
        f"| steady state (read {phases['read']:.2f} s + detect {phases['detect']:.2f} s + land "
        f"{phases['land']:.2f} s) | {counts['calls'] / steady:,.0f} calls/s | >= {TARGET_STEADY:,} calls/s | "
        f"{verdict(counts['calls'] / steady >= TARGET_STEADY)} |"
    )
    print(f"| detectors alone | {counts['calls'] / phases['detect']:,.0f} calls/s | | |")
    if ingest and share is not None:
        print(
            f"| scan / cold ingest ({ingest.seconds:.2f} s) | {share:.1%} | <= {TARGET_SHARE:.0%} | "
            f"{verdict(share <= TARGET_SHARE)} |"
        )
    print(f"| no-change rescan | {again.seconds:.2f} s | | |")
    print(f"| peak RSS of the scan | {mb(cold.peak_tree_rss)} | | |")


if __name__ == "__main__":
    main()
