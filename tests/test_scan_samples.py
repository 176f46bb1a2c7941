"""The scan over sample_data/: every planted episode is found exactly as sample_data/.expected.json (and its README)
describe it, and the declared non-loops (a changing edit->build cycle, an aborted turn, ...) give no finding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import ingest_paths, query

from analyzer.scan.run import scan

SAMPLE_DATA = Path(__file__).resolve().parents[1] / "sample_data"
EXPECTED_FILE = SAMPLE_DATA / ".expected.json"
FIELDS = (
    "kind",
    "period",
    "tools",
    "first_seq",
    "last_seq",
    "repeats",
    "stuck",
    "user_turn",
    "wasted_tokens",
    "call_ids",
)


def _expected() -> list[dict[str, Any]]:
    return json.loads(EXPECTED_FILE.read_text())["sessions"] if EXPECTED_FILE.exists() else []


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not EXPECTED_FILE.exists():
        pytest.skip("sample_data/.expected.json not found")
    db = tmp_path_factory.mktemp("samples") / "store.duckdb"
    ingest_paths(db, SAMPLE_DATA)
    scan(db)
    return db


@pytest.mark.parametrize("session", _expected(), ids=lambda s: f"{s['format']}:{s['session_id'][:12]}")
def test_sample_findings_match_the_expected_episodes(store: Path, session: dict[str, Any]) -> None:
    if not query(store, "SELECT count(*) FROM sessions WHERE session_id = ?", [session["session_id"]])[0][0]:
        pytest.skip(f"the {session['format']} adapter did not load this sample")
    got = query(
        store,
        f"SELECT {', '.join(FIELDS)} FROM findings WHERE session_id = ? ORDER BY user_turn, first_seq NULLS FIRST",
        [session["session_id"]],
    )
    expected = sorted(
        (tuple(f[k] for k in FIELDS) for f in session["findings"]), key=lambda f: (f[7], -1 if f[3] is None else f[3])
    )
    assert [tuple(r) for r in got] == expected, session["summary"]
