"""Shared test helpers: where the public fixtures live, and a fresh store per test."""

from __future__ import annotations

import compileall
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"  # public transcripts copied byte-exact, each with its source in SOURCES.md
SAMPLE_DATA = ROOT / "sample_data"


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
