"""What adapters produce: a ``SessionBuilder`` per session, writing rows into a ``RowSink``.

Adapters know formats; the builder knows what every format has in common: user turns, assistant messages that may
arrive split over several records, tool calls waiting for their results, and usage to price. The sink batches rows
and spills them to Parquet, so a worker's memory stays bounded however large the file.

This is the ingest hot path. Keys are hashed here, in the parallel workers, from the full texts (the store's main
process, which lands every chunk, is the serial bottleneck); parsing timestamps, which DuckDB does faster in bulk,
happens in SQL when the spool is loaded (``ingest/land.py``).
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyzer.detect.keys import action_json, call_key, canonical_json, ordered_json, result_key, shallow_sorted_json
from analyzer.ingest.cost import Usage, price_usage
from analyzer.store.schema import CALLS, SESSIONS, STORED_HEAD_CHARS, STORED_TAIL_CHARS, TURNS, spool_columns
from analyzer.tables import arrow_type

if TYPE_CHECKING:
    import pyarrow.parquet as pq

MAX_EXCERPT = 200
MAX_ERRORS_PER_FILE = 1000

# The spool: what workers write and ``ingest/land.py`` loads. Its columns are the store's, in the store's order, less
# what loading computes (session totals); timestamps travel as the transcript's strings.
SPOOL: dict[str, tuple[tuple[str, str], ...]] = {
    "sessions": spool_columns(
        SESSIONS,
        rename={"started_at": "first_ts", "ended_at": "last_ts"},
        drop=SESSIONS.names[SESSIONS.names.index("user_turns") :],
    ),
    "turns": spool_columns(TURNS),
    "calls": spool_columns(CALLS),
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
            return datetime.fromtimestamp(secs, tz=UTC).isoformat()
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
        dt = dt.astimezone(UTC).replace(tzinfo=None)
    return dt


def as_int(value: Any) -> int | float:
    """Token counts arrive as ints, floats, strings or nulls. A count no integer can hold (``1e400``, ``NaN``, 5,000
    digits) comes back as NaN, which stays NaN through any sum: ``valid_count`` then turns it into NULL."""
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0 if not isinstance(value, str) or not value.strip().lstrip("+-").isdigit() else math.nan
    return int(number) if math.isfinite(number) else math.nan


# The largest token count or cost taken as a real value: a quadrillion tokens (or dollars) in one response is a
# corrupt record, and such values overflow the store's BIGINT columns and every sum over them.
MAX_COUNT = 10**15


def valid_count(value: Any) -> bool:
    """A token count the store can hold and add up: an integer of magnitude below ``MAX_COUNT``."""
    return type(value) is int and -MAX_COUNT < value < MAX_COUNT


def valid_cost(value: Any) -> bool:
    """A cost the store can add up: a finite number of magnitude below ``MAX_COUNT``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return -MAX_COUNT < value < MAX_COUNT  # False for NaN too


