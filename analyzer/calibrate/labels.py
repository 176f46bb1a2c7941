"""Labels: a person's word on what a span of calls was, overriding the stuck/progress proxy of the scan.

Calibration needs to know which halts were right. Without labels it uses the scan's proxy (a halt inside a stuck
finding is right; inside a finding that made progress, or in no finding, it interrupted healthy work). A labels file
lets a reviewer say otherwise for the sessions they read.

File format: CSV (a header row) or JSON (an array of objects, ``{"labels": [...]}``, or JSON Lines: one object per
line). Fields:

- ``session_id`` (required): the session (``sessions.session_id``).
- ``label`` (required): ``stuck`` (the calls looped without progress: halting them is right) or ``benign`` (healthy
  work: halting it is a false halt). Case and surrounding spaces are ignored.
- ``first_call_id`` / ``last_call_id`` (optional): the span, by the transcript's own call ids (``calls.call_id``),
  both included. Without ``first_call_id`` the span starts at the session's first call, without ``last_call_id`` it
  ends at its last; with neither the label covers the whole session.
- ``finding_id`` (optional, instead of the call ids): the span of that finding (``findings.finding_id``).
- ``note`` (optional): free text, ignored.

Any other field is an error (a misspelt ``first_call_id`` would otherwise silently label the whole session). A bad row
is rejected with its line number: a missing or empty ``session_id``, an unknown label, call ids together with a
finding id, a call id or finding id the store does not hold, a span that ends before it starts, and two overlapping
spans of one session with different labels. A row naming a session the store does not hold is skipped and counted
(a labels file may cover more sessions than one store).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyzer.errors import UsageError

if TYPE_CHECKING:
    import duckdb
    import polars as pl

LABELS = ("stuck", "benign")
FIELDS = ("session_id", "label", "first_call_id", "last_call_id", "finding_id", "note")
REQUIRED = ("session_id", "label")


@dataclass(frozen=True)
class Label:
    """One row of a labels file, validated but not yet resolved against the store."""

    line: int
    session_id: str
    label: str
    first_call_id: str | None = None
    last_call_id: str | None = None
    finding_id: str | None = None


@dataclass(frozen=True)
class LabelSpans:
    """Labels resolved to seq spans: ``spans`` has ``session_id``, ``first_seq``, ``last_seq``, ``label``, ``line``
    (one row per label whose session is in the store); ``skipped`` counts rows naming a session the store lacks."""

    source: str
    spans: pl.DataFrame
    rows: int
    skipped: int


def _err(path: Path, line: int | None, msg: str) -> UsageError:
    where = f"labels file {path}" + (f" line {line}" if line is not None else "")
    return UsageError(f"{where}: {msg}")


# -- reading -----------------------------------------------------------------------------------------------------------
def read_labels(path: Path) -> list[Label]:
    """Parse and validate a labels file (CSV or JSON); every error names the file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"labels file {path} does not exist") from None
    except IsADirectoryError:
        raise UsageError(f"labels file {path} is a folder, not a file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"labels file {path} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except OSError as exc:
        raise UsageError(f"cannot read labels file {path}: {exc.strerror or exc}") from None
    if not text.strip():
        raise _err(path, None, "is empty; expected a CSV header or JSON")
    suffix = path.suffix.lower()
    first = text.lstrip()[:1]
    if suffix in (".jsonl", ".ndjson"):
        rows = _json_lines(path, text)
    elif suffix == ".json" or (suffix != ".csv" and first in "[{"):
        rows = _json(path, text)
    else:
        rows = _csv(path, text)
    labels = [_row(path, line, row) for line, row in rows]
    if not labels:
        raise _err(path, None, "holds no label rows")
    return labels


def _csv(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    out: list[tuple[int, dict[str, Any]]] = []
    header: list[str] | None = None
    start = 1
    try:
        for rec in reader:
            line, start = start, reader.line_num + 1
            if not rec or all(not c.strip() for c in rec):
                continue
            if header is None:
                header = [c.strip().lower() for c in rec]
                _check_fields(path, line, header)
                continue
            if len(rec) != len(header):
                raise _err(path, line, f"has {len(rec)} fields, the header has {len(header)}")
            out.append((line, dict(zip(header, rec))))
    except csv.Error as exc:
        raise _err(path, reader.line_num, f"is not valid CSV: {exc}") from None
    return out


def _check_fields(path: Path, line: int, names: list[str]) -> None:
    unknown = [n for n in names if n not in FIELDS]
    if unknown:
        raise _err(path, line, f"unknown field(s) {', '.join(map(repr, unknown))}; fields are {', '.join(FIELDS)}")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _err(path, line, f"field(s) {', '.join(dup)} appear more than once")
    missing = [n for n in REQUIRED if n not in names]
    if missing:
        raise _err(path, line, f"missing required field(s) {', '.join(missing)}")


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _json(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """A JSON array of objects (or ``{"labels": [...]}``), each element's line being where it starts; a file of
    several top-level objects is read as JSON Lines."""
    dec = json.JSONDecoder()
    pos = _skip_ws(text, 0)
    if text[pos] == "{":
        try:
            obj, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _err(path, exc.lineno, f"is not valid JSON: {exc.msg}") from None
        if _skip_ws(text, end) < len(text):
            return _json_lines(path, text)
        if not (isinstance(obj, dict) and set(obj) == {"labels"}):
            return [(_line_of(text, pos), obj)]
        items = obj["labels"]
        if not isinstance(items, list):
            raise _err(path, _line_of(text, pos), '"labels" must be an array of objects')
        # Element positions are needed for line numbers: find the array and walk it.
        pos = text.index("[", pos)
    if text[pos] != "[":
        raise _err(path, _line_of(text, pos), "expected a JSON array of label objects")
    out: list[tuple[int, dict[str, Any]]] = []
    pos = _skip_ws(text, pos + 1)
    if pos < len(text) and text[pos] == "]":
        return out
    while True:
        try:
            item, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _err(path, exc.lineno, f"is not valid JSON: {exc.msg}") from None
        out.append((_line_of(text, pos), item))
        pos = _skip_ws(text, end)
        if pos >= len(text):
            raise _err(path, _line_of(text, len(text) - 1), "is not valid JSON: the array is not closed")
        if text[pos] == "]":
            return out
        if text[pos] != ",":
            raise _err(path, _line_of(text, pos), "is not valid JSON: expected ',' or ']' between label objects")
        pos = _skip_ws(text, pos + 1)


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _json_lines(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    out: list[tuple[int, dict[str, Any]]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            out.append((n, json.loads(raw)))
        except json.JSONDecodeError as exc:
            raise _err(path, n, f"is not valid JSON: {exc.msg}") from None
    return out


def _value(path: Path, line: int, name: str, v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise _err(path, line, f"{name} must be a string, got {json.dumps(v)}")
    s = str(v).strip()
    return s or None


def _row(path: Path, line: int, row: Any) -> Label:
    if not isinstance(row, dict):
        raise _err(path, line, f"expected an object with session_id and label, got {json.dumps(row)[:60]}")
    names = [str(k).strip().lower() for k in row]
    _check_fields(path, line, names)
    vals = {str(k).strip().lower(): v for k, v in row.items()}
    if isinstance(vals.get("note"), (dict, list)):
        raise _err(path, line, "note must be text")
    got = {k: _value(path, line, k, vals.get(k)) for k in FIELDS if k != "note"}
    if not got["session_id"]:
        raise _err(path, line, "session_id is empty")
    label = (got["label"] or "").lower()
    if label not in LABELS:
        raise _err(path, line, f"label must be stuck or benign, got {got['label'] or ''!r}")
    if got["finding_id"] and (got["first_call_id"] or got["last_call_id"]):
        raise _err(path, line, "give either finding_id or first_call_id/last_call_id, not both")
    return Label(
        line,
        got["session_id"],
        label,
        got["first_call_id"],
        got["last_call_id"],  # type: ignore[arg-type]
        got["finding_id"],
    )


# -- resolving against the store ---------------------------------------------------------------------------------------
def resolve_labels(con: duckdb.DuckDBPyConnection, labels: list[Label], source: str | Path) -> LabelSpans:
    """Turn label rows into seq spans with the store's calls and findings; reject rows that name calls or findings
    the store does not hold, spans that end before they start, and conflicting overlaps."""
    import polars as pl

    path = Path(source)
    sids = sorted({lb.session_id for lb in labels})
    bounds = {
        r[0]: (r[1], r[2])
        for r in con.execute(
            "SELECT session_id, min(seq), max(seq) FROM calls WHERE session_id IN (SELECT unnest(?::VARCHAR[])) "
            "GROUP BY session_id",
            [sids],
        ).fetchall()
    }
    known = {
        r[0]
        for r in con.execute(
            "SELECT session_id FROM sessions WHERE session_id IN (SELECT unnest(?::VARCHAR[]))", [sids]
        ).fetchall()
    }
    call_ids = sorted({c for lb in labels for c in (lb.first_call_id, lb.last_call_id) if c})
    seqs: dict[tuple[str, str], tuple[int, int]] = {}
    if call_ids:
        for sid, cid, lo, hi in con.execute(
            "SELECT session_id, call_id, min(seq), max(seq) FROM calls "
            "WHERE session_id IN (SELECT unnest(?::VARCHAR[])) AND call_id IN (SELECT unnest(?::VARCHAR[])) "
            "GROUP BY session_id, call_id",
            [sids, call_ids],
        ).fetchall():
            seqs[(sid, cid)] = (lo, hi)
    fids = sorted({lb.finding_id for lb in labels if lb.finding_id})
    found: dict[str, tuple[str, int | None, int | None]] = {}
    if fids:
        for fid, sid, lo, hi in con.execute(
            "SELECT finding_id, session_id, first_seq, last_seq FROM findings "
            "WHERE finding_id IN (SELECT unnest(?::VARCHAR[]))",
            [fids],
        ).fetchall():
            found[fid] = (sid, lo, hi)
    rows: list[tuple[str, int, int, str, int]] = []
    skipped = 0
    for lb in labels:
        if lb.session_id not in known:
            skipped += 1
            continue
        span = _span(path, lb, bounds.get(lb.session_id), seqs, found)
        if span is not None:
            rows.append((lb.session_id, span[0], span[1], lb.label, lb.line))
    _check_overlaps(path, rows)
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
    return LabelSpans(str(source), spans, len(labels), skipped)


def _span(
    path: Path,
    lb: Label,
    bounds: tuple[int, int] | None,
    seqs: dict[tuple[str, str], tuple[int, int]],
    found: dict[str, tuple[str, int | None, int | None]],
) -> tuple[int, int] | None:
    if lb.finding_id:
        f = found.get(lb.finding_id)
        if f is None:
            raise _err(
                path,
                lb.line,
                f"finding_id {lb.finding_id!r} is not in the store's findings (run `loopscope scan`, or check the id)",
            )
        if f[0] != lb.session_id:
            raise _err(path, lb.line, f"finding {lb.finding_id!r} belongs to session {f[0]!r}, not {lb.session_id!r}")
        if f[1] is None:
            raise _err(path, lb.line, f"finding {lb.finding_id!r} has no calls to label (a text loop without calls)")
        return f[1], f[2] if f[2] is not None else f[1]
    if bounds is None:  # a session without calls: nothing a guard could halt
        if lb.first_call_id or lb.last_call_id:
            raise _err(path, lb.line, f"session {lb.session_id!r} has no calls")
        return None
    lo, hi = bounds
    for name, cid in (("first_call_id", lb.first_call_id), ("last_call_id", lb.last_call_id)):
        if cid and (lb.session_id, cid) not in seqs:
            raise _err(path, lb.line, f"{name} {cid!r} is not a call of session {lb.session_id!r}")
    first = seqs[(lb.session_id, lb.first_call_id)][0] if lb.first_call_id else lo
    last = seqs[(lb.session_id, lb.last_call_id)][1] if lb.last_call_id else hi
    if last < first:
        raise _err(path, lb.line, f"last_call_id {lb.last_call_id!r} comes before first_call_id {lb.first_call_id!r}")
    return first, last


def _check_overlaps(path: Path, rows: list[tuple[str, int, int, str, int]]) -> None:
    """Two spans of one session that overlap must agree; otherwise which one wins would be a guess. The error names
    the later line of the two."""
    by_sid: dict[str, list[tuple[int, int, str, int]]] = {}
    for sid, lo, hi, label, line in rows:
        by_sid.setdefault(sid, []).append((lo, hi, label, line))
    for spans in by_sid.values():
        spans.sort()
        for i, (_lo, hi, label, line) in enumerate(spans):
            for lo2, _hi2, label2, line2 in spans[i + 1 :]:
                if lo2 > hi:
                    break
                if label2 != label:
                    (early, early_label), (late, late_label) = sorted(((line, label), (line2, label2)))
                    raise _err(path, late, f"its {late_label} span overlaps the {early_label} span of line {early}")
