"""The store side of one group of sessions: read its calls and messages, answer the detectors' lookups, land its rows.

Kept apart from ``analyzer.scan.run`` (which plans) so that polars is imported only when there is something to scan: a
no-change rescan starts and ends without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import duckdb
import polars as pl

from analyzer.detect.keys import estimate_tokens_sql, tokens_of_length_sql
from analyzer.detect.rules import RESULT_HEAD
from analyzer.store import connection

# How the scan's rows are compressed as they land. DuckDB's own choice tries several schemes on every string
# segment and keeps the smallest: the largest single step of the scan (0.4 s of 1.7 s on the benchmark corpus).
# Plain dictionary compression lands them ~40% faster for ~6% more store (13 MB for 500 MB of transcripts).
# None: DuckDB's choice.
OUTPUT_COMPRESSION: str | None = "dictionary"
# A store that keeps each call's argument words (``keys.args_words`` of its action arguments,
# ``coalesce(action_args, args)``) spares the scan the tokenising.
WORDS_COLUMN = "args_words"

# One group's rows: its sessions' rows lie in a narrow span of rowids (``connection.rows_of``: the scan takes sessions
# in the order of their rows, so DuckDB skips the row groups outside the span) and a registered table
# (``_scan_group``) names them. Bounded by file ids instead, a group skipped nothing: ingest lands chunks in the order
# its parser processes finish, so every row group spans nearly every file.
# Unsorted: polars sorts faster than DuckDB sorts strings. Calls are compared by their action key (``k``; the
# semantics table, ``detect.semantics``), their words read from the action arguments (NULL: the arguments). Keys are
# 16 hex digits of an XXH3-64, read as the 64-bit
# number they spell, exactly (a hash of them would add collisions of its own); a missing result key stays NULL.
_GROUP = "{span} AND session_id IN (SELECT session_id FROM _scan_group)"
_KEY = "CASE WHEN {col} IS NOT NULL THEN coalesce(try_cast('0x' || {col} AS UBIGINT), hash({col})) END"
_CALLS_SQL = f"""
    SELECT session_id, seq, call_id, turn_id, user_turn, tool, {_KEY.format(col="action_key")} AS k, args,
           action_args, {_KEY.format(col="result_key")} AS result_key, is_error, parent_call_id,
           ({estimate_tokens_sql("args")} + {tokens_of_length_sql("result_chars")})::INTEGER AS est_tokens{{words}}
    FROM calls WHERE {_GROUP.format(span="{calls}")}
"""
_TURNS_SQL = f"""
    SELECT session_id, turn_id, turn_index, user_turn, text, {estimate_tokens_sql("text")}::INTEGER AS est_tokens
    FROM turns WHERE role = 'assistant' AND {_GROUP.format(span="{turns}")}
"""
# What findings need, for the few rows that need it (``detect.vector.episodes.HeadsFn`` and ``TurnsFn``). Bounded
# by the group's rowid spans, like the group's own read: a join alone scans (and decompresses) the whole table for
# every group, which made small groups expensive.
_HEADS_SQL = f"""
    SELECT h.session_id, h.seq, left(c.result_text, {RESULT_HEAD}) AS head
    FROM _scan_heads h JOIN calls c ON c.session_id = h.session_id AND c.seq = h.seq
    WHERE {{calls}}
"""
_TURN_INFO_SQL = """
    SELECT n.session_id, n.turn_id, max(t.turn_index) AS turn_index,
           sum(t.total_tokens) FILTER (WHERE t.usage_counted AND t.turn_id IS NOT NULL)::BIGINT AS tokens,
           sum(coalesce(t.cost_usd, 0)) FILTER (WHERE t.usage_counted AND t.turn_id IS NOT NULL) AS cost
    FROM _scan_turns n JOIN turns t ON t.session_id = n.session_id AND t.turn_id IS NOT DISTINCT FROM n.turn_id
    WHERE t.role = 'assistant' AND {turns}
    GROUP BY n.session_id, n.turn_id
