#!/usr/bin/env python3
"""Precision, recall and healthy-kept of loopscope's stuck findings on the labelled real transcripts (tests/realdata),
held-out and tuning sources apart, per format and per source, with the false findings and the misses listed.

    python benchmarks/bench_realdata.py            # both parts (the held-out figures are the README's headline)
    python benchmarks/bench_realdata.py --tuning   # the tuning sources only: what to read while rules change
    python benchmarks/bench_realdata.py --committed  # only the files the repository holds (what CI scores)
    python benchmarks/bench_realdata.py --figures  # the tables alone, no finding or label listed
    python benchmarks/bench_realdata.py --loso     # also each part's figures with each one source left out
    python benchmarks/bench_realdata.py --readme   # also write the headline table into README.md (all files present)

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

from realdata_labels import HELD_OUT, TUNING, part_of_source  # noqa: E402
from realdata_score import render, run  # noqa: E402

from analyzer.evaluate.score import table  # noqa: E402

README = ROOT / "README.md"
START, END = "<!-- realdata:start -->", "<!-- realdata:end -->"


def readme_table(scores: dict) -> str:
    """The README's headline: the held-out sources' figures, then the tuning sources'."""
    sources = {k[7:] for k in scores if k.startswith("source=")}
    held = sum(part_of_source(s) == HELD_OUT for s in sources)
    rows = {f"held out ({held} of {len(sources)})": scores[f"part={HELD_OUT}"], "tuning": scores[f"part={TUNING}"]}
    return table(rows, rows, "sources")


def write_readme(scores: dict) -> None:
    text = README.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{START}\n{readme_table(scores)}\n{END}{tail}")


def main() -> None:
    parts = (TUNING,) if "--tuning" in sys.argv else (HELD_OUT, TUNING)
    if "--readme" in sys.argv and (len(parts) == 1 or "--committed" in sys.argv):
        sys.exit("--readme writes both parts' figures with every file present: not with --tuning or --committed")
    t0 = time.perf_counter()
    scores = run(verbose=False, fetched="--committed" not in sys.argv, parts=parts)
    print(render(scores, parts, details="--figures" not in sys.argv, loso="--loso" in sys.argv))
    print(f"\n(ingest + scan + score of the labelled corpus: {time.perf_counter() - t0:.1f} s)")
    if "--readme" in sys.argv:
        write_readme(scores)
        print(f"README.md: the table between {START} and {END} rewritten")


if __name__ == "__main__":
    main()
