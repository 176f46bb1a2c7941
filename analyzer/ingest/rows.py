"""What adapters produce: a ``SessionBuilder`` per session, writing rows into a ``RowSink``.

Adapters know formats; the builder knows what every format has in common: user turns, assistant messages that may
arrive split over several records, tool calls waiting for their results, and usage to price. The sink batches rows
and spills them to Parquet, so a worker's memory stays bounded however large the file.

This is the ingest hot path, so the Python side does only what needs Python (linking, merging, canonical JSON);
work DuckDB does faster in bulk — parsing timestamps, hashing keys, normalising results — happens in SQL when the
spool is loaded (``ingest/land.py``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any


from analyzer.detect.keys import canonical_json, ordered_json, shallow_sorted_json
from analyzer.ingest.cost import Usage, price_usage
from analyzer.store.schema import CALLS, SESSIONS, TURNS, spool_columns
from analyzer.tables import arrow_type

if TYPE_CHECKING:
    import pyarrow.parquet as pq

MAX_EXCERPT = 200
MAX_ERRORS_PER_FILE = 1000

# The spool: what workers write and ``ingest/land.py`` loads. Its columns are the store's, in the store's order, less
# what loading computes (keys, totals), plus what only loading needs; timestamps travel as the transcript's strings.
SPOOL: dict[str, tuple[tuple[str, str], ...]] = {
    "sessions": spool_columns(SESSIONS, rename={"started_at": "first_ts", "ended_at": "last_ts"},
                              drop=SESSIONS.names[SESSIONS.names.index("user_turns"):]),
    "turns": spool_columns(TURNS),
    "calls": spool_columns(CALLS, drop=("call_key", "call_key_ordered", "call_key_shallow", "result_key"),
                           after={"args": ("args_ordered", "args_shallow"), "result_text": ("has_result",)},
                           extra_sql={"args_ordered": "VARCHAR", "args_shallow": "VARCHAR", "has_result": "BOOLEAN"}),
}


def ts_text(value: Any) -> str | None:
    """A timestamp as text for DuckDB to parse: ISO strings pass through; epoch seconds or milliseconds become ISO."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, datetime):
        return value.isoformat()  # naive datetimes here are UTC, which is the store's session time zone
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        secs = value / 1000.0 if value > 1e11 else float(value)
        try:
            return datetime.fromtimestamp(secs, tz=timezone.utc).isoformat()
        except (OverflowError, OSError, ValueError):
            return None
    return None


def parse_ts(value: Any) -> datetime | None:
    """ISO-8601 string or epoch (s or ms) to a naive UTC datetime; ``None`` for anything else."""
    text = ts_text(value)
    if text is None:
        return None
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt


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


def _clean(values: list[Any]) -> list[Any]:
    """Strings with lone surrogates (from ``\\ud800`` escapes) cannot be UTF-8; replace them rather than drop rows."""
    return [v.encode("utf-8", "replace").decode("utf-8") if isinstance(v, str) else v for v in values]


class RowSink:
    """Row buffers per table, flushed to one Parquet file per table when they grow past ``flush_bytes``."""

    def __init__(self, spool_dir: Path, tag: str, flush_bytes: int = 32 << 20) -> None:
        import pyarrow as pa  # only a worker that parses loads Arrow; the format registry stays light

        self.spool_dir = spool_dir
        self.tag = tag
        self.flush_bytes = flush_bytes
        self._rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in SPOOL}
        self._schemas = {t: pa.schema([(n, arrow_type(sql)) for n, sql in cols]) for t, cols in SPOOL.items()}
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._pending_bytes = 0
        self.counts = {t: 0 for t in SPOOL}

    def add(self, table: str, row: tuple[Any, ...], approx_bytes: int = 64) -> None:
        self._rows[table].append(row)
        self.counts[table] += 1
        self._pending_bytes += approx_bytes
        if self._pending_bytes >= self.flush_bytes:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        for name, rows in self._rows.items():
            if not rows:
                continue
            schema = self._schemas[name]
            columns = list(zip(*rows))
            arrays = []
            for values, fld in zip(columns, schema):
                try:
                    arrays.append(pa.array(values, type=fld.type))
                except (pa.ArrowInvalid, UnicodeEncodeError):
                    arrays.append(pa.array(_clean(list(values)), type=fld.type))
            batch = pa.Table.from_arrays(arrays, schema=schema)
            writer = self._writers.get(name)
            if writer is None:
                path = self.spool_dir / f"{self.tag}.{name}.parquet"
                writer = self._writers[name] = pq.ParquetWriter(path, schema, compression="none")
            writer.write_table(batch)
            rows.clear()
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
    ts: Any
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
    ts: Any
    line: int


