"""Findings on real work: loopscope's stuck findings scored against the hand labels of tests/realdata, held-out and
tuning sources apart, on the part of the labelled set the repository holds (sources without a licence are manifests,
fetched at development time: `benchmarks/bench_realdata.py` scores them too). The figures are pinned: a change of
rules that moves them must move this table, on purpose."""

from __future__ import annotations

import duckdb
import pytest
from realdata_labels import HELD_OUT, TUNING
from realdata_score import COUNTS, build_store, leave_one_source_out, render, score, without

from analyzer.ingest import formats

# part: (stuck findings on a loop or not_loop label, on a loop label, loop episodes, with a stuck finding on them,
#        not_loop labels, with no stuck finding on them)
PINNED = {
    HELD_OUT: (34, 34, 30, 29, 225, 220),
    TUNING: (20, 20, 21, 17, 172, 170),
}


@pytest.fixture(scope="module")
def scores(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("realdata") / "realdata.duckdb"
    build_store(db, fetched=False)
    con = duckdb.connect(str(db), read_only=True)
    try:
        yield score(con, readable=set(formats.names()), fetched=False)
    finally:
        con.close()


@pytest.mark.parametrize("part", [HELD_OUT, TUNING])
def test_figures_are_pinned(scores, part: str) -> None:
    s = scores[f"part={part}"]
    got = (s.on_labels, s.on_loop, s.loops, s.loops_found, s.healthy, s.healthy_kept)
    assert got == PINNED[part], render(scores, (part,))


def test_precision_recall_and_healthy_kept_meet_the_targets_on_the_held_out_part(scores) -> None:
    """The targets hold for the held-out sources, the README's headline. The tuning part is pinned above, not held to
    them: the loops missed there (two rounds of deepseek fix scripts, labelled in sw-c) are what the next rules are
    measured against."""
    s = scores[f"part={HELD_OUT}"]
    assert s.precision >= 0.9 and s.recall >= 0.85 and s.healthy_kept_rate >= 0.97


def test_every_source_is_scored_in_one_part(scores) -> None:
    """The per-source rows add up to the parts: no source's labels are split or lost."""
    sources = [s for k, s in scores.items() if k.startswith("source=")]
    assert sum(s.loops for s in sources) == scores["all"].loops
    assert sum(s.healthy for s in sources) == scores["all"].healthy
    assert scores[f"part={HELD_OUT}"].loops + scores[f"part={TUNING}"].loops == scores["all"].loops


def test_leaving_a_source_out_takes_exactly_its_labels_and_findings_out(scores) -> None:
    """A leave-one-source-out row is its part minus that source, count for count: the table shows each source with
    labels, and the part's figures without it."""
    from realdata_labels import part_of_source

    text = leave_one_source_out(scores)
    for k, own in scores.items():
        if not k.startswith("source=") or not any(getattr(own, c) for c in COUNTS):
            continue
        part = part_of_source(k[7:])
        rest = without(scores[f"part={part}"], own)
        row = next(line for line in text.splitlines() if line.startswith(f"| {part} without {k[7:]} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert [int(cells[i]) for i in (1, 2, 4, 5, 7, 8)] == [
            rest.on_labels,
            rest.on_loop,
            rest.loops,
            rest.loops_found,
            rest.healthy,
            rest.healthy_kept,
        ]
        assert rest.loops + own.loops == scores[f"part={part}"].loops
