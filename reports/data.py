"""The report's data layer: what it reads from the store, as polars frames (``ReportData``, the ``ReportSource`` the
renderer draws from). It sits a layer below the renderer (tests/test_architecture.py), which reads it only through
that protocol.

The report knows the store's tables (sessions, turns, calls, findings, ingest_errors) and nothing about transcript
formats. The session filter is applied once: ``prepare`` materialises the filtered sessions (and their findings) in
temp tables, which every later query joins. Transcript text is read clipped in SQL, so one huge tool result never
lands in memory whole; redaction happens after (reports/episodes.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import polars as pl

from analyzer.detect.rules import WAITING
from analyzer.results import Totals
from analyzer.store.connection import (
    base_tables,
    frame,
    has_table,
    in_place_order,
    one,
    read_capped,
    record_places,
    rows_of,
)
from analyzer.store.connection import (
    columns as _columns,
)
from analyzer.store.connection import (
    store_id as _store_id,
)
from analyzer.store.filters import SessionFilter

FINDINGS_COLUMNS = (
    "finding_id",
    "session_id",
    "kind",
    "period",
    "tools",
    "call_ids",
    "first_seq",
    "last_seq",
    "repeats",
    "stuck",
    "user_turn",
    "wasted_tokens",
    "estimated_tokens",
    "cost_usd",
)

OPTIONAL_FINDINGS_COLUMNS = (
    ("first_turn_index", "INTEGER"),
    ("last_turn_index", "INTEGER"),
    ("repeat_tokens", "BIGINT"),
    ("why", "VARCHAR"),
)
"""Finding columns read when the store has them: the turn span, and (from the detector rework) the tokens of the
repeats of every finding and a human line saying why it is a loop."""

TEXT_CLIP = 8000
"""Characters of an argument, result or message read from the store; pages show fewer (episodes.SHOW_CHARS), and
the margin lets a secret that straddles the shown part still be recognised whole by the redactor."""

CONV_CLIP = 1500
"""Characters of an argument, result or message read for the whole conversation of a session without findings: its
page shows a few hundred of each (episodes.SESSION_MESSAGE, SESSION_RESULT), the rest is the redactor's margin."""


@dataclass(frozen=True)
class ReportScope:
    """The filtered store as the report sees it: how many sessions, and whether ``loopscope scan`` has run."""

    sessions: int
    has_findings: bool


