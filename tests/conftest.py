"""Shared test helpers: where the public fixtures live, and a fresh store per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LOOPSCOPE_SHARED", ROOT.parent / "shared"))
FIXTURES = SHARED / "fixtures"
SAMPLE_DATA = ROOT / "sample_data"


@pytest.fixture
def fixtures() -> Path:
    """The real transcripts in ../shared/fixtures; tests that need them skip, saying why, when it is absent."""
    if not FIXTURES.is_dir():
        pytest.skip(f"public fixtures not found at {FIXTURES} (set LOOPSCOPE_SHARED)")
    return FIXTURES


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"
