"""Exact rendering of one small page, compared with a reviewed snapshot after normalising what legitimately
changes between runs (asset hashes, versions, the temp folder). A change to templates, figures or formatting shows
up here as a readable diff; regenerate with LOOPSCOPE_UPDATE_SNAPSHOTS=1 after reviewing it."""

from __future__ import annotations

import difflib
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from test_report_corpus import build_store

from analyzer import __version__
from analyzer.store import connection
from reports import render_report
from reports.data import ReportData
from reports.paths import session_slug

SNAPSHOTS = Path(__file__).parent / "snapshots"


def normalise(html: str, tmp: Path) -> str:
    from plotly.offline import get_plotlyjs_version

    html = html.replace(str(tmp), "<tmp>")
    html = re.sub(r"loopscope-[0-9a-f]{10}\.(css|js)", r"loopscope-<hash>.\1", html)
    html = re.sub(r'data-store="[^"]*"', 'data-store="<store id>"', html)  # derived from the temp folder's path
    html = html.replace(f"plotly-{get_plotlyjs_version()}.min.js", "plotly-<version>.min.js")
    return html.replace(f"loopscope {__version__}", "loopscope <version>")


def test_session_page_matches_snapshot(tmp_path: Path) -> None:
    db = build_store(tmp_path)
    con = connection.connect(db, read_only=True)
    try:
        render_report(ReportData(con), tmp_path / "r", generated_at=datetime(2026, 3, 5, 12, 0, tzinfo=UTC))
    finally:
        con.close()
    page = tmp_path / "r" / "sessions" / f"{session_slug('sess-window')}.html"
    got = normalise(page.read_text(), tmp_path)
    snap = SNAPSHOTS / "report_session_window.html"
    if os.environ.get("LOOPSCOPE_UPDATE_SNAPSHOTS"):
        snap.parent.mkdir(exist_ok=True)
        snap.write_text(got)
    assert snap.is_file(), f"no snapshot at {snap}: run with LOOPSCOPE_UPDATE_SNAPSHOTS=1 and review it"
    want = snap.read_text()
    if got != want:
        diff = "\n".join(
            difflib.unified_diff(want.splitlines(), got.splitlines(), "snapshot", "rendered", lineterm="", n=2)
        )
        raise AssertionError(f"session page differs from {snap.name}:\n{diff[:6000]}")
