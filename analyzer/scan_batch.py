"""The worker side of ``loopscope scan``: a group of sessions in as Arrow tables, their signals and findings out.

No DuckDB here: ``analyzer.scan`` reads the store and lands the results; this module runs the detector core over
each session (``detect.core``, ``detect.text``), finds its episodes (``detect.episodes``) and builds the output
tables. It runs in worker processes, so tables cross the process boundary as Arrow IPC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .detect.core import SIGNAL_FIELDS, Config, scan_calls
from .detect.episodes import Finding, SessionData, build_findings
from .detect.text import TEXT_FIELDS, scan_texts
from .schema import FINDINGS, SIGNALS, TEXT_SIGNALS

# Argument token sets by call key, kept across the sessions and groups a worker scans (commands recur).
_TOKEN_CACHE: dict[Any, frozenset[str]] = {}
_TOKEN_CACHE_MAX = 200_000

_CALL_COLUMNS = ("seq", "call_id", "turn_id", "user_turn", "tool", "k", "args", "result_key", "is_error",
                 "parent_call_id", "est_tokens")
_TURN_COLUMNS = ("turn_id", "turn_index", "user_turn", "text", "est_tokens")


def _offsets(col: pa.ChunkedArray) -> dict[str, tuple[int, int]]:
    """session_id -> [start, end) of its rows in a table sorted by session."""
    if len(col) == 0:
        return {}
    runs = pc.run_end_encode(col.combine_chunks())
    out: dict[str, tuple[int, int]] = {}
    start = 0
    for sid, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist()):
        out[sid] = (start, end)
        start = end
    return out


def _head(heads: pa.ChunkedArray, base: int, i: int) -> str | None:
    """A result's first characters, converted only for the few calls a drift check looks at."""
    return heads[base + i].as_py()


@dataclass
class _Out:
    """Rows accumulated over a group's sessions."""

    signals: list[tuple] = field(default_factory=list)
    call_fids: list[str | None] = field(default_factory=list)
    texts: list[tuple] = field(default_factory=list)
    text_keep: list[bool] = field(default_factory=list)
    text_fids: list[str | None] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    state: list[tuple[str, str, int, int, int]] = field(default_factory=list)


def scan_batch(sessions: list[tuple[str, str]], calls: pa.Table, turns: pa.Table, usage: pa.Table,
               config: Config) -> dict[str, pa.Table]:
    """Scan a group of sessions. ``sessions`` pairs each id with its fingerprint; ``calls`` and ``turns`` (assistant
    messages) are sorted by session, then ``seq`` / ``turn_index``; ``usage`` holds each turn's counted usage.
    Returns Arrow tables for ``signals``, ``text_signals``, ``findings`` and ``scan_state``."""
    if len(_TOKEN_CACHE) > _TOKEN_CACHE_MAX:
        _TOKEN_CACHE.clear()
    c = {name: calls.column(name).to_pylist() for name in _CALL_COLUMNS}
    t = {name: turns.column(name).to_pylist() for name in _TURN_COLUMNS}
    call_at, turn_at = _offsets(calls.column("session_id")), _offsets(turns.column("session_id"))
    use_at = _offsets(usage.column("session_id"))
    u_turn, u_tok, u_cost = (usage.column(n).to_pylist() for n in ("turn_id", "tokens", "cost"))
    heads = calls.column("result_head")
    out = _Out()
    for sid, fingerprint in sessions:
        s, e = call_at.get(sid, (0, 0))
        a, b = turn_at.get(sid, (0, 0))
        ua, ub = use_at.get(sid, (0, 0))
        cs = {name: col[s:e] for name, col in c.items()}
        ts = {name: col[a:b] for name, col in t.items()}
        sig, links = scan_calls(cs["k"], cs["tool"], cs["args"], cs["result_key"], cs["is_error"],
                                cs["parent_call_id"], cs["user_turn"], config, _TOKEN_CACHE)
        tsig, tlinks = scan_texts(ts["text"], ts["user_turn"], config.similarity, config.reset_on_user)
        found = build_findings(SessionData(
            session_id=sid, seq=cs["seq"], call_id=cs["call_id"], turn_id=cs["turn_id"], user_turn=cs["user_turn"],
            tool=cs["tool"], key=cs["k"], args=cs["args"], parent=cs["parent_call_id"], est_tokens=cs["est_tokens"],
            signals=sig, nested_links=links, m_turn_id=ts["turn_id"], m_turn_index=ts["turn_index"],
            m_user_turn=ts["user_turn"], m_text=ts["text"], m_est_tokens=ts["est_tokens"], m_signals=tsig,
            text_links=tlinks, usage={u_turn[i]: (u_tok[i], u_cost[i]) for i in range(ua, ub)},
            tokens=_TOKEN_CACHE, result_key=cs["result_key"], is_error=cs["is_error"],
            result_head=partial(_head, heads, s),
        ))
        _collect(out, sid, fingerprint, sig, tsig, found)
    return {
        "signals": _signals_table(calls, out.signals, out.call_fids),
        "text_signals": _text_table(turns, out.text_keep, out.texts, out.text_fids),
        "findings": pa.table({f.name: pa.array([getattr(x, f.name) for x in out.findings], f.arrow)
                              for f in FINDINGS.columns}),
        "scan_state": pa.table({
            "session_id": pa.array([x[0] for x in out.state], pa.large_string()),
            "fingerprint": pa.array([x[1] for x in out.state], pa.large_string()),
            "calls": pa.array([x[2] for x in out.state], pa.int32()),
            "texts": pa.array([x[3] for x in out.state], pa.int32()),
            "findings": pa.array([x[4] for x in out.state], pa.int32()),
        }),
    }


