"""Labels files: every accepted shape, and every bad row rejected with its line number (reading and resolving)."""

from __future__ import annotations

from pathlib import Path

import pytest
from calibrate_support import build_store
from typer.testing import CliRunner

from analyzer.calibrate.labels import Label, read_labels, resolve_labels
from analyzer.cli import app
from analyzer.errors import UsageError
from analyzer.store import connection

runner = CliRunner()


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("labels"))


def resolve(db: Path, path: Path):  # type: ignore[no-untyped-def]
    con = connection.connect(db, read_only=True)
    try:
        return resolve_labels(con, read_labels(path), path)
    finally:
        con.close()


# -- accepted shapes ---------------------------------------------------------------------------------------------------
def test_csv_with_every_field(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "l.csv",
        "Session_ID, label ,first_call_id,last_call_id,finding_id,note\n"
        "s1,Stuck,c1,c4,,looked at it\n\n"
        's2, benign ,,,f9,"a note, with a comma"\n',
    )
    assert read_labels(p) == [Label(2, "s1", "stuck", "c1", "c4", None), Label(4, "s2", "benign", None, None, "f9")]


def test_json_array_wrapper_and_json_lines(tmp_path: Path) -> None:
    arr = write(
        tmp_path,
        "a.json",
        '[\n  {"session_id": "s1", "label": "stuck"},\n\n  {"session_id": "s2",\n'
        '   "label": "benign", "finding_id": "f1"}\n]\n',
    )
    assert [(lb.line, lb.session_id, lb.finding_id) for lb in read_labels(arr)] == [(2, "s1", None), (4, "s2", "f1")]
    wrapped = write(tmp_path, "w.json", '{"labels": [{"session_id": "s1", "label": "stuck"}]}')
    assert read_labels(wrapped)[0].session_id == "s1"
    lines = write(
        tmp_path, "l.jsonl", '{"session_id": "s1", "label": "stuck"}\n\n{"session_id": 7, "label": "benign"}\n'
    )
    assert [(lb.line, lb.session_id) for lb in read_labels(lines)] == [(1, "s1"), (3, "7")]
    sniffed = write(tmp_path, "labels.txt", '[{"session_id": "s1", "label": "stuck"}]')
    assert read_labels(sniffed)[0].label == "stuck"


# -- bad rows: the error names the file and the line -------------------------------------------------------------------
BAD_CSV = [
    ("session_id\ns1\n", 1, "missing required field(s) label"),
    ("session_id,label,first_call\ns1,stuck,c1\n", 1, "unknown field(s) 'first_call'"),
    ("session_id,label,label\ns1,stuck,stuck\n", 1, "appear more than once"),
    ("session_id,label\ns1,stuck\n,benign\n", 3, "session_id is empty"),
    ("session_id,label\ns1,stuck\ns2,maybe\n", 3, "label must be stuck or benign, got 'maybe'"),
    ("session_id,label\ns1,\n", 2, "label must be stuck or benign, got ''"),
    ("session_id,label,finding_id,first_call_id\ns1,stuck,f1,c1\n", 2, "either finding_id or first_call_id"),
    ("session_id,label\ns1,stuck,extra\n", 2, "has 3 fields, the header has 2"),
    ('session_id,label\ns1,stuck\n"s2\nwrapped",benign\ns3,nope\n', 5, "label must be stuck or benign"),
]


@pytest.mark.parametrize("text,line,msg", BAD_CSV, ids=[m for _, _, m in BAD_CSV])
def test_bad_csv_rows(tmp_path: Path, text: str, line: int, msg: str) -> None:
    p = write(tmp_path, "bad.csv", text)
    with pytest.raises(UsageError) as exc:
        read_labels(p)
    assert f"labels file {p} line {line}: " in str(exc.value) and msg in str(exc.value)
    assert "\n" not in str(exc.value)


BAD_JSON = [
    ('[{"session_id": "s1", "label": "stuck"},\n {"session_id": "s2", "label": "sure"}]', 2, "label must be"),
    ('[{"session_id": "s1", "label": "stuck"},\n "s2"]', 2, "expected an object"),
    (
        '[{"session_id": "s1", "label": "stuck"},\n\n {"session_id": ["s2"], "label": "stuck"}]',
        3,
        "session_id must be a string",
    ),
    ('[{"session_id": "s1", "label": "stuck"},\n {"session_id": "s2" "label": "stuck"}]', 2, "is not valid JSON"),
    ('[{"session_id": "s1", "label": "stuck"}\n {"session_id": "s2", "label": "stuck"}]', 2, "expected ',' or ']'"),
    ('[{"session_id": "s1", "label": "stuck"},\n{"session": "s2", "label": "stuck"}]', 2, "unknown field(s) 'session'"),
    ('{"labels": {"session_id": "s1"}}', 1, '"labels" must be an array'),
    ('[{"session_id": "s1", "label": "stuck"}', 1, "the array is not closed"),
]


