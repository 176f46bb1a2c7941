"""Shared test helpers: where the public fixtures live, and a fresh store per test."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"  # public transcripts copied byte-exact, each with its source in SOURCES.md
SAMPLE_DATA = ROOT / "sample_data"


@pytest.fixture
def fixtures() -> Path:
    """The real public transcripts under tests/fixtures (see its SOURCES.md)."""
    return FIXTURES


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"
