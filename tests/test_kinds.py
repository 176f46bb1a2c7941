"""Each loop kind and each signal is declared once (``detect/rules.py``); everything that lists them reads that
declaration: the report's titles and colours, the findings table's doc, the kinds table of docs/detectors.md, the
judgement's table, the signal records."""

from __future__ import annotations

import re
from pathlib import Path

from analyzer.detect.judge import CALL_JUDGES
from analyzer.detect.rules import (
    CLAIM_ORDER,
    CLAIMS,
    FINDINGS,
    KINDS,
    LOOP_KINDS,
    PRE_FIELDS,
    RESULT_FIELDS,
    SIGNAL_FIELDS,
    SIGNALS,
    TEXT_FIELDS,
    TEXT_SIGNALS,
    CallSignals,
    TextSignals,
    kinds_table,
)
from analyzer.detect.stream.calls import CallDetector, Config
from analyzer.detect.stream.text import TextDetector
from reports.episodes import KIND_TITLES
from reports.figures import KIND_COLORS

DETECTORS_DOC = Path(__file__).resolve().parents[1] / "docs" / "detectors.md"
BLOCK = re.compile(r"<!-- kinds:start -->\n(.*?)\n<!-- kinds:end -->", re.S)


def test_detectors_doc_holds_the_kinds_table():
    found = BLOCK.findall(DETECTORS_DOC.read_text(encoding="utf-8"))
    assert len(found) == 1, "docs/detectors.md needs one <!-- kinds:start --> ... <!-- kinds:end --> block"
    assert found[0] == kinds_table(), (
        "docs/detectors.md's kinds table is out of date; put this between its markers:\n" + kinds_table()
    )


def test_report_titles_and_colours_cover_exactly_the_kinds():
    assert tuple(KIND_TITLES) == KINDS
    assert tuple(KIND_COLORS) == KINDS
    assert all(KIND_TITLES.values()) and len(set(KIND_COLORS.values())) == len(KINDS)


def test_findings_doc_names_every_kind_once():
    kind = next(c for c in FINDINGS.columns if c.name == "kind")
    assert re.findall(r"`(\w+)` \(", kind.doc) == list(KINDS)
    for k in LOOP_KINDS:
        assert f"`{k.name}` ({k.doc})" in kind.doc
    assert "(claimed in the order cycle, drift, streak, failure, window)" in FINDINGS.doc


def test_every_call_kind_has_its_judgement():
    assert set(CALL_JUDGES) == set(KINDS) - {"text", "waiting"}  # text loops: judge_text; waiting: judge_calls


def test_claim_order():
    ranks = sorted(k.claim for k in LOOP_KINDS if k.claim is not None)
    assert ranks == list(range(1, len(ranks) + 1))
    assert CLAIMS == ("cycle", "drift", "streak", "failure", "window")
    # the runs of links, one per kind (a cycle's one per period), in claim order; window is found by chains
    assert tuple(dict.fromkeys(re.sub(r"\d+$", "", r) for r in CLAIM_ORDER)) == CLAIMS[:-1]


def test_signal_records_are_the_table_columns():
    assert CallSignals._fields == SIGNAL_FIELDS
    assert TextSignals._fields == TEXT_FIELDS
    names = SIGNALS.names
    assert tuple(names[names.index(SIGNAL_FIELDS[0]) :][: len(SIGNAL_FIELDS)]) == SIGNAL_FIELDS
    names = TEXT_SIGNALS.names
    assert tuple(names[names.index(TEXT_FIELDS[0]) :][: len(TEXT_FIELDS)]) == TEXT_FIELDS
    assert set(PRE_FIELDS) | set(RESULT_FIELDS) == set(SIGNAL_FIELDS) and not set(PRE_FIELDS) & set(RESULT_FIELDS)


def test_the_stream_core_builds_records():
    d = CallDetector(Config(exempt_tools=frozenset({"todo"})))
    for _ in range(3):
        pre = d.call(1, "bash", '{"command": "make"}')
        assert isinstance(pre, CallSignals)
        assert all(getattr(pre, f) is None for f in RESULT_FIELDS)
        full = d.result(7, True)
    assert isinstance(full, CallSignals)
    assert (full.streak, full.fail_run, full.same_result, full.progress, full.nested_repeat) == (3, 3, True, False, 0)
    exempt = d.call(2, "todo", "{}")
    assert exempt == CallSignals(**dict.fromkeys(SIGNAL_FIELDS, 0) | dict.fromkeys(("sim_prev", *RESULT_FIELDS)))
    nested = d.call(3, "read", '{"path": "a"}', parent="s")
    assert nested.nested_repeat == 1 and nested.streak == 0 and nested.fail_run is None
    assert d.result(None, None).nested_repeat == 1
    text = TextDetector().feed("The same sentence again and again.")
    assert isinstance(text, TextSignals) and text.same_count == 1
