"""``loopscope eval`` reads the project's realdata labels through the same code as a user's, and scores them with the
scorer ``benchmarks/bench_realdata.py`` uses: on a store of one source, it prints that source's figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.library import Store

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import realdata_labels  # noqa: E402
import realdata_score  # noqa: E402

runner = CliRunner()
SOURCE = "OpenHands__benchmarks"  # a tuning source, committed: 15 OpenHands runs, 7 loop and 13 not_loop labels
FOLDER = ROOT / "tests" / "realdata" / "openhands" / SOURCE


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("realdata") / "one-source.duckdb"
    with Store.open(db, write=True) as s:
        s.ingest([FOLDER], workers=1)
        s.scan(workers=1)
    return db


def test_eval_prints_the_benchmark_figures_of_one_source(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [r for r in realdata_labels.load_labels() if realdata_labels.source_of(r["file"]) == SOURCE]
    assert len(records) >= 20
    labels = tmp_path / "records.json"
    labels.write_text(json.dumps(records), encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # the records' files are relative to the repository: --root says where it is
    res = runner.invoke(app, ["eval", "--db", str(store), "--labels", str(labels), "--root", str(ROOT), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["labels"]["skipped"] == {} and data["labels"]["resolved"] == len(records)

    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        bench = realdata_score.score(con, records)[f"source={SOURCE}"]
    finally:
        con.close()
    (mine,) = data["figures"]
    assert (mine["stuck_on_labels"], mine["on_loop"], mine["loops"], mine["found"], mine["healthy"], mine["kept"]) == (
        bench.on_labels,
        bench.on_loop,
        bench.loops,
        bench.loops_found,
        bench.healthy,
        bench.healthy_kept,
    )
    assert (mine["precision"], mine["recall"], mine["healthy_kept"]) == (
        bench.precision,
        bench.recall,
        bench.healthy_kept_rate,
    )
    assert bench.loops > 0 and bench.healthy > 0 and bench.on_labels > 0  # figures with something behind them
    rows = data["disagreements"]
    assert sorted(d["finding_id"] for d in rows if d["disagreement"] == "false finding") == sorted(
        f.finding_id for f, _ in bench.false
    )
    assert sorted((d["first_seq"], d["last_seq"]) for d in rows if d["disagreement"] == "missed loop") == sorted(
        (m.first, m.last) for m in bench.missed
    )
    assert len([d for d in rows if d["disagreement"] == "unlabelled"]) == len(bench.unlabelled)


def test_message_index_labels_meet_text_loops_as_the_benchmark_resolves_them(tmp_path: Path) -> None:
    """A Claude Code text loop (sample_data: the same sentence in the messages on lines 6, 9, 12, 15 and 18 of the
    transcript) labelled by ``message_index``, the 0-based line as the realdata records count it: message 8 (line 9)
    is on the loop, message 2 is not. The record names its transcript by ``file`` with another tool's session id."""
    rel = "sample_data/claude_code/-home-dana-src-webshop/2c8f4a6e-0d3b-4b7c-9e15-a6d2f0c8b493.jsonl"
    db = tmp_path / "s.duckdb"
    with Store.open(db, write=True) as s:
        s.ingest([ROOT / rel], workers=1)
        s.scan(workers=1)
    base = {"file": rel, "format": "claude_code", "session_id": "transcripts.py's id", "why": "read it"}
    records = [
        {
            **base,
            "kind": "text",
            "first_call_index": None,
            "last_call_index": None,
            "message_index": 8,
            "label": "loop",
        },
        {
            **base,
            "kind": "text",
            "first_call_index": None,
            "last_call_index": None,
            "message_index": 2,
            "label": "loop",
        },
    ]
    labels = tmp_path / "records.json"
    labels.write_text(json.dumps(records), encoding="utf-8")
    res = runner.invoke(app, ["eval", "--db", str(db), "--labels", str(labels), "--root", str(ROOT), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert (data["figures"][0]["loops"], data["figures"][0]["found"]) == (2, 1)
    (missed,) = [d for d in data["disagreements"] if d["disagreement"] == "missed loop"]
    assert missed["message_index"] == 2 and missed["note"] == "read it"
