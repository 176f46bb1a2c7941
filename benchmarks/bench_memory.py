#!/usr/bin/env python3
"""Memory benchmark: ingest ONE ~1 GB transcript file and report the ingest's peak RSS (target < 1 GB).

    python benchmarks/bench_memory.py [--size-mb 1024] [--format pi|codex] [--dir /tmp/loopscope-1gb]

Why: a single session can grow to gigabytes (months of a long-running agent, huge tool outputs), and the ingest must
stream it, not hold it. The file is one session rendered by ``sample_data/transcript_writer.py`` (the same shapes as
``sample_data/``), written line by line as it is generated, so generating it needs little memory too. It is reused on
later runs when the same size and format are asked for. The ingest runs as a subprocess; its whole process tree is
sampled (see ``_measure.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import CHECKOUT, mb  # noqa: E402
from gen_corpus import Blobs, Scenarios, _path  # noqa: E402
from transcript_writer import Session, new_uuid, render  # noqa: E402

GB = 1 << 30


def generate(folder: Path, size_mb: float, fmt: str, seed: int) -> Path:
    """Stream one session of about ``size_mb`` MB into ``folder`` (agent layout); return the file's path."""
    rng = random.Random(seed)
    sc = Scenarios(rng, Blobs.build(random.Random(seed + 1)))
    target = int(size_mb * 1e6)
    written = 0

    def turns():  # generated lazily: the renderer asks for the next turn only after writing the previous one
        while written < target:
            yield from sc.turns(fmt, 1)

    s = Session(
        fmt,
        new_uuid(rng),
        "/home/dana/src/monorepo",
        datetime(2026, 1, 5, 8, 0, tzinfo=UTC),
        "claude-sonnet-4-5" if fmt == "pi" else "gpt-5.1-codex",
        turns(),
        seed=seed,
        version="0.63.0" if fmt == "codex" else "",
        variant="exec",
    )
    path = folder / _path(s)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb", buffering=1 << 20) as f:
        for line in render(s):
            f.write(line)
            written += len(line)
    (folder / ".manifest.json").write_text(
        json.dumps({"size_mb": size_mb, "format": fmt, "seed": seed, "path": str(path), "bytes": written}) + "\n"
    )
    return path


def ensure(folder: Path, size_mb: float, fmt: str, seed: int) -> Path:
    mf = folder / ".manifest.json"
    if mf.exists():
        m = json.loads(mf.read_text())
        if (m["size_mb"], m["format"], m["seed"]) == (size_mb, fmt, seed) and Path(m["path"]).exists():
            return Path(m["path"])
        shutil.rmtree(folder)
    t = time.perf_counter()
    print(f"generating one {size_mb:g} MB {fmt} transcript in {folder} ...", flush=True)
    path = generate(folder, size_mb, fmt, seed)
    print(f"  {mb(path.stat().st_size)} in {time.perf_counter() - t:.1f} s", flush=True)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=1024)
    ap.add_argument("--format", choices=["pi", "codex"], default="pi")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/loopscope-1gb"))
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()

    path = ensure(args.dir, args.size_mb, args.format, args.seed)
    size = path.stat().st_size
    store_dir = Path(tempfile.mkdtemp(prefix="loopscope-mem-"))
    try:
        db = store_dir / "store.duckdb"
        r = CHECKOUT.run("ingest", str(path), "--db", str(db), "--quiet")
        import duckdb

        con = duckdb.connect(str(db), read_only=True)
        sessions, calls, turns = con.execute("SELECT count(*), sum(calls), sum(turns) FROM sessions").fetchone()
        errors = con.execute("SELECT count(*) FROM ingest_errors").fetchone()[0]
        con.close()
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
    print(
        f"ingested {mb(size)} ({args.format}, {sessions} session, {calls:,} calls, {turns:,} turns, {errors} errors) "
        f"in {r.seconds:.1f} s; peak RSS {mb(r.peak_tree_rss)} over up to {r.max_processes} processes, largest "
        f"process {mb(r.max_process_rss)} (main process {mb(r.main_rss)}, largest worker {mb(r.workers_rss)})"
    )
    print()
    print(f"| memory benchmark: one {mb(size)} {args.format} transcript | figure | target | met |")
    print("|---|---|---|---|")
    print(f"| ingest time | {r.seconds:.1f} s ({size / 1e6 / r.seconds:,.1f} MB/s) | | |")
    print(
        f"| peak RSS, all {r.max_processes} processes | {mb(r.peak_tree_rss)} | < 1 GB | "
        f"{'yes' if r.peak_tree_rss < GB else '**no**'} |"
    )
    print(
        f"| largest single process | {mb(r.max_process_rss)} (main {mb(r.main_rss)}, worker {mb(r.workers_rss)}) | | |"
    )


if __name__ == "__main__":
    main()