def _scanned(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``loopscope scan`` has run: findings in the contract's shape, and (when the store tracks scans in
    ``scan_state``) at least one scanned session. An empty findings table alone only means the schema exists."""
    if not set(FINDINGS_COLUMNS) <= _columns(con, "findings"):
        return False
    if has_table(con, "scan_state"):
        row = one(con, "SELECT count(*) FROM scan_state")
        return bool(row and row[0])
    return True


def prepare(con: duckdb.DuckDBPyConnection, flt: SessionFilter) -> ReportScope:
    """Materialise the filtered sessions (``_r_sessions``) and, when ``loopscope scan`` has run, their findings with
    the dimensions the index breaks loops down by (``_r_findings``); record where each session's rows lie
    (``record_places``) for the page batches' reads."""
    where, params = flt.where("s")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _r_sessions AS SELECT s.* FROM sessions s WHERE {where}", params)
    usable = _scanned(con)
    if usable:
        cols = ", ".join(f"f.{c}" for c in FINDINGS_COLUMNS)
        # turn_ids (the turns counted in wasted_tokens) lets the totals count a turn once across findings.
        have = _columns(con, "findings")
        turn_ids = "f.turn_ids" if "turn_ids" in have else "CAST(NULL AS VARCHAR[])"
        # Columns some stores have and others not yet: NULL where missing, so every query can name them.
        optional = ", ".join(
            f"{'f.' + c if c in have else f'CAST(NULL AS {t})'} AS {c}" for c, t in OPTIONAL_FINDINGS_COLUMNS
        )
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE _r_findings AS
            SELECT {cols}, {turn_ids} AS turn_ids, {optional}, s.format, s.cwd,
                   coalesce(t.model, s.models[1]) AS model,
                   CAST(coalesce(c.ts, s.started_at) AS DATE) AS day
            FROM findings f
            JOIN _r_sessions s USING (session_id)
            LEFT JOIN calls c ON c.session_id = f.session_id AND c.seq = f.first_seq
            LEFT JOIN (SELECT session_id, turn_id, max(model) AS model FROM turns
                       WHERE role = 'assistant' GROUP BY ALL) t
                   ON t.session_id = c.session_id AND t.turn_id = c.turn_id
        """)
    record_places(con)
    n = one(con, "SELECT count(*) FROM _r_sessions")
    return ReportScope(sessions=int(n[0]) if n else 0, has_findings=usable)


def totals(con: duckdb.DuckDBPyConnection, scope: ReportScope) -> Totals:
    s = one(
        con,
        "SELECT count(*), coalesce(sum(calls), 0), coalesce(sum(total_tokens), 0), "
        "coalesce(sum(cost_usd), 0), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cache_read_tokens), 0), coalesce(sum(cache_write_tokens), 0) FROM _r_sessions",
    )
    assert s is not None
    loops = (0, 0, 0, 0.0, 0)
    if scope.has_findings:
        # Calls count once even if two episodes share them. Tokens and dollars: each finding's own, unless the
        # findings name their turns, in which case a turn shared by two findings counts once. A wait (polls of a
        # process that still runs) is no loop: its findings count in none of these totals.
        row = one(
            con,
            f"""
            WITH loops AS (SELECT * FROM _r_findings WHERE kind IS DISTINCT FROM '{WAITING}'),
            dedup AS (
                SELECT sum(t.total_tokens) AS tokens, sum(coalesce(t.cost_usd, 0)) AS cost
                FROM (SELECT DISTINCT session_id, unnest(turn_ids) AS turn_id FROM loops) u
                JOIN turns t ON t.session_id = u.session_id AND t.turn_id = u.turn_id AND t.usage_counted)
            SELECT count(DISTINCT session_id),
                   (SELECT count(*) FROM (SELECT DISTINCT session_id, unnest(call_ids) FROM loops)),
                   CASE WHEN count(turn_ids) = count(*) AND count(*) > 0 THEN (SELECT coalesce(tokens, 0) FROM dedup)
                        ELSE coalesce(sum(wasted_tokens), 0) END,
                   CASE WHEN count(turn_ids) = count(*) AND count(*) > 0 THEN (SELECT coalesce(cost, 0) FROM dedup)
                        ELSE coalesce(sum(cost_usd), 0) END,
                   coalesce(sum(estimated_tokens) FILTER (WHERE coalesce(wasted_tokens, 0) = 0), 0)
            FROM loops""",
        )
        assert row is not None
        loops = row
        # Wasted: the stuck findings' turns, each once (or, where findings do not name their turns, their own sums).
        st = one(
            con,
            """
            WITH dedup AS (
                SELECT sum(t.total_tokens) AS tokens, sum(coalesce(t.cost_usd, 0)) AS cost
                FROM (SELECT DISTINCT session_id, unnest(turn_ids) AS turn_id FROM _r_findings WHERE stuck) u
                JOIN turns t ON t.session_id = u.session_id AND t.turn_id = u.turn_id AND t.usage_counted)
            SELECT CASE WHEN count(turn_ids) = count(*) AND count(*) > 0 THEN (SELECT coalesce(tokens, 0) FROM dedup)
                        ELSE coalesce(sum(wasted_tokens), 0) END,
                   CASE WHEN count(turn_ids) = count(*) AND count(*) > 0 THEN (SELECT coalesce(cost, 0) FROM dedup)
                        ELSE coalesce(sum(cost_usd), 0) END
            FROM _r_findings WHERE stuck""",
        )
        stuck = (int(st[0]), float(st[1])) if st else (None, None)
    else:
        stuck = (None, None)
    return Totals(
        int(s[0]),
        int(s[1]),
        int(s[2]),
        float(s[3]),
        int(loops[0]),
        int(loops[1]),
        int(loops[2]),
        float(loops[3]),
        int(loops[4]),
        int(s[4]),
        int(s[5]),
        int(s[6]),
        int(s[7]),
        stuck[0],
        stuck[1],
    )


def findings(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every finding in scope with its session's format, project (cwd), model and day."""
    return frame(con, "SELECT * FROM _r_findings ORDER BY session_id, first_seq, finding_id")


