"""What adapters produce: a ``SessionBuilder`` per session, writing rows into a ``RowSink``.

Adapters know formats; the builder knows what every format has in common: user turns, assistant messages that may
arrive split over several records, tool calls waiting for their results, and usage to price. The sink batches rows
column-wise and spills them to Parquet, so a worker's memory stays bounded however large the file.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..cost import price_usage
from ..detect.keys import call_key, canonical_json, ordered_json, result_key, shallow_sorted_json
from ..schema import CALLS, SESSIONS, TURNS, Table

MAX_EXCERPT = 200
MAX_ERRORS_PER_FILE = 1000


def parse_ts(value: Any) -> datetime | None:
    """ISO-8601 string or epoch (s or ms) to a naive UTC datetime; ``None`` for anything else."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        secs = value / 1000.0 if value > 1e11 else float(value)
        try:
            return datetime.fromtimestamp(secs, tz=timezone.utc).replace(tzinfo=None)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            return None
        if dt.tzinfo is not None:
            dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
        return dt
    return None


def as_int(value: Any) -> int:
    """Token counts arrive as ints, floats, strings or nulls."""
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, int):
        return value
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


@dataclass(slots=True)
class Usage:
    """Token usage of one API response. ``input`` excludes cached input."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total: int | None = None  # the agent's own total, where it records one
    cost: float | None = None  # the agent's own cost, where it records one

    @property
    def total_tokens(self) -> int:
        if self.total is not None:
            return self.total
        return self.input + self.output + self.cache_read + self.cache_write


class RowSink:
    """Column buffers per table, flushed to one Parquet file per table when they grow past ``flush_bytes``."""

    def __init__(self, spool_dir: Path, tag: str, flush_bytes: int = 16 << 20) -> None:
        self.spool_dir = spool_dir
        self.tag = tag
        self.flush_bytes = flush_bytes
        self._cols: dict[str, dict[str, list[Any]]] = {t.name: {c: [] for c in t.names} for t in (SESSIONS, TURNS, CALLS)}
        self._tables = {t.name: t for t in (SESSIONS, TURNS, CALLS)}
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._pending_bytes = 0
        self.counts = {t: 0 for t in self._cols}

    def add(self, table: Table, row: dict[str, Any], approx_bytes: int = 64) -> None:
        cols = self._cols[table.name]
        for name, values in cols.items():
            values.append(row.get(name))
        self.counts[table.name] += 1
        self._pending_bytes += approx_bytes
        if self._pending_bytes >= self.flush_bytes:
            self.flush()

    def flush(self) -> None:
        for name, cols in self._cols.items():
            n = len(next(iter(cols.values())))
            if not n:
                continue
            table = self._tables[name]
            batch = pa.table({c.name: pa.array(cols[c.name], type=c.arrow) for c in table.columns})
            writer = self._writers.get(name)
            if writer is None:
                path = self.spool_dir / f"{self.tag}.{name}.parquet"
                writer = self._writers[name] = pq.ParquetWriter(path, table.arrow_schema(), compression="none")
            writer.write_table(batch)
            for values in cols.values():
                values.clear()
        self._pending_bytes = 0

    def close(self) -> dict[str, str]:
        """Flush and close; the Parquet path of each table that received rows."""
        self.flush()
        paths = {}
        for name, writer in self._writers.items():
            writer.close()
            paths[name] = str(self.spool_dir / f"{self.tag}.{name}.parquet")
        return paths


@dataclass(slots=True)
class _Turn:
    turn_id: str
    turn_index: int
    role: str
    texts: list[str]
    model: str | None
    ts: datetime | None
    user_turn: int
    is_sidechain: bool
    usage: Usage | None
    usage_key: str | None
    line: int


@dataclass(slots=True)
class _Call:
    seq: int
    call_id: str
    turn_id: str | None
    user_turn: int
    tool: str
    args: Any
    parent_call_id: str | None
    ts: datetime | None
    line: int


@dataclass
class SessionBuilder:
    """Collects one session's rows. Adapters call its methods in transcript order and ``finish()`` at the end."""

    sink: RowSink
    file_id: int
    source_path: str
    format: str
    session_id: str
    cwd: str | None = None
    parent_session_id: str | None = None
    agent_version: str | None = None
    max_open_turns: int = 256

    user_turn: int = field(default=-1, init=False)
    n_turns: int = field(default=0, init=False)
    n_calls: int = field(default=0, init=False)
    started_at: datetime | None = field(default=None, init=False)
    ended_at: datetime | None = field(default=None, init=False)
    models: list[str] = field(default_factory=list, init=False)
    current_turn_id: str | None = field(default=None, init=False)
    _open: dict[str, _Turn] = field(default_factory=dict, init=False)
    _pending: dict[str, deque[_Call]] = field(default_factory=dict, init=False)
    _finished: bool = field(default=False, init=False)

    # -- time -------------------------------------------------------------------------------------------------------
    def see_ts(self, ts: datetime | None) -> None:
        if ts is None:
            return
        if self.started_at is None or ts < self.started_at:
            self.started_at = ts
        if self.ended_at is None or ts > self.ended_at:
            self.ended_at = ts

    def _model(self, model: str | None) -> None:
        if model and model not in self.models:
            self.models.append(model)

    @property
    def turn(self) -> int:
        """The user turn calls belong to now (0 before the first prompt)."""
        return max(self.user_turn, 0)

    # -- messages -----------------------------------------------------------------------------------------------------
    def user_prompt(self, text: str, ts: Any, line: int, turn_id: str | None = None) -> None:
        """A prompt typed (or queued) by the user: starts a new user turn."""
        self.flush_turns()
        self.user_turn += 1
        t = parse_ts(ts)
        self.see_ts(t)
        tid = turn_id or f"u{self.n_turns}"
        self._emit_turn(_Turn(tid, self.n_turns, "user", [text], None, t, self.user_turn, False, None, None, line))
        self.n_turns += 1
        self.current_turn_id = None

    def assistant(
        self,
        turn_id: str | None,
        text: str | None,
        ts: Any,
        line: int,
        model: str | None = None,
        usage: Usage | None = None,
        usage_key: str | None = None,
        is_sidechain: bool = False,
    ) -> str:
        """An assistant message, or one more piece of one already open (same ``turn_id``): texts are joined and the
        largest usage is kept. Returns the turn id calls should point to."""
        t = parse_ts(ts)
        self.see_ts(t)
        self._model(model)
        tid = turn_id or f"a{self.n_turns}"
        turn = self._open.get(tid)
        if turn is None:
            turn = _Turn(tid, self.n_turns, "assistant", [], model, t, self.turn, is_sidechain, None, usage_key, line)
            self.n_turns += 1
            self._open[tid] = turn
            if len(self._open) > self.max_open_turns:
                oldest = next(iter(self._open))
                self._emit_turn(self._open.pop(oldest))
        if text:
            turn.texts.append(text)
        if model and not turn.model:
            turn.model = model
        if usage is not None and (turn.usage is None or usage.total_tokens >= turn.usage.total_tokens):
            turn.usage = usage
        self.current_turn_id = tid
        return tid

    def add_usage(self, usage: Usage, turn_id: str | None = None) -> None:
        """Attach usage that arrives after its message (Codex ``token_count``) to the open turn, or to a turn of its
        own when no message is open."""
        tid = turn_id or self.current_turn_id
        turn = self._open.get(tid) if tid else None
        if turn is None:
            tid = self.assistant(None, None, None, -1)
            turn = self._open[tid]
        if turn.usage is None:
            turn.usage = usage
        else:  # two requests folded into one message: add them up
            u = turn.usage
            turn.usage = Usage(
                u.input + usage.input, u.output + usage.output, u.cache_read + usage.cache_read,
                u.cache_write + usage.cache_write,
                None if u.total is None or usage.total is None else u.total + usage.total,
                None if u.cost is None or usage.cost is None else u.cost + usage.cost,
            )

    def flush_turns(self) -> None:
        for turn in self._open.values():
            self._emit_turn(turn)
        self._open.clear()

    def _emit_turn(self, turn: _Turn) -> None:
        u = turn.usage
        text = "\n".join(x for x in turn.texts if x) if turn.texts else None
        row: dict[str, Any] = {
            "session_id": self.session_id, "turn_id": turn.turn_id, "turn_index": turn.turn_index,
            "role": turn.role, "text": text, "model": turn.model, "ts": turn.ts, "user_turn": max(turn.user_turn, 0),
            "is_sidechain": turn.is_sidechain, "usage_key": turn.usage_key, "file_id": self.file_id,
            "line": turn.line if turn.line >= 0 else None,
        }
        if u is not None:
            cost, source = (u.cost, "transcript") if u.cost is not None else price_usage(turn.model, u)
            row.update(
                input_tokens=u.input, output_tokens=u.output, cache_read_tokens=u.cache_read,
                cache_write_tokens=u.cache_write, total_tokens=u.total_tokens, cost_usd=cost, cost_source=source,
                usage_counted=turn.usage_key is None,
            )
        else:
            row.update(input_tokens=0, output_tokens=0, cache_read_tokens=0, cache_write_tokens=0, total_tokens=0,
                       cost_usd=0.0, cost_source=None, usage_counted=False)
        self.sink.add(TURNS, row, 96 + (len(text) if text else 0))

    # -- calls --------------------------------------------------------------------------------------------------------
    def call(
        self,
        call_id: str | None,
        tool: str,
        args: Any,
        ts: Any,
        line: int,
        turn_id: str | None = None,
        parent_call_id: str | None = None,
    ) -> None:
        """A tool call. It waits for its result (``result``) and is written then, or at ``finish`` without one."""
        t = parse_ts(ts)
        self.see_ts(t)
        cid = call_id if call_id else f"#{self.n_calls}"
        c = _Call(self.n_calls, cid, turn_id or self.current_turn_id, self.turn, tool or "?", args,
                  parent_call_id, t, line)
        self.n_calls += 1
        self._pending.setdefault(cid, deque()).append(c)

    def result(
        self,
        call_id: str | None,
        text: str | None,
        is_error: bool | None,
        ts: Any = None,
        error_kind: str | None = None,
    ) -> bool:
        """The result of the oldest waiting call with this id (ids can repeat: matched in order). False when no call
        waits for it."""
        queue = self._pending.get(call_id or "")
        if not queue:
            return False
        c = queue.popleft()
        if not queue:
            del self._pending[call_id or ""]
        t = parse_ts(ts)
        self.see_ts(t)
        self._emit_call(c, text, is_error, t, error_kind)
        return True

    def has_pending(self, call_id: str) -> bool:
        return bool(self._pending.get(call_id))

    def _emit_call(self, c: _Call, text: str | None, is_error: bool | None, result_ts: datetime | None,
                   error_kind: str | None) -> None:
        args = c.args if c.args is not None else {}
        canon = canonical_json(args)
        has_result = text is not None or is_error is not None
        if has_result and is_error and not error_kind:
            error_kind = "flag"
        row = {
            "session_id": self.session_id, "seq": c.seq, "call_id": c.call_id, "turn_id": c.turn_id,
            "user_turn": c.user_turn, "tool": c.tool, "args": canon, "call_key": call_key(c.tool, canon),
            "call_key_ordered": call_key(c.tool, ordered_json(args)),
            "call_key_shallow": call_key(c.tool, shallow_sorted_json(args)),
            "result_text": text if has_result else None,
            "result_key": result_key(text, bool(is_error)) if has_result else None,
            "is_error": bool(is_error) if has_result else None,
            "error_kind": error_kind if has_result and is_error else None,
            "parent_call_id": c.parent_call_id, "ts": c.ts, "result_ts": result_ts,
            "file_id": self.file_id, "line": c.line,
        }
        self.sink.add(CALLS, row, 160 + len(canon) + (len(text) if text else 0))

    # -- end ----------------------------------------------------------------------------------------------------------
    def finish(self) -> None:
        """Write what is still open: turns, calls that never got a result, and the session row."""
        if self._finished:
            return
        self._finished = True
        self.flush_turns()
        waiting = sorted((c for q in self._pending.values() for c in q), key=lambda c: c.seq)
        self._pending.clear()
        for c in waiting:
            self._emit_call(c, None, None, None, None)
        self.sink.add(SESSIONS, {
            "session_id": self.session_id, "format": self.format, "source_path": self.source_path,
            "file_id": self.file_id, "parent_session_id": self.parent_session_id,
            "agent_version": self.agent_version, "started_at": self.started_at, "ended_at": self.ended_at,
            "cwd": self.cwd, "models": list(self.models), "user_turns": max(self.user_turn + 1, 0),
            "turns": self.n_turns, "calls": self.n_calls, "error_calls": 0, "input_tokens": 0, "output_tokens": 0,
            "cache_read_tokens": 0, "cache_write_tokens": 0, "total_tokens": 0, "cost_usd": 0.0,
        })


def excerpt(text: str | bytes, limit: int = MAX_EXCERPT) -> str:
    if isinstance(text, bytes):
        text = text[: limit * 4].decode("utf-8", "replace")
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "…"