def _safe(value: Any) -> Any:
    """A value Arrow can write: an integer too large for 64 bits or a non-finite float becomes NULL. The last line of
    defence; ``SessionBuilder`` reports the values it knows about before they get here."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < 1 << 63:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _coerce(value: Any, typ: Any) -> Any:
    """One value as ``typ`` wants it, where an adapter passed the transcript's value through unchecked (a number as
    ``cwd``, an object as a model name): text columns get the value as JSON text, others NULL."""
    import pyarrow as pa

    try:
        pa.array([value], type=typ)
        return value
    except (pa.ArrowInvalid, OverflowError, TypeError, ValueError, UnicodeEncodeError):
        pass
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        try:
            return json.dumps(value, default=str, ensure_ascii=True)
        except (TypeError, ValueError, RecursionError):
            return repr(type(value))
    if pa.types.is_list(typ) and isinstance(value, (list, tuple)):
        return [_coerce(v, typ.value_type) for v in value]
    return None


def _clean(values: list[Any]) -> list[Any]:
    """Strings with lone surrogates (from ``\\ud800`` escapes) cannot be UTF-8; replace them rather than drop rows."""
    return [v.encode("utf-8", "replace").decode("utf-8") if isinstance(v, str) else _safe(v) for v in values]


def clip_result(text: str, ref: str) -> str:
    """What the store keeps of a result: the whole text when short, else its head and tail around a marker line that
    says how many characters are left out and how to read them (``ref`` names the call, as ``SESSION:SEQ``)."""
    n = len(text)
    if n <= STORED_HEAD_CHARS + STORED_TAIL_CHARS:
        return text
    elided = n - STORED_HEAD_CHARS - STORED_TAIL_CHARS
    marker = f"\n[… {elided:,} characters not stored: loopscope show {ref} prints the whole result …]\n"
    if len(marker) >= elided:
        return text
    return text[:STORED_HEAD_CHARS] + marker + text[n - STORED_TAIL_CHARS :]


class RowSink:
    """Row buffers per table, flushed to one Parquet file per table when they grow past ``flush_bytes``.
    ``full_results``: keep whole results rather than ``clip_result``'s head and tail."""

    def __init__(self, spool_dir: Path, tag: str, flush_bytes: int = 8 << 20, full_results: bool = False) -> None:
        import pyarrow as pa  # only a worker that parses loads Arrow; the format registry stays light

        # Arrow's default pool (jemalloc) keeps every flushed batch's memory mapped; the system allocator gives it
        # back: ~50 MB less a worker at its peak, at no measurable cost.
        pa.set_memory_pool(pa.system_memory_pool())

        self.spool_dir = spool_dir
        self.tag = tag
        self.flush_bytes = flush_bytes
        self.full_results = full_results
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
                except (pa.ArrowInvalid, UnicodeEncodeError, OverflowError, TypeError, ValueError):
                    try:
                        arrays.append(pa.array(_clean(list(values)), type=fld.type))
                    except (pa.ArrowInvalid, OverflowError, TypeError, ValueError):
                        arrays.append(pa.array([_coerce(v, fld.type) for v in _clean(list(values))], type=fld.type))
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
    on_error: Callable[[int | None, str, str], None] | None = None

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

    def harness_message(self, text: str, ts: Any, line: int) -> None:
        """A message the harness sent in the user's place (an automatic "please continue"): recorded with role
        ``harness``, and not a user prompt, so loop counting does not restart at it."""
        if self._open:
            self.flush_turns()
        self._emit_turn(
            _Turn(f"h{self.n_turns}", self.n_turns, "harness", [text], None, ts, self.turn, False, None, None, line)
        )
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
                u.input + usage.input,
                u.output + usage.output,
                u.cache_read + usage.cache_read,
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
            usage = self._usage_row(turn, u)
        else:
            usage = (0, 0, 0, 0, 0, 0.0, None, turn.usage_key, False)
        self.sink.add(
            "turns",
            (
                self.session_id,
                turn.turn_id,
                turn.turn_index,
                turn.role,
                text,
                turn.model,
                ts_text(turn.ts),
                turn.user_turn if turn.user_turn > 0 else 0,
                turn.is_sidechain,
                *usage,
                self.file_id,
                turn.line if turn.line >= 0 else None,
            ),
            96 + (len(text) if text else 0),
        )

    def _usage_row(self, turn: _Turn, u: Usage) -> tuple[Any, ...]:
        """The usage columns of a turn. A count or cost that is not a real value (NaN, infinite, past ``MAX_COUNT``)
        is stored as NULL and reported with its field; the turn and its other values are kept."""
        inp, out, read, write, total, cost = u.input, u.output, u.cache_read, u.cache_write, u.total, u.cost
        if (
            valid_count(inp)
            and valid_count(out)
            and valid_count(read)
            and valid_count(write)
            and (total is None or valid_count(total))
            and (cost is None or valid_cost(cost))
        ):
            # Every value valid (nearly every turn): no dict of fields, which only the error path below needs.
            if cost is not None:
                source = "transcript"
            else:
                cost, source = price_usage(turn.model, u)
            return (inp, out, read, write, u.total_tokens, cost, source, turn.usage_key, turn.usage_key is None)
        counts = {"input": u.input, "output": u.output, "cache_read": u.cache_read, "cache_write": u.cache_write}
        bad = [k for k, v in counts.items() if not valid_count(v)]
        if u.total is not None and not valid_count(u.total):
            bad.append("total")
        if u.cost is not None and not valid_cost(u.cost):
            bad.append("cost")
        # ``bad`` is never empty here: a turn whose every value is valid took the path above.
        if self.on_error is not None:
            values = {**counts, "total": u.total, "cost": u.cost}
            shown = ", ".join(f"{k}={_short(values[k])}" for k in bad)
            self.on_error(
                turn.line if turn.line >= 0 else None,
                f"invalid usage value ({shown}): stored as NULL, the rest of the message kept",
                f"usage.{bad[0]} = {_short(values[bad[0]])}",
            )
        vals = [v if valid_count(v) else None for v in counts.values()]
        total = u.total_tokens if "total" not in bad and all(v is not None for v in vals) else None
        if total is not None and not valid_count(total):
            total = None
        if u.cost is not None:
            cost, source = (u.cost, "transcript") if "cost" not in bad else (None, None)
        elif all(v is not None for v in vals):
            cost, source = price_usage(turn.model, u)
        else:
            cost, source = None, None
        return (*vals, total, cost, source, turn.usage_key, turn.usage_key is None)

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
        c = _Call(
            self.n_calls, cid, turn_id or self.current_turn_id, self.turn, tool or "?", args, parent_call_id, ts, line
        )
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

    def _emit_call(
        self,
        c: _Call,
        text: str | None,
        is_error: bool | None,
        result_ts: Any,
        error_kind: str | None,
        has_result: bool,
    ) -> None:
        args = c.args if c.args is not None else {}
        canon, ordered, shallow = _arg_variants(args)
        # The ordered and shallow variants are None when they equal the canonical JSON (most calls): their key is
        # then the canonical key, not hashed again. So are the action arguments (``keys.action_json``) when nothing
        # is commentary or tuning: ``action_args`` is stored NULL then.
        key = call_key(c.tool, canon)
        key_ordered = key if ordered is None else call_key(c.tool, ordered)
        key_shallow = key if shallow is None else call_key(c.tool, shallow)
        act = action_json(c.tool, args, canon)
        if act == canon:
            act, key_action = None, key
        else:
            key_action = call_key(c.tool, act)
        if has_result:
            text = text or ""
            is_error = bool(is_error)
            if is_error and not error_kind:
                error_kind = "flag"
            if not (is_error or error_kind == "placeholder"):
                error_kind = None
            rkey, chars = result_key(text, is_error), len(text)
            if not self.sink.full_results:
                text = clip_result(text, f"{self.session_id}:{c.seq}")
        else:
            text = is_error = error_kind = rkey = chars = None
        self.sink.add(
            "calls",
            (
                self.session_id,
                c.seq,
                c.call_id,
                c.turn_id,
                c.user_turn,
                c.tool,
                canon,
                key,
                key_ordered,
                key_shallow,
                key_action,
                act,
                text,
                chars,
                rkey,
                is_error,
                error_kind,
                c.parent_call_id,
                ts_text(c.ts),
                ts_text(result_ts),
                self.file_id,
                c.line,
            ),
            160 + len(canon) + (len(act) if act else 0) + (len(text) if text else 0),
        )

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
        self.sink.add(
            "sessions",
            (
                self.session_id,
                self.format,
                self.source_path,
                self.file_id,
                self.parent_session_id,
                self.agent_version,
                self.first_ts,
                self.last_ts,
                self.cwd,
                list(self.models),
            ),
        )


