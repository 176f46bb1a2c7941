"""The replay benchmark's table (no timing: the figures are made up here) and its argument checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_replay as br  # noqa: E402


def _run(pi: float, loopscope: float, build: float = 6.0) -> dict[str, float]:
    return {"pi-anti-doom-loop": pi, "loopscope": loopscope, "(building the sessions)": build, "calls": 1000}


def test_table_gives_medians_and_the_ratio_of_each_pair() -> None:
    # The host slows down over the runs (every figure doubles), yet each pair says the change saves 20% of pi.
    runs = {"before": [_run(20, 10), _run(40, 20), _run(80, 40)], "after": [_run(16, 10), _run(32, 20), _run(64, 40)]}
    rows = br.table(runs)
    assert rows[0] == "| guard | before: µs a call | after: µs a call | after ÷ before (min–max) |"
    assert "| pi-anti-doom-loop | 40.0 | 32.0 | 0.80x (0.80–0.80) |" in rows
    assert "| loopscope | 20.0 | 20.0 | 1.00x (1.00–1.00) |" in rows
    # every guard together, the building of the sessions apart
    assert "| (all guards) | 60.0 | 52.0 | 0.87x (0.87–0.87) |" in rows
    assert "| (building the sessions) | 6.0 | 6.0 | 1.00x (1.00–1.00) |" in rows


def test_one_checkout_gives_medians_without_ratios() -> None:
    rows = br.table({"after": [_run(16, 10), _run(18, 12), _run(30, 11)]})
    assert rows[0] == "| guard | after: µs a call |"
    assert "| pi-anti-doom-loop | 18.0 |" in rows and "| (all guards) | 30.0 |" in rows


def test_a_missing_store_is_refused_without_a_traceback(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_replay.py"), "--store", str(tmp_path / "none.duckdb")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "no store at" in r.stderr and "Traceback" not in r.stderr