@pytest.mark.parametrize("text,line,msg", BAD_JSON, ids=[m for _, _, m in BAD_JSON])
def test_bad_json_rows(tmp_path: Path, text: str, line: int, msg: str) -> None:
    p = write(tmp_path, "bad.json", text)
    with pytest.raises(UsageError) as exc:
        read_labels(p)
    assert f"line {line}: " in str(exc.value) and msg in str(exc.value)


def test_bad_json_lines_row(tmp_path: Path) -> None:
    p = write(tmp_path, "bad.jsonl", '{"session_id": "s1", "label": "stuck"}\n{"session_id": "s2", "label": true}\n')
    with pytest.raises(UsageError, match=r"line 2: label must be a string"):
        read_labels(p)


def test_missing_empty_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        read_labels(tmp_path / "nope.csv")
    with pytest.raises(UsageError, match="is empty"):
        read_labels(write(tmp_path, "e.csv", "\n  \n"))
    with pytest.raises(UsageError, match="holds no label rows"):
        read_labels(write(tmp_path, "h.csv", "session_id,label\n"))
    (tmp_path / "bin.csv").write_bytes(b"session_id,label\n\xff\xfe,stuck\n")
    with pytest.raises(UsageError, match="not UTF-8"):
        read_labels(tmp_path / "bin.csv")


# -- resolving against the store ---------------------------------------------------------------------------------------
def test_spans_from_calls_findings_and_sessions(db: Path, tmp_path: Path) -> None:
    fid = store_finding(db, "poll")
    p = write(
        tmp_path,
        "l.csv",
        "session_id,label,first_call_id,last_call_id,finding_id\n"
        "streak,benign,streak-c2,streak-c4,\n"
        "streak,benign,streak-c6,,\n"
        f"poll,stuck,,,{fid}\n"
        "cycle,stuck,,,\n"
        "elsewhere,stuck,,,\n",
    )
    spans = resolve(db, p)
    assert spans.rows == 5 and spans.skipped == 1  # "elsewhere" is not in this store
    assert spans.spans.select("session_id", "first_seq", "last_seq", "label", "line").rows() == [
        ("streak", 2, 4, "benign", 2),
        ("streak", 6, 7, "benign", 3),
        ("poll", 0, 5, "stuck", 4),
        ("cycle", 0, 14, "stuck", 5),
    ]


def store_finding(db: Path, sid: str) -> str:
    con = connection.connect(db, read_only=True)
    try:
        return con.execute("SELECT finding_id FROM findings WHERE session_id = ?", [sid]).fetchall()[0][0]
    finally:
        con.close()


BAD_SPANS = [
    ("streak,stuck,streak-c1,nope,", 3, "last_call_id 'nope' is not a call of session 'streak'"),
    ("streak,stuck,poll-c1,,", 3, "first_call_id 'poll-c1' is not a call of session 'streak'"),
    ("streak,stuck,streak-c5,streak-c2,", 3, "last_call_id 'streak-c2' comes before first_call_id 'streak-c5'"),
    ("streak,stuck,,,no-such-finding", 3, "finding_id 'no-such-finding' is not in the store's findings"),
    ("streak,benign,streak-c3,streak-c3,", 3, "its benign span overlaps the stuck span of line 2"),
]


@pytest.mark.parametrize("row,line,msg", BAD_SPANS, ids=[m[:40] for _, _, m in BAD_SPANS])
def test_bad_spans(db: Path, tmp_path: Path, row: str, line: int, msg: str) -> None:
    p = write(
        tmp_path,
        "l.csv",
        "session_id,label,first_call_id,last_call_id,finding_id\nstreak,stuck,streak-c0,streak-c4,\n" + row + "\n",
    )
    with pytest.raises(UsageError) as exc:
        resolve(db, p)
    assert f"line {line}: {msg}" in str(exc.value)


def test_finding_of_another_session(db: Path, tmp_path: Path) -> None:
    fid = store_finding(db, "poll")
    p = write(tmp_path, "l.csv", f"session_id,label,finding_id\nstreak,stuck,{fid}\n")
    with pytest.raises(UsageError, match=r"line 2: finding .* belongs to session 'poll', not 'streak'"):
        resolve(db, p)


def test_overlapping_spans_that_agree_are_fine(db: Path, tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "l.csv",
        "session_id,label,first_call_id,last_call_id\nstreak,stuck,streak-c0,streak-c4\n"
        "streak,stuck,streak-c3,streak-c6\n",
    )
    assert resolve(db, p).spans.height == 2


def test_cli_rejects_a_bad_row_in_one_line_with_exit_code_2(db: Path, tmp_path: Path) -> None:
    p = write(tmp_path, "l.csv", "session_id,label\nstreak,stuck\npoll,progress\n")
    res = runner.invoke(app, ["calibrate", "--db", str(db), "--labels", str(p), "--no-save"])
    assert res.exit_code == 2
    assert isinstance(res.exception, SystemExit) and "Traceback" not in res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "line 3: label must be stuck or benign, got 'progress'" in lines[0]
