"""Labels for calibration: a person's word on which halts are right, overriding the scan's stuck/progress proxy.

Calibration needs to know which halts were right. Without labels it uses the scan's proxy (a halt inside a stuck
finding is right; inside a finding that made progress, or in no finding, it interrupted healthy work). A labels file
lets a reviewer say otherwise for the sessions they read. The file format, its validation and its resolution against
the store are ``analyzer.evaluate.labels`` (the one label format ``loopscope eval`` and the report share); this module
turns the resolved labels into the seq spans the sweep reads: a ``loop`` span is ``stuck`` (halting there is right), a
``not_loop`` span and a ``loop-free`` session are ``benign`` (a halt there is a false halt), ``unsure`` labels and
labels that name no calls (a message, a text finding without calls) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from analyzer.evaluate.labels import LOOP, LOOP_FREE, NOT_LOOP, Label, Resolution, read_labels, resolve

if TYPE_CHECKING:
    import duckdb
    import polars as pl

__all__ = ["Label", "LabelSpans", "read_labels", "resolve_labels", "spans_of"]

STUCK, BENIGN = "stuck", "benign"
SWEEP_LABEL = {LOOP: STUCK, NOT_LOOP: BENIGN, LOOP_FREE: BENIGN}  # what each label says about a halt


@dataclass(frozen=True)
class LabelSpans:
    """Labels resolved to seq spans: ``spans`` has ``session_id``, ``first_seq``, ``last_seq``, ``label`` (``stuck`` or
    ``benign``), ``line`` (one row per label with calls whose session is in the store); ``rows`` counts the file's
    rows, ``skipped`` those naming a session the store lacks, ``used`` the spans."""

    source: str
    spans: pl.DataFrame
    rows: int
    skipped: int

    @property
    def used(self) -> int:
        return self.spans.height


def spans_of(res: Resolution, source: str | Path) -> LabelSpans:
    """The sweep's spans of resolved labels."""
    import polars as pl

    rows = [
        (r.session_id, r.first, r.last, SWEEP_LABEL[r.name], r.label.line)
        for r in res.labels
        if r.name in SWEEP_LABEL and r.first is not None and r.last is not None
    ]
    spans = pl.DataFrame(
        rows,
        schema={
            "session_id": pl.String,
            "first_seq": pl.Int64,
            "last_seq": pl.Int64,
            "label": pl.String,
            "line": pl.Int64,
        },
        orient="row",
    )
    return LabelSpans(str(source), spans, res.rows, res.skipped_rows)


def resolve_labels(con: duckdb.DuckDBPyConnection, labels: list[Label], source: str | Path) -> LabelSpans:
    """Resolve label rows against the store (``analyzer.evaluate.labels.resolve``) into the sweep's spans."""
    return spans_of(resolve(con, labels), source)
