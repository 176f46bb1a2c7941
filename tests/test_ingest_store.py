"""Incremental and safe: re-ingest changes nothing, grown and rewritten files replace their rows, one writer at a time,
and a kill at any moment leaves a consistent store that the next run completes."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from helpers import ingest_paths, pi_records, query, write_jsonl

from analyzer.errors import StoreError, StoreInUseError
from analyzer.ingest.parse import FileTask
from analyzer.ingest.pipeline import CHUNK_BYTES_MAX, CHUNK_BYTES_MIN, _chunks, chunk_bytes
from analyzer.store import connection
from analyzer.store.schema import SCHEMA_VERSION

SNAPSHOT = (
    "SELECT session_id, calls, turns, user_turns, error_calls, input_tokens, output_tokens, total_tokens, "
    "started_at, ended_at FROM sessions ORDER BY session_id"
)


def snapshot(db: Path) -> dict[str, list[tuple]]:
    return {
        "sessions": query(db, SNAPSHOT),
        "calls": query(
            db, "SELECT session_id, seq, call_id, call_key, result_key, is_error FROM calls ORDER BY session_id, seq"
        ),
        "turns": query(
            db,
            "SELECT session_id, turn_index, role, total_tokens, usage_counted FROM turns "
            "ORDER BY session_id, turn_index",
        ),
        "errors": query(db, "SELECT path, line, reason FROM ingest_errors ORDER BY path, line"),
    }


def check_consistent(db: Path) -> None:
    """What a user relies on: totals agree with the rows they sum; every row belongs to a recorded file."""
    assert query(
        db,
        """
        SELECT count(*) FROM sessions s
        LEFT JOIN (SELECT session_id, count(*) n FROM calls GROUP BY ALL) c USING (session_id)
        LEFT JOIN (SELECT session_id, count(*) n, sum(total_tokens) FILTER (WHERE usage_counted) t
                   FROM turns GROUP BY ALL) t USING (session_id)
        WHERE s.calls != coalesce(c.n, 0) OR s.turns != coalesce(t.n, 0) OR s.total_tokens != coalesce(t.t, 0)
    """,
    ) == [(0,)]
    assert query(db, "SELECT count(*) FROM calls WHERE session_id NOT IN (SELECT session_id FROM sessions)") == [(0,)]
    assert query(db, "SELECT count(*) FROM sessions WHERE file_id NOT IN (SELECT file_id FROM files)") == [(0,)]
    assert query(
        db,
        """
        SELECT count(*) FROM files f WHERE status = 'ingested'
        AND sessions != (SELECT count(*) FROM sessions s WHERE s.file_id = f.file_id)
    """,
    ) == [(0,)]


def test_reingest_changes_nothing(tmp_path: Path, db: Path) -> None:
    for i in range(3):
        write_jsonl(tmp_path / f"s{i}.jsonl", pi_records(f"s{i}"))
    first = ingest_paths(db, tmp_path)
    before = snapshot(db)
    second = ingest_paths(db, tmp_path)
    assert (first.files_ingested, second.files_ingested, second.files_unchanged) == (3, 0, 3)
    assert snapshot(db) == before


def test_touched_file_with_same_content_is_not_reparsed(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(tmp_path / "s.jsonl", pi_records("s1"))
    ingest_paths(db, tmp_path)
    ((ingested_at,),) = query(db, "SELECT ingested_at FROM files")
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    summary = ingest_paths(db, tmp_path)
    assert (summary.files_ingested, summary.files_unchanged) == (0, 1)
    assert query(db, "SELECT ingested_at, mtime_ns FROM files") == [(ingested_at, st.st_mtime_ns + 5_000_000_000)]


def test_grown_file_gets_its_new_content(tmp_path: Path, db: Path) -> None:
    recs = pi_records("s1", n_calls=2)
    f = write_jsonl(tmp_path / "s.jsonl", recs)
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT calls FROM sessions") == [(2,)]
    write_jsonl(f, pi_records("s1", n_calls=5))  # the agent appended three more calls
    summary = ingest_paths(db, tmp_path)
    assert summary.files_ingested == 1
    assert query(db, "SELECT calls, turns FROM sessions") == [(5, 6)]
    assert query(db, "SELECT count(*), count(DISTINCT seq) FROM calls") == [(5, 5)]
    check_consistent(db)


def test_rewritten_file_replaces_its_rows(tmp_path: Path, db: Path) -> None:
    f = write_jsonl(tmp_path / "s.jsonl", pi_records("old-id", n_calls=4))
    ingest_paths(db, tmp_path)
    write_jsonl(f, pi_records("new-id", n_calls=1))  # e.g. pi migrating a v1 file rewrites it whole
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT session_id, calls FROM sessions") == [("new-id", 1)]
    assert query(db, "SELECT DISTINCT session_id FROM calls") == [("new-id",)]
    check_consistent(db)


def test_duplicate_session_id_in_two_files_is_recorded_not_loaded_twice(tmp_path: Path, db: Path) -> None:
    write_jsonl(tmp_path / "a" / "s.jsonl", pi_records("same", n_calls=2))
    write_jsonl(tmp_path / "b" / "s-archived.jsonl", pi_records("same", n_calls=2))
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT count(*), sum(calls) FROM sessions") == [(1, 2)]
    ((path, reason),) = query(db, "SELECT path, reason FROM ingest_errors")
    assert path.endswith("s-archived.jsonl") and reason.startswith("duplicate session id same")
    check_consistent(db)


def test_duplicate_session_id_is_kept_from_the_lowest_file_id_whatever_lands_first(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One chunk a file, the biggest (parsed first) the highest file id: of the copies an ingest reads, the lowest
    file id is kept, in process and with workers. A later ingest that brings another copy keeps the stored one; one
    that reads the kept copy's file again, now without the session, loads it from the other copy (read again)."""
    import analyzer.ingest.pipeline as pipeline

    monkeypatch.setattr(pipeline, "CHUNK_FILES", 1)
    monkeypatch.setattr(pipeline, "CHUNK_BYTES_MIN", 1)
    write_jsonl(tmp_path / "a.jsonl", pi_records("same", n_calls=1))
    write_jsonl(tmp_path / "b.jsonl", pi_records("other", n_calls=1))
    write_jsonl(tmp_path / "c.jsonl", pi_records("same", n_calls=9))
    for workers in (1, 2):
        store = tmp_path / f"w{workers}.duckdb"
        ingest_paths(store, tmp_path, workers=workers)
        assert query(store, "SELECT file_id, calls FROM sessions WHERE session_id = 'same'") == [(1, 1)]
        ((fid, reason),) = query(store, "SELECT file_id, reason FROM ingest_errors")
        assert fid == 3 and reason.endswith(f"already ingested from {tmp_path / 'a.jsonl'}; this copy was not loaded")
        check_consistent(store)
    write_jsonl(tmp_path / "0.jsonl", pi_records("same", n_calls=5))  # a new file: a new id, the stored copy stays
    ingest_paths(db, tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl")
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT file_id, calls FROM sessions WHERE session_id = 'same'") == [(1, 1)]
    write_jsonl(tmp_path / "a.jsonl", pi_records("renamed", n_calls=1))  # the kept copy's file changes
    summary = ingest_paths(db, tmp_path)
    assert summary.files_ingested == 3  # a.jsonl, and the two files with the other copies
    assert query(db, "SELECT file_id, calls FROM sessions WHERE session_id = 'same'") == [(3, 9)]
    assert query(db, "SELECT file_id FROM ingest_errors") == [(4,)]
    check_consistent(db)


def test_second_writer_gets_store_in_use(tmp_path: Path, db: Path) -> None:
    write_jsonl(tmp_path / "s.jsonl", pi_records("s1"))
    ingest_paths(db, tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb,sys,time; c=duckdb.connect(sys.argv[1]); print('ready', flush=True); time.sleep(60)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreInUseError, match="is in use"):
            connection.connect(db)
        proc = subprocess.run(
            [sys.executable, "-m", "analyzer.cli", "ingest", str(tmp_path), "--db", str(db)],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 3
        assert "is in use" in proc.stderr and "Traceback" not in proc.stderr
    finally:
        holder.kill()
        holder.wait()


def _corpus(root: Path, n_files: int, calls: int) -> Path:
    for i in range(n_files):
        recs = pi_records(f"k{i:04d}", n_calls=calls, cwd=f"/p{i % 7}")
        for r in recs:  # fatten results so the run takes long enough to be killed in the middle
            if r.get("message", {}).get("role") == "toolResult":
                r["message"]["content"][0]["text"] += "\n" + "log line\n" * 400
        write_jsonl(root / f"d{i % 10}" / f"k{i:04d}.jsonl", recs)
    return root


@pytest.mark.slow
def test_kill_at_any_moment_leaves_a_consistent_store(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus", n_files=400, calls=12)
    reference = tmp_path / "reference.duckdb"
    ingest_paths(reference, corpus)
    expected = snapshot(reference)
    killed_mid_run = 0
    for attempt, delay in enumerate((0.6, 1.0, 1.4, 1.8, 2.4)):
        db = tmp_path / f"killed{attempt}.duckdb"
        proc = subprocess.Popen(
            [sys.executable, "-m", "analyzer.cli", "ingest", str(corpus), "--db", str(db), "--workers", "2", "--quiet"],
            start_new_session=True,
        )
        time.sleep(delay)
        if proc.poll() is None:
            killed_mid_run += 1
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # it finished between the poll and the kill
                pass
        proc.wait()
        if db.exists():
            check_consistent(db)  # whatever landed is whole
            partial = query(db, "SELECT count(*) FROM files")[0][0]
            assert partial <= 400
        ingest_paths(db, corpus)  # the next run completes it
        check_consistent(db)
        assert snapshot(db) == expected
    assert killed_mid_run >= 2, "the corpus ingested too fast to be interrupted; make it bigger"


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``loopscope ARGS --db DB`` as a user runs it (a wide terminal: one message is one line)."""
    return subprocess.run(
        [sys.executable, "-m", "analyzer.cli", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
    )


def test_store_from_newer_loopscope_is_refused(db: Path) -> None:
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE loopscope_meta (key VARCHAR, value VARCHAR)")
    con.execute("INSERT INTO loopscope_meta VALUES ('schema_version', '999')")
    con.close()
    with pytest.raises(StoreError, match="newer"):
        connection.connect(db)


def test_store_with_older_keys_is_rebuilt_by_ingest_and_refused_by_the_rest(tmp_path: Path, db: Path) -> None:
    from analyzer.detect.keys import call_key

    folder = tmp_path / "t"
    folder.mkdir()
    write_jsonl(folder / "s.jsonl", pi_records("s1"))
    ingest_paths(db, folder)
    con = duckdb.connect(str(db))  # a store as loopscope wrote it before XXH3: MD5 keys, no result_chars
    con.execute("UPDATE calls SET call_key = left(md5(tool || chr(0) || args), 16)")
    con.execute("ALTER TABLE calls DROP COLUMN result_chars")
    con.execute("UPDATE loopscope_meta SET value = '2' WHERE key = 'schema_version'")
    con.close()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(db, *args)

    refused = cli("scan")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "older loopscope" in refused.stderr and f"loopscope ingest PATHS --db {db}" in refused.stderr
    rebuilt = cli("ingest", str(folder))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "older loopscope" in rebuilt.stderr and "rebuilt" in rebuilt.stderr
    assert query(db, "SELECT value FROM loopscope_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    rows = query(db, "SELECT tool, args, call_key FROM calls ORDER BY seq")
    assert len(rows) == 3 and all(key == call_key(tool, args) for tool, args, key in rows)
    assert cli("scan").returncode == 0


def _run_on_a_terminal(args: list[str]) -> str:
    """Run the CLI with stdout and stderr on a pseudo-terminal, as a person at a shell would; return what it drew."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "analyzer.cli", *args],
        stdout=slave,
        stderr=slave,
        env={**os.environ, "COLUMNS": "100", "TERM": "xterm"},
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait()
    os.close(master)
    assert proc.returncode == 0
    return b"".join(chunks).decode("utf-8", "replace")


def test_progress_bar_on_a_terminal_only(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus", n_files=40, calls=4)
    drawn = _run_on_a_terminal(["ingest", str(corpus), "--db", str(tmp_path / "tty.duckdb")])
    assert "\x1b[" in drawn and "━" in drawn  # rich drew a bar...
    assert re.search(r"ingest ━+ [\d.]+/[\d.]+ kB", re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", drawn))  # ...over bytes
    assert "files: 40 seen, 40 ingested" in drawn
    quiet = _run_on_a_terminal(["ingest", str(corpus), "--db", str(tmp_path / "quiet.duckdb"), "--quiet"])
    assert quiet.strip() == ""
    piped = subprocess.run(
        [sys.executable, "-m", "analyzer.cli", "ingest", str(corpus), "--db", str(tmp_path / "piped.duckdb")],
        capture_output=True,
        text=True,
    )
    assert piped.returncode == 0 and piped.stderr == "" and "files: 40 seen" in piped.stdout


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed: nothing to keep out")
def test_ingest_workers_and_landing_do_not_import_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas, when installed, to ask whether a list is a pandas object: ~0.5 s of CPU and ~80 MB in
    every process that builds Arrow arrays from lists. Neither a worker's parse nor the main process's landing needs
    it. Each runs in a process of its own here, as in an ingest, and the rows still land."""
    corpus = tmp_path / "corpus"
    for i in range(3):
        write_jsonl(corpus / f"s{i}.jsonl", pi_records(f"s{i}", n_calls=4))
    spool, handoff, db = tmp_path / "spool", tmp_path / "handoff.pickle", tmp_path / "t.duckdb"
    spool.mkdir()
    worker = f"""
import pickle, sys
from pathlib import Path
from analyzer.ingest.worker import init_worker, parse_chunk
from analyzer.ingest.parse import FileTask
init_worker(None)
files = sorted(Path({str(corpus)!r}).iterdir())
tasks = [FileTask(i + 1, str(f), f.stat().st_size, f.stat().st_mtime_ns) for i, f in enumerate(files)]
Path({str(handoff)!r}).write_bytes(pickle.dumps(parse_chunk(tasks, {str(spool)!r}, "c0")))
print("pandas" in sys.modules)
"""
    land = f"""
import pickle, sys
from pathlib import Path
from analyzer.ingest import land
from analyzer.store import connection
outcomes, paths = pickle.loads(Path({str(handoff)!r}).read_bytes())
con = connection.connect(Path({str(db)!r}))
land.load_chunk(con, outcomes, paths)
con.close()
print("pandas" in sys.modules)
"""
    for script in (worker, land):
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "False"
    assert query(db, "SELECT count(*), sum(calls) FROM sessions") == [(3, 12)]
    assert query(db, "SELECT count(*) FROM files WHERE status = 'ingested'") == [(3,)]


def test_files_are_grouped_in_about_four_chunks_a_worker_within_the_bounds() -> None:
    """Each chunk lands in one transaction that also runs statements over the whole store, so a corpus is cut into
    few chunks (about four a worker, so the pool stays busy while the main process lands), none past the upper bound;
    a big file is a chunk of its own."""
    mb = 1 << 20
    files = [FileTask(i, f"/t/{i:05d}.jsonl", mb, 0) for i in range(2400)]  # 2.4 GB of 1 MB sessions
    chunks = _chunks(files, chunk_bytes(2400 * mb, 2))
    assert len(chunks) == 19 and max(sum(t.size for t in c) for c in chunks) <= CHUNK_BYTES_MAX
    assert sorted(t.file_id for c in chunks for t in c) == list(range(2400))
    assert len(_chunks(files[:600], chunk_bytes(600 * mb, 2))) == 8  # 75 MB each: four a worker
    assert chunk_bytes(40 * mb, 2) == CHUNK_BYTES_MIN  # a small corpus: chunks no smaller than the lower bound
    big = FileTask(9999, "/t/big.jsonl", 3 * CHUNK_BYTES_MAX, 0)
    assert [big] in _chunks([*files[:10], big], chunk_bytes(big.size, 2))


def test_store_scanned_by_an_older_schema_keeps_its_transcripts_and_is_rescanned_saying_so(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store one schema back whose keys are still ours (a schema change that touched only the derived tables: v5 ->
    v6 was one) but whose findings came from older rules: reading it is refused with the fix, and the scan drops and
    rebuilds the derived tables, saying so, without reading a transcript again. Today every older schema has other
    keys, so the first usable schema is set to the current one's predecessor, as such a change would."""
    from typer.testing import CliRunner

    from analyzer.cli import app

    monkeypatch.setattr(connection, "KEYS_VERSION", SCHEMA_VERSION - 1)
    older = str(SCHEMA_VERSION - 1)
    folder = tmp_path / "t"
    folder.mkdir()
    write_jsonl(folder / "s.jsonl", pi_records("s1"))
    ingest_paths(db, folder)
    runner = CliRunner()

    def cli(*args: str):  # noqa: ANN202 - click's Result
        return runner.invoke(app, [*args, "--db", str(db)], env={"COLUMNS": "300"})

    assert cli("scan").exit_code == 0
    calls = query(db, "SELECT seq, call_key FROM calls ORDER BY seq")
    con = duckdb.connect(str(db))
    con.execute("UPDATE loopscope_meta SET value = ? WHERE key = 'schema_version'", [older])
    con.close()
    (folder / "s.jsonl").unlink()  # the transcript is gone: nothing may need it again

    refused = cli("findings")
    assert refused.exit_code != 0 and "Traceback" not in refused.output
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "older loopscope" in refused.stderr and f"loopscope scan --db {db}" in refused.stderr
    rescanned = cli("scan")
    assert rescanned.exit_code == 0, rescanned.stderr
    assert f"store schema v{older}" in rescanned.stderr and "scanned again" in rescanned.stderr
    assert "1 scanned" in rescanned.stdout
    assert query(db, "SELECT value FROM loopscope_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    assert query(db, "SELECT seq, call_key FROM calls ORDER BY seq") == calls
    again = cli("findings")
    assert again.exit_code == 0 and "note:" not in again.stderr
