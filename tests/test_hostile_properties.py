"""Property tests of the hostile-input promise: arbitrary bytes to the reader, and arbitrary JSON values in any field
of any record of each format, never raise out of the reader or an adapter (nor out of the row flush, where a number
no column holds used to end the ingest), and every record left well-formed is kept."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.ingest.parse import FileTask, parse_file
from analyzer.ingest.reader import ReadStats, iter_records
from analyzer.ingest.rows import RowSink

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

# Raw JSON text no Python value serialises to: what broke the ingest before.
RAW = [
    "1e400",
    "-1e400",
    "NaN",
    "Infinity",
    "9" * 5000,
    "[" * 3000 + "]" * 3000,
    "9223372036854775808",
    "18446744073709551616",
    '"18446744073709551616"',
    "-9223372036854775809",
    '"\\ud800"',
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
replacement = st.one_of(json_values.map(lambda v: ("value", v)), st.sampled_from(RAW).map(lambda r: ("raw", r)))


def _dumps(value: Any, raw: str | None) -> str:
    if raw is not None:
        return raw
    return json.dumps(value, allow_nan=True)


# -- the reader ------------------------------------------------------------------------------------------------------
@given(st.binary(max_size=4096))
@settings(max_examples=300, deadline=None)
def test_reader_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    errors: list[tuple] = []
    list(iter_records(io.BytesIO(data), ReadStats(), lambda *a: errors.append(a)))


@given(
    st.lists(
        st.one_of(
            st.binary(max_size=60).filter(lambda b: b"\n" not in b).map(lambda b: ("junk", b)),
            st.dictionaries(
                st.text(max_size=8), st.integers(-1000, 1000) | st.text(max_size=8), min_size=1, max_size=4
            ).map(lambda d: ("good", d)),
        ),
        max_size=30,
    )
)
@settings(max_examples=200, deadline=None)
def test_reader_keeps_every_well_formed_line(items: list[tuple[str, Any]]) -> None:
    lines = [orjson.dumps(v) if kind == "good" else v for kind, v in items]
    data = b"\n".join(lines) + b"\n"
    got = list(iter_records(io.BytesIO(data), ReadStats(), lambda *a: None))
    by_line: dict[int, list[Any]] = {}
    for line, value in got:
        by_line.setdefault(line, []).append(value)
    for i, (kind, v) in enumerate(items, 1):
        if kind == "good":
            assert v in by_line.get(i, []), (i, v, by_line.get(i))


# -- the adapters ----------------------------------------------------------------------------------------------------
def _jsonl(path: Path, limit: int = 40) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [ln.rstrip("\n") for _, ln in zip(range(limit), f) if ln.strip()]


JSONL_CASES = {
    "pi": FIXTURES / "pi" / "earendil-pi_prompt-cache-replay-session.jsonl",
    "claude": FIXTURES / "claude_code" / "sample_session.jsonl",
    "codex": FIXTURES / "codex" / "ccusage_session-alpha.jsonl",
    "openai_messages": FIXTURES / "openai_messages" / "dataset-parser_valid_full.jsonl",
    "openhands": FIXTURES / "openhands" / "resolver_mock_output.jsonl",
}
DOCUMENT_CASES = {
    "gemini": FIXTURES / "gemini" / "session-2025-12-01T21-45-5b959dae.json",
}


def _paths(value: Any, prefix: tuple = (), out: list | None = None, limit: int = 400) -> list[tuple]:
    """Every (key or index) path into a JSON value, the value itself included, up to ``limit``."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    out.append(prefix)
    if isinstance(value, dict):
        for k, v in value.items():
            _paths(v, prefix + (k,), out, limit)
    elif isinstance(value, list):
        for i, v in enumerate(value[:20]):
            _paths(v, prefix + (i,), out, limit)
    return out


_MARK = "\u0000loopscope-raw\u0000"


def _replace(doc: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    doc = json.loads(json.dumps(doc))
    node = doc
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = new
    return doc


def _serialise(doc: Any, kind: str, payload: Any) -> str:
    if kind == "raw":
        return json.dumps(doc, allow_nan=True).replace(json.dumps(_MARK), payload)
    return json.dumps(doc, allow_nan=True)


def _parse(tmp: Path, name: str, text: bytes) -> tuple[Any, set[int]]:
    """Parse one file as ingest does, through the row flush; (outcome, lines that produced calls)."""
    for p in tmp.glob("*.parquet"):
        p.unlink()
    path = tmp / name
    path.write_bytes(text)
    sink = RowSink(tmp, "t")
    outcome = parse_file(FileTask(1, str(path), len(text), 0), sink)
    written = sink.close()
    lines: set[int] = set()
    if "calls" in written:
        lines = {
            v for v in pq.read_table(written["calls"], columns=["line"]).column("line").to_pylist() if v is not None
        }
    return outcome, lines


@pytest.mark.parametrize("fmt", list(JSONL_CASES))
@given(data=st.data())
@SETTINGS
def test_any_value_in_any_field_of_a_jsonl_record(fmt: str, tmp_path: Path, data: st.DataObject) -> None:
    lines = _jsonl(JSONL_CASES[fmt])
    base_outcome, base_lines = _parse(tmp_path, f"{fmt}.jsonl", ("\n".join(lines) + "\n").encode())
    index = data.draw(st.integers(0, len(lines) - 1), label="line")
    record = json.loads(lines[index])
    path = data.draw(st.sampled_from(_paths(record)), label="path")
    kind, payload = data.draw(replacement, label="value")
    new = _replace(record, path, _MARK if kind == "raw" else payload)
    lines = list(lines)
    lines[index] = _serialise(new, kind, payload)
    outcome, got = _parse(tmp_path, f"{fmt}.jsonl", ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    # Every record left well-formed is kept: the calls of every other line are still there, unless the change hit
    # the record that decides the file's format or session.
    if index > 0 and outcome.format == base_outcome.format:
        assert base_lines - {index + 1} <= got, (path, payload)


@pytest.mark.parametrize("fmt", list(DOCUMENT_CASES))
@given(data=st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_value_in_any_field_of_a_document(fmt: str, tmp_path: Path, data: st.DataObject) -> None:
    doc = json.loads(DOCUMENT_CASES[fmt].read_text())
    path = data.draw(st.sampled_from(_paths(doc)[1:]), label="path")
    kind, payload = data.draw(replacement, label="value")
    new = _replace(doc, path, _MARK if kind == "raw" else payload)
    _parse(tmp_path, f"{fmt}.json", _serialise(new, kind, payload).encode("utf-8", "surrogatepass"))


def test_property_helpers_round_trip() -> None:
    assert _serialise(_replace({"a": 1}, ("a",), _MARK), "raw", "1e400") == '{"a": 1e400}'
    assert math.isnan(float("nan"))
