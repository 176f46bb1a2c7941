"""Bad input never produces a traceback and never loses data: each problem is an `ingest_errors` row (file, line,
reason, excerpt) or a "skipped: reason", and the rest of the file is ingested."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import ingest_paths, pi_records, query, write_jsonl

from analyzer.errors import NothingToIngestError


def lines(records: list[dict]) -> list[bytes]:
    return [orjson.dumps(r) for r in records]


def errors(db: Path) -> list[tuple]:
    return query(db, "SELECT line, reason, excerpt FROM ingest_errors ORDER BY line")


def test_invalid_json_line_is_recorded_and_the_rest_ingested(tmp_path: Path, db: Path) -> None:
    ls = lines(pi_records("s1"))
    ls.insert(3, b'{"type": "message", "message": {"role": "assistant", oops}')
    (tmp_path / "s.jsonl").write_bytes(b"\n".join(ls) + b"\n")
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT count(*) FROM calls") == [(3,)]
    ((line, reason, excerpt),) = errors(db)
    assert line == 4 and reason.startswith("invalid JSON") and "oops" in excerpt


def test_two_objects_glued_on_one_line_are_both_read(tmp_path: Path, db: Path) -> None:
    ls = lines(pi_records("s1", n_calls=2))
    glued = ls[2] + ls[3]  # call and its result on one physical line, as real pi files have
    ls[2:4] = [glued]
    (tmp_path / "s.jsonl").write_bytes(b"\n".join(ls) + b"\n")
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT call_id, result_text FROM calls ORDER BY seq") == [("c0", "0 passed"), ("c1", "1 passed")]
    assert errors(db) == []


def test_glued_objects_with_junk_tail_keep_the_objects(tmp_path: Path, db: Path) -> None:
    ls = lines(pi_records("s1", n_calls=1))
    ls[2] = ls[2] + ls[3] + b'{"type":"mess'
    del ls[3]
    (tmp_path / "s.jsonl").write_bytes(b"\n".join(ls) + b"\n")
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT count(*) FROM calls WHERE result_text = '0 passed'") == [(1,)]
    ((line, reason, _),) = errors(db)
    assert line == 3 and "after 2 JSON value(s)" in reason


def test_truncated_last_line(tmp_path: Path, db: Path) -> None:
    ls = lines(pi_records("s1", n_calls=2))
    data = b"\n".join(ls) + b'\n{"type":"message","id":"a9","message":{"role":"assis'
    (tmp_path / "s.jsonl").write_bytes(data)
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT count(*) FROM calls") == [(2,)]
    ((line, reason, _),) = errors(db)
    assert line == len(ls) + 1 and reason.startswith("truncated last line")


def test_non_utf8_bytes_are_replaced_and_the_line_kept(tmp_path: Path, db: Path) -> None:
    ls = lines(pi_records("s1", n_calls=1))
    ls[3] = ls[3].replace(b"0 passed", b"0 pass\xff\xfeed")
    (tmp_path / "s.jsonl").write_bytes(b"\n".join(ls) + b"\n")
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT result_text FROM calls") == [("0 pass\ufffd\ufffded",)]
    ((line, reason, _),) = errors(db)
    assert line == 4 and reason.startswith("invalid UTF-8")


def test_lone_surrogate_escape_does_not_lose_the_row(tmp_path: Path, db: Path) -> None:
    ls = lines(pi_records("s1", n_calls=1))
    ls[3] = ls[3].replace(b"0 passed", b"0 \\ud800 passed")  # valid JSON, not encodable as UTF-8
    (tmp_path / "s.jsonl").write_bytes(b"\n".join(ls) + b"\n")
    ingest_paths(db, tmp_path)
    ((text,),) = query(db, "SELECT result_text FROM calls")
    assert text.startswith("0 ") and text.endswith(" passed")


def test_empty_binary_and_unknown_files_are_skipped_with_reasons(tmp_path: Path, db: Path) -> None:
    write_jsonl(tmp_path / "good.jsonl", pi_records("s1"))
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "blank.jsonl").write_bytes(b"\n\n  \n")
    (tmp_path / "image.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    write_jsonl(tmp_path / "other.jsonl", [{"event": "click", "x": 1}, {"event": "scroll"}])
    (tmp_path / "notes.log").write_text("just some notes\nnothing json here\n")
    summary = ingest_paths(db, tmp_path)
    reasons = {Path(p).name: r for p, r in summary.skipped}
    assert reasons["empty.jsonl"] == "empty file"
    assert reasons["blank.jsonl"] == "empty file"
    assert reasons["image.bin"].startswith("binary file")
    assert reasons["other.jsonl"].startswith("unknown format") and "event" in reasons["other.jsonl"]
    assert reasons["notes.log"] == "no JSON could be read from the file"
    assert summary.files_ingested == 1
    assert query(db, "SELECT status, count(*) FROM files GROUP BY status ORDER BY status") == [
        ("ingested", 1),
        ("skipped", 5),
    ]


def test_a_50_mb_line_is_ingested(tmp_path: Path, db: Path) -> None:
    recs = pi_records("s1", n_calls=2)
    big = "x" * (50 * 1024 * 1024)
    recs[3]["message"]["content"][0]["text"] = big
    write_jsonl(tmp_path / "s.jsonl", recs)
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT seq, result_chars FROM calls ORDER BY seq") == [(0, len(big)), (1, 8)]


def test_docs_and_code_in_a_folder_are_not_read_but_named_files_are(tmp_path: Path, db: Path) -> None:
    write_jsonl(tmp_path / "s.jsonl", pi_records("s1"))
    (tmp_path / "README.md").write_text("# notes\n")
    (tmp_path / "make.py").write_text("print(1)\n")
    summary = ingest_paths(db, tmp_path)
    # not opened, but not silently dropped either: each is listed as skipped, with why
    assert (summary.files_seen, summary.files_ingested) == (3, 1)
    assert sorted((Path(p).name, r.split(":")[0]) for p, r in summary.skipped) == [
        ("README.md", "not read"),
        ("make.py", "not read"),
    ]
    assert query(db, "SELECT count(*) FROM files WHERE status = 'skipped' AND content_hash IS NULL") == [(2,)]
    with pytest.raises(NothingToIngestError, match="no JSON could be read from the file"):
        ingest_paths(db, tmp_path / "README.md")


def test_nothing_readable_raises_a_clear_error(tmp_path: Path, db: Path) -> None:
    (tmp_path / "a.log").write_text("hello\n")
    with pytest.raises(NothingToIngestError, match="nothing could be read"):
        ingest_paths(db, tmp_path)


def test_cli_bad_input_exit_codes_and_no_traceback(tmp_path: Path, db: Path) -> None:
    (tmp_path / "a.log").write_text("hello\n")
    for args, code, message in [
        ([str(tmp_path)], 4, "nothing could be read"),
        ([str(tmp_path / "missing")], 2, "no such file or folder"),
        ([str(tmp_path), "--db", str(tmp_path / "no" / "dir" / "x.duckdb")], 2, "does not exist"),
    ]:
        proc = subprocess.run(
            [sys.executable, "-m", "analyzer.cli", "ingest", *args, "--db", str(db)]
            if "--db" not in args
            else [sys.executable, "-m", "analyzer.cli", "ingest", *args],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == code, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_not_a_store_is_a_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.duckdb"
    bogus.write_bytes(b"this is not a database at all" * 100)
    proc = subprocess.run(
        [sys.executable, "-m", "analyzer.cli", "sessions", "--db", str(bogus)], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "cannot open store" in proc.stderr and "Traceback" not in proc.stderr
