#!/usr/bin/env python3
"""Replay benchmark: what each preset guard costs a call, in one process, before and after, run by run.

    python benchmarks/bench_replay.py                                  # 300 sessions of the 600-session corpus
    python benchmarks/bench_replay.py --baseline ../wt-before --repeat 3
    python benchmarks/bench_replay.py --store my.duckdb --sessions 1000

A whole `report` or `analyze` replays the ten preset guards in worker processes beside everything else, so a change
of a few percent in one guard drowns in a 2-core host's noise (±10-40% within the hour). This times the replay
alone: one process (``--baseline``'s checkout and this one in turn, ``--repeat`` times each) reads ``--sessions``
sessions of a store, builds them afresh for each guard (a guard's caches on the calls stay its own) and times each
guard's replay, then the building itself. Figures are microseconds of wall time a call; the table gives the median
of the runs and, with a baseline, the median and range of after ÷ before over the pairs.

Without ``--store``, the store is the 600-session corpus of ``bench_scale.py`` (written to /tmp when missing),
ingested once by this checkout into a scratch folder; a store is only read.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import CHECKOUT, Checkout, paired_ratio  # noqa: E402

# Runs in the measured checkout's interpreter, on its own code: prints {guard: µs a call, ..., "(building the
# sessions)": µs a call, "calls": n}.
PROBE = r"""
import json, sys, time
import duckdb
from analyzer.guards.policies import resolve
from analyzer.guards.replay import build_corpus, read_corpus, replay
from analyzer.store.filters import SessionIds

if __name__ == "__main__":
    con = duckdb.connect(sys.argv[1], read_only=True)
    ids = [r[0] for r in con.execute("SELECT session_id FROM sessions ORDER BY session_id LIMIT ?",
                                     [int(sys.argv[2])]).fetchall()]
    frames = read_corpus(con, SessionIds(ids))
    out = {}
    builds = []
    for policy in resolve(["all"]):  # the preset guards, as the report replays them
        t = time.perf_counter()
        corpus = build_corpus(frames)
        builds.append(time.perf_counter() - t)
        calls = sum(len(s.calls) for s in corpus.sessions)
        t = time.perf_counter()
        replay(corpus, [policy], workers=1)
        out[policy.name] = (time.perf_counter() - t) / calls * 1e6
    out["(building the sessions)"] = min(builds) / calls * 1e6
    out["calls"] = calls
    print(json.dumps(out))
"""
CALLS = "calls"


def probe(checkout: Checkout, store: Path, sessions: int) -> dict[str, float]:
    """One run of ``PROBE`` in ``checkout``: µs a call per guard (and for building), and the calls replayed."""
    r = subprocess.run(
        [str(checkout.python), "-c", PROBE, str(store), str(sessions)],
        env=checkout.env(),
        capture_output=True,
        text=True,
        cwd="/",
    )  # not ours: ``-c`` puts the cwd first
    if r.returncode:
        raise SystemExit(f"the replay probe failed in {checkout.root or checkout.exe}:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def default_store(scratch: Path) -> Path:
    """The 600-session corpus of ``bench_scale.py``, ingested by this checkout."""
    from bench_scale import SMALL, corpus_of

    corpus, _ = corpus_of(SMALL)
    store = scratch / "replay.duckdb"
    print(f"ingesting {corpus} into {store} ...", flush=True)
    subprocess.run(
        [str(CHECKOUT.exe), "ingest", str(corpus), "--db", str(store), "--quiet"], env=CHECKOUT.env(), check=True
    )
    return store


def guards_total(run: dict[str, float]) -> float:
    """µs a call for every guard of a run together (building the sessions apart)."""
    return sum(v for k, v in run.items() if k != CALLS and not k.startswith("("))


def table(runs: dict[str, list[dict[str, float]]]) -> list[str]:
    """Markdown rows: each guard's median µs a call per checkout and, with two checkouts, after ÷ before by pair."""
    names = list(runs)
    guards = [k for k in runs[names[-1]][0] if k != CALLS]
    head = "| guard | " + " | ".join(f"{n}: µs a call" for n in names)
    head += " | after ÷ before (min–max) |" if len(names) == 2 else " |"
    lines = [head, "|" + "---|" * (len(names) + 1 + (len(names) == 2))]
    total = {n: [guards_total(r) for r in runs[n]] for n in names}
    for g in guards + ["(all guards)"]:
        cols = [total[n] if g == "(all guards)" else [r.get(g, float("nan")) for r in runs[n]] for n in names]
        row = f"| {g} | " + " | ".join(f"{statistics.median(c):.1f}" for c in cols)
        if len(names) == 2:
            row += f" | {paired_ratio(cols[1], cols[0]) or '—'}"
        lines.append(row + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, default=None, help="a loopscope store to read (default: see above)")
    ap.add_argument("--sessions", type=int, default=300, help="sessions replayed (default 300)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each checkout, in turn (default 3)")
    ap.add_argument("--baseline", type=Path, default=None, help="a checkout (or `loopscope` entry point) to compare")
    args = ap.parse_args()
    if args.sessions < 1 or args.repeat < 1:
        ap.error("--sessions and --repeat must be at least 1")
    if args.store is not None and not args.store.is_file():
        ap.error(f"no store at {args.store}")
    checkouts = {"before": Checkout.at(args.baseline)} if args.baseline else {}
    checkouts["after"] = CHECKOUT
    for name, c in checkouts.items():
        print(f"{name}: {c.python} running the code in {c.source()}")
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as scratch:
        store = args.store or default_store(Path(scratch))
        runs: dict[str, list[dict[str, float]]] = {n: [] for n in checkouts}
        for i in range(args.repeat):
            for name, c in checkouts.items():
                runs[name].append(probe(c, store, args.sessions))
                print(f"run {i + 1}/{args.repeat} {name}: {guards_total(runs[name][-1]):.1f} µs a call", flush=True)
    calls = int(runs["after"][0][CALLS])
    print(
        f"\nReplay of {args.sessions:,} sessions ({calls:,} calls) of {store}, one process, medians of {args.repeat}:\n"
    )
    print("\n".join(table(runs)))


if __name__ == "__main__":
    main()
