"""Labels: a person's word on what a session or a span of its calls was. The one reader, validator and resolver of
the label format that ``loopscope eval``, ``calibrate --labels``, ``analyze --labels`` and the report's "Export
labels" share (README, "Measuring it on your own sessions").

A labels file is JSON: ``{"loopscope_labels": 1, "store_id": "...", "labels": [...]}`` (the report's export), a bare
array of label objects or ``{"labels": [...]}``; or JSON Lines (one object per line); or CSV with a header row. The
project's realdata records (tests/realdata/labels/*.json) are label objects too. Fields of a label:

- the session, one way or more: ``session_id`` (``sessions.session_id``); ``session_key`` = ``"k_"`` + the first 16
  hex digits of sha256(session_id) (``session_key``: what the report exports, so that a file leaks no id); or
  ``file``, a transcript path as stored in ``sessions.source_path`` (absolute, or relative to the current folder or a
  root the caller gives). With ``file``, ``session_id`` picks one of the file's sessions; a file of one session is
  that session, whatever id another tool gave it (the realdata records name mini-swe-agent runs by instance id).
- ``label``: ``loop`` (synonym ``stuck``), ``not_loop`` (``benign``), ``unsure`` (kept, counted nowhere) or
  ``loop-free`` (a person read the whole session and found no loop: no span allowed). Case and spaces are ignored.
- the span, at most one way: ``finding_id``; ``first_call_id``/``last_call_id`` (``calls.call_id``); ``first_seq``/
  ``last_seq`` (``calls.seq``, inclusive; the realdata records' ``first_call_index``/``last_call_index``); or
  ``message_index`` (``message_key``), which a text label may give beside the seqs of the calls its messages issued.
  A missing end is the session's first or last call; no span is the whole session.
- ``kind``: the kind of pattern, a kind of finding (``rules.KINDS``) where it is one: it groups the figures
  (``--by kind``). ``waiting`` (polls of a process that still runs) is never a loop: a ``loop`` label of kind
  ``waiting`` is an error (label it ``not_loop``, or ``unsure``).
- ``note`` (free text), and the realdata records' ``why``, ``origin``, ``format``: kept, not needed.

Validation: any other field is an error (a misspelt ``first_seq`` would otherwise label the whole session); a bad row
is rejected with its file and line; a row naming a session or file the store does not hold is skipped and counted (a
labels file may cover more than one store); a call, seq or finding the session does not hold is an error; two
overlapping spans of one session with different labels are an error (``unsure`` excepted, and two labels of
different ``kind``: a long healthy ``window`` may hold a ``streak`` that loops, as the realdata records have it).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyzer.detect.rules import WAITING
from analyzer.errors import UsageError
from analyzer.evaluate.score import LOOP, NOT_LOOP, UNSURE

if TYPE_CHECKING:
    import duckdb

LOOP_FREE = "loop-free"
KINDS = (LOOP, NOT_LOOP, UNSURE, LOOP_FREE)
SYNONYMS = {"stuck": LOOP, "benign": NOT_LOOP, "not-loop": NOT_LOOP, "loop_free": LOOP_FREE}
VERSION = 1  # the header's ``loopscope_labels``

SESSION_FIELDS = ("session_id", "session_key", "file")
SPAN_FIELDS = ("finding_id", "first_call_id", "last_call_id", "first_seq", "last_seq", "message_index")
SEQ_ALIASES = {"first_call_index": "first_seq", "last_call_index": "last_seq"}  # the realdata records' names
KEPT_FIELDS = ("note", "kind", "why", "origin", "format")
FIELDS = (*SESSION_FIELDS, "label", *SPAN_FIELDS, *SEQ_ALIASES, *KEPT_FIELDS)
HEADER_FIELDS = frozenset({"loopscope_labels", "store_id", "labels"})
INT_FIELDS = frozenset({"first_seq", "last_seq", "message_index"})
KEY_RE = re.compile(r"k_[0-9a-f]{16}")


def session_key(session_id: str) -> str:
    """The key a labels file may name a session by without its id: ``k_`` + 16 hex digits of sha256(session_id)."""
    return "k_" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def normal_label(text: str) -> str | None:
    """``loop``, ``not_loop``, ``unsure`` or ``loop-free`` for a label as written (synonyms, case, spaces); None for
    anything else."""
    v = re.sub(r"\s+", "_", text.strip().lower())
    v = SYNONYMS.get(v, v)
    return v if v in KINDS else None


@dataclass(frozen=True)
class Label:
    """One row of a labels file, validated but not yet resolved against a store. ``label`` is normalised
    (``normal_label``); ``source`` is the file and ``line`` where the row starts."""

    line: int
    label: str
    session_id: str | None = None
    session_key: str | None = None
    file: str | None = None
    finding_id: str | None = None
    first_call_id: str | None = None
    last_call_id: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    message_index: int | None = None
    note: str | None = None
    kind: str | None = None
    source: str = ""

    @property
    def whole(self) -> bool:
        """The label is about the whole session (no span)."""
        return not (
            self.finding_id
            or self.first_call_id
            or self.last_call_id
            or self.first_seq is not None
            or self.last_seq is not None
            or self.message_index is not None
        )

    @property
    def session(self) -> str:
        """How the row names its session, for messages."""
        return self.session_id or self.session_key or self.file or "?"

    def where(self) -> str:
        return f"labels file {self.source} line {self.line}"


@dataclass(frozen=True)
class LabelFile:
    """A labels file as read: its rows and the ``store_id`` of its header (None without one)."""

    path: str
    labels: list[Label]
    store_id: str | None = None


def _err(path: str | Path, line: int | None, msg: str) -> UsageError:
    where = f"labels file {path}" + (f" line {line}" if line is not None else "")
    return UsageError(f"{where}: {msg}")


# -- reading -----------------------------------------------------------------------------------------------------------
def read_labels(path: str | Path) -> list[Label]:
    """The rows of a labels file (``read_label_file``)."""
    return read_label_file(path).labels


def read_label_file(path: str | Path) -> LabelFile:
    """Parse and validate a labels file (JSON, JSON Lines or CSV); every error names the file and line."""
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
        raise _err(path, None, "is empty; expected JSON or a CSV header")
    suffix = path.suffix.lower()
    first = text.lstrip()[:1]
    store_id = None
    if suffix in (".jsonl", ".ndjson"):
        rows = _json_lines(path, text)
    elif suffix == ".json" or (suffix != ".csv" and first in "[{"):
        store_id, rows = _json(path, text)
    else:
        rows = _csv(path, text)
    labels = [_row(path, line, row) for line, row in rows]
    if not labels:
        raise _err(path, None, "holds no label rows")
    return LabelFile(str(path), labels, store_id)


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
    if "label" not in names:
        raise _err(path, line, "missing required field(s) label")
    if not any(n in names for n in SESSION_FIELDS):
        raise _err(path, line, "missing required field(s): one of session_id, session_key, file")


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _member(text: str, pos: int, key: str) -> int:
    """Where the value of ``key`` starts in the (valid) JSON object at ``pos`` (its last occurrence, as ``json``
    keeps)."""
    dec = json.JSONDecoder()
    i, found = _skip_ws(text, pos + 1), -1
    while i < len(text) and text[i] != "}":
        k, i = dec.raw_decode(text, i)
        i = _skip_ws(text, _skip_ws(text, i) + 1)  # past the colon
        if k == key:
            found = i
        _, i = dec.raw_decode(text, i)
        i = _skip_ws(text, i)
        if i < len(text) and text[i] == ",":
            i = _skip_ws(text, i + 1)
    return found


def _json(path: Path, text: str) -> tuple[str | None, list[tuple[int, dict[str, Any]]]]:
    """A JSON array of objects, ``{"labels": [...]}`` with or without the header's other fields, or one object; each
    element's line is where it starts. A file of several top-level objects is read as JSON Lines."""
    dec = json.JSONDecoder()
    pos = _skip_ws(text, 0)
    store_id = None
    if text[pos] == "{":
        try:
            obj, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _err(path, exc.lineno, f"is not valid JSON: {exc.msg}") from None
        if _skip_ws(text, end) < len(text):
            return None, _json_lines(path, text)
        if not (isinstance(obj, dict) and "labels" in obj and set(obj) <= HEADER_FIELDS):
            return None, [(_line_of(text, pos), obj)]
        line = _line_of(text, pos)
        version = obj.get("loopscope_labels")
        if version is not None and (isinstance(version, bool) or version != VERSION):
            raise _err(
                path, line, f"is labels format {json.dumps(version)}; this loopscope reads loopscope_labels {VERSION}"
            )
        store_id = obj.get("store_id")
        if store_id is not None and not isinstance(store_id, str):
            raise _err(path, line, "store_id must be a string")
        if not isinstance(obj["labels"], list):
            raise _err(path, line, '"labels" must be an array of objects')
        pos = _member(text, pos, "labels")
    if text[pos] != "[":
        raise _err(path, _line_of(text, pos), "expected a JSON array of label objects")
    out: list[tuple[int, dict[str, Any]]] = []
    pos = _skip_ws(text, pos + 1)
    if pos < len(text) and text[pos] == "]":
        return store_id or None, out
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
            return store_id or None, out
        if text[pos] != ",":
            raise _err(path, _line_of(text, pos), "is not valid JSON: expected ',' or ']' between label objects")
        pos = _skip_ws(text, pos + 1)


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


