"""The scale benchmark's corpus sizing and its verdicts (no timing: the figures are made up here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_scale as bs  # noqa: E402
from _measure import CHECKOUT, Run  # noqa: E402

GEN = ROOT / "benchmarks" / "gen_corpus.py"


def test_sessions_option_writes_that_many_sessions_of_the_asked_total(tmp_path: Path) -> None:
    out = tmp_path / "c"
    subprocess.run([sys.executable, str(GEN), "--sessions", "12", "--size-mb", "6", "--big-rate", "0.09",
                    "--out", str(out)], check=True, capture_output=True)
    m = json.loads((out / ".manifest.json").read_text())
    assert 12 <= sum(m["sessions"].values()) <= 13  # a Claude session's subagent may be the 13th
    assert 3e6 < m["bytes"] < 12e6
    assert (m["sessions_target"], m["big_rate"]) == (12, 0.09)


def test_sessions_option_rejects_zero_without_a_traceback(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(GEN), "--sessions", "0", "--out", str(tmp_path / "c")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--sessions must be at least 1" in r.stderr and "Traceback" not in r.stderr


def _step(seconds: float, rss_mb: float = 100) -> bs.Step:
    return bs.Step([Run(seconds, 0, int(rss_mb * 1e6), 0, 1, 0, 0, "", "")])


def _size(n: int, mb: float, calls: int, times: dict[str, float], rss: float) -> bs.Size:
    s = bs.Subject("after", CHECKOUT, Path("/nonexistent"), full_results=False, calls=calls, sessions=n)
    s.steps = {k: _step(v, rss) for k, v in times.items()}
    return bs.Size(n, Path("/nonexistent"), mb, _step(1.0), None, {"after": s})


def _rows(lines: list[str]) -> dict[tuple[str, str], list[str]]:
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    return {(r[0], r[1]): r for r in rows}


def test_table_judges_each_target_and_the_filed_figures_only_at_the_issue_sizes() -> None:
    fast = {"ingest": 2.5, "reingest": 0.3, "scan": 0.8, "startup": 0.4, "report": 15, "analyze": 50, "unchanged": 2}
    slow = {"ingest": 12.0, "reingest": 0.3, "scan": 4.0, "startup": 0.4, "report": 30, "analyze": 90, "unchanged": 9}
    t = _rows(bs.table([_size(600, 600, 90_000, fast, 500), _size(2400, 2400, 360_000, slow, 900)], ["after"]))
    assert t[("cold ingest ÷ bare parse", "600")][-3:] == ["2.50x", "<= 3x", "PASS"]
    assert t[("cold ingest ÷ bare parse", "600")][2] == "8.50x"  # as filed
    assert t[("cold scan, whole command", "600")][-1] == "PASS"  # 112k calls/s
    assert t[("scan steady state: calls ÷ (cold − start-up)", "2,400")][-1] == "miss"  # 100k calls/s
    assert t[("`report`", "2,400")][-1] == "miss" and t[("`report`", "2,400")][2] == "111 s, 1,100 MB"
    assert t[("cold ingest ÷ ccusage", "600")][-2:] == ["<= 3x", "n/a"]  # no ccusage
    assert t[("ingest s/MB, 2,400 ÷ 600", "2,400 ÷ 600")][-1] == "miss"  # 1.2x
    assert t[("peak RSS of ingest", "2,400")][-1] == "miss"  # 900 MB


def test_small_sizes_leave_absolute_targets_and_filed_figures_out() -> None:
    times = {"ingest": 1.0, "reingest": 0.3, "scan": 0.8, "startup": 0.4, "report": 1, "analyze": 2, "unchanged": 1}
    t = _rows(bs.table([_size(60, 60, 9_000, times, 300), _size(240, 240, 36_000, times, 300)], ["after"]))
    assert t[("`report`", "240")][-1] == "n/a (size)"
    assert t[("cold `ingest`", "60")][2] == "—"
    assert t[("ingest s/MB, 240 ÷ 60", "240 ÷ 60")][2] == "—"
    assert t[("cold ingest ÷ bare parse", "60")][-1] == "PASS"


@pytest.mark.parametrize("text", ["60,x", "0,240", ""])
def test_sessions_list_rejects_bad_input_with_a_message(text: str) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--sessions", text],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--sessions" in r.stderr and "Traceback" not in r.stderr
