"""Comparing a store with Parquet results: table rows, and the reports drawn from each."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from analyzer.store.schema import ALL_TABLES

WHEN = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)
# Columns that say when or where a run happened, not what it found.
RUN_COLUMNS = {"files": ("ingested_at",), "scan_state": ("fingerprint", "detector", "scanned_at")}
TABLES = ("files", "ingest_errors", "sessions", "turns", "calls", "signals", "text_signals", "findings", "scan_state")


def rows(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple]:
    """Every row of ``table``, sorted, without the run columns; doubles rounded to 9 places (sums in another order
    differ in the last bit)."""
    spec = next(t for t in ALL_TABLES if t.name == table)
    cols = [
        f"round({c.name}, 9)" if c.sql == "DOUBLE" else f'"{c.name}"'
        for c in spec.columns
        if c.name not in RUN_COLUMNS.get(table, ())
    ]
    return con.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY ALL").fetchall()


def render(con: duckdb.DuckDBPyConnection, out: Path) -> None:
    from analyzer.analyze import report_inputs
    from reports.data import ReportData
    from reports.render import render_report

    replay, calibration = report_inputs(con, workers=1)
    render_report(ReportData(con), out, replay=replay, calibration=calibration, generated_at=WHEN)


_FIGURE = re.compile(r'<script type="application/json" id="([^"]+)">(.*?)</script>', re.S)
_FLOAT = re.compile(r"\d+\.\d{10,}")


def _rounded(v: object) -> object:
    if isinstance(v, float):
        return round(v, 9)  # sums taken in another order differ in the last bits
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return v


def _figure(data: str) -> object:
    """A figure's data, order-free: each trace's points as a sorted list (bars with equal values may come in either
    order), floats rounded."""
    fig = _rounded(json.loads(data))
    traces = []
    for tr in fig.get("data", []) if isinstance(fig, dict) else []:
        cols = [tr.get(k) for k in ("x", "y", "customdata", "text") if isinstance(tr.get(k), list)]
        points = sorted(json.dumps(p, sort_keys=True) for p in zip(*cols)) if cols else []
        traces.append((tr.get("name"), tr.get("type"), points))
    return sorted(json.dumps(t) for t in traces) if traces else json.dumps(fig, sort_keys=True)


def page(path: Path) -> tuple[str, dict[str, object]]:
    """A page's text with figures taken out (floats rounded), and its figures, order-free."""
    html = path.read_text()
    figures = {m.group(1): _figure(m.group(2)) for m in _FIGURE.finditer(html)}
    text = _FIGURE.sub("", html)
    return _FLOAT.sub(lambda m: f"{float(m.group(0)):.9f}", text), figures


def same_report(a: Path, b: Path) -> None:
    """The same pages with the same text and figures. The incremental-build manifest (``reports.render.MANIFEST``)
    is left out: it records each page's inputs (fingerprints of the store's files), which differ between stores."""
    from reports.render import MANIFEST

    pages_a = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    pages_b = sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    assert pages_a == pages_b
    for rel in pages_a:
        if rel.endswith(".html"):
            ta, fa = page(a / rel)
            tb, fb = page(b / rel)
            assert fa == fb, (
                f"{rel}: figures differ: "
                + "; ".join(
                    f"{k}: {sorted(set(map(str, fa[k])) ^ set(map(str, fb.get(k) or [])))}"
                    for k in sorted(fa)
                    if fa[k] != fb.get(k)
                )[:3000]
            )
            assert ta == tb, f"{rel}: text differs"
        elif not rel.endswith((".js", ".css")) and rel != MANIFEST:
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
