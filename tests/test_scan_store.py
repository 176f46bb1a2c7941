"""The scan against the store: incremental rescans, stable ids, parallel workers, and the CLI commands on top."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import orjson
import polars as pl
import pytest
from helpers import ingest_paths, query
from test_scan_findings import Call, Pi, bash
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.detect import keys
from analyzer.detect.stream.calls import Config
from analyzer.scan import run as scan_mod
from analyzer.scan.run import DETECTOR_VERSION, scan

CONTRACT = [
    "finding_id",
    "session_id",
    "kind",
    "period",
    "tools",
    "call_ids",
    "first_seq",
    "last_seq",
    "repeats",
    "stuck",
    "user_turn",
    "why",
    "wasted_tokens",
    "estimated_tokens",
    "cost_usd",
]
runner = CliRunner()


def looping(session_id: str, n: int = 4, command: str = "make test") -> Pi:
    return Pi(session_id).user().each(*[bash(command, "1 failed", True) for _ in range(n)])


def healthy(session_id: str) -> Pi:
    return (
        Pi(session_id)
        .user()
        .say("Reading the module first.", Call("read", {"path": "a"}, "a"))
        .say("Now the fix.", Call("edit", {"path": "a", "x": 1}, "ok"))
        .say("Build:", bash("make", "ok"))
    )


def ids(db: Path) -> dict[str, str]:
    return dict(query(db, "SELECT finding_id, session_id FROM findings"))


def test_rescans_only_new_or_changed_sessions(tmp_path: Path, db: Path) -> None:
    folder = tmp_path / "t"
    looping("one").write(folder)
    healthy("two").write(folder)
    ingest_paths(db, folder)
    first = scan(db)
    assert (first.scanned, first.unchanged, first.findings) == (2, 0, 1)
    before = ids(db)

    again = scan(db)
    assert (again.scanned, again.unchanged) == (0, 2)
    assert ids(db) == before

    looping("one", n=6).write(folder)  # the file grows: its session is rescanned, the other is not
    ingest_paths(db, folder)
    third = scan(db)
    assert (third.scanned, third.unchanged) == (1, 1)
    assert ids(db) == before  # same episode start, same id
    assert query(db, "SELECT repeats FROM findings") == [(6,)]
    assert query(db, "SELECT count(*) FROM signals WHERE session_id = 'one'") == [(6,)]


def test_removed_sessions_lose_their_rows(tmp_path: Path, db: Path) -> None:
    f = looping("gone").write(tmp_path / "t")
    ingest_paths(db, f)
    scan(db)
    f.write_bytes(orjson.dumps(healthy("other").records[0]) + b"\n")  # same file, now another (empty) session
    ingest_paths(db, f)
    s = scan(db)
    assert (s.removed, s.scanned) == (1, 1)
    for table in ("signals", "findings", "text_signals", "scan_state"):
        assert query(db, f"SELECT count(*) FROM {table} WHERE session_id = 'gone'") == [(0,)]


def test_other_options_or_full_rescan_everything(tmp_path: Path, db: Path) -> None:
    ingest_paths(db, looping("a").write(tmp_path / "t"), healthy("b").write(tmp_path / "t"))
    scan(db)
    assert scan(db, full=True).scanned == 2
    assert scan(db, Config(reset_on_user=False)).scanned == 2
    assert scan(db, Config(reset_on_user=False)).scanned == 0
    assert query(db, "SELECT DISTINCT detector FROM scan_state") == [
        (f"v{DETECTOR_VERSION};reset_on_user=0;sim=0.55;script=100;exempt=",)
    ]


def test_small_groups_write_what_one_group_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "t"
    for i in range(12):
        (looping(f"s{i:02d}", 3 + i % 4, f"make t{i}") if i % 3 else healthy(f"s{i:02d}")).write(folder)
    dbs = [tmp_path / "one.duckdb", tmp_path / "two.duckdb"]
    for d in dbs:
        ingest_paths(d, folder)
    scan(dbs[0], workers=1)
    monkeypatch.setattr(scan_mod, "BATCH_CALLS", 10)  # a group (and a transaction) every few sessions
    s = scan(dbs[1], workers=2)
    assert s.workers == 2 and s.scanned == 12
    # where the time went, as bench_scan prints it: start-up apart from the groups' read, detect and land
    assert min(s.startup, s.read, s.detect, s.land) > 0 and s.startup + s.read + s.detect + s.land <= s.seconds
    for table, order in (
        ("signals", "session_id, seq"),
        ("findings", "finding_id"),
        ("text_signals", "session_id, turn_index"),
    ):
        rows = [query(d, f"SELECT * FROM {table} ORDER BY {order}") for d in dbs]
        assert rows[0] == rows[1] and rows[0]


def test_signals_and_text_signals_rows(tmp_path: Path, db: Path) -> None:
    pi = Pi().user().say("Checking.", bash("ls", "a b")).say("", bash("ls", "a b")).say("Checking.", bash("ls", "a b"))
    ingest_paths(db, pi.write(tmp_path / "t"))
    scan(db)
    rows = query(
        db,
        "SELECT seq, call_id, tool, nested, streak, window_count, same_result, progress, finding_id "
        "IS NOT NULL FROM signals ORDER BY seq",
    )
    assert rows == [
        (0, "call0", "bash", False, 1, 1, None, True, True),
        (1, "call1", "bash", False, 2, 2, True, False, True),
        (2, "call2", "bash", False, 3, 3, True, False, True),
    ]
    texts = query(db, "SELECT turn_index, same_count, similar_run FROM text_signals ORDER BY turn_index")
    assert texts == [(1, 1, 1), (3, 2, 2)]  # the blank message is not recorded, so the run continues across it


def invoke(*args: str) -> Any:
    result = runner.invoke(app, list(args))
    return result


def test_cli_scan_findings_summary_and_sessions(tmp_path: Path, db: Path) -> None:
    ingest_paths(db, looping("loopy", 5).write(tmp_path / "t"), healthy("fine").write(tmp_path / "t"))
    before = invoke("sessions", "--db", str(db), "--format", "json")
    assert before.exit_code == 0
    assert {r["session_id"]: r["loops"] for r in orjson.loads(before.stdout)} == {"loopy": None, "fine": None}

    r = invoke("scan", "--db", str(db))
    assert r.exit_code == 0 and "2 scanned" in r.stdout and "findings: 1" in r.stdout

    found = orjson.loads(invoke("findings", "--db", str(db), "--format", "json").stdout)
    assert len(found) == 1 and list(found[0])[: len(CONTRACT)] == CONTRACT
    f = found[0]
    assert (f["session_id"], f["kind"], f["repeats"], f["stuck"]) == ("loopy", "streak", 5, True)
    assert orjson.loads(invoke("findings", "--db", str(db), "-f", "json", "--kind", "cycle").stdout) == []
    assert orjson.loads(invoke("findings", "--db", str(db), "-f", "json", "--min-repeats", "6").stdout) == []
    assert len(orjson.loads(invoke("findings", "--db", str(db), "-f", "json", "--session", "loopy").stdout)) == 1
    assert orjson.loads(invoke("findings", "--db", str(db), "-f", "json", "--progress").stdout) == []
    nd = invoke("findings", "--db", str(db), "-f", "ndjson").stdout.splitlines()
    assert len(nd) == 1
    csv = invoke("findings", "--db", str(db), "-f", "csv").stdout.splitlines()
    assert csv[0].startswith(",".join(CONTRACT)) and "call0;call1;call2;call3;call4" in csv[1]
    table = invoke("findings", "--db", str(db))
    assert table.exit_code == 0 and "streak" in table.stdout

    bad = invoke("findings", "--db", str(db), "--kind", "loopy")
    assert bad.exit_code == 2 and "unknown kind" in bad.stderr and "Traceback" not in bad.output

    after = {r["session_id"]: r for r in orjson.loads(invoke("sessions", "--db", str(db), "-f", "json").stdout)}
    assert (after["loopy"]["loops"], after["loopy"]["stuck_loops"], after["loopy"]["wasted_tokens"]) == (1, 1, 4000)
    assert (after["fine"]["loops"], after["fine"]["wasted_tokens"]) == (0, 0)

    s = orjson.loads(invoke("summary", "--db", str(db), "-f", "json").stdout)
    t = s["totals"]
    assert (t["sessions"], t["sessions_with_loops"], t["loops"], t["stuck_loops"]) == (2, 1, 1, 1)
    assert t["wasted_tokens"] == 4000 and t["total_tokens"] == 8000 and t["wasted_token_share"] == 0.5
    assert [(k["kind"], k["loops"], k["wasted_tokens"]) for k in s["by_kind"]] == [("streak", 1, 4000)]
    assert [(k["tool"], k["loops"]) for k in s["by_tool"]] == [("bash", 1)]
    text = invoke("summary", "--db", str(db))
    assert text.exit_code == 0 and "loops by kind" in text.stdout and "50.00%" in text.stdout
    csv = invoke("summary", "--db", str(db), "-f", "csv").stdout.splitlines()
    assert csv[0].startswith("section,") and len(csv) == 4


def test_summary_counts_a_turn_shared_by_two_findings_once(tmp_path: Path, db: Path) -> None:
    ingest_paths(db, looping("loopy", 4).write(tmp_path / "t"))
    scan(db)
    con = duckdb.connect(str(db))
    con.execute(
        "INSERT INTO findings BY NAME SELECT * REPLACE ('extra' AS finding_id, 'window' AS kind, "
        "NULL AS period) FROM findings"
    )
    con.close()
    s = orjson.loads(invoke("summary", "--db", str(db), "-f", "json").stdout)
    assert s["totals"]["loops"] == 2 and s["totals"]["wasted_tokens"] == 3000


def test_listing_on_a_store_without_scan_tables(tmp_path: Path, db: Path) -> None:
    ingest_paths(db, healthy("fine").write(tmp_path / "t"))
    con = duckdb.connect(str(db))
    for t in ("signals", "text_signals", "findings", "scan_state"):
        con.execute(f"DROP TABLE {t}")  # a store written before the scan existed
    con.close()
    r = invoke("findings", "--db", str(db))
    assert r.exit_code == 2 and "loopscope scan" in r.stderr
    s = invoke("sessions", "--db", str(db), "-f", "json")
    assert s.exit_code == 0 and orjson.loads(s.stdout)[0]["loops"] is None


def test_cli_scan_options_and_errors(tmp_path: Path, db: Path) -> None:
    missing = invoke("scan", "--db", str(tmp_path / "none.duckdb"))
    assert missing.exit_code == 2 and "loopscope ingest" in missing.stderr and "Traceback" not in missing.output
    assert not (tmp_path / "none.duckdb").exists()
    ingest_paths(db, looping("loopy").write(tmp_path / "t"))
    assert invoke("scan", "--db", str(db), "-q").stdout == ""
    again = invoke("scan", "--db", str(db), "--no-reset-on-user")
    assert again.exit_code == 0 and "1 scanned" in again.stdout
    assert query(db, "SELECT detector FROM scan_state")[0][0].startswith(f"v{DETECTOR_VERSION};reset_on_user=0")


def test_a_store_with_argument_words_scans_the_same(tmp_path: Path) -> None:
    # a store that keeps each call's words (calls.args_words, keys.args_words of its action arguments at ingest) spares
    # the tokenising
    folder = tmp_path / "t"
    for i in range(6):
        drift = [bash(f"curl -s --retry {n} http://ci/{i}/status", "status: pending") for n in (3, 5, 8, 13)]
        Pi(f"d{i}").user().each(*drift).user().each(bash("make"), bash("make --verbose")).write(folder)
    looping("loop").write(folder)
    dbs = [tmp_path / "plain.duckdb", tmp_path / "words.duckdb"]
    for d in dbs:
        ingest_paths(d, folder)
    con = duckdb.connect(str(dbs[1]))
    rows = con.execute("SELECT session_id, seq, coalesce(action_args, args) FROM calls").fetchall()
    words = pl.DataFrame(
        {"session_id": [r[0] for r in rows], "seq": [r[1] for r in rows], "w": [keys.args_words(r[2]) for r in rows]},
        schema_overrides={"w": pl.List(pl.String)},
    )
    con.register("_words", words)
    con.execute("ALTER TABLE calls ADD COLUMN args_words VARCHAR[]")
    con.execute(
        "UPDATE calls SET args_words = w FROM _words WHERE calls.session_id = _words.session_id "
        "AND calls.seq = _words.seq"
    )
    con.close()
    for d in dbs:
        scan(d)
    for table, order in (("signals", "session_id, seq"), ("findings", "finding_id")):
        rows = [query(d, f"SELECT * FROM {table} ORDER BY {order}") for d in dbs]
        assert rows[0] == rows[1] and rows[0]
    assert query(dbs[1], "SELECT count(*) FROM findings WHERE kind = 'drift'") == [(6,)]


def test_summary_shows_waiting_cost_apart_from_waste(tmp_path: Path, db: Path) -> None:
    # four polls of a CI run still in progress (a wait, 1000 tokens a message), then a stuck loop of four failures
    polls = [bash(f"sleep {30 * (i + 1)} && gh run view 42", "* main CI · 42 in progress", False) for i in range(4)]
    pi = Pi("waits").user().each(*polls).user().each(*[bash("make test", "1 failed", True) for _ in range(4)])
    ingest_paths(db, pi.write(tmp_path / "t"))
    scan(db)
    kinds = query(db, "SELECT kind, stuck, wasted_tokens, repeat_tokens FROM findings ORDER BY first_seq")
    assert kinds == [("waiting", False, 0, 3000), ("streak", True, 3000, 3000)]
    t = orjson.loads(invoke("summary", "--db", str(db), "-f", "json").stdout)["totals"]
    assert (t["loops"], t["stuck_loops"], t["waits"]) == (2, 1, 1)
    assert t["wasted_tokens"] == 3000  # the wait is never waste
    assert t["waiting_tokens"] == 3000 and t["progress_repeat_tokens"] == 0  # nor progress: its own figure
    by_kind = {k["kind"]: k for k in orjson.loads(invoke("summary", "--db", str(db), "-f", "json").stdout)["by_kind"]}
    assert (by_kind["waiting"]["wasted_tokens"], by_kind["waiting"]["waiting_tokens"]) == (0, 3000)


def test_a_group_whose_result_heads_outgrow_the_memory_cap_is_scanned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The result heads a group asks for are read under the scan's DuckDB memory cap (``run.DUCKDB_MEMORY``): asked
    all at once, the 18,229 heads one group of the labelled real set needed (22 MB) overran it and the scan failed.
    12,000 repeats with different ~4 KB failures (48 MB of heads in one group) must scan under the same cap, with
    the findings an uncapped scan gives."""
    import random

    rng = random.Random(7)
    words = [f"w{i}" for i in range(5000)]

    def result(i: int) -> str:  # a different failure each time: every repeat's head is read
        return f"run {i} failed:\n" + " ".join(rng.choice(words) for _ in range(800))

    folder = tmp_path / "t"
    for s in range(200):
        Pi(f"s{s:03d}").user().each(*[bash(f"make t{s}", result(s * 100 + i), True) for i in range(60)]).write(folder)
    dbs = [tmp_path / "capped.duckdb", tmp_path / "free.duckdb"]
    for d in dbs:
        ingest_paths(d, folder)
    scan(dbs[0])
    monkeypatch.setattr(scan_mod, "DUCKDB_MEMORY", "2GB")
    scan(dbs[1])
    rows = [query(d, "SELECT * FROM findings ORDER BY finding_id") for d in dbs]
    assert rows[0] == rows[1] and len(rows[0]) == 200
