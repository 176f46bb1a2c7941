"""Labels files: every accepted shape, and every bad row rejected with its line number (reading and resolving); the
old calibrate files and the one label format (``analyzer.evaluate.labels``) alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from calibrate_support import build_store
from helpers import query
from typer.testing import CliRunner

from analyzer.calibrate.labels import Label, read_labels, resolve_labels
from analyzer.cli import app
from analyzer.errors import UsageError
from analyzer.evaluate import labels as fmt
from analyzer.evaluate.labels import read_label_file, session_key
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
    assert read_labels(p) == [
        Label(2, "loop", session_id="s1", first_call_id="c1", last_call_id="c4", note="looked at it", source=str(p)),
        Label(4, "not_loop", session_id="s2", finding_id="f9", note="a note, with a comma", source=str(p)),
    ]


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
    assert read_labels(sniffed)[0].label == "loop"


# -- bad rows: the error names the file and the line -------------------------------------------------------------------
BAD_CSV = [
    ("session_id\ns1\n", 1, "missing required field(s) label"),
    ("session_id,label,first_call\ns1,stuck,c1\n", 1, "unknown field(s) 'first_call'"),
    ("session_id,label,label\ns1,stuck,stuck\n", 1, "appear more than once"),
    ("session_id,label\ns1,stuck\n,benign\n", 3, "session_id is empty"),
    (
        "session_id,label\ns1,stuck\ns2,maybe\n",
        3,
        "label must be loop, not_loop, unsure or loop-free (or stuck, benign), got 'maybe'",
    ),
    ("session_id,label\ns1,\n", 2, "label must be loop, not_loop, unsure or loop-free (or stuck, benign), got ''"),
    ("session_id,label,finding_id,first_call_id\ns1,stuck,f1,c1\n", 2, "either finding_id or first_call_id"),
    ("session_id,label\ns1,stuck,extra\n", 2, "has 3 fields, the header has 2"),
    (
        'session_id,label\ns1,stuck\n"s2\nwrapped",benign\ns3,nope\n',
        5,
        "label must be loop, not_loop, unsure or loop-free",
    ),
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
    ("streak,benign,streak-c3,streak-c3,", 3, "its not_loop span overlaps the loop span of line 2"),
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
    assert (
        len(lines) == 1
        and "line 3: label must be loop, not_loop, unsure or loop-free (or stuck, benign), got 'progress'" in lines[0]
    )


# -- the one label format: the report's export, session keys, seqs, loop-free, unsure, realdata records --------------
def test_the_exported_file_with_its_header(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "loopscope-labels.json",
        '{"loopscope_labels": 1, "store_id": "s-1", "labels": [\n'
        '  {"session_key": "k_0123456789abcdef", "label": "not_loop", "finding_id": "f1", "note": "a poll"},\n'
        '  {"session_key": "k_0123456789abcdef", "label": "loop", "first_seq": 12, "last_seq": 19},\n'
        '  {"session_key": "k_fedcba9876543210", "label": "loop-free"},\n'
        '  {"session_key": "k_fedcba9876543210", "label": "unsure", "first_seq": 3}\n]}\n',
    )
    f = read_label_file(p)
    assert f.store_id == "s-1"
    assert [(lb.line, lb.label, lb.first_seq, lb.last_seq, lb.whole) for lb in f.labels] == [
        (2, "not_loop", None, None, False),
        (3, "loop", 12, 19, False),
        (4, "loop-free", None, None, True),
        (5, "unsure", 3, None, False),
    ]


def test_a_realdata_record_is_a_label(tmp_path: Path) -> None:
    rec = {
        "file": "tests/realdata/x/y.jsonl",
        "format": "claude_code",
        "session_id": "abc",
        "kind": "text",
        "first_call_index": 4,
        "last_call_index": 6,
        "message_index": 9,
        "label": "not_loop",
        "why": "a plan with repeated headings",
        "origin": "reader",
    }
    (lb,) = read_labels(write(tmp_path, "r.json", json.dumps([rec])))
    assert (lb.file, lb.session_id, lb.first_seq, lb.last_seq, lb.message_index, lb.kind) == (
        "tests/realdata/x/y.jsonl",
        "abc",
        4,
        6,
        9,
        "text",
    )
    assert lb.note == "a plan with repeated headings"  # its why is its note


BAD_ROWS = [
    ('{"labels": [{"session_id": "s", "label": "loop"}], "loopscope_labels": 2}', 1, "labels format 2"),
    ('[{"session_key": "k_12", "label": "loop"}]', 1, "session_key must be k_ and 16 hex digits"),
    (f'[{{"session_id": "s", "session_key": "{session_key("t")}", "label": "loop"}}]', 1, "is not the key of"),
    ('[{"session_id": "s", "label": "loop-free", "first_seq": 2}]', 1, "a loop-free label is about the whole session"),
    ('[{"session_id": "s", "label": "loop", "first_seq": 5, "last_seq": 2}]', 1, "last_seq 2 comes before first_seq 5"),
    ('[{"session_id": "s", "label": "loop", "first_seq": -1}]', 1, "first_seq must be a whole number >= 0"),
    ('[{"session_id": "s", "label": "loop", "first_seq": 1, "first_call_index": 1}]', 1, "give first_seq or"),
    ('[{"session_id": "s", "label": "loop", "finding_id": "f", "first_seq": 1}]', 1, "give either finding_id or"),
    ('[{"session_id": "s", "label": "loop", "finding_id": "f", "message_index": 1}]', 1, "or message_index, not"),
    ('[{"label": "loop", "note": "no session"}]', 1, "missing required field(s): one of session_id, session_key"),
]


@pytest.mark.parametrize("text,line,msg", BAD_ROWS, ids=[m for _, _, m in BAD_ROWS])
def test_bad_rows_of_the_new_fields(tmp_path: Path, text: str, line: int, msg: str) -> None:
    p = write(tmp_path, "bad.json", text)
    with pytest.raises(UsageError) as exc:
        read_labels(p)
    assert f"labels file {p} line {line}: " in str(exc.value) and msg in str(exc.value)


def resolution(db: Path, path: Path, roots: tuple[Path, ...] = ()):  # type: ignore[no-untyped-def]
    con = connection.connect(db, read_only=True)
    try:
        return fmt.resolve(con, read_labels(path), roots)
    finally:
        con.close()


def test_sessions_by_key_and_by_transcript(db: Path, tmp_path: Path) -> None:
    (path,) = [r[0] for r in query(db, "SELECT source_path FROM sessions WHERE session_id = 'cycle'")]
    folder = Path(path).parent
    p = write(
        tmp_path,
        "l.json",
        json.dumps(
            [
                {"session_key": session_key("streak"), "label": "loop", "first_seq": 2, "last_seq": 4},
                {"file": path, "label": "not_loop", "first_seq": 1, "last_seq": 1},  # absolute
                {"file": Path(path).name, "session_id": "not its id", "label": "unsure"},  # under a root
                {"file": "elsewhere.jsonl", "label": "loop"},
                {"session_key": session_key("elsewhere"), "label": "loop"},
                {"file": Path(path).name, "session_id": "x", "session_key": session_key("x"), "label": "loop"},
            ]
        ),
    )
    res = resolution(db, p, (folder,))
    assert [(r.session_id, r.first, r.last, r.name) for r in res.labels] == [
        ("streak", 2, 4, "loop"),
        ("cycle", 1, 1, "not_loop"),
        ("cycle", 0, 14, "unsure"),
    ]
    assert res.skipped == {
        "transcript not in the store": 1,
        "session not in the store": 1,
        "session not in its transcript": 1,
    }


def test_overlaps_loop_free_unsure_and_kinds(db: Path, tmp_path: Path) -> None:
    def rows(*labels: dict) -> Path:
        return write(tmp_path, "l.json", json.dumps(list(labels)))

    ok = rows(
        {"session_id": "streak", "label": "loop-free"},
        {"session_id": "streak", "label": "not_loop", "first_seq": 1, "last_seq": 2},
        {"session_id": "streak", "label": "unsure", "first_seq": 0, "last_seq": 7},
        {"session_id": "cycle", "label": "loop", "first_seq": 3, "last_seq": 5, "kind": "streak"},
        {"session_id": "cycle", "label": "not_loop", "first_seq": 0, "last_seq": 14, "kind": "window"},
    )
    assert len(resolution(db, ok).labels) == 5
    bad = rows(
        {"session_id": "streak", "label": "loop-free"}, {"session_id": "streak", "label": "loop", "first_seq": 3}
    )
    with pytest.raises(UsageError, match=r"line 1: its loop span overlaps the loop-free span of line 1"):
        resolution(db, bad)


def test_calibration_spans_of_the_new_labels(db: Path, tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "l.json",
        json.dumps(
            [
                {"session_id": "streak", "label": "loop", "first_seq": 2, "last_seq": 4},
                {"session_id": "poll", "label": "loop-free"},
                {"session_id": "cycle", "label": "unsure"},
                {"session_id": "repeat", "label": "not_loop", "message_index": 3},
                {"session_id": "elsewhere", "label": "loop"},
            ]
        ),
    )
    spans = resolve(db, p)
    assert spans.rows == 5 and spans.skipped == 1
    assert spans.spans.select("session_id", "first_seq", "last_seq", "label").rows() == [
        ("streak", 2, 4, "stuck"),
        ("poll", 0, 5, "benign"),
    ]
