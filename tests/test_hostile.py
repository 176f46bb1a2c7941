"""The hostile-input battery: input and faults a careful user would try, each checked for its exit code, a one-line
message (never a traceback), and that every good line of every file is in the store.

Each case is one regression test of the promises in the README's reliability section. The heavy cases (20,000 tiny
files, a 60 MB line) are sized to keep the whole battery well under three minutes on two cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import orjson
import pytest
from helpers import ingest_paths, pi_records, query
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.errors import NothingToIngestError, UsageError

RUNNER = CliRunner()


# -- building blocks -----------------------------------------------------------------------------------------------
def pi_lines(sid: str, n_calls: int = 3, **kw: object) -> list[bytes]:
    return [orjson.dumps(r) for r in pi_records(sid, n_calls, **kw)]  # type: ignore[arg-type]


def write(path: Path, lines: list[bytes], end: bytes = b"\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines) + end)
    return path


def cli(*args: str) -> tuple[int, str]:
    """Run the CLI in-process; (exit code, stderr+stdout). A traceback fails the test."""
    result = RUNNER.invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback from {args}: {result.exception!r}") from result.exception
    return result.exit_code, result.output


def one_line_error(code: int, output: str, expected_code: int, *needles: str) -> None:
    assert code == expected_code, output
    assert "Traceback" not in output, output
    errs = [ln for ln in output.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1, output
    for n in needles:
        assert n in errs[0], output


def calls_of(db: Path, sid: str) -> list[str]:
    return [r[0] for r in query(db, "SELECT call_id FROM calls WHERE session_id = ? ORDER BY seq", [sid])]


def ingest_errors(db: Path) -> list[tuple]:
    return query(db, "SELECT path, line, reason, excerpt FROM ingest_errors ORDER BY path, line")


# -- 1. token counts no column holds ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [9223372036854775808, "18446744073709551616", 2**63 - 1, 10**30])
def test_huge_token_count_is_one_bad_value(tmp_path: Path, db: Path, value: object) -> None:
    lines = pi_lines("big", 3)
    rec = orjson.loads(lines[2])
    rec["message"]["usage"]["input"] = value
    lines[2] = json.dumps(rec).encode()
    write(tmp_path / "c" / "big.jsonl", lines)
    write(tmp_path / "c" / "ok.jsonl", pi_lines("ok", 2))
    ingest_paths(db, tmp_path / "c")
    ingest_paths(db, tmp_path / "c")  # and every re-run works too
    assert calls_of(db, "big") == ["c0", "c1", "c2"] and calls_of(db, "ok") == ["c0", "c1"]
    ((path, line, reason, _),) = ingest_errors(db)
    assert path.endswith("big.jsonl") and line == 3 and "input" in reason
    row = query(
        db, "SELECT input_tokens, output_tokens, total_tokens FROM turns WHERE session_id = 'big' AND turn_id = 'a0'"
    )
    assert row == [(None, 5, None)]
    assert query(db, "SELECT total_tokens FROM sessions WHERE session_id = 'big'") == [(30,)]


def test_huge_claude_count(tmp_path: Path, db: Path) -> None:
    from test_ingest_claude import assistant, tool_use, usage, user

    recs = [
        user(0, "go"),
        assistant(1, "m1", "r1", [tool_use("t1", "Bash", {"command": "ls"})], usage(2**63 - 1, 5)),
        assistant(2, "m2", "r2", [tool_use("t2", "Bash", {"command": "pwd"})], usage(10, 5)),
    ]
    write(tmp_path / "claude.jsonl", [orjson.dumps(r) for r in recs])
    ingest_paths(db, tmp_path)
    assert [r[0] for r in query(db, "SELECT call_id FROM calls ORDER BY seq")] == ["t1", "t2"]
    ((_, line, reason, _),) = ingest_errors(db)
    assert line == 2 and "input" in reason
    assert query(db, "SELECT input_tokens FROM turns WHERE role = 'assistant' ORDER BY turn_index") == [(None,), (10,)]


@pytest.mark.parametrize("count", ["18446744073709551615", 18446744073709551615])
def test_huge_codex_count(tmp_path: Path, db: Path, count: object) -> None:

    src = (Path(__file__).parent / "fixtures" / "codex" / "ccusage_session-alpha.jsonl").read_bytes()
    lines = src.rstrip(b"\n").split(b"\n")
    rec = orjson.loads(lines[1])
    rec["payload"]["info"]["last_token_usage"]["output_tokens"] = count
    rec["payload"]["info"]["total_token_usage"]["output_tokens"] = count
    lines[1] = json.dumps(rec).encode()
    write(tmp_path / "rollout.jsonl", lines)
    ingest_paths(db, tmp_path)
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT count(*) FROM sessions") == [(1,)]
    assert any("output" in r[2] for r in ingest_errors(db))
    ((tokens,),) = query(db, "SELECT total_tokens FROM sessions")
    assert tokens is not None and 0 <= tokens < 10**12


@pytest.mark.parametrize("cost", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_cost_is_an_invalid_value(tmp_path: Path, db: Path, cost: str) -> None:
    lines = pi_lines("nan", 2)
    lines[2] = lines[2].replace(b'"cacheWrite":0}', b'"cacheWrite":0,"cost":{"total":' + cost.encode() + b"}}")
    write(tmp_path / "nan.jsonl", lines)
    ingest_paths(db, tmp_path)
    assert calls_of(db, "nan") == ["c0", "c1"]
    ((_, line, reason, _),) = ingest_errors(db)
    assert line == 3 and "cost" in reason
    ((cost_usd,),) = query(db, "SELECT cost_usd FROM sessions")
    assert cost_usd is not None and cost_usd == cost_usd and abs(cost_usd) < 1e6  # finite
    code, output = cli("summary", "--db", str(db))
    assert code == 0 and "nan" not in output.lower().replace("nan)", "")


# -- 2. a file name that is not UTF-8 -------------------------------------------------------------------------------
def test_file_name_that_is_not_utf8(tmp_path: Path, db: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    name = os.fsdecode(b"x\xff.jsonl")
    write(folder / name, pi_lines("badname", 2))
    write(folder / "ok.jsonl", pi_lines("ok", 2))
    ingest_paths(db, folder)
    assert calls_of(db, "badname") == ["c0", "c1"] and calls_of(db, "ok") == ["c0", "c1"]
    paths = [r[0] for r in query(db, "SELECT path FROM files ORDER BY path")]
    assert any(p.endswith("x\\xff.jsonl") for p in paths)
    summary = ingest_paths(db, folder)
    assert summary.files_unchanged == 2  # the escaped name is matched again next run
    code, output = cli("sessions", "--db", str(db))
    assert code == 0


# -- 3. one line a parser chokes on costs that line ------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a": ' + b"9" * 5000 + b"}",
        b'{"type": "message", "id": "x", "message": {"role": "assistant", "content": [], "usage": {"input": 1e400}}}',
        b'{"type": "message", "id": "y", "message": {"role": "assistant", "content": ['
        + b'{"type": "toolCall", "id": "deep", "name": "bash", "arguments": '
        + b"[" * 5000
        + b"]" * 5000
        + b"}]}}",
    ],
)
def test_a_line_the_parser_chokes_on_costs_only_that_line(tmp_path: Path, db: Path, bad: bytes) -> None:
    lines = pi_lines("s", 3)
    lines.insert(3, bad)
    write(tmp_path / "s.jsonl", lines)
    ingest_paths(db, tmp_path)
    assert calls_of(db, "s")[-3:] == ["c0", "c1", "c2"] or set(calls_of(db, "s")) >= {"c0", "c1", "c2"}
    assert any(line == 4 for _, line, _, _ in ingest_errors(db))
    assert len(query(db, "SELECT 1 FROM calls WHERE result_text IS NOT NULL")) >= 3


# -- 4. a file that could not be opened is retried -----------------------------------------------------------------
def test_file_that_could_not_be_opened_is_retried(tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from analyzer.ingest import parse

    write(tmp_path / "a.jsonl", pi_lines("a", 2))
    target = write(tmp_path / "b.jsonl", pi_lines("b", 2))
    real_open = open

    def failing_open(path: object, *args: object, **kw: object):  # type: ignore[no-untyped-def]
        if str(path) == str(target):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(parse, "open", failing_open, raising=False)
    summary = ingest_paths(db, tmp_path)
    assert summary.skipped and "cannot open" in summary.skipped[0][1]
    monkeypatch.undo()
    summary = ingest_paths(db, tmp_path)  # same size, same mtime: read again all the same
    assert summary.files_ingested == 1 and calls_of(db, "b") == ["c0", "c1"]
    assert ingest_paths(db, tmp_path).files_unchanged == 2


# -- 6. a byte-order mark ---------------------------------------------------------------------------------------------
def test_utf8_bom_does_not_cost_line_one(tmp_path: Path, db: Path) -> None:
    lines = pi_lines("bom", 2, cwd="/home/me/proj")
    lines[0] = b"\xef\xbb\xbf" + lines[0]
    write(tmp_path / "bom.jsonl", lines)
    ingest_paths(db, tmp_path)
    assert query(db, "SELECT session_id, cwd FROM sessions") == [("bom", "/home/me/proj")]
    assert ingest_errors(db) == []


# -- inputs that already held: keep them holding ---------------------------------------------------------------------
def test_empty_binary_truncated_invalid_utf8_glued(tmp_path: Path, db: Path) -> None:
    c = tmp_path / "c"
    c.mkdir()
    (c / "empty.jsonl").write_bytes(b"")
    (c / "binary.jsonl").write_bytes(bytes(range(256)) * 64)
    write(c / "trunc.jsonl", pi_lines("trunc", 2) + [pi_lines("x", 1)[2][:40]], end=b"")
    bad = pi_lines("utf8", 2)
    bad.insert(2, b'{"type": "custom", "note": "\xff\xfe"}')
    write(c / "utf8.jsonl", bad)
    glued = pi_lines("glued", 2)
    glued[2:4] = [glued[2] + glued[3]]
    write(c / "glued.jsonl", glued)
    ingest_paths(db, c)
    assert calls_of(db, "trunc") == ["c0", "c1"]
    assert calls_of(db, "utf8") == ["c0", "c1"]
    assert calls_of(db, "glued") == ["c0", "c1"]
    reasons = dict(
        query(db, "SELECT regexp_extract(path, '[a-z0-9]+\\.jsonl$'), reason FROM files WHERE status = 'skipped'")
    )
    assert reasons["empty.jsonl"] == "empty file" and "binary" in reasons["binary.jsonl"]


def test_sixty_megabyte_line(tmp_path: Path, db: Path) -> None:
    lines = pi_lines("huge", 2)
    rec = orjson.loads(lines[3])
    rec["message"]["content"][0]["text"] = "x" * (60 << 20)
    lines[3] = orjson.dumps(rec)
    write(tmp_path / "huge.jsonl", lines)
    ingest_paths(db, tmp_path)
    assert calls_of(db, "huge") == ["c0", "c1"]
    assert query(db, "SELECT result_chars FROM calls WHERE call_id = 'c0'") == [(60 << 20,)]


def test_symlink_loop_and_dangling_link(tmp_path: Path, db: Path) -> None:
    c = tmp_path / "c"
    write(c / "ok.jsonl", pi_lines("ok", 2))
    (c / "loop").symlink_to(c)
    (c / "a").symlink_to(c / "b")
    (c / "b").symlink_to(c / "a")
    (c / "dangling.jsonl").symlink_to(c / "nowhere")
    ingest_paths(db, c)
    assert calls_of(db, "ok") == ["c0", "c1"]


def test_twenty_thousand_tiny_files(tmp_path: Path, db: Path) -> None:
    c = tmp_path / "c"
    c.mkdir()
    header = orjson.dumps(pi_records("t", 0)[0])
    for i in range(20_000):
        (c / f"{i:05d}.jsonl").write_bytes(header.replace(b'"t"', f'"t{i}"'.encode()) + b"\n")
    t0 = time.perf_counter()
    ingest_paths(db, c, workers=2)
    assert query(db, "SELECT count(*) FROM sessions") == [(20_000,)]
    assert time.perf_counter() - t0 < 90


def test_fifo_named_on_the_command_line(tmp_path: Path, db: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="FIFO"):
        ingest_paths(db, fifo)
    code, output = cli("ingest", str(fifo), "--db", str(db))
    one_line_error(code, output, 2, "FIFO")
    (tmp_path / "sub").mkdir()
    os.mkfifo(tmp_path / "sub" / "p.jsonl")  # inside a folder: not a file, not read, never blocks
    write(tmp_path / "sub" / "ok.jsonl", pi_lines("ok", 1))
    ingest_paths(db, tmp_path / "sub")
    assert calls_of(db, "ok") == ["c0"]


def test_nothing_readable_is_one_line(tmp_path: Path, db: Path) -> None:
    (tmp_path / "x.jsonl").write_bytes(b"\x00\x01")
    with pytest.raises(NothingToIngestError):
        ingest_paths(db, tmp_path)
    code, output = cli("ingest", str(tmp_path), "--db", str(tmp_path / "other.duckdb"))
    one_line_error(code, output, 4)


# -- the store: damaged, foreign, busy, killed -----------------------------------------------------------------------
STORE_COMMANDS = [["sessions"], ["summary"], ["findings"], ["scan"], ["calibrate"], ["replay", "--policy", "cline"]]


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("store")
    for i in range(30):
        write(d / "c" / f"s{i}.jsonl", pi_lines(f"s{i}", 6))
    db = d / "good.duckdb"
    ingest_paths(db, d / "c")
    return db


def _damaged(kind: str, good: Path, tmp_path: Path) -> Path:
    target = tmp_path / f"{kind}.duckdb"
    data = good.read_bytes()
    if kind == "truncated":
        target.write_bytes(data[:20000])
    elif kind == "garbage":
        target.write_bytes(os.urandom(len(data)))
    elif kind == "foreign":
        con = duckdb.connect(str(target))
        con.execute("CREATE TABLE sessions (session_id VARCHAR)")
        con.close()
    elif kind == "text":
        target.write_text("hello, not a database\n")
    return target


@pytest.mark.parametrize("kind", ["truncated", "garbage", "foreign", "text"])
@pytest.mark.parametrize("command", STORE_COMMANDS + [["ingest", "IN"], ["report", "--out", "OUT"]], ids=lambda c: c[0])
def test_a_store_that_is_not_one_is_one_line(good_store: Path, tmp_path: Path, kind: str, command: list[str]) -> None:
    db = _damaged(kind, good_store, tmp_path)
    write(tmp_path / "in" / "s.jsonl", pi_lines("s", 1))
    args = [str(tmp_path / "in") if a == "IN" else str(tmp_path / "out") if a == "OUT" else a for a in command]
    before = db.read_bytes()
    code, output = cli(*args, "--db", str(db))
    one_line_error(code, output, 2, str(db.name))
    assert db.read_bytes() == before  # never written into


def test_a_store_being_created_when_killed_is_no_store(tmp_path: Path) -> None:
    """The store file appears only with its schema (created under another name, then renamed)."""
    db = tmp_path / "new.duckdb"
    write(tmp_path / "c" / "s.jsonl", pi_lines("s", 1))
    ingest_paths(db, tmp_path / "c")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".new")] == []
    con = duckdb.connect(str(tmp_path / "empty.duckdb"))  # what an older loopscope killed at creation left
    con.close()
    ingest_paths(tmp_path / "empty.duckdb", tmp_path / "c")
    assert query(tmp_path / "empty.duckdb", "SELECT count(*) FROM sessions") == [(1,)]


# -- where output goes ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["/nonexistent/x.json", "DIR", "/proc/x.json"])
def test_output_that_cannot_be_written_fails_first(good_store: Path, tmp_path: Path, target: str) -> None:
    out = str(tmp_path) if target == "DIR" else target
    for command in (["sessions"], ["findings"], ["summary"], ["calibrate", "--no-save"]):
        code, output = cli(*command, "--db", str(good_store), "--output", out)
        one_line_error(code, output, 2, "--output" if target != "/proc/x.json" else "cannot write")


@pytest.mark.parametrize(
    "args",
    [
        ["--out", "/proc/report"],
        ["--single-file", "--out", "/proc/r.html"],
        ["--single-file", "--out", "/etc/hostname/x/r.html"],
    ],
)
def test_report_to_a_place_that_cannot_be_written(good_store: Path, args: list[str]) -> None:
    code, output = cli("report", "--db", str(good_store), *args)
    assert code == 2 and "Traceback" not in output and output.startswith("error:"), output


def test_read_only_folder_is_found_before_any_work(
    good_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    ro = tmp_path / "ro"
    ro.mkdir()
    real = tempfile.NamedTemporaryFile

    def refuse(*a: object, **kw: object):  # type: ignore[no-untyped-def]
        if str(kw.get("dir")) == str(ro):
            raise PermissionError(13, "Permission denied")
        return real(*a, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", refuse)
    code, output = cli("report", "--db", str(good_store), "--out", str(ro / "rep"))
    assert code == 0 or "cannot write" in output  # ro/rep does not exist: its parent is probed
    code, output = cli("report", "--db", str(good_store), "--out", str(ro))
    one_line_error(code, output, 2, "cannot write")
    db = tmp_path / "a.duckdb"
    write(tmp_path / "c" / "s.jsonl", pi_lines("s", 1))
    code, output = cli("analyze", str(tmp_path / "c"), "--db", str(db), "--out", str(ro))
    one_line_error(code, output, 2, "cannot write")
    assert not db.exists()  # nothing was ingested before finding out


def test_report_refuses_the_current_folder_and_foreign_folders(
    good_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = cli("report", "--db", str(good_store), "--out", "")
    one_line_error(code, output, 2, "current folder")
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("my own page")
    code, output = cli("report", "--db", str(good_store), "--out", str(site))
    one_line_error(code, output, 2, "--force")
    assert (site / "index.html").read_text() == "my own page"
    code, output = cli("report", "--db", str(good_store), "--out", str(site), "--force")
    assert code == 0, output
    code, output = cli("report", "--db", str(good_store), "--out", str(site))  # now a loopscope report: fine
    assert code == 0, output


@pytest.mark.parametrize(
    "args",
    [
        ["findings", "--min-repeats", "-3"],
        ["findings", "--limit", "-1"],
        ["sessions", "--limit", "-5"],
        ["scan", "--workers", "0"],
        ["replay", "--policy", "cline", "--halt", "-1"],
        ["calibrate", "--target-false-halt-rate", "2"],
        ["ingest", "--workers", "-2"],
    ],
)
def test_out_of_range_option_values_are_rejected(good_store: Path, args: list[str]) -> None:
    code, output = cli(*args, "--db", str(good_store))
    assert code == 2 and "Traceback" not in output, output
    assert "Invalid value" in output or "between" in output, output


def test_disk_full_while_ingesting_is_one_line_and_the_store_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from analyzer.ingest import land

    db = tmp_path / "s.duckdb"
    write(tmp_path / "c1" / "a.jsonl", pi_lines("a", 2))
    ingest_paths(db, tmp_path / "c1")
    write(tmp_path / "c2" / "b.jsonl", pi_lines("b", 2))
    real = land.load_chunk

    def full(con, outcomes, spool):  # type: ignore[no-untyped-def]
        con.execute("BEGIN TRANSACTION")
        con.execute("DELETE FROM calls")
        con.execute("ROLLBACK")
        raise OSError(28, "No space left on device", str(db))

    monkeypatch.setattr(land, "load_chunk", full)
    code, output = cli("ingest", str(tmp_path / "c2"), "--db", str(db))
    one_line_error(code, output, 2, "No space left on device")

    def duck_full(con, outcomes, spool):  # type: ignore[no-untyped-def]
        raise duckdb.TransactionException("TransactionContext Error: Failed to commit: No space left on device")

    monkeypatch.setattr(land, "load_chunk", duck_full)
    code, output = cli("ingest", str(tmp_path / "c2"), "--db", str(db))
    one_line_error(code, output, 2, "No space left on device")
    monkeypatch.setattr(land, "load_chunk", real)
    assert calls_of(db, "a") == ["c0", "c1"]
    ingest_paths(db, tmp_path / "c2")
    assert calls_of(db, "b") == ["c0", "c1"]


def test_disk_full_while_writing_a_report(good_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path as P

    real = P.write_text

    def full(self, *a, **kw):  # type: ignore[no-untyped-def]
        if self.suffix == ".html":
            raise OSError(28, "No space left on device", str(self))
        return real(self, *a, **kw)

    monkeypatch.setattr(P, "write_text", full)
    code, output = cli("report", "--db", str(good_store), "--out", str(tmp_path / "rep"))
    one_line_error(code, output, 2, "No space left on device")


# -- secrets ----------------------------------------------------------------------------------------------------------
AWS = "AKIA" + "Q3EGRW7N5JXZ2PLM"
GHP = "ghp_" + "R8sK2mQ7vX1nT4bY9cW3eZ6aF0hJ5uL8dP2g"

SECRET_FAMILIES = {
    "cloud (AWS)": (f"aws_access_key_id {AWS} here", AWS),
    "cloud (Azure)": ("AccountKey=" + "a" * 86 + "==;", "a" * 86),
    "cloud (Google)": (
        "key AIza" + "SyD3x9Zq1WvB7nC5mK2jH8gF4dS6aP0oL1u" + " end",
        "SyD3x9Zq1WvB7nC5mK2jH8gF4dS6aP0oL1u",
    ),
    "vcs (GitHub)": (f"git clone https://{GHP}@github.com/x", GHP[4:]),
    "vcs (GitLab)": ("glpat-" + "Zx8Kp2Qm7Vn4Tb9Rc3We" + " x", "Zx8Kp2Qm7Vn4Tb9Rc3We"),
    "chat (Slack)": ("xoxb-" + "123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    "chat (Discord)": ("MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs x", "ZnCjm1XVW7vRze4b7Cq4se7kKWs"),
    "chat (Telegram)": (
        "bot 123456789:" + "AAHk2Jd8sQ1vX4nB7mC0pL5rT9wZ3yF6eGu" + " x",
        "AAHk2Jd8sQ1vX4nB7mC0pL5rT9wZ3yF6eGu",
    ),
    "payment (Stripe)": ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    "payment (Square)": ("sq0csp-" + "A" * 43, "A" * 43),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    "private key": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7b9Q\nZmFrZWtleWJvZHk=\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA7b9Q",
    ),
    "password=": ("password=hunter2", "hunter2"),
    "json password": ('{"password": "correct horse battery"}', "correct horse"),
    "passwd": ("passwd: 'Tr0ub4dor&3'", "Tr0ub4dor"),
    "secret": ("secret=9f8e7d6c5b4a", "9f8e7d6c5b4a"),
    "token": ("token=abcd1234efgh5678", "abcd1234efgh5678"),
    "api_key": ("api_key = 'zq8w7e6r5t4y'", "zq8w7e6r5t4y"),
    "connection string": ("postgres://admin:s3cr3tpass@db.internal:5432/app", "s3cr3tpass"),
    "bearer": ("curl -H 'Authorization: Bearer abc123def456ghi789jkl' x", "abc123def456ghi789jkl"),
}


@pytest.mark.parametrize("family", list(SECRET_FAMILIES))
def test_each_secret_family_is_redacted(family: str) -> None:
    from reports.redact import redact

    text, secret = SECRET_FAMILIES[family]
    out = redact(text) or ""
    assert secret not in out and "[REDACTED" in out, out


def test_detect_secrets_plugins_are_used() -> None:
    from reports.redact import DETECT_SECRETS_RULES

    families = {r.family for r in DETECT_SECRETS_RULES}
    assert {"aws-key", "github-token", "slack-token", "stripe-key", "url-password"} <= families


def test_pem_block_crossing_the_window_edge_is_redacted_whole() -> None:
    from reports.redact import redact_cut

    body = "\n".join("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2" for _ in range(30))
    text = "cat key.pem\n-----BEGIN OPENSSH PRIVATE KEY-----\n" + body + "\n-----END OPENSSH PRIVATE KEY-----\n"
    for limit in (40, 60, 100, 500):
        shown = redact_cut(text, limit) or ""
        assert "QUJDREVG" not in shown and "BEGIN" not in shown.replace("[REDACTED private-key]", "")


def test_ingest_error_excerpt_keeps_a_secret_whole_for_redaction(tmp_path: Path, db: Path) -> None:
    from reports.redact import redact

    lines = pi_lines("s", 1)
    lines.insert(2, b"{not json " + b"x" * 178 + b" " + AWS.encode() + b" more}")  # the key straddles char 200
    write(tmp_path / "s.jsonl", lines)
    ingest_paths(db, tmp_path)
    ((_, _, _, excerpt),) = ingest_errors(db)
    shown = (redact(excerpt) or "")[:200]
    assert AWS[:10] not in shown


def test_secret_in_a_session_id_never_reaches_the_report(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    sid = f"run-{AWS}-{GHP}"
    recs = pi_records(sid, 6)
    for r in recs[2::2]:  # the same call six times: a loop, so the session gets a page
        r["message"]["content"][0]["arguments"] = {"command": "pytest"}
    write(tmp_path / "c" / f"2026_{sid}.jsonl", [orjson.dumps(r) for r in recs])
    ingest_paths(db, tmp_path / "c")
    code, output = cli("scan", "--db", str(db))
    assert code == 0, output
    for args in (["--out", str(tmp_path / "rep")], ["--single-file", "--out", str(tmp_path / "one.html")]):
        code, output = cli("report", "--db", str(db), *args)
        assert code == 0, output
    written = [p for p in (tmp_path / "rep").rglob("*") if p.is_file()] + [tmp_path / "one.html"]
    assert any(p.parent.name == "sessions" for p in written)
    for p in written:
        assert AWS not in p.name and GHP not in p.name
        if p.suffix in (".html", ".json"):
            data = p.read_text(errors="replace")
            assert AWS not in data and GHP not in data, p


# -- processes --------------------------------------------------------------------------------------------------------
def _children(pid: int) -> set[int]:
    kids: set[int] = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.update(int(x) for x in f.read().split())
    except OSError:
        pass
    return kids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _big_corpus(folder: Path, n_files: int = 700, result_chars: int = 20_000) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n_files):
        recs = pi_records(f"k{i}", 4)
        for r in recs[3::2]:
            r["message"]["content"][0]["text"] = "y" * result_chars
        write(folder / f"{i:04d}.jsonl", [orjson.dumps(r) for r in recs])
    return folder


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_exit_when_the_ingest_is_killed(tmp_path: Path) -> None:
    corpus = _big_corpus(tmp_path / "c")
    db = tmp_path / "s.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "analyzer.cli", "ingest", str(corpus), "--db", str(db), "--workers", "2", "--quiet"]
    )
    workers: set[int] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        workers = (
            {k for k in _children(proc.pid) if "spawn_main" in Path(f"/proc/{k}/cmdline").read_text()}
            if _children(proc.pid)
            else set()
        )
        if len(workers) >= 1:
            break
        time.sleep(0.02)
    if proc.poll() is not None:
        pytest.skip("the ingest finished before its workers could be seen")
    time.sleep(0.3)
    workers |= {k for k in _children(proc.pid) if _alive(k)}
    os.kill(proc.pid, signal.SIGKILL)  # the parent only, as `kill -9 PID` does
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)], "workers outlived their parent"
    # The spool the killed run left (beside the store) is removed by the next run, which completes the store.
    ingest_paths(db, corpus)
    assert not list(tmp_path.glob("s.duckdb.spool-*"))
    assert query(db, "SELECT count(*) FROM sessions") == [(700,)]


def test_two_concurrent_writers(tmp_path: Path) -> None:
    corpus = _big_corpus(tmp_path / "c", n_files=300, result_chars=2000)
    db = tmp_path / "s.duckdb"
    cmd = [sys.executable, "-m", "analyzer.cli", "ingest", str(corpus), "--db", str(db), "--quiet"]
    a = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    b = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    ra, rb = a.wait(), b.wait()
    errs = (a.stderr.read() if a.stderr else "") + (b.stderr.read() if b.stderr else "")
    assert {ra, rb} <= {0, 3} and 0 in (ra, rb), errs
    assert "Traceback" not in errs
    if 3 in (ra, rb):
        assert "in use" in errs
    assert query(db, "SELECT count(*) FROM sessions") == [(300,)]


def test_kill_mid_ingest_then_reingest_equals_a_clean_ingest(tmp_path: Path) -> None:
    corpus = _big_corpus(tmp_path / "c", n_files=600, result_chars=4000)
    clean = tmp_path / "clean.duckdb"
    ingest_paths(clean, corpus)
    snap = "SELECT session_id, calls, turns, total_tokens FROM sessions ORDER BY session_id"
    expected = query(clean, snap)
    db = tmp_path / "killed.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "analyzer.cli", "ingest", str(corpus), "--db", str(db), "--workers", "2", "--quiet"],
        start_new_session=True,
    )
    time.sleep(1.5)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    ingest_paths(db, corpus)
    assert query(db, snap) == expected


def test_a_worker_that_dies_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures.process import BrokenProcessPool

    from analyzer.ingest import pipeline

    def broken(*a: object, **kw: object) -> None:
        raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr(pipeline, "_ingest_files", broken)
    write(tmp_path / "c" / "s.jsonl", pi_lines("s", 1))
    code, output = cli("ingest", str(tmp_path / "c"), "--db", str(tmp_path / "s.duckdb"))
    one_line_error(code, output, 1, "worker")


def test_a_read_error_mid_file_is_retried(tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from analyzer.ingest import reader

    write(tmp_path / "a.jsonl", pi_lines("a", 3))
    real = reader.iter_lines

    def failing(f, stats, progress=None):  # type: ignore[no-untyped-def]
        yield from list(real(f, stats, progress))[:3]
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(reader, "iter_lines", failing)
    with pytest.raises(NothingToIngestError, match="cannot read"):
        ingest_paths(db, tmp_path)
    monkeypatch.undo()
    ingest_paths(db, tmp_path)  # same size and mtime, read again
    assert calls_of(db, "a") == ["c0", "c1", "c2"]
