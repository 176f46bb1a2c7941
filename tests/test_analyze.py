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
    return subprocess.run(
        [sys.executable, "-m", "analyzer.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


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
    # one page per session (loop-free ones too), and the store in the working directory
    db = work / "loopscope.duckdb"
    assert query(db, "SELECT count(DISTINCT session_id) FROM findings")[0][0] == 15
    assert (
        len(list((work / "loopscope-report" / "sessions").glob("*.html")))
        == query(db, "SELECT count(*) FROM sessions")[0][0]
        == 25
    )
    html = index.read_text()
    assert "Worst sessions" in html and "sessions/" in html


def test_running_it_again_is_incremental(analyzed: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    work, first = analyzed
    assert first.returncode == 0, first.stderr
    proc = loopscope("analyze", str(SAMPLE_DATA), cwd=work)
    assert proc.returncode == 0, proc.stderr
    # the transcripts, opencode's message and part files (read with their session) and sample_data's docs and
    # scripts (recorded as skipped, not read, the first time)
    assert "0 files ingested, 79 unchanged" in proc.stdout
    assert "skipped" in first.stdout and "README.md: not read" in first.stdout
    assert "24 files ingested (+50 companion files read with them)" in first.stdout
    assert not [line for line in first.stdout.splitlines() if "skipped" in line and "/opencode/" in line]
    assert "0 sessions scanned (25 unchanged)" in proc.stdout
    # nothing changed, so the last calibration still holds
    assert "calibrate: kept the" in proc.stdout and "calibrate: kept the" not in first.stdout
    # and so does the report: nothing is written again
    assert "report: kept the report of" in proc.stdout and "files): nothing changed since" in proc.stdout
    assert "report: kept" not in first.stdout


def sample_findings_table(db: Path) -> str:
    rows = query(
        db,
        "SELECT f.session_id, s.format, f.kind, f.tools, f.first_seq, f.last_seq, f.repeats, f.stuck, "
        "f.wasted_tokens FROM findings f JOIN sessions s USING (session_id) "
        "ORDER BY s.format, f.session_id, f.first_seq",
    )
    lines = [
        "| session | agent | kind | tools | calls (seq) | repeats | stuck | wasted tokens |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for sid, fmt, kind, tools, first, last, repeats, stuck, wasted in rows:
        lines.append(
            f"| `{sid[:13]}` | {fmt} | {kind} | {', '.join(tools)} | {first}–{last} | {repeats} | "
            f"{'yes' if stuck else 'no'} | {wasted:,} |"
        )
    return "\n".join(lines)


def test_readme_shows_the_findings_sample_data_gives(analyzed: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    work, proc = analyzed
    assert proc.returncode == 0, proc.stderr
    expected = sample_findings_table(work / "loopscope.duckdb")
    shown = README[README.index(START) + len(START) : README.index(END)].strip()
    assert shown == expected, "update the README's sample findings table to:\n" + expected


def test_findings_json_contract(analyzed: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    work, _ = analyzed
    proc = loopscope("findings", "--format", "json", cwd=work)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    contract = [
        "finding_id",
        "session_id",
        "kind",
        "period",
        "tools",
        "call_ids",
        "first_seq",
        "last_seq",
        "repeats",
        "stuck",
        "user_turn",
        "why",
        "wasted_tokens",
        "estimated_tokens",
        "cost_usd",
    ]
    assert len(rows) == 15 and all(list(r)[: len(contract)] == contract for r in rows)
    from analyzer.detect.rules import KINDS

    assert {r["kind"] for r in rows} == set(KINDS)  # the sample data shows every kind, waiting included
    poll = [r for r in rows if not r["stuck"]]
    assert len(poll) == 1 and poll[0]["kind"] == "waiting"  # the release run watched until it finished
    assert poll[0]["wasted_tokens"] == 0


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
    webshop = query(
        work / "loopscope.duckdb",
        "SELECT count(*) FROM sessions WHERE cwd LIKE '%webshop%' AND started_at >= '2026-03-04'",
    )[0][0]
    assert json.loads(proc.stdout)["totals"]["sessions"] == webshop
    bad = loopscope("sessions", "--since", "last week", cwd=work)
    assert bad.returncode == 2 and "--since" in bad.stderr and "Traceback" not in bad.stderr
    assert re.search(r"expected a date", bad.stderr)


def test_a_cold_analyze_replays_the_report_guards_in_the_calibration_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The calibration's exact replay builds every scanned session; a cold ``analyze`` replays the report's preset
    guards from those same sessions and caches the rows, so the report replays none of them again. The rows are
    those of a fresh replay of every session, and the pages those of a report that replays everything itself."""
    import shutil

    import polars as pl

    import analyzer.analyze as analyze
    from analyzer.analyze import replay_cache_path, replay_presets
    from analyzer.calibrate import recommend
    from analyzer.store import connection

    replayed_by_report: list[int] = []
    chunks = analyze._replay_chunks
    monkeypatch.setattr(
        analyze,
        "_replay_chunks",
        lambda con, todo, *a: (replayed_by_report.append(len(todo)), chunks(con, todo, *a))[1],
    )
    monkeypatch.setattr(recommend, "VERIFY_CHUNK", 4)  # several jobs, each serving both
    db, out = tmp_path / "s.duckdb", tmp_path / "r"
    analyze.analyze([SAMPLE_DATA], db, out, workers=1)
    assert replayed_by_report == [0]
    cached = pl.read_parquet(replay_cache_path(db)).drop("_key", "_fp")
    con = connection.connect(db, read_only=True)
    try:
        fresh = replay_presets(con, workers=1)
    finally:
        con.close()
    assert fresh is not None and cached.height == fresh.frame.height >= 8 * 25
    assert cached.equals(fresh.frame)
    # a report that replays every session itself writes the same pages
    shutil.copyfile(db, tmp_path / "copy.duckdb")
    con = connection.connect(tmp_path / "copy.duckdb", read_only=True)
    try:
        analyze.write_report(con, tmp_path / "r2", workers=1, cache=tmp_path / "none.parquet")
    finally:
        con.close()
    assert replayed_by_report[-1] == 25
    footer = re.compile(r"generated \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC")  # the minute each was written
    pages = sorted((out / "sessions").glob("*.html"))
    assert len(pages) == 25  # every session has a page
    for page in pages:
        assert footer.sub("", page.read_text()) == footer.sub(
            "", (tmp_path / "r2" / "sessions" / page.name).read_text()
        ), page.name
