"""The scale benchmark's corpus sizing and its verdicts (no timing: the figures are made up here)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_scale as bs  # noqa: E402
from _measure import CHECKOUT, Run  # noqa: E402

GEN = ROOT / "benchmarks" / "gen_corpus.py"


def test_sessions_option_writes_that_many_sessions_of_the_asked_total(tmp_path: Path) -> None:
    out = tmp_path / "c"
    subprocess.run(
        [sys.executable, str(GEN), "--sessions", "12", "--size-mb", "6", "--big-rate", "0.09", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    m = json.loads((out / ".manifest.json").read_text())
    assert 12 <= sum(m["sessions"].values()) <= 13  # a Claude session's subagent may be the 13th
    assert 3e6 < m["bytes"] < 12e6
    assert (m["sessions_target"], m["big_rate"]) == (12, 0.09)


def test_sessions_option_rejects_zero_without_a_traceback(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, str(GEN), "--sessions", "0", "--out", str(tmp_path / "c")], capture_output=True, text=True
    )
    assert r.returncode == 2 and "--sessions must be at least 1" in r.stderr and "Traceback" not in r.stderr


def _step(seconds: float, rss_mb: float = 100) -> bs.Step:
    return bs.Step(
        [
            Run(
                seconds=seconds,
                returncode=0,
                peak_tree_rss=int(rss_mb * 1e6),
                max_process_rss=0,
                max_processes=1,
                main_rss=0,
                workers_rss=0,
                cpu_seconds=seconds,
                stdout="",
                stderr="",
            )
        ]
    )


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
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--sessions", text],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "--sessions" in r.stderr and "Traceback" not in r.stderr


def test_schedule_times_the_asked_steps_and_runs_what_they_need_once_untimed() -> None:
    assert bs.schedule(["report"]) == [("ingest", False), ("scan", False), ("report", True)]
    assert bs.schedule(["startup", "ingest"]) == [("ingest", True), ("scan", False), ("startup", True)]
    assert bs.schedule(["unchanged"]) == [("analyze", False), ("unchanged", True)]
    assert bs.schedule(list(bs.STEPS)) == [(k, True) for k in bs.STEPS]
    with pytest.raises(ValueError, match="unknown step"):
        bs.schedule(["reports"])


def _runs(pairs: list[tuple[float, float]]) -> bs.Step:
    return bs.Step(
        [
            Run(
                seconds=w,
                returncode=0,
                peak_tree_rss=0,
                max_process_rss=0,
                max_processes=1,
                main_rss=0,
                workers_rss=0,
                cpu_seconds=c,
                stdout="",
                stderr="",
            )
            for w, c in pairs
        ]
    )


def test_paired_ratios_divide_each_run_by_the_one_beside_it() -> None:
    """The host slowed between the pairs: each pair's ratio is 0.8 in wall time whatever the drift, which the
    medians of the two columns (25 ÷ 26.25) would not show."""
    after = bs.Subject("after", CHECKOUT, Path("/nonexistent"), full_results=False)
    before = bs.Subject("before", CHECKOUT, Path("/nonexistent"), full_results=False)
    after.steps = {"report": _runs([(16, 30), (24, 45), (40, 90)])}
    before.steps = {"report": _runs([(20, 30), (30, 50), (50, 100)]), "scan": _runs([(5, 5)])}
    size = bs.Size(2400, Path("/nonexistent"), 2400, _step(1.0), None, {"before": before, "after": after})
    lines = bs.paired([size])
    assert lines[2:] == ["| `report` | 2,400 | 3 | 0.80x (0.80–0.80) | 0.90x (0.90–1.00) |"]  # no scan: one side


def test_steps_option_rejects_an_unknown_step_without_a_traceback() -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--steps", "report,nope"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "unknown step(s) nope" in r.stderr and "Traceback" not in r.stderr


def test_table_leaves_out_the_rows_of_steps_not_timed() -> None:
    """``--steps report``: the report's rows and its memory, none of the ingest's or the scan's (their stores were
    made untimed)."""
    times = {"report": 15}
    t = _rows(
        bs.table(
            [_size(600, 600, 90_000, times, 500), _size(2400, 2400, 360_000, {"report": 18}, 700)],
            ["after"],
            {"report"},
        )
    )
    labels = {label for label, _ in t}
    assert ("`report`", "2,400") in t and t[("`report`", "2,400")][-1] == "PASS"
    assert ("peak RSS of report", "2,400") in t
    assert not labels & {
        "cold `ingest`",
        "cold ingest ÷ bare parse",
        "cold `scan`",
        "peak RSS of ingest",
        "ingest s/MB, 2,400 ÷ 600",
        "cold `analyze`",
    }


def test_report_and_cold_analyze_start_without_the_replays_a_run_before_kept(tmp_path: Path) -> None:
    # A report keeps its guard replays beside the store; a second timed run would reuse them and skip the replays.
    s = bs.Subject("after", CHECKOUT, tmp_path, full_results=True)
    steps = bs.plan(s, tmp_path / "corpus", [])
    for key, db in (("report", s.db), ("analyze", s.analyze_db)):
        cache = bs.replay_cache_path(db)
        cache.write_bytes(b"kept")
        prepare, _ = steps[key]
        assert prepare is not None
        prepare()
        assert not cache.exists()


def test_budgets_set_each_step_s_cpu_against_its_target_times_the_cores() -> None:
    small = _size(600, 600, 90_000, {"ingest": 6.0, "scan": 3.0, "startup": 0.8}, 500)
    large = _size(2400, 2400, 360_000, {"report": 30.0, "analyze": 50.0}, 700)
    small.subjects["after"].steps["ingest"].runs[0] = replace(
        small.subjects["after"].steps["ingest"].runs[0], cpu_seconds=9.0
    )
    t = _rows(bs.budgets([small, large], cores=2))
    # ingest: target 3 × the 1.0 s bare parse; 9 s of CPU against 6 s the two cores give in 3 s
    assert t[("cold `ingest`", "600")][2:] == [
        "3× bare parse = 3.00 s",
        "6.00 s",
        "2.00x",
        "9.0 s",
        "4.50 s",
        "6.0 s",
        "1.50x",
    ]
    # the scan's budget is 0.9 s for 90k calls; its start-up alone takes 0.8 s of it
    assert t[("scan start-up (no-change rescan)", "600")][4] == "0.89x"
    assert t[("`report`", "2,400")][-1] == "0.75x"  # 30 s of CPU in a 40 s budget: only the schedule misses
    assert t[("cold `analyze`", "2,400")][4] == "0.83x"
    assert ("`report`", "600") not in t  # absolute targets only at the issue's size


def test_budgets_leave_out_steps_not_timed() -> None:
    t = _rows(
        bs.budgets([_size(600, 600, 90_000, {"scan": 3.0}, 500), _size(1200, 1200, 1, {"report": 9}, 1)], cores=2)
    )
    assert set(t) == {("cold `scan`", "600")}