"""

Lookup = Callable[[pl.DataFrame], pl.DataFrame]


class Session(Protocol):
    session_id: str
    fingerprint: str


def has_words(con: duckdb.DuckDBPyConnection) -> bool:
    row = connection.one(
        con,
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'calls' AND column_name = ?",
        [WORDS_COLUMN],
    )
    return bool(row and row[0])


def read_group(
    con: duckdb.DuckDBPyConnection, group: Sequence[Session], words: bool
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """A group's sessions (id, fingerprint), calls and assistant messages, sorted by session, then seq /
    turn_index."""
    sessions = pl.DataFrame(
        {"session_id": [t.session_id for t in group], "fingerprint": [t.fingerprint for t in group]},
        schema={"session_id": pl.String, "fingerprint": pl.String},
    )
    spans = _spans(con, group)
    sql = _CALLS_SQL.format(words=f", {WORDS_COLUMN} AS words" if words else "", **spans)
    con.register("_scan_group", sessions.select("session_id"))
    try:
        calls = _sorted(con.sql(sql).pl(), "seq")
        return sessions, calls, _sorted(con.sql(_TURNS_SQL.format(**spans)).pl(), "turn_index")
    finally:
        con.unregister("_scan_group")


def _sorted(frame: pl.DataFrame, order: str) -> pl.DataFrame:
    """``frame`` sorted by session, then ``order``; checked first, since it may be already."""
    sid, o = pl.col("session_id"), pl.col(order)
    out_of_order = (sid < sid.shift(1)) | ((sid == sid.shift(1)) & (o <= o.shift(1)))
    return frame.sort("session_id", order) if frame.select(out_of_order.any()).item() else frame


def _spans(
    con: duckdb.DuckDBPyConnection, group: Sequence[Session], calls: str = "calls", turns: str = "turns"
) -> dict[str, str]:
    """Conditions on ``calls`` and on ``turns`` (named so in the query) true of every row of the group's sessions:
    their rowid spans (``connection.rows_of``; the scan recorded them with ``connection.record_places``)."""
    ids = "SELECT unnest(?::VARCHAR[])"
    params = [[t.session_id for t in group]]
    return {
        "calls": connection.rows_of(con, "calls", ids, params, calls),
        "turns": connection.rows_of(con, "turns", ids, params, turns),
    }


def lookups(con: duckdb.DuckDBPyConnection, group: Sequence[Session]) -> tuple[Lookup, Lookup]:
    """The result heads and the turn figures findings need, read on demand from the group's rows."""
    spans = _spans(con, group, calls="c", turns="t")
    return (
        _lookup(con, _HEADS_SQL.format(**spans), "_scan_heads"),
        _lookup(con, _TURN_INFO_SQL.format(**spans), "_scan_turns"),
    )


LOOKUP_KEYS = 2_000
"""Keys per lookup query. An answer is materialised inside DuckDB, under the scan's memory cap (``run.DUCKDB_MEMORY``),
before polars gets it: 2,000 result heads are at most 8 MB of text (``RESULT_HEAD`` characters each). Asked at once,
the 18,229 heads one group of the labelled real set needed (22 MB, and the group's results read to find them) overran
the 64 MB cap (a semi-join instead of the join was tried too: it was not needed once the keys came in slices, and
cost 3% more CPU on the 600-session scan)."""


def _lookup(con: duckdb.DuckDBPyConnection, sql: str, name: str) -> Lookup:
    """A query over a registered frame of keys, ``LOOKUP_KEYS`` at a time."""

    def one(keys: pl.DataFrame) -> pl.DataFrame:
        con.register(name, keys)
        try:
            return con.sql(sql).pl()
        finally:
            con.unregister(name)

    def run(keys: pl.DataFrame) -> pl.DataFrame:
        if keys.height <= LOOKUP_KEYS:
            return one(keys)
        return pl.concat([one(part) for part in keys.iter_slices(LOOKUP_KEYS)], how="vertical_relaxed")

    return run


def compress_output(con: duckdb.DuckDBPyConnection) -> None:
    """Compress what the scan writes with ``OUTPUT_COMPRESSION`` until the store closes. Its close writes the rows
    landed since the last checkpoint: all of them on a store of up to ~250k calls (``run.CHECKPOINT_EVERY``),
    which DuckDB's own choice took 0.4 s to compress at 91k calls, when the setting ended with each landing."""
    if OUTPUT_COMPRESSION:
        con.execute(f"SET force_compression = '{OUTPUT_COMPRESSION}'")


def land(con: duckdb.DuckDBPyConnection, out: dict[str, pl.DataFrame], detector: str) -> None:
    """One group's rows in one transaction: a session is either fully scanned or not at all."""
    with connection.transaction(con):
        for table in ("signals", "text_signals", "findings"):
            if out[table].height:
                con.register("_scan_out", out[table])
                con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _scan_out")
                con.unregister("_scan_out")
        con.register("_scan_out", out["scan_state"])
        con.execute(
            "INSERT INTO scan_state BY NAME SELECT *, ? AS detector, now()::TIMESTAMP AS scanned_at FROM _scan_out",
            [detector],
        )
        con.unregister("_scan_out")
