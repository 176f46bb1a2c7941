"""sample_data/: the files are exactly what make_samples.py writes, and every transcript ingests with zero errors and
the sessions, calls and call positions that sample_data/.expected.json (and its README) promise.

A format whose adapter does not recognise its sample files yet is skipped, saying so, rather than failing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import ingest_paths, query

from analyzer.ingest.parse import ADAPTERS

SAMPLE_DATA = Path(__file__).resolve().parents[1] / "sample_data"
EXPECTED: dict[str, Any] = json.loads((SAMPLE_DATA / ".expected.json").read_text())


def _first_records(path: Path, n: int = 8) -> list[Any]:
    out = []
    with path.open("rb") as f:
        for line in f:
            if line.strip():
                out.append(orjson.loads(line))
            if len(out) >= n:
                break
    return out


def _recognised(adapter: Any, path: Path) -> bool:
    """Whether ``adapter`` recognises ``path`` the way ingest would offer it: as a file it reads itself (a zip, a
    storage tree), as one JSON document, or by its JSON lines."""
    head = path.read_bytes()[:65536]
    if hasattr(adapter, "sniff_file") and adapter.sniff_file(path, head):
        return True
    if hasattr(adapter, "sniff_document"):
        try:
            if adapter.sniff_document(orjson.loads(path.read_bytes())):
                return True
        except orjson.JSONDecodeError:
            pass
    if not hasattr(adapter, "sniff"):
        return False
    try:
        return any(adapter.sniff(r) for r in _first_records(path))
    except orjson.JSONDecodeError:
        return False


def _adapter_ready(fmt: str) -> bool:
    """True once the format's adapter recognises our own sample files (placeholders recognise nothing)."""
    files = [f for f in EXPECTED["transcript_files"] if f["format"] == fmt]
    return any(_recognised(ADAPTERS[fmt], SAMPLE_DATA / f["path"]) for f in files)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("sample") / "store.duckdb"
    ingest_paths(db, SAMPLE_DATA)
    return db


def test_samples_are_reproducible(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(SAMPLE_DATA / "make_samples.py"), "--out", str(tmp_path)], check=True, capture_output=True
    )
    written = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()}
    shipped = {
        p.relative_to(SAMPLE_DATA)
        for p in SAMPLE_DATA.rglob("*")
        if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts
    }
    assert written == shipped, "sample_data/ holds files make_samples.py does not write, or lacks some"
    changed = [str(p) for p in sorted(written) if (tmp_path / p).read_bytes() != (SAMPLE_DATA / p).read_bytes()]
    assert not changed, f"stale sample files (run sample_data/make_samples.py): {changed}"


def test_samples_stay_small() -> None:
    size = sum(p.stat().st_size for p in SAMPLE_DATA.rglob("*") if p.is_file())
    assert size < 1_000_000


@pytest.mark.parametrize("fmt", sorted({f["format"] for f in EXPECTED["transcript_files"]}))
def test_every_sample_file_ingests_cleanly(store: Path, fmt: str) -> None:
    if not _adapter_ready(fmt):
        pytest.skip(f"the {fmt} adapter does not recognise the sample files yet")
    for f in (f for f in EXPECTED["transcript_files"] if f["format"] == fmt):
        path = str((SAMPLE_DATA / f["path"]).resolve())
        rows = query(store, "SELECT status, format, sessions, calls, errors FROM files WHERE path = ?", [path])
        assert rows == [("ingested", fmt, f["sessions"], f["calls"], 0)], f["path"]
        errors = query(store, "SELECT line, reason FROM ingest_errors WHERE path = ?", [path])
        assert errors == [], f["path"]


@pytest.mark.parametrize("session", EXPECTED["sessions"], ids=lambda s: s["session_id"])
def test_sessions_calls_and_positions(store: Path, session: dict[str, Any]) -> None:
    if not _adapter_ready(session["format"]):
        pytest.skip(f"the {session['format']} adapter does not recognise the sample files yet")
    sid = session["session_id"]
    rows = query(store, "SELECT format, parent_session_id, calls, cwd FROM sessions WHERE session_id = ?", [sid])
    assert rows == [(session["format"], session["parent_session_id"], session["calls"], session["cwd"])]
    ((unanswered, nested),) = query(
        store,
        "SELECT count(*) FILTER (WHERE result_key IS NULL), count(*) FILTER (WHERE parent_call_id IS NOT NULL) "
        "FROM calls WHERE session_id = ?",
        [sid],
    )
    assert (unanswered, nested) == (session["calls_without_result"], session["nested_calls"])
    if session["error_calls"] is not None:  # OpenAI messages carry no error flag
        ((errors,),) = query(store, "SELECT count(*) FILTER (WHERE is_error) FROM calls WHERE session_id = ?", [sid])
        assert errors == session["error_calls"]
    tools = dict(query(store, "SELECT tool, count(*) FROM calls WHERE session_id = ? GROUP BY tool", [sid]))
    assert tools == session["tools"]
    # every call a loop episode names sits at the seq the README gives it, in the user turn it gives
    seq_of = {
        cid: (seq, ut)
        for cid, seq, ut in query(store, "SELECT call_id, seq, user_turn FROM calls WHERE session_id = ?", [sid])
    }
    for finding in session["findings"]:
        got = [seq_of.get(cid) for cid in finding["call_ids"]]
        assert got == [(s, finding["user_turn"]) for s in finding["seqs"]], finding["kind"]


def test_non_transcripts_add_nothing(store: Path) -> None:
    for rel in EXPECTED["other_files"]:
        path = str((SAMPLE_DATA / rel).resolve())
        rows = query(store, "SELECT status, sessions, errors FROM files WHERE path = ?", [path])
        # not read at all (docs, code, hidden files), read and found to hold no session (subagent metadata), or read
        # with their session file (opencode's message and part files)
        assert rows in ([], [("skipped", 0, 0)], [("ingested", 0, 0)], [("companion", 0, 0)]), rel
        assert query(store, "SELECT count(*) FROM ingest_errors WHERE path = ?", [path]) == [(0,)], rel


def test_opencode_message_and_part_files_are_read_with_their_session_not_skipped(store: Path) -> None:
    """They are read through their session file: the files table says so, and the report's list of files not read
    (``reports.data.skipped_files``) leaves them out."""
    import duckdb

    from reports.data import skipped_files

    storage = SAMPLE_DATA.resolve() / "opencode" / "storage"
    parts = sorted(str(p) for sub in ("message", "part") for p in (storage / sub).rglob("*.json"))
    assert len(parts) > 20
    rows = query(
        store, "SELECT path, status, format, reason FROM files WHERE starts_with(path, ?) ORDER BY path", [str(storage)]
    )
    sessions = {str(p) for p in (storage / "session").rglob("ses_*.json")}
    assert {r[0] for r in rows} == set(parts) | sessions
    assert {(r[1], r[2]) for r in rows if r[0] in parts} == {("companion", "opencode")}
    assert {r[3].removeprefix("read with ") for r in rows if r[0] in parts} == sessions
    with duckdb.connect(str(store), read_only=True) as con:
        n, listed = skipped_files(con, 1000)
    assert n == len(listed) and not [p for p in listed["path"].to_list() if "/opencode/" in p]