def _collect(out: _Out, sid: str, fingerprint: str, sig: list[tuple], tsig: list[tuple | None],
             found: list[Finding]) -> None:
    """Add one session's rows; each call and message points to its finding (a call episode before a text one)."""
    cf: list[str | None] = [None] * len(sig)
    tf: list[str | None] = [None] * len(tsig)
    for f in found:
        for i in f.calls:
            if cf[i] is None:
                cf[i] = f.finding_id
        for m in f.messages:
            tf[m] = f.finding_id
    out.signals.extend(sig)
    out.call_fids.extend(cf)
    keep = [x is not None for x in tsig]
    out.text_keep.extend(keep)
    out.texts.extend(x for x in tsig if x is not None)
    out.text_fids.extend(f for f, k in zip(tf, keep) if k)
    out.findings.extend(found)
    out.state.append((sid, fingerprint, len(sig), sum(keep), len(found)))


def _struct_columns(rows: list[tuple], names: tuple[str, ...], types: dict[str, pa.DataType]
                    ) -> dict[str, pa.Array]:
    """Per-row tuples to Arrow columns in one conversion (a struct array, then its fields)."""
    struct = pa.array(rows, type=pa.struct([(n, types[n]) for n in names]))
    return dict(zip(names, struct.flatten()))


def _signals_table(calls: pa.Table, rows: list[tuple], fids: list[str | None]) -> pa.Table:
    types = {c.name: c.arrow for c in SIGNALS.columns}
    cols: dict[str, Any] = {n: calls.column(n) for n in ("session_id", "seq", "call_id", "turn_id", "user_turn",
                                                          "tool", "est_tokens")}
    cols["nested"] = pc.is_valid(calls.column("parent_call_id"))
    cols.update(_struct_columns(rows, SIGNAL_FIELDS, types))
    cols["finding_id"] = pa.array(fids, pa.large_string())
    return pa.table({n: _cast(cols[n], types[n]) for n in SIGNALS.names})


def _text_table(turns: pa.Table, keep: list[bool], rows: list[tuple], fids: list[str | None]) -> pa.Table:
    types = {c.name: c.arrow for c in TEXT_SIGNALS.columns}
    kept = turns.filter(pa.array(keep, pa.bool_())) if len(turns) else turns
    cols: dict[str, Any] = {n: kept.column(n) for n in ("session_id", "turn_id", "turn_index", "user_turn",
                                                          "est_tokens")}
    cols.update(_struct_columns(rows, TEXT_FIELDS, types))
    cols["finding_id"] = pa.array(fids, pa.large_string())
    return pa.table({n: _cast(cols[n], types[n]) for n in TEXT_SIGNALS.names})


def _cast(arr: Any, typ: pa.DataType) -> Any:
    return arr if arr.type == typ else arr.cast(typ)


def to_ipc(table: pa.Table) -> bytes:
    """Arrow IPC bytes: only the rows of a sliced table travel (pickling a slice would ship its parent's buffers)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


def scan_packed(sessions: list[tuple[str, str]], calls: bytes, turns: bytes, usage: bytes,
                config: Config) -> dict[str, bytes]:
    """``scan_batch`` across a process boundary, tables as Arrow IPC."""
    out = scan_batch(sessions, from_ipc(calls), from_ipc(turns), from_ipc(usage), config)
    return {name: to_ipc(t) for name, t in out.items()}