def loop_sessions(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Sessions with at least one finding, worst (most wasted tokens) first."""
    return frame(
        con,
        """
        SELECT s.session_id, s.format, s.cwd, s.started_at, s.calls, s.total_tokens, s.cost_usd,
               count(*) AS episodes, count(*) FILTER (WHERE f.stuck) AS stuck_episodes,
               coalesce(sum(f.wasted_tokens), 0) AS wasted_tokens,
               coalesce(sum(f.estimated_tokens), 0) AS estimated_tokens,
               coalesce(sum(f.cost_usd), 0) AS loop_cost_usd
        FROM _r_findings f JOIN _r_sessions s USING (session_id)
        GROUP BY ALL
        ORDER BY wasted_tokens DESC, estimated_tokens DESC, s.session_id""",
    )


def ingest_errors(con: duckdb.DuckDBPyConnection, limit: int) -> tuple[int, pl.DataFrame]:
    """All ingest errors are shown whatever the filter: they belong to files, not to sessions."""
    row = one(con, "SELECT count(*) FROM ingest_errors")
    n = int(row[0]) if row else 0
    df = frame(
        con,
        f"SELECT path, line, reason, excerpt FROM ingest_errors ORDER BY path, line NULLS FIRST, reason, excerpt "
        f"LIMIT {int(limit)}",
    )
    return n, df


def skipped_files(con: duckdb.DuckDBPyConnection, limit: int) -> tuple[int, pl.DataFrame]:
    """Files found but not read (unknown format, binary, empty, not a transcript), with the reason; a file read with
    another one (``files.status`` companion) is not among them. Like ingest errors they belong to files, so no session
    filter applies."""
    row = one(con, "SELECT count(*) FROM files WHERE status = 'skipped'")
    n = int(row[0]) if row else 0
    return n, frame(con, f"SELECT path, reason FROM files WHERE status = 'skipped' ORDER BY path LIMIT {int(limit)}")


def _ids_table(con: duckdb.DuckDBPyConnection, ids: Sequence[str]) -> None:
    """``_r_batch`` (the batch's session ids) and the batch's own calls and turns (``_r_batch_calls``,
    ``_r_batch_turns``), bounded by where the batch's rows lie (``rows_of``)."""
    # One statement with a list parameter: executemany of one-row inserts cost 70 ms a batch of 50.
    con.execute("CREATE OR REPLACE TEMP TABLE _r_batch AS SELECT unnest(?::VARCHAR[]) AS session_id", [list(ids)])
    for view, table in (("_r_batch_calls", "calls"), ("_r_batch_turns", "turns")):
        rows = rows_of(con, table, "SELECT session_id FROM _r_batch")
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT {table}.* FROM {table} JOIN _r_batch USING "
            f"(session_id) WHERE {rows}"
        )


# The batch's own calls and turns (``_ids_table``), for every join of a batch's query.
BATCH_CALLS = "_r_batch_calls"
BATCH_TURNS = "_r_batch_turns"


def session_batch(con: duckdb.DuckDBPyConnection, ids: Sequence[str]) -> dict[str, pl.DataFrame]:
    """Everything the session pages of ``ids`` need, in a handful of queries for the whole batch:

    - ``sessions``: the session rows, with ``cost_sources`` (where their turns' costs came from);
    - ``calls``: every call, without text (the timeline);
    - ``turns``: assistant turns with counted usage (cumulative tokens) and which call they end at;
    - ``findings``: the batch's findings;
    - ``episode_calls``: every call inside a finding's span (first to last call), with clipped args and result text;
    - ``conversation``: the user prompt and assistant messages around each finding;
    - ``texts``: clipped text of the looping assistant messages of text findings, with their ``finding_id``;
    - ``session_turns``, ``session_calls``: the whole conversation of the sessions without findings
      (``whole_conversation``).
    """
    _ids_table(con, ids)
    out: dict[str, pl.DataFrame] = {}
    out["sessions"] = _estimated_cost(
        frame(
            con,
            f"""
        SELECT s.* EXCLUDE (file_id), src.cost_sources, coalesce(est.chars_tokens, 0) AS estimated_tokens
        FROM _r_sessions s JOIN _r_batch USING (session_id)
        LEFT JOIN (SELECT t.session_id, list(DISTINCT t.cost_source ORDER BY t.cost_source) AS cost_sources
                   FROM {BATCH_TURNS} t
                   WHERE t.usage_counted AND t.cost_source IS NOT NULL GROUP BY ALL) src USING (session_id)
        LEFT JOIN (  -- an estimate (about four characters a token) where the transcript records no usage
            SELECT c.session_id, (sum(coalesce(length(c.args), 0) + coalesce(c.result_chars, 0)) / 4)::BIGINT
                       AS chars_tokens
            FROM {BATCH_CALLS} c
            WHERE c.session_id IN (SELECT session_id FROM _r_sessions WHERE coalesce(total_tokens, 0) = 0)
            GROUP BY ALL) est USING (session_id)""",
        )
    )
    out["calls"] = frame(
        con,
        f"""
        SELECT c.session_id, c.seq, c.call_id, c.turn_id, c.user_turn, c.tool, c.is_error
        FROM {BATCH_CALLS} c ORDER BY c.session_id, c.seq""",
    )
    out["turns"] = frame(
        con,
        f"""
        SELECT t.session_id, t.turn_index, t.turn_id, t.model,
               CASE WHEN t.usage_counted THEN coalesce(t.total_tokens, 0) ELSE 0 END AS tokens, m.last_seq
        FROM {BATCH_TURNS} t
        LEFT JOIN (SELECT c.session_id, c.turn_id, max(c.seq) AS last_seq
                   FROM {BATCH_CALLS} c GROUP BY ALL) m
               ON m.session_id = t.session_id AND m.turn_id = t.turn_id
        WHERE t.role = 'assistant'
        ORDER BY t.session_id, t.turn_index""",
    )
    out["findings"] = frame(
        con,
        """
        SELECT f.* FROM _r_findings f JOIN _r_batch USING (session_id)
        ORDER BY f.session_id, f.first_seq, f.finding_id""",
    )
    out["episode_calls"] = frame(
        con,
        f"""
        WITH wanted AS (
            SELECT DISTINCT f.session_id, unnest(range(f.first_seq, f.last_seq + 1)) AS seq
            FROM _r_findings f JOIN _r_batch USING (session_id) WHERE f.first_seq IS NOT NULL)
        SELECT c.session_id, c.seq, c.call_id, c.turn_id, c.tool, c.call_key, c.action_key, c.result_key, c.is_error,
               left(c.args, {TEXT_CLIP}) AS args, length(c.args) AS args_len,
               left(c.result_text, {TEXT_CLIP}) AS result_text, c.result_chars AS result_len
        FROM (SELECT DISTINCT * FROM wanted) w JOIN {BATCH_CALLS} c ON c.session_id = w.session_id AND c.seq = w.seq
        ORDER BY c.session_id, c.seq""",
    )
    # The messages of text loops: named by text_signals when the scan recorded them, else the messages that issued
    # the finding's calls.
    by_calls = f"""
        SELECT DISTINCT w.finding_id, w.session_id, c.turn_id
        FROM (SELECT f.finding_id, f.session_id, unnest(f.call_ids) AS call_id
              FROM _r_findings f JOIN _r_batch USING (session_id) WHERE f.kind = 'text') w
        JOIN {BATCH_CALLS} c USING (session_id, call_id)"""
    if "finding_id" in _columns(con, "text_signals"):
        looping = f"""
            WITH named AS (
                SELECT DISTINCT x.finding_id, x.session_id, x.turn_id
                FROM text_signals x JOIN _r_batch USING (session_id)
                WHERE x.finding_id IN (SELECT finding_id FROM _r_findings f JOIN _r_batch USING (session_id)
                                       WHERE f.kind = 'text'))
            SELECT * FROM named
            UNION ALL
            SELECT * FROM ({by_calls}) b WHERE b.finding_id NOT IN (SELECT finding_id FROM named)"""
    else:
        looping = by_calls
    out["conversation"] = conversation(con)
    out["session_turns"], out["session_calls"] = whole_conversation(con)
    out["texts"] = frame(
        con,
        f"""
        SELECT l.finding_id, t.session_id, t.turn_id, t.turn_index,
               left(t.text, {TEXT_CLIP}) AS text, length(t.text) AS text_len
        FROM ({looping}) l JOIN {BATCH_TURNS} t ON t.session_id = l.session_id AND t.turn_id = l.turn_id
        WHERE t.role = 'assistant'
        ORDER BY t.session_id, t.turn_index""",
    )
    return out


def whole_conversation(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The whole conversation of each session of the batch (``_r_batch``) that has no finding, whose page shows it
    all (a page with findings shows the conversation around each episode instead): its user prompts and assistant
    messages (those without text too: they place their calls), and every call with its arguments and result,
    clipped (``CONV_CLIP``). An argument longer than the clip may lose the key that names what the call did (a file
    written after its content), so those keys are read from it whole (``args_keys``, as ``calltext`` reads them)."""
    from analyzer.calltext import _KEYS as ARG_KEYS  # the keys call_text reads, most telling first

    loop_free = "SELECT session_id FROM _r_batch WHERE session_id NOT IN (SELECT session_id FROM _r_findings)"
    paths = ", ".join(f"'$.{k}'" for k in ARG_KEYS)
    turns = frame(
        con,
        f"""
        SELECT t.session_id, t.turn_index, t.turn_id, t.role, left(t.text, {CONV_CLIP}) AS text,
               length(t.text) AS text_len
        FROM {BATCH_TURNS} t
        WHERE t.session_id IN ({loop_free}) AND t.role IN ('user', 'assistant')
        ORDER BY t.session_id, t.turn_index""",
    )
    calls = frame(
        con,
        f"""
        SELECT c.session_id, c.seq, c.call_id, c.turn_id, c.tool, c.call_key, c.result_key, c.is_error,
               left(c.args, {CONV_CLIP}) AS args, length(c.args) AS args_len,
               CASE WHEN length(c.args) > {CONV_CLIP} AND json_valid(c.args)
                    THEN json_extract_string(c.args, [{paths}]) END AS args_keys,
               left(c.result_text, {CONV_CLIP}) AS result_text, c.result_chars AS result_len
        FROM {BATCH_CALLS} c
        WHERE c.session_id IN ({loop_free})
        ORDER BY c.session_id, c.seq""",
    )
    return turns, calls


CONTEXT_MESSAGES = 2
"""Assistant messages shown before an episode's first call (the reasoning that led into it)."""
CONTEXT_LOOKBACK = 40
"""How many turns back from an episode those messages are looked for."""


def conversation(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The conversation around each finding of the batch (``_r_batch``): the user prompt of its turn, the assistant
    messages from a few before the episode to its end, with clipped text; one row per (finding, message), in order.
    ``kind`` is ``user`` or ``assistant``; the calls themselves come from ``episode_calls``/``conversation_calls``."""
    # Equality joins on unnested ranges: DuckDB's range joins are slow on sessions of 20,000 calls.
    return frame(
        con,
        f"""
        WITH f AS (
            SELECT f.finding_id, f.session_id, f.user_turn, f.first_seq, f.last_seq,
                   f.first_turn_index, f.last_turn_index
            FROM _r_findings f JOIN _r_batch USING (session_id)),
        by_calls AS (
            SELECT x.finding_id, min(t.turn_index) AS lo, max(t.turn_index) AS hi
            FROM (SELECT finding_id, session_id, unnest(range(first_seq, last_seq + 1)) AS seq
                  FROM f WHERE first_seq IS NOT NULL) x
            JOIN {BATCH_CALLS} c ON c.session_id = x.session_id AND c.seq = x.seq
            JOIN {BATCH_TURNS} t ON t.session_id = c.session_id AND t.turn_id = c.turn_id
            GROUP BY x.finding_id),
        span AS (
            SELECT f.finding_id, f.session_id, f.user_turn,
                   coalesce(f.first_turn_index, b.lo) AS lo, coalesce(f.last_turn_index, b.hi) AS hi
            FROM f LEFT JOIN by_calls b USING (finding_id)
            WHERE coalesce(f.first_turn_index, b.lo) IS NOT NULL),
        prompt AS (
            SELECT s.finding_id, max(t.turn_index) AS turn_index
            FROM span s JOIN {BATCH_TURNS} t ON t.session_id = s.session_id AND t.role = 'user'
                 AND t.user_turn = s.user_turn AND t.turn_index <= s.lo
            GROUP BY ALL),
        near AS (
            SELECT finding_id, session_id, user_turn, lo, hi,
                   unnest(range(greatest(lo - {CONTEXT_LOOKBACK}, 0), hi + 1)) AS turn_index
            FROM span),
        candidates AS (
            SELECT n.finding_id, n.turn_index, n.turn_index >= n.lo AS inside,
                   (t.text IS NOT NULL AND t.text <> '') AS has_text
            FROM near n JOIN {BATCH_TURNS} t ON t.session_id = n.session_id AND t.turn_index = n.turn_index
            WHERE t.role = 'assistant' AND t.user_turn = n.user_turn),
        before AS (  -- the last few assistant messages with text before the episode
            SELECT finding_id, turn_index FROM (
                SELECT finding_id, turn_index,
                       row_number() OVER (PARTITION BY finding_id ORDER BY turn_index DESC) AS k
                FROM candidates WHERE NOT inside AND has_text)
            WHERE k <= {CONTEXT_MESSAGES}),
        wanted AS (
            SELECT * FROM prompt
            UNION SELECT * FROM before
            UNION SELECT finding_id, turn_index FROM candidates WHERE inside)
        SELECT w.finding_id, t.session_id, t.turn_index, t.turn_id, t.role, left(t.text, {TEXT_CLIP}) AS text,
               length(t.text) AS text_len, t.ts
        FROM wanted w JOIN span s USING (finding_id)
        JOIN {BATCH_TURNS} t ON t.session_id = s.session_id AND t.turn_index = w.turn_index
        ORDER BY w.finding_id, t.turn_index""",
    )


def _first_prompts() -> str:
    return f"""
        SELECT session_id, arg_min(left(text, {PROMPT_CLIP}), turn_index) AS first_prompt
        FROM turns WHERE role = 'user' AND text IS NOT NULL AND trim(text) <> ''
          AND session_id IN (SELECT session_id FROM _r_sessions)
        GROUP BY session_id"""


PROMPT_CLIP = 400
"""Characters of a session's first prompt read for the all-sessions index (it shows and searches fewer)."""


def all_sessions(con: duckdb.DuckDBPyConnection, scope: ReportScope) -> pl.DataFrame:
    """Every session in scope, one row each, for the all-sessions index: agent, project, models, start, calls,
    tokens split four ways, cost and where it came from, an estimate for transcripts without usage, the first user
    prompt; with findings, the loop kinds, their tools, the wasted (stuck) cost and tokens, and the loop labels
    (``loops_text``: one line per finding, the main one first)."""
    from analyzer.calltext import loop_text

    base = frame(
        con,
        f"""
        WITH est AS (
            SELECT c.session_id, (sum(coalesce(length(c.args), 0) + coalesce(c.result_chars, 0)) / 4)::BIGINT
                       AS chars_tokens
            FROM calls c
            -- only where the transcript records no usage: reading every result's length is not free
            WHERE c.session_id IN (SELECT session_id FROM _r_sessions WHERE coalesce(total_tokens, 0) = 0)
            GROUP BY ALL),
        src AS (
            SELECT session_id, list(DISTINCT cost_source) FILTER (WHERE cost_source IS NOT NULL) AS cost_sources
            FROM turns WHERE session_id IN (SELECT session_id FROM _r_sessions) AND usage_counted GROUP BY ALL),
        fp AS ({_first_prompts()})
        SELECT s.session_id, s.format, s.cwd, s.models, s.started_at, s.calls, s.error_calls, s.user_turns,
               s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_write_tokens, s.total_tokens,
               s.cost_usd, src.cost_sources, coalesce(est.chars_tokens, 0) AS estimated_tokens, fp.first_prompt
        FROM _r_sessions s LEFT JOIN est USING (session_id) LEFT JOIN src USING (session_id)
        LEFT JOIN fp USING (session_id)
        ORDER BY s.cost_usd DESC NULLS LAST, s.total_tokens DESC, s.session_id""",
    )
    if not scope.has_findings:
        return _estimated_cost(
            base.with_columns(
                pl.lit(0).alias("loops"),
                pl.lit([], dtype=pl.List(pl.String)).alias("kinds"),
                pl.lit([], dtype=pl.List(pl.String)).alias("loop_tools"),
                pl.lit(0.0).alias("wasted_usd"),
                pl.lit(0).alias("wasted_tokens"),
                pl.lit([], dtype=pl.List(pl.String)).alias("loops_text"),
            )
        )
    per = frame(
        con,
        """
        WITH named AS (
            SELECT w.session_id, sum(t.total_tokens) AS tokens, sum(coalesce(t.cost_usd, 0)) AS cost
            FROM (SELECT DISTINCT session_id, unnest(turn_ids) AS turn_id FROM _r_findings WHERE stuck) w
            JOIN turns t ON t.session_id = w.session_id AND t.turn_id = w.turn_id AND t.usage_counted
            GROUP BY ALL),
        own AS (  -- findings that do not name their turns: their own sums
            SELECT session_id, sum(wasted_tokens) AS tokens, sum(coalesce(cost_usd, 0)) AS cost
            FROM _r_findings WHERE stuck AND turn_ids IS NULL GROUP BY ALL),
        stuck AS (
            SELECT session_id, sum(tokens) AS tokens, sum(cost) AS cost
            FROM (SELECT * FROM named UNION ALL SELECT * FROM own) GROUP BY ALL)
        SELECT f.session_id, count(*) AS loops, list(DISTINCT f.kind ORDER BY f.kind) AS kinds,
               flatten(list(f.tools ORDER BY f.first_seq NULLS FIRST, f.finding_id)) AS loop_tools,
               any_value(stuck.cost) AS wasted_usd, any_value(stuck.tokens)::BIGINT AS wasted_tokens
        FROM _r_findings f LEFT JOIN stuck USING (session_id) GROUP BY f.session_id""",
    )
    per = per.with_columns(pl.col("loop_tools").list.unique(maintain_order=True))
    labels = frame(
        con,
        """
        SELECT f.session_id, f.finding_id, f.stuck, f.repeats,
               list(c.tool ORDER BY c.seq) FILTER (WHERE c.seq IS NOT NULL) AS c_tools,
               list(left(c.args, 400) ORDER BY c.seq) FILTER (WHERE c.seq IS NOT NULL) AS c_args
        FROM _r_findings f
        LEFT JOIN calls c ON c.session_id = f.session_id AND f.first_seq IS NOT NULL
             AND c.seq BETWEEN f.first_seq AND f.first_seq + greatest(coalesce(f.period, 1), 1) - 1
        GROUP BY ALL""",
    )
    text = [
        loop_text(t or [], a or [], r, width=90)
        for t, a, r in zip(labels["c_tools"].to_list(), labels["c_args"].to_list(), labels["repeats"].to_list())
    ]
    labels = (
        labels.drop("c_tools", "c_args")
        .with_columns(pl.Series("loop", text, dtype=pl.String))
        .sort(["session_id", "stuck", "repeats", "finding_id"], descending=[False, True, True, False], nulls_last=True)
        .group_by("session_id", maintain_order=True)
        .agg(pl.col("loop").alias("loops_text"))
    )
    out = base.join(per, on="session_id", how="left", maintain_order="left").join(
        labels, on="session_id", how="left", maintain_order="left"
    )
    return _estimated_cost(
        out.with_columns(
            pl.col("loops").fill_null(0), pl.col("wasted_usd").fill_null(0.0), pl.col("wasted_tokens").fill_null(0)
        )
    )


def _estimated_cost(df: pl.DataFrame) -> pl.DataFrame:
    """``estimated_cost_usd``: for a session whose transcript records no usage, its estimated tokens (about four
    characters each of its arguments and results) priced as input of its first model; NULL otherwise, or when the
    model has no known price. Always shown labelled as an estimate."""
    from analyzer.ingest.cost import Usage, price_usage

    est = []
    for total, tokens, models in zip(
        df["total_tokens"].to_list(), df["estimated_tokens"].to_list(), df["models"].to_list()
    ):
        if total or not tokens or not models:
            est.append(None)
            continue
        cost, _ = price_usage(models[0], Usage(input=int(tokens)))
        est.append(cost)
    return df.with_columns(pl.Series("estimated_cost_usd", est, dtype=pl.Float64))


def fingerprints(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Each scanned session's fingerprint (``scan_state``: its file's content and ingest, its counts, the detector
    and its options): the report keeps a session's page while this and its replay are unchanged. Empty when the
    store does not track scans (a Parquet export): every page is then written."""
    if not has_table(con, "scan_state") or "fingerprint" not in _columns(con, "scan_state"):
        return {}
    rows = con.execute(
        "SELECT session_id, fingerprint FROM scan_state "
        "WHERE session_id IN (SELECT session_id FROM _r_sessions) AND fingerprint IS NOT NULL"
    ).fetchall()
    return {str(sid): str(fp) for sid, fp in rows}


STATE_QUERIES = (
    "SELECT file_id, path, format, status, reason, content_hash, sessions, calls, errors, ingested_at, full_results "
    "FROM files ORDER BY file_id",
    "SELECT session_id, fingerprint, scanned_at FROM scan_state ORDER BY session_id",
    "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM turns), (SELECT count(*) FROM calls), "
    "(SELECT count(*) FROM ingest_errors), (SELECT count(*) FROM findings)",
)
"""What ``store_state`` reads: ingest writes a ``files`` row (a new ``ingested_at``) for every file whose rows it
changes, and scan a ``scan_state`` row (a new ``scanned_at``) for every session it scans, so these rows change
whenever anything a report shows does; the counts are a second check."""


def store_state(con: duckdb.DuckDBPyConnection, flt: SessionFilter) -> str | None:
    """A digest of the store's state as a report of ``flt`` reads it (``STATE_QUERIES``), so that a report written
    from the same state may be kept as it is; None for a source that is no store (a Parquet export: its files may
    change under the same rows) or a store without scans."""
    import hashlib

    if not {"files", "scan_state", "sessions", "turns", "calls", "ingest_errors", "findings"} <= base_tables(con):
        return None
    h = hashlib.blake2b(repr((duckdb.__version__, pl.__version__, flt)).encode(), digest_size=16)
    for sql in STATE_QUERIES:
        h.update(sql.encode())
        for row in con.execute(sql).fetchall():
            h.update(repr(row).encode())
    return h.hexdigest()


PAGE_READS = {"memory_limit": "128MB"}
"""DuckDB's cap while ``loopscope report`` reads the store (its page batches, the sessions whose guards it replays,
the calibration's sweep): uncapped, DuckDB keeps the blocks it read cached up to its limit, so the report of 2,400
sessions peaked at 796 MB against 615 MB for 600 sessions (capping the replays' and the sweep's reads too took its
main process from 549 to 422 MB). A read that needs more than the cap runs again without it
(``store.connection.read_capped``), so the cap bounds the cache, never what a read may use."""


class ReportData:
    """What the report reads from the store, for the sessions ``flt`` selects: the report renders from this object
    and never touches the store itself. Opening it materialises the scope (``_r_sessions``, ``_r_findings``).
    ``read_cap``: DuckDB settings for the page batches' reads (``PAGE_READS``)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        flt: SessionFilter = SessionFilter(),
        read_cap: dict[str, str] | None = None,
    ) -> None:
        self.con = con
        self.filter = flt
        self.read_cap = read_cap
        self.scope = prepare(con, flt)

    def totals(self) -> Totals:
        return totals(self.con, self.scope)

    def findings(self) -> pl.DataFrame:
        return findings(self.con)

    def loop_sessions(self) -> pl.DataFrame:
        return loop_sessions(self.con)

    def ingest_errors(self, limit: int) -> tuple[int, pl.DataFrame]:
        return ingest_errors(self.con, limit)

    def skipped_files(self, limit: int) -> tuple[int, pl.DataFrame]:
        """How many files were skipped, and the first ``limit`` of them (``path``, ``reason``)."""
        return skipped_files(self.con, limit)

    def session_ids(self) -> pl.DataFrame:
        """The ``session_id`` of every session in scope."""
        return frame(self.con, "SELECT session_id FROM _r_sessions")

    def read_order(self, ids: Sequence[str]) -> list[str]:
        """``ids`` in the order of their rows in the store (``in_place_order``)."""
        return in_place_order(self.con, ids)

    def session_batch(self, ids: Sequence[str]) -> dict[str, pl.DataFrame]:
        return read_capped(self.con, self.read_cap, lambda: session_batch(self.con, ids))

    def fingerprints(self) -> dict[str, str]:
        return fingerprints(self.con)

    def all_sessions(self) -> pl.DataFrame:
        return all_sessions(self.con, self.scope)

    def store_id(self) -> str:
        """The store's id (``loopscope_meta`` key ``store_id``): the report keeps a person's labels under it. A store
        written before stores kept one (and a Parquet export, which has none) gets the id ``store.connection``
        derives from its first transcript file without writing, the one its next write records."""
        return _store_id(self.con)