def _text(path: Path, line: int, name: str, v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise _err(path, line, f"{name} must be a string, got {json.dumps(v)[:60]}")
    s = str(v).strip()
    return s or None


def _index(path: Path, line: int, name: str, v: Any) -> int | None:
    """A seq or message index: a whole number >= 0 (a JSON number, or the digits of a CSV cell)."""
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    raise _err(path, line, f"{name} must be a whole number >= 0, got {json.dumps(v)[:60]}")


def _row(path: Path, line: int, row: Any) -> Label:
    if not isinstance(row, dict):
        raise _err(path, line, f"expected an object with a session and a label, got {json.dumps(row)[:60]}")
    names = [str(k).strip().lower() for k in row]
    _check_fields(path, line, names)
    vals = {str(k).strip().lower(): v for k, v in row.items()}
    for alias, name in SEQ_ALIASES.items():
        if alias in vals:
            if name in vals:
                raise _err(path, line, f"give {name} or {alias}, not both")
            vals[name] = vals.pop(alias)
    for name in KEPT_FIELDS:
        if isinstance(vals.get(name), (dict, list)):
            raise _err(path, line, f"{name} must be text")
    got: dict[str, Any] = {
        k: (_index(path, line, k, vals.get(k)) if k in INT_FIELDS else _text(path, line, k, vals.get(k)))
        for k in (*SESSION_FIELDS, "label", *SPAN_FIELDS, "kind")
    }
    if not any(got[k] for k in SESSION_FIELDS):
        raise _err(path, line, "session_id is empty (give session_id, session_key or file)")
    key = got["session_key"]
    if key is not None and not KEY_RE.fullmatch(key):
        raise _err(path, line, f"session_key must be k_ and 16 hex digits, got {key!r}")
    if key is not None and got["session_id"] and session_key(got["session_id"]) != key:
        raise _err(path, line, f"session_key {key} is not the key of session_id {got['session_id']!r}")
    label = normal_label(got["label"] or "")
    if label is None:
        raise _err(
            path,
            line,
            f"label must be loop, not_loop, unsure or loop-free (or stuck, benign), got {got['label'] or ''!r}",
        )
    ways = [
        name
        for name, given in (
            ("finding_id", got["finding_id"]),
            ("first_call_id/last_call_id", got["first_call_id"] or got["last_call_id"]),
            ("first_seq/last_seq", got["first_seq"] is not None or got["last_seq"] is not None),
        )
        if given
    ]
    if len(ways) > 1:
        raise _err(path, line, f"give either {' or '.join(ways)}, not both: one span per label")
    if got["message_index"] is not None and ways and ways[0] != "first_seq/last_seq":
        raise _err(path, line, f"give either {ways[0]} or message_index, not both")
    if label == LOOP and (got["kind"] or "").strip().lower() == WAITING:
        raise _err(path, line, "a wait is not a loop: label a waiting pattern not_loop (or unsure)")
    if label == LOOP_FREE and (ways or got["message_index"] is not None):
        raise _err(path, line, "a loop-free label is about the whole session: it takes no span")
    a, b = got["first_seq"], got["last_seq"]
    if a is not None and b is not None and b < a:
        raise _err(path, line, f"last_seq {b} comes before first_seq {a}")
    note = vals.get("note") if vals.get("note") is not None else vals.get("why")  # a realdata record's note is why
    return Label(
        line,
        label,
        got["session_id"],
        key,
        got["file"],
        got["finding_id"],
        got["first_call_id"],
        got["last_call_id"],
        a,
        b,
        got["message_index"],
        None if note is None else str(note),
        got["kind"],
        str(path),
    )


# -- resolving against the store ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Resolved:
    """A label on a session of the store: ``first``..``last`` are call seqs (inclusive; None when the label names no
    calls: a message, a finding without calls, a session without calls), ``message`` a ``message_key``."""

    label: Label
    session_id: str
    first: int | None
    last: int | None
    message: int | None = None

    @property
    def name(self) -> str:
        return self.label.label


@dataclass
class Resolution:
    """Labels resolved against one store: the rows that name its sessions (``labels``), how many rows were read and
    how many were skipped, by reason, because the store does not hold what they name."""

    labels: list[Resolved]
    rows: int
    skipped: Counter[str] = field(default_factory=Counter)
    files: list[LabelFile] = field(default_factory=list)

    @property
    def skipped_rows(self) -> int:
        return sum(self.skipped.values())

    def counts(self) -> Counter[str]:
        """Resolved labels per label (loop, not_loop, unsure, loop-free)."""
        return Counter(r.name for r in self.labels)

    def text(self) -> str:
        """One line: what was read and used."""
        c = self.counts()
        used = ", ".join(f"{c[k]:,} {k}" for k in KINDS if c[k])
        skipped = f"; {self.skipped_rows:,} skipped ({_reasons(self.skipped)})" if self.skipped_rows else ""
        return f"{len(self.labels):,} of {self.rows:,} label rows resolved ({used or 'none'}){skipped}"


def _reasons(c: Counter[str]) -> str:
    return ", ".join(f"{n:,} {why}" for why, n in c.most_common())


def resolve(con: duckdb.DuckDBPyConnection, labels: Sequence[Label], roots: Iterable[str | Path] = ()) -> Resolution:
    """Find each label's session and span in the store. Rows naming a session or transcript the store does not hold
    are skipped and counted; a call, seq or finding the session lacks, a span that ends before it starts, and
    conflicting overlaps are errors naming the row."""
    sessions = _sessions(con, labels, [Path(r) for r in roots])
    res = Resolution([], len(labels))
    mine: list[tuple[Label, str]] = []
    for lb in labels:
        sid, why = sessions(lb)
        if sid is None:
            res.skipped[why] += 1
        else:
            mine.append((lb, sid))
    sids = sorted({sid for _, sid in mine})
    bounds = {
        r[0]: (r[1], r[2])
        for r in con.execute(
            "SELECT session_id, min(seq), max(seq) FROM calls WHERE list_contains(?, session_id) GROUP BY session_id",
            [sids],
        ).fetchall()
    }
    call_ids = sorted({c for lb, _ in mine for c in (lb.first_call_id, lb.last_call_id) if c})
    seqs: dict[tuple[str, str], tuple[int, int]] = {}
    if call_ids:
        for sid, cid, lo, hi in con.execute(
            "SELECT session_id, call_id, min(seq), max(seq) FROM calls "
            "WHERE list_contains(?, session_id) AND list_contains(?, call_id) GROUP BY session_id, call_id",
            [sids, call_ids],
        ).fetchall():
            seqs[(sid, cid)] = (lo, hi)
    fids = sorted({lb.finding_id for lb, _ in mine if lb.finding_id})
    found: dict[str, tuple[str, int | None, int | None]] = {}
    if fids:
        for fid, sid, lo, hi in con.execute(
            "SELECT finding_id, session_id, first_seq, last_seq FROM findings WHERE list_contains(?, finding_id)",
            [fids],
        ).fetchall():
            found[fid] = (sid, lo, hi)
    for lb, sid in mine:
        first, last = _span(lb, sid, bounds.get(sid), seqs, found)
        res.labels.append(Resolved(lb, sid, first, last, lb.message_index))
    _check_overlaps(res.labels)
    return res


def _sessions(con: duckdb.DuckDBPyConnection, labels: Sequence[Label], roots: list[Path]) -> Any:
    """A function from a label to (its session id, None) or (None, why it was skipped), reading only the sessions the
    labels name."""
    ids = sorted({lb.session_id for lb in labels if lb.session_id})
    keys = sorted({lb.session_key for lb in labels if lb.session_key and not lb.session_id and not lb.file})
    paths: dict[str, list[str]] = {}  # a candidate path -> the labels' files it stands for
    for f in sorted({lb.file for lb in labels if lb.file}):
        for p in _candidates(f, roots):
            paths.setdefault(p, []).append(f)
    known = {
        r[0]
        for r in con.execute("SELECT session_id FROM sessions WHERE list_contains(?, session_id)", [ids]).fetchall()
    }
    by_key = (
        {
            r[1]: r[0]
            for r in con.execute(
                "SELECT session_id, 'k_' || left(sha256(session_id), 16) AS k FROM sessions WHERE list_contains(?, k)",
                [keys],
            ).fetchall()
        }
        if keys
        else {}
    )
    in_file: dict[str, list[str]] = {}
    if paths:
        for sid, path in con.execute(
            "SELECT session_id, source_path FROM sessions WHERE list_contains(?, source_path) ORDER BY session_id",
            [sorted(paths)],
        ).fetchall():
            for f in paths[path]:
                if sid not in in_file.setdefault(f, []):
                    in_file[f].append(sid)

    def session(lb: Label) -> tuple[str | None, str]:
        if lb.file:
            held = in_file.get(lb.file)
            if not held:
                return None, "transcript not in the store"
            if lb.session_id in held:
                return lb.session_id, ""
            if len(held) == 1 and not (lb.session_key and session_key(held[0]) != lb.session_key):
                return held[0], ""
            return None, "session not in its transcript"
        if lb.session_id:
            return (lb.session_id, "") if lb.session_id in known else (None, "session not in the store")
        sid = by_key.get(lb.session_key or "")
        return (sid, "") if sid else (None, "session not in the store")

    return session


def _candidates(file: str, roots: list[Path]) -> list[str]:
    """The paths ``sessions.source_path`` may hold for a labels file's ``file``: as given when absolute, else under
    the current folder and each root; each also with its symlinks resolved."""
    p = Path(file)
    bases = [p] if p.is_absolute() else [Path.cwd() / p, *(r / p for r in roots)]
    out: list[str] = []
    for b in bases:
        for c in (os.path.normpath(os.path.abspath(b)), str(b.resolve())):
            if c not in out:
                out.append(c)
    return out


def _span(
    lb: Label,
    sid: str,
    bounds: tuple[int, int] | None,
    seqs: dict[tuple[str, str], tuple[int, int]],
    found: dict[str, tuple[str, int | None, int | None]],
) -> tuple[int | None, int | None]:
    """The label's seq span in session ``sid`` (None, None: no calls)."""
    if lb.finding_id:
        f = found.get(lb.finding_id)
        if f is None:
            raise _err(
                lb.source,
                lb.line,
                f"finding_id {lb.finding_id!r} is not in the store's findings (run `loopscope scan`, or check the id)",
            )
        if f[0] != sid:
            raise _err(lb.source, lb.line, f"finding {lb.finding_id!r} belongs to session {f[0]!r}, not {sid!r}")
        return (f[1], f[2] if f[2] is not None else f[1]) if f[1] is not None else (None, None)
    if bounds is None:  # a session without calls
        if lb.first_call_id or lb.last_call_id or lb.first_seq is not None or lb.last_seq is not None:
            raise _err(lb.source, lb.line, f"session {lb.session!r} has no calls")
        return None, None
    lo, hi = bounds
    if lb.message_index is not None and lb.first_seq is None and lb.last_seq is None:
        return None, None
    if lb.first_call_id or lb.last_call_id:
        for name, cid in (("first_call_id", lb.first_call_id), ("last_call_id", lb.last_call_id)):
            if cid and (sid, cid) not in seqs:
                raise _err(lb.source, lb.line, f"{name} {cid!r} is not a call of session {lb.session!r}")
        first = seqs[(sid, lb.first_call_id)][0] if lb.first_call_id else lo
        last = seqs[(sid, lb.last_call_id)][1] if lb.last_call_id else hi
        if last < first:
            raise _err(
                lb.source, lb.line, f"last_call_id {lb.last_call_id!r} comes before first_call_id {lb.first_call_id!r}"
            )
        return first, last
    for name, seq in (("first_seq", lb.first_seq), ("last_seq", lb.last_seq)):
        if seq is not None and not lo <= seq <= hi:
            raise _err(
                lb.source, lb.line, f"{name} {seq} is not a call of session {lb.session!r} (its calls are {lo}-{hi})"
            )
    first = lb.first_seq if lb.first_seq is not None else lo
    last = lb.last_seq if lb.last_seq is not None else hi
    if last < first:
        raise _err(lb.source, lb.line, f"last_seq {last} comes before first_seq {first}")
    return first, last


def _truth(name: str) -> str:
    """What a label says for a halt: a loop-free session is healthy work throughout."""
    return NOT_LOOP if name == LOOP_FREE else name


def _check_overlaps(labels: list[Resolved]) -> None:
    """Two labels of one session that share a call (or a message) must agree; otherwise which one holds would be a
    guess. ``unsure`` agrees with anything, and labels of two different ``kind``s are two patterns. The error names
    the later row of the two."""
    by_sid: dict[str, list[Resolved]] = {}
    for r in labels:
        if r.name != UNSURE:
            by_sid.setdefault(r.session_id, []).append(r)
    for rs in by_sid.values():
        rs.sort(key=lambda r: (r.first if r.first is not None else -1, r.label.source, r.label.line))
        for i, a in enumerate(rs):
            for b in rs[i + 1 :]:
                if _truth(a.name) == _truth(b.name):
                    continue
                if a.label.kind and b.label.kind and a.label.kind != b.label.kind:
                    continue
                calls = a.first is not None and b.first is not None and a.last is not None and b.first <= a.last
                if not (calls or (a.message is not None and a.message == b.message)):
                    continue
                early, late = sorted((a, b), key=lambda r: (r.label.source, r.label.line))
                other = f"line {early.label.line}"
                if early.label.source != late.label.source:
                    other = f"{early.label.source} line {early.label.line}"
                raise _err(
                    late.label.source,
                    late.label.line,
                    f"its {late.name} span overlaps the {early.name} span of {other}",
                )
