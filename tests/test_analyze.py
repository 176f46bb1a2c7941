"""`loopscope analyze`, the README's main command, end to end on sample_data: what a new user runs first."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SAMPLE_DATA
from helpers import query

README = (ROOT / "README.md").read_text()
START, END = "<!-- sample-findings:start -->", "<!-- sample-findings:end -->"


def loopscope(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "analyzer.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    work = tmp_path_factory.mktemp("analyze")
    return work, loopscope("analyze", str(SAMPLE_DATA), cwd=work)


def test_analyze_prints_where_the_report_is(analyzed: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    work, proc = analyzed
    assert proc.returncode == 0, proc.stderr
    index = work / "loopscope-report" / "index.html"
    assert f"report: {index}" in proc.stdout
    for stage in ("ingest:", "scan:", "calibrate:", "report:"):
        assert stage in proc.stdout
    assert (work / "loopscope-report" / "calibration.html").exists()
    # one page per session with findings, and the store in the working directory
    sessions_with_loops = query(work / "loopscope.duckdb", "SELECT count(DISTINCT session_id) FROM findings")[0][0]
    assert len(list((work / "loopscope-report" / "sessions").glob("*.html"))) == sessions_with_loops == 15
    html = index.read_text()
    assert "Worst sessions" in html and "sessions/" in html


def test_running_it_again_is_incremental(analyzed: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    work, first = analyzed
    assert first.returncode == 0, first.stderr
    proc = loopscope("analyze", str(SAMPLE_DATA), cwd=work)
    assert proc.returncode == 0, proc.stderr
    # the transcripts (opencode's message and part files read with their session) and sample_data's docs and
    # scripts, recorded as skipped (not read) the first time
    assert "0 files ingested, 79 unchanged" in proc.stdout
    assert "skipped" in first.stdout and "README.md: not read" in first.stdout
    assert "0 sessions scanned (25 unchanged)" in proc.stdout
    # nothing changed, so the last calibration still holds
    assert "calibrate: kept the" in proc.stdout and "calibrate: kept the" not in first.stdout
    # and so does the report: nothing is written again
    assert "report: kept the report of" in proc.stdout and "files): nothing changed since" in proc.stdout
    assert "report: kept" not in first.stdout


def sample_findings_table(db: Path) -> str:
    rows = query(db, "SELECT f.session_id, s.format, f.kind, f.tools, f.first_seq, f.last_seq, f.repeats, f.stuck, "
                     "f.wasted_tokens FROM findings f JOIN sessions s USING (session_id) "
                     "ORDER BY s.format, f.session_id, f.first_seq")
    lines = ["| session | agent | kind | tools | calls (seq) | repeats | stuck | wasted tokens |",
             "|---|---|---|---|---|---|---|---|"]
    for sid, fmt, kind, tools, first, last, repeats, stuck, wasted in rows:
        lines.append(f"| `{sid[:13]}` | {fmt} | {kind} | {', '.join(tools)} | {first}–{last} | {repeats} | "
                     f"{'yes' if stuck else 'no'} | {wasted:,} |")
    return "\n".join(lines)


def test_readme_shows_the_findings_sample_data_gives(analyzed: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    work, proc = analyzed
    assert proc.returncode == 0, proc.stderr
    expected = sample_findings_table(work / "loopscope.duckdb")
    shown = README[README.index(START) + len(START):README.index(END)].strip()
    assert shown == expected, "update the README's sample findings table to:\n" + expected


def test_findings_json_contract(analyzed: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    work, _ = analyzed
    proc = loopscope("findings", "--format", "json", cwd=work)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    contract = ["finding_id", "session_id", "kind", "period", "tools", "call_ids", "first_seq", "last_seq", "repeats",
                "stuck", "user_turn", "why", "wasted_tokens", "estimated_tokens", "cost_usd"]
    assert len(rows) == 15 and all(list(r)[:len(contract)] == contract for r in rows)
    assert {r["kind"] for r in rows} == {"streak", "cycle", "drift", "failure", "window", "text", "nested"}
    poll = [r for r in rows if not r["stuck"]]
    assert len(poll) == 1 and poll[0]["kind"] == "streak"  # the CI poll whose status changes


def test_filters_narrow_every_listing_the_same_way(analyzed: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    work, _ = analyzed
    counts = {}
    for cmd in ("sessions", "findings"):
        proc = loopscope(cmd, "--agent", "codex", "--format", "json", cwd=work)
        assert proc.returncode == 0, proc.stderr
        counts[cmd] = json.loads(proc.stdout)
    assert {r["format"] for r in counts["sessions"]} == {"codex"}
    codex_ids = {r["session_id"] for r in counts["sessions"]}
    assert counts["findings"] and {r["session_id"] for r in counts["findings"]} <= codex_ids
    proc = loopscope("summary", "--project", "webshop", "--since", "2026-03-04", "--format", "json", cwd=work)
    assert proc.returncode == 0, proc.stderr
    webshop = query(work / "loopscope.duckdb", "SELECT count(*) FROM sessions WHERE cwd LIKE '%webshop%' "
                                               "AND started_at >= '2026-03-04'")[0][0]
    assert json.loads(proc.stdout)["totals"]["sessions"] == webshop
    bad = loopscope("sessions", "--since", "last week", cwd=work)
    assert bad.returncode == 2 and "--since" in bad.stderr and "Traceback" not in bad.stderr
    assert re.search(r"expected a date", bad.stderr)
