"""Findings on real work: loopscope's stuck findings scored against the hand labels of tests/realdata (the tuning
part and the part kept aside while the rules were tuned, apart). The figures are pinned: a change of rules that moves
them must move this table, on purpose."""

from __future__ import annotations

import duckdb
import pytest
from realdata_score import build_store, score

from analyzer.ingest import formats

# part: (stuck findings, matching a labelled loop, labelled loops, found)
PINNED = {
    "tuning": (28, 28, 26, 25),
    "held_aside": (29, 28, 24, 22),
}


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("realdata") / "realdata.duckdb"
    build_store(db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        yield score(con, readable=set(formats.names()))
    finally:
        con.close()


@pytest.mark.parametrize("part", ["tuning", "held_aside"])
def test_figures_are_pinned(parts, part: str) -> None:
    p = parts[part]
    assert (p.stuck - p.unsure_only, p.matched, p.loops, p.loops_found) == PINNED[part], (
        f"{part}: precision {p.precision:.2f}, recall {p.recall:.2f}; false: "
        f"{[(f.file, f.kind, sorted(f.seqs)[:3]) for f in p.false]}; missed: "
        f"{[(m['file'], m['first_call_index']) for m in p.missed]}"
    )


def test_precision_on_both_parts(parts) -> None:
    for part in ("tuning", "held_aside"):
        assert parts[part].precision >= 0.9, part


def test_recall_on_both_parts(parts) -> None:
    for part in ("tuning", "held_aside"):
        assert parts[part].recall >= 0.9, part
