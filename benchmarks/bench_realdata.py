#!/usr/bin/env python3
"""Precision, recall and healthy-kept of loopscope's stuck findings on the labelled real transcripts (tests/realdata),
held-out and tuning sources apart, per format and per source, with the false findings and the misses listed.

    python benchmarks/bench_realdata.py            # both parts (the held-out figures are the README's headline)
    python benchmarks/bench_realdata.py --tuning   # the tuning sources only: what to read while rules change
    python benchmarks/bench_realdata.py --committed  # only the files the repository holds (what CI scores)
    python benchmarks/bench_realdata.py --figures  # the tables alone, no finding or label listed
    python benchmarks/bench_realdata.py --loso     # also each part's figures with each one source left out

Sources without a licence are committed as manifests (tests/realdata/sources/*.tsv): restore their files first with
`python tests/realdata/tools/fetch_manifest.py` (from git mirrors of the repositories); without them the figures
cover the committed part only. The scoring rule is that of `analyzer.evaluate.score` (tests/realdata_score.py builds
the corpus and reads the findings; tests/test_realdata_score.py pins the committed part's figures).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from realdata_labels import HELD_OUT, TUNING  # noqa: E402
from realdata_score import render, run  # noqa: E402


def main() -> None:
    parts = (TUNING,) if "--tuning" in sys.argv else (HELD_OUT, TUNING)
    t0 = time.perf_counter()
    scores = run(verbose=False, fetched="--committed" not in sys.argv, parts=parts)
    print(render(scores, parts, details="--figures" not in sys.argv, loso="--loso" in sys.argv))
    print(f"\n(ingest + scan + score of the labelled corpus: {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