def display_path(path: str) -> str:
    """A file name as the store keeps it. A name that is not valid UTF-8 (``x\\xff.jsonl``) reaches Python with its
    bad bytes as lone surrogates, which no UTF-8 column can hold: they are written as ``\\xff`` escapes, so the name
    stays readable and distinct (a name that already holds such an escape literally is the one ambiguity)."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        try:
            return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate that did not come from a byte
            return path.encode("utf-8", "backslashreplace").decode("utf-8")


def _short(value: Any) -> str:
    if isinstance(value, int) and value.bit_length() > 128:
        return f"<a {len(str(abs(value))) if value.bit_length() < 13000 else 'huge'}-digit integer>"
    text = repr(value)
    return text if len(text) <= 40 else text[:20] + f"…({len(text)} chars)"


# An excerpt is never cut inside a word: a secret cut short (18 of a key's 20 characters) is one no redaction rule
# recognises any more. The cut moves on to the end of the word, up to this many characters more.
_WORD_END = re.compile(rf"[^\s\"'`,;&|<>(){{}}\[\]]{{0,{4 * MAX_EXCERPT}}}")


def excerpt(text: str | bytes, limit: int = MAX_EXCERPT) -> str:
    """The start of a bad record, for ``ingest_errors``: about ``limit`` characters, never ending inside a word (so
    the report, which redacts before it cuts to ``limit``, sees every secret whole)."""
    if isinstance(text, bytes):
        text = text[: limit * 8].decode("utf-8", "replace")
    else:
        text = text[: limit * 8]
    text = text.replace("\n", "\\n")
    if len(text) <= limit:
        return text
    end = _WORD_END.match(text, limit).end()  # type: ignore[union-attr]
    return text[:end] + ("…" if end < len(text) else "")
