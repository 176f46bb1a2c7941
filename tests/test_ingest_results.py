"""What the store keeps of a result: by default a long one's head and tail, its full length and keys of its full text,
so detection is the same as with ``--full-results``; ``loopscope show`` reads the whole result back from its
transcript; a store remembers its choice and switching re-reads what was stored the other way."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import query, write_jsonl

from analyzer.detect.keys import result_key
from analyzer.ingest.pipeline import ingest
from analyzer.scan.run import scan
from analyzer.store.schema import STORED_HEAD_CHARS, STORED_TAIL_CHARS

LONG = "HEAD " + "".join(f"line {i:05d} of the build log\n" for i in range(1_800)) + " TAIL"  # ~50 KB
MIDDLE = "line 00900 of the build log"


def looping_session(sid: str, repeats: int = 6) -> list[dict]:
    """A pi session that runs the same failing command ``repeats`` times and gets the same 50 KB log each time."""
    recs: list[dict] = [
        {"type": "session", "version": 3, "id": sid, "timestamp": "2026-03-01T10:00:00Z", "cwd": "/repo"},
        {
            "type": "message",
            "id": "u1",
            "timestamp": "2026-03-01T10:00:01Z",
            "message": {"role": "user", "content": "build it"},
        },
    ]
    for i in range(repeats):
        recs.append(
            {
                "type": "message",
                "id": f"a{i}",
                "timestamp": f"2026-03-01T10:01:{i:02d}Z",
                "message": {
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "toolCall", "id": f"c{i}", "name": "bash", "arguments": {"command": "make"}}],
                    "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0},
                },
            }
        )
        recs.append(
            {
                "type": "message",
                "id": f"r{i}",
                "timestamp": f"2026-03-01T10:01:{i:02d}Z",
                "message": {
                    "role": "toolResult",
                    "toolCallId": f"c{i}",
                    "toolName": "bash",
                    "isError": True,
                    "content": [{"type": "text", "text": LONG}],
                },
            }
        )
    return recs


CALLS = (
    "SELECT seq, call_key, call_key_ordered, call_key_shallow, result_key, result_chars, is_error FROM calls "
    "ORDER BY seq"
)
FINDINGS = (
    "SELECT kind, period, tools, call_ids, first_seq, last_seq, repeats, stuck, user_turn, why, wasted_tokens, "
    "estimated_tokens FROM findings ORDER BY first_seq, kind"
)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "analyzer.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
    )


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "t"
    folder.mkdir()
    write_jsonl(folder / "s.jsonl", looping_session("s1"))
    return folder


def test_a_long_result_is_stored_clipped_and_detection_is_unchanged(tmp_path: Path, corpus: Path) -> None:
    clipped, full = tmp_path / "clipped.duckdb", tmp_path / "full.duckdb"
    ingest([corpus], clipped, workers=1)
    ingest([corpus], full, workers=1, full_results=True)

    (text, chars), *_ = query(clipped, "SELECT result_text, result_chars FROM calls ORDER BY seq")
    assert chars == len(LONG) > 45_000
    assert text.startswith(LONG[:STORED_HEAD_CHARS]) and text.endswith(LONG[-STORED_TAIL_CHARS:])
    assert MIDDLE not in text and len(text) < STORED_HEAD_CHARS + STORED_TAIL_CHARS + 200
    assert f"{len(LONG) - STORED_HEAD_CHARS - STORED_TAIL_CHARS:,} characters not stored: loopscope show s1:0" in text
    assert query(full, "SELECT DISTINCT result_text FROM calls") == [(LONG,)]

    assert query(clipped, CALLS) == query(full, CALLS)
    assert query(clipped, "SELECT DISTINCT result_key FROM calls") == [(result_key(LONG, True),)]
    scan(clipped, workers=1)
    scan(full, workers=1)
    assert query(clipped, FINDINGS) == query(full, FINDINGS) != []


def test_show_prints_the_whole_result_read_back_from_the_transcript(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest([corpus], db, workers=1)
    for ref in ("s1:2", "c2"):
        shown = cli("show", ref, "--db", str(db))
        assert shown.returncode == 0, shown.stderr
        assert "tool bash" in shown.stdout and '{"command":"make"}' in shown.stdout
        assert f"error ({len(LONG):,} characters):\n{LONG}\n" in shown.stdout

    unknown = cli("show", "s1:99", "--db", str(db))
    assert unknown.returncode != 0 and "Traceback" not in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1 and "no call 's1:99'" in unknown.stderr

    (corpus / "s.jsonl").rename(tmp_path / "moved.jsonl")
    missing = cli("show", "s1:2", "--db", str(db))
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1 and "cannot read the transcript" in missing.stderr


def test_the_store_remembers_full_results_and_switching_rereads(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "s.duckdb"
    whole = "SELECT count(*) FROM calls WHERE length(result_text) = result_chars"
    ingest([corpus], db, workers=1)
    assert query(db, whole) == [(0,)]
    switched = ingest([corpus], db, workers=1, full_results=True)
    assert switched.files_ingested == 1 and query(db, whole) == [(6,)]
    again = ingest([corpus], db, workers=1)  # no option: the store's choice stands, nothing to re-read
    assert (again.files_ingested, again.files_unchanged) == (0, 1) and query(db, whole) == [(6,)]
    back = ingest([corpus], db, workers=1, full_results=False)
    assert back.files_ingested == 1 and query(db, whole) == [(0,)]


def test_the_report_names_the_command_that_prints_a_clipped_result_whole(tmp_path: Path, corpus: Path) -> None:
    import html
    import re
    import shlex

    db, out = tmp_path / "s.duckdb", tmp_path / "report"
    ingest([corpus], db, workers=1)
    scan(db)
    made = cli("report", "--db", str(db), "--out", str(out))
    assert made.returncode == 0, made.stderr
    pages = [p.read_text() for p in out.rglob("*.html") if "s1" in p.name]
    commands = {html.unescape(c) for page in pages for c in re.findall(r"<code>(loopscope show [^<]+)</code>", page)}
    assert commands, "the session page does not say how to see the clipped result"
    for command in commands:
        shown = cli(*shlex.split(command)[1:], "--db", str(db))
        assert shown.returncode == 0, shown.stderr
        assert LONG in shown.stdout


def test_results_are_stored_zstd_compressed_and_read_back_whole(tmp_path: Path) -> None:
    """Result text is most of a store's bytes; DuckDB's own choice for strings shorter than 4 KB (dictionary + FSST)
    kept it near its raw size, zstd halves the store (benchmarks/bench_scale.py) and reads back the same text."""
    folder = tmp_path / "t"
    folder.mkdir()
    recs = looping_session("s1", repeats=0)
    texts = [
        f"test_{i:04d} " + "".join(f"tests/test_mod{i % 7}.py::test_case_{j} PASSED [{j}%]\n" for j in range(40))
        for i in range(600)
    ]  # ~2 KB each, all different
    for i, text in enumerate(texts):
        recs.append(
            {
                "type": "message",
                "id": f"a{i}",
                "timestamp": "2026-03-01T10:01:00Z",
                "message": {
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [
                        {"type": "toolCall", "id": f"c{i}", "name": "bash", "arguments": {"command": f"pytest -k {i}"}}
                    ],
                    "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0},
                },
            }
        )
        recs.append(
            {
                "type": "message",
                "id": f"r{i}",
                "timestamp": "2026-03-01T10:01:01Z",
                "message": {
                    "role": "toolResult",
                    "toolCallId": f"c{i}",
                    "toolName": "bash",
                    "isError": False,
                    "content": [{"type": "text", "text": text}],
                },
            }
        )
    write_jsonl(folder / "s.jsonl", recs)
    db = tmp_path / "s.duckdb"
    ingest([folder], db, workers=1)

    assert [t for (t,) in query(db, "SELECT result_text FROM calls ORDER BY seq")] == texts
    assert query(
        db,
        "SELECT DISTINCT compression FROM pragma_storage_info('calls') "
        "WHERE column_name = 'result_text' AND segment_type = 'VARCHAR'",
    ) == [("ZSTD",)]


@pytest.mark.parametrize(
    ("part", "kind"),
    [
        ({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}, "image/png"),
        ({"type": "input_image", "image_url": "data:image/jpeg;base64,AAAA"}, "image"),  # Codex
        ({"type": "image", "data": "AAAA", "mimeType": "image/webp"}, "image/webp"),  # pi
    ],
)
def test_a_results_image_is_a_line_naming_it_by_digest(part: dict, kind: str) -> None:
    from analyzer.ingest.base import result_text_of

    got = result_text_of([{"type": "text", "text": "Took a screenshot"}, part])
    first, second = got.split("\n")
    assert first == "Took a screenshot"
    assert re.fullmatch(rf"\[{re.escape(kind)}, [0-9,]+ bytes, sha1 [0-9a-f]{{12}}\]", second)
    assert result_text_of([part]) == second and result_text_of("plain") == "plain"
