"""Shared test helpers: where the public fixtures live, a fresh store per test, and the rendered report site and the
headless Chromium that the browser tests (test_report_browser.py, test_report_audit_browser.py) share."""

from __future__ import annotations

import compileall
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"  # public transcripts copied byte-exact, each with its source in SOURCES.md
SAMPLE_DATA = ROOT / "sample_data"
CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the package's bytecode once, as an install does. Many tests start ``python -m analyzer...`` processes
    (the hook test alone starts ~3,000); where ``PYTHONDONTWRITEBYTECODE`` is set and the checkout is fresh, each of
    them would otherwise compile every module it imports again (about half of a hook process's time)."""
    for package in ("analyzer", "reports"):
        compileall.compile_dir(ROOT / package, quiet=1)


@pytest.fixture
def fixtures() -> Path:
    """The real public transcripts under tests/fixtures (see its SOURCES.md)."""
    return FIXTURES


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from test_report_corpus import build_store, sample_calibration, sample_replay

    from analyzer.store import connection
    from reports import render_report
    from reports.data import ReportData

    tmp = tmp_path_factory.mktemp("site")
    db = build_store(tmp)
    con = connection.connect(db, read_only=True)
    try:
        when = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)
        render_report(
            ReportData(con), tmp / "report", replay=sample_replay(), calibration=sample_calibration(), generated_at=when
        )
        render_report(
            ReportData(con),
            tmp / "single" / "report.html",
            single_file=True,
            replay=sample_replay(),
            calibration=sample_calibration(),
            generated_at=when,
        )
    finally:
        con.close()
    return tmp


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh --user-data-dir
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 1280, "height": 900},
        )
        # Nothing leaves the machine even if a page tried: any http(s) request is aborted (and recorded by the
        # tests' ``Visit``).
        ctx.route("http*://**/*", lambda route: route.abort())
        yield ctx
        ctx.close()
