#!/usr/bin/env python3
"""Precision and recall of loopscope's stuck findings on the labelled real transcripts (tests/realdata), the tuning
and the held-aside parts apart, with the misses and the false findings listed.

    python benchmarks/bench_realdata.py

The scoring rule and the corpus are those of tests/realdata_score.py (and tests/test_realdata_score.py pins the
figures): a stuck finding with 3+ repeats matches a labelled episode when they share a call (for text, the message).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from realdata_score import render, run  # noqa: E402


def main() -> None:
    t0 = time.perf_counter()
    parts = run(verbose=False)
    print(render(parts))
    print(f"\n(ingest + scan + score of the labelled corpus: {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
