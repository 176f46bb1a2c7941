#!/usr/bin/env python3
"""Choose the held-out sources of the labelled real set and record them in tests/realdata/heldout.json.

    python tests/realdata/tools/choose_heldout.py [--write]

The rule, fixed before any rule of the detector was changed on the new labels: group the sources (``source_of``) by
the format most of their labels are in; within each format, order the sources by the sha1 of their name and hold
out the first third (rounded up, so every format with a source has a held-out one). The held-out sources' files,
labels and misses are not looked at while rules change; their figures are the README's headline. A source added
after the choice was recorded is held out when sha1(name) % 3 == 0 (``realdata_labels.part_of_source``).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

from realdata_labels import HELD_OUT, HELDOUT_FILE, TUNING, load_labels, source_of  # noqa: E402


def choose() -> dict[str, list[str]]:
    formats: dict[str, Counter[str]] = defaultdict(Counter)
    for rec in load_labels():
        formats[source_of(rec["file"])][rec["format"]] += 1
    by_format: dict[str, list[str]] = defaultdict(list)
    for src, counts in formats.items():
        by_format[counts.most_common(1)[0][0]].append(src)
    held: list[str] = []
    tuning: list[str] = []
    for fmt in sorted(by_format):
        ranked = sorted(by_format[fmt], key=lambda s: hashlib.sha1(s.encode()).hexdigest())
        k = math.ceil(len(ranked) / 3)
        held += ranked[:k]
        tuning += ranked[k:]
    return {HELD_OUT: sorted(held), TUNING: sorted(tuning)}


def main() -> None:
    choice = choose()
    print(f"{len(choice[HELD_OUT])} held-out sources of {len(choice[HELD_OUT]) + len(choice[TUNING])}:")
    for s in choice[HELD_OUT]:
        print(f"  {s}")
    if "--write" in sys.argv:
        rule = " ".join(__doc__.split("\n\n")[2].split())
        HELDOUT_FILE.write_text(json.dumps({"rule": rule, **choice}, indent=1) + "\n", encoding="utf-8")
        print(f"written: {HELDOUT_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