def _arg_variants(args: Any) -> tuple[str, str | None, str | None]:
    """Canonical JSON, and the insertion-order and top-level-sorted variants only where they differ from it (most
    arguments are one flat object with keys already sorted, where all three are the same string)."""
    canon = canonical_json(args)
    if not isinstance(args, dict):
        ordered = ordered_json(args)
        return canon, (ordered if ordered != canon else None), None
    keys = list(args)
    flat = not any(isinstance(v, (dict, list)) for v in args.values())
    if flat and keys == sorted(keys):
        return canon, None, None
    ordered = ordered_json(args)
    shallow = shallow_sorted_json(args)
    return canon, (ordered if ordered != canon else None), (shallow if shallow != canon else None)


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
    first_ts: str | None = field(default=None, init=False)
    last_ts: str | None = field(default=None, init=False)
    models: list[str] = field(default_factory=list, init=False)
    current_turn_id: str | None = field(default=None, init=False)
    _open: dict[str, _Turn] = field(default_factory=dict, init=False)
    _pending: dict[str, deque[_Call]] = field(default_factory=dict, init=False)
    _finished: bool = field(default=False, init=False)

    def see_ts(self, ts: Any) -> None:
        """A timestamp that belongs to no message (a session header). Session start and end are computed in SQL from
        these and the messages' and calls' own timestamps."""
        text = ts_text(ts)
        if text is None:
            return
        if self.first_ts is None:
            self.first_ts = text
        self.last_ts = text

    @property
    def turn(self) -> int:
        """The user turn calls belong to now (0 before the first prompt)."""
        return self.user_turn if self.user_turn > 0 else 0

    # -- messages -----------------------------------------------------------------------------------------------------
    def user_prompt(self, text: str, ts: Any, line: int, turn_id: str | None = None) -> None:
        """A prompt typed (or queued) by the user: starts a new user turn."""
        if self._open:
            self.flush_turns()
        self.user_turn += 1
        tid = turn_id or f"u{self.n_turns}"
        self._emit_turn(_Turn(tid, self.n_turns, "user", [text], None, ts, self.user_turn, False, None, None, line))
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
        if model and model not in self.models:
            self.models.append(model)
        tid = turn_id or f"a{self.n_turns}"
        turn = self._open.get(tid)
        if turn is None:
            turn = _Turn(tid, self.n_turns, "assistant", [], model, ts, self.turn, is_sidechain, None, usage_key, line)
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

    def add_usage(self, usage: Usage, turn_id: str | None = None, model: str | None = None) -> None:
        """Attach usage that arrives after its message (Codex ``token_count``) to the open turn, or to a turn of its
        own (answered by ``model``, so it can be priced) when no message is open."""
        tid = turn_id or self.current_turn_id
        turn = self._open.get(tid) if tid else None
        if turn is None:
            tid = self.assistant(None, None, None, -1, model=model)
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
        texts = turn.texts
        text = (texts[0] if len(texts) == 1 else "\n".join(x for x in texts if x)) if texts else None
        if u is not None:
            if u.cost is not None:
                cost, source = u.cost, "transcript"
            else:
                cost, source = price_usage(turn.model, u)
            usage = (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens, cost, source,
                     turn.usage_key, turn.usage_key is None)
        else:
            usage = (0, 0, 0, 0, 0, 0.0, None, turn.usage_key, False)
        self.sink.add("turns", (
            self.session_id, turn.turn_id, turn.turn_index, turn.role, text, turn.model, ts_text(turn.ts),
            turn.user_turn if turn.user_turn > 0 else 0, turn.is_sidechain, *usage, self.file_id,
            turn.line if turn.line >= 0 else None,
        ), 96 + (len(text) if text else 0))

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
        cid = call_id if call_id else f"#{self.n_calls}"
        c = _Call(self.n_calls, cid, turn_id or self.current_turn_id, self.turn, tool or "?", args,
                  parent_call_id, ts, line)
        self.n_calls += 1
        q = self._pending.get(cid)
        if q is None:
            self._pending[cid] = deque((c,))
        else:
            q.append(c)

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
        key = call_id or ""
        queue = self._pending.get(key)
        if not queue:
            return False
        c = queue.popleft()
        if not queue:
            del self._pending[key]
        self._emit_call(c, text if text is not None else "", bool(is_error), ts, error_kind, True)
        return True

    def has_pending(self, call_id: str) -> bool:
        return bool(self._pending.get(call_id))

    def _emit_call(self, c: _Call, text: str | None, is_error: bool | None, result_ts: Any,
                   error_kind: str | None, has_result: bool) -> None:
        canon, ordered, shallow = _arg_variants(c.args if c.args is not None else {})
        if has_result and is_error and not error_kind:
            error_kind = "flag"
        self.sink.add("calls", (
            self.session_id, c.seq, c.call_id, c.turn_id, c.user_turn, c.tool, canon, ordered, shallow,
            text if has_result else None, has_result, is_error if has_result else None,
            error_kind if has_result and (is_error or error_kind == "placeholder") else None, c.parent_call_id, ts_text(c.ts), ts_text(result_ts),
            self.file_id, c.line,
        ), 160 + len(canon) + (len(text) if text else 0))

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
            self._emit_call(c, None, None, None, None, False)
        self.sink.add("sessions", (
            self.session_id, self.format, self.source_path, self.file_id, self.parent_session_id,
            self.agent_version, self.first_ts, self.last_ts, self.cwd, list(self.models),
        ))


def excerpt(text: str | bytes, limit: int = MAX_EXCERPT) -> str:
    if isinstance(text, bytes):
        text = text[: limit * 4].decode("utf-8", "replace")
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "…"
