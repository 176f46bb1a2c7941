"""The calibration sweep's engine: stored signals in, one row of figures per threshold setting out, without rescanning.

One load (``load_frames``) reads, per call in scope, the signals a base policy's measure needs plus what a halt at
that call would mean — the tokens it saves, whether it lands in a loop — and the stuck episodes; every setting is then
a few polars expressions over that frame. Every figure is a sum over sessions (or, for the median and the float
sums, taken over per-halt and per-episode values), so calibrate loads and sweeps a batch of sessions at a time
(``variant_parts``) and adds the batches up (``finish_sweep``): the same rows as one pass, in a batch's memory. The idea
that makes a 200-setting sweep cheap: for a threshold-on-a-measure guard, "the first call of a run whose measure reaches
t" is the same call for every t between two *records* of the run's running maximum, so each record row is exploded over
the thresholds it decides, and one group-by yields the figures of every threshold at once (``first_reaching``).

**Measures** (per call, counters restart at each user prompt as the stored signals do; ``a`` decides the warning and
``h`` the halt; a run is one user turn of one session):

- ``open-codesign``: ``max(streak, cycle2 .. cycle<max_cycle>)`` (3 by default) for both; warn at ``warn``, halt at
  ``halt``. Blocked calls stay in its history and in the transcript alike, so on the recorded calls this is the guard.
- ``gitagent``: ``streak`` of calls that got a result; the turn cap of the base policy (``max_turns``, 50) halts too.
  It has no warning (``warn`` = ``halt``), and a trip in the middle of a batch stops the run at the end of the next
  batch, as the replay has it.
- ``cline``: ``streak`` (notice at ``warn``, stop at ``halt``), and the mistake limit of the base policy: ``mistakes``
  error results in a row of tools other than the shell stop too (``fail_run``, ``has_result``).
- ``roo-code``: ``streak``; no warning.
- ``gemini-cli``: ``max(streak, cycle2 .. cycle5)``; no warning.
- ``pi-anti-doom-loop``: one threshold R (``PI_ANTI_LOOP_REPEATS``; rows carry ``warn`` = ``halt`` = R). A call is
  *blocked* when ``m = max(window count over W, near-identical run)`` reaches R, or when the previous call was the same
  tool failing for the ``fails``-th time in a row (``fail_run``); the near-identical run counts consecutive calls of
  one tool linked by ``streak > 1`` or ``sim_prev >= B`` (capped at W + 1; none when the similarity is off). The halt
  is pi's abort: a call blocked when an earlier call with the same key was blocked in the run, i.e. the first call
  with ``min(b, max of b over earlier calls with its key) >= R`` where ``b`` is ``m`` (or "always" for a failure
  block). W ranges over the stored window sizes (5, 10, 20), B over the similarity bars. The rules no swept setting
  changes come from the stored counters and apply to every row: a text-rule hit (``text_signals`` reaching
  ``text_repeats``) steers the first time in a run and aborts the second time; a call repeated inside its script
  (``nested_repeat`` reaching ``nested_repeats``) is blocked.

**Approximations** (why calibrate verifies its recommendation with one exact replay, ``analyzer.guards.replay``): the
signals use the action key (``calls.action_key``: commentary and tuning dropped, a shell command without its wrappers;
the seed guards use the canonical key, gitagent and gemini-cli hash ``JSON.stringify`` order, roo-code sorts the top
level only); ``done`` is not exempt for open-codesign; cline and roo-code never reset at user prompts but the signals
do; pi does not record blocked calls in its window (the sweep counts every recorded call), compares near-identical
arguments with every call in its window (the sweep only with the previous call of the same tool), reads its text rules
over ``PI_ANTI_LOOP_WINDOW`` texts (the stored counters over 10, with rule 4 as a set of mutually similar texts), and
aborts when a call blocked in one script is issued in another (not modelled, nor loop_ack or the fail rate);
gemini-cli's text rule and gitagent's batches with a call that got no result are left out as well.

**What a halt saves**: exactly the replay's ``scope="run"`` figure — the counted usage (``turns.total_tokens`` and
``cost_usd`` of assistant messages with ``usage_counted``) of the messages after the message at which the run stops,
up to the next user prompt; and the calls with a higher ``seq`` in the run. The message of a call is found as the
replay finds it (same ``turn_id`` and user turn, else same ``turn_id``, else the previous call's, else the user turn's
last assistant message).

**What a halt hits** (``cls``): the halting call (for gitagent, the call that ends the stopping batch) lies in a
``stuck`` label span -> stuck; a ``benign`` label span -> benign; otherwise, as the replay's ``halt_on``, in a stuck
finding -> stuck, only in findings that made progress or in a ``waiting`` finding (polls of a process that still runs:
a guard that halts a wait breaks the session) -> progress, in none -> none. Labels win where they overlap findings. A
session has a false halt when one of its halts is not ``stuck``.

**Episodes**: the stuck findings that carry calls (never a ``waiting`` one: a wait is no loop to catch), except those
a label span overlaps (the labels replace them there), plus the ``stuck`` label spans. An episode is *caught* when
the guard's first action inside it (a warning, or the halt itself for guards without one) comes no later than its
run's halt; *calls until detection* is that call's ``seq`` minus
the episode's ``first_seq``, plus one. A *false warning* is the guard's first action in a run on a call that is not
stuck, before the run stops (a warning blocks the call in open-codesign and pi): ``false_warn_sessions``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from analyzer.guards import SweepSpec, sweepable
from analyzer.store.connection import frame, one
from analyzer.store.filters import SessionFilter, SessionIds

if TYPE_CHECKING:
    import duckdb

STUCK, PROGRESS, NONE, BENIGN = 0, 1, 2, 3
CLASSES = ("stuck", "progress", "none", "benign")
ALWAYS = 1 << 20  # a measure value above every threshold (pi's failure block, gitagent's turn cap, cline's mistakes)
WINDOW_COLUMNS = {5: "window5", 10: "window_count", 20: "window20"}  # pi window W -> the stored count over W calls

SWEEP_SCHEMA: dict[str, Any] = {
    "warn": pl.Int64,
    "halt": pl.Int64,
    "window": pl.Int64,
    "similarity": pl.Float64,
    "halts": pl.Int64,
    "halts_stuck": pl.Int64,
    "halts_progress": pl.Int64,
    "halts_none": pl.Int64,
    "halts_benign": pl.Int64,
    "sessions_warned": pl.Int64,
    "sessions_halted": pl.Int64,
    "false_halt_sessions": pl.Int64,
    "sessions": pl.Int64,
    "false_halt_rate": pl.Float64,
    "false_warn_sessions": pl.Int64,
    "false_warn_rate": pl.Float64,
    "stuck_episodes": pl.Int64,
    "stuck_caught": pl.Int64,
    "median_calls_to_detect": pl.Float64,
    "tokens_saved": pl.Int64,
    "dollars_saved": pl.Float64,
    "calls_saved": pl.Int64,
}


# Each sweepable guard's spec (measure, warning, swept windows and similarities, cycles, rule) lives in its module
# (``Guard.SWEEP``); this is the lookup by engine name.
BASES: dict[str, SweepSpec] = {name: g.SWEEP for name, g in sweepable().items() if g.SWEEP is not None}


@dataclass
class Frames:
    """Everything a sweep reads, loaded once.

    ``calls``: one row per call in scope, ordered by session and ``seq``: ``sidx`` (session index), ``run`` (run
    index), ``session_id``, ``seq``, ``user_turn``, ``tool``, ``nested``, the signals, ``key`` (hash of the call key),
    ``nested_repeat``, ``has_result``, ``turn_pos`` (the issuing message's ``turn_index``),
    ``tok_after``/``cost_after``/``calls_after`` (what a halt here saves) and ``cls`` (what a halt here hits: 0 stuck, 1
    progress, 2 none, 3 benign). ``texts`` (pi-anti-doom-loop only): the text-rule counters of each assistant message
    with text, with ``run``, ``turn_index`` and what a halt at the message saves. ``episodes``: ``ep``, ``sidx``,
    ``first_seq``, ``last_seq`` of the stuck episodes.
    """

    calls: pl.DataFrame
    episodes: pl.DataFrame
    sessions: int  # sessions in scope (scanned, matching the filter), with or without calls
    unscanned: int  # sessions matching the filter that were never scanned (left out)
    total_tokens: int
    total_cost: float
    scope_ids: list[str] = field(default_factory=list)
    texts: pl.DataFrame | None = None
    labelled: bool = False
    cache: dict[Any, Any] = field(default_factory=dict, repr=False)
    _members: pl.DataFrame | None = field(default=None, repr=False)

    @property
    def members(self) -> pl.DataFrame:
        """One row per (stuck episode, call): the calls each episode spans."""
        if self._members is None:
            e = self.episodes.with_columns(pl.int_ranges("first_seq", pl.col("last_seq") + 1).alias("seq"))
            e = e.explode("seq").drop_nulls("seq").with_columns(pl.col("seq").cast(pl.Int64))
            self._members = e.join(self.calls.select("sidx", "seq", "run", "nested"), on=["sidx", "seq"])
        return self._members

    def for_verification(self) -> Frames:
        """These frames without what only the sweep reads (the signals, the texts): what the exact replay of the
        recommendation needs of a batch (``recommend.verify_parts``), kept while the other batches are swept."""
        return Frames(
            self.calls.select(_VERIFY_COLUMNS),
            self.episodes,
            self.sessions,
            self.unscanned,
            self.total_tokens,
            self.total_cost,
            self.scope_ids,
            None,
            self.labelled,
        )


_VERIFY_COLUMNS = ["session_id", "sidx", "seq", "run", "cls", "nested"]


@dataclass(frozen=True)
class CalibrationScope:
    """The scanned sessions matching a filter (``ids``, sorted), the matching ones never scanned, and the counted
    usage of the scanned ones."""

    ids: list[str]
    unscanned: int
    total_tokens: int
    total_cost: float


def _create_scope(con: duckdb.DuckDBPyConnection, flt: SessionFilter | SessionIds) -> CalibrationScope:
    """The scope of ``flt``, left in the temp table ``_cal_scope`` for the queries that follow."""
    where, params = flt.where("s")
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _cal_scope AS
        SELECT s.session_id FROM sessions s
        WHERE {where} AND s.session_id IN (SELECT session_id FROM scan_state)""",
        params,
    )
    row = one(
        con,
        f"""
        SELECT (SELECT count(*) FROM sessions s WHERE {where}) - (SELECT count(*) FROM _cal_scope),
               (SELECT coalesce(sum(total_tokens), 0) FROM sessions WHERE session_id IN (SELECT * FROM _cal_scope)),
               (SELECT coalesce(sum(cost_usd), 0) FROM sessions WHERE session_id IN (SELECT * FROM _cal_scope))
    """,
        params,
    )
    assert row is not None
    ids = [r[0] for r in con.execute("SELECT session_id FROM _cal_scope ORDER BY session_id").fetchall()]
    return CalibrationScope(ids, int(row[0]), int(row[1]), float(row[2]))


def load_scope(con: duckdb.DuckDBPyConnection, flt: SessionFilter = SessionFilter()) -> CalibrationScope:
    """The scanned sessions matching ``flt`` and their totals, without their calls: what a sweep in batches of
    sessions (``SessionIds``) needs before the first batch."""
    try:
        return _create_scope(con, flt)
    finally:
        con.execute("DROP TABLE IF EXISTS _cal_scope")


_LABELS_SCHEMA = {"session_id": pl.String, "first_seq": pl.Int64, "last_seq": pl.Int64, "label": pl.String}


def load_frames(
    con: duckdb.DuckDBPyConnection,
    flt: SessionFilter | SessionIds = SessionFilter(),
    labels: pl.DataFrame | None = None,
    texts: bool = False,
) -> Frames:
    """One read of the store: the scanned sessions matching ``flt`` (a filter, or one batch of a scope by id),
    their calls' signals, and what a halt at each call would save and hit (``labels``: spans with ``session_id``,
    ``first_seq``, ``last_seq``, ``label``); with ``texts``, the text-rule counters of their assistant messages
    too."""
    lab = (labels if labels is not None else pl.DataFrame(schema=_LABELS_SCHEMA)).select(list(_LABELS_SCHEMA))
    con.register("_cal_labels", lab.to_arrow())
    try:
        scope = _create_scope(con, flt)
        scope_ids = scope.ids
        con.execute(_MSG_SQL)
        calls = frame(con, _CALLS_SQL)
        episodes = frame(con, _EPISODES_SQL)
        text_rows = frame(con, _TEXTS_SQL) if texts else None
    finally:
        con.unregister("_cal_labels")
        con.execute("DROP TABLE IF EXISTS _cal_scope")
        con.execute("DROP TABLE IF EXISTS _cal_msg")
    sidx = pl.DataFrame(
        {
            "session_id": pl.Series(scope_ids, dtype=pl.String),
            "sidx": pl.int_range(len(scope_ids), dtype=pl.Int32, eager=True),
        }
    )
    calls = calls.join(sidx, on="session_id", maintain_order="left")
    keys = [calls.select("sidx", "user_turn")]
    if text_rows is not None:
        text_rows = text_rows.join(sidx, on="session_id", maintain_order="left")
        keys.append(text_rows.select("sidx", "user_turn"))
    runs = (
        pl.concat(keys)
        .unique()
        .sort("sidx", "user_turn")
        .with_row_index("run")
        .with_columns(pl.col("run").cast(pl.Int32))
    )
    calls = calls.join(runs, on=["sidx", "user_turn"], maintain_order="left")
    if text_rows is not None:
        text_rows = text_rows.join(runs, on=["sidx", "user_turn"], maintain_order="left")
    episodes = (
        episodes.join(sidx, on="session_id")
        .sort("session_id", "first_seq", "last_seq")
        .with_row_index("ep")
        .select(pl.col("ep").cast(pl.Int32), "sidx", "session_id", "first_seq", "last_seq")
    )
    return Frames(
        calls,
        episodes,
        len(scope_ids),
        scope.unscanned,
        scope.total_tokens,
        scope.total_cost,
        scope_ids,
        text_rows,
        labelled=labels is not None and labels.height > 0,
    )


# Every message of the sessions in scope with the counted usage after it in its run (the replay's "tokens after").
_MSG_SQL = """
CREATE OR REPLACE TEMP TABLE _cal_msg AS
WITH t AS (
    SELECT session_id, turn_id, turn_index, coalesce(user_turn, 0) AS user_turn, role,
           CASE WHEN role = 'assistant' AND usage_counted THEN coalesce(total_tokens, 0) ELSE 0 END AS tok,
           CASE WHEN role = 'assistant' AND usage_counted THEN coalesce(cost_usd, 0) ELSE 0 END AS cost
    FROM turns WHERE session_id IN (SELECT session_id FROM _cal_scope)
)
SELECT session_id, turn_id, user_turn, turn_index, role,
       coalesce(sum(tok) OVER w, 0)::BIGINT AS tok_after, coalesce(sum(cost) OVER w, 0)::DOUBLE AS cost_after
FROM t
WINDOW w AS (PARTITION BY session_id, user_turn ORDER BY turn_index ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
"""

_CALLS_SQL = """
WITH amsg AS (SELECT * FROM _cal_msg WHERE role = 'assistant'),
m1 AS (SELECT session_id, turn_id, user_turn, min(turn_index) AS ti FROM amsg GROUP BY ALL),
m2 AS (SELECT session_id, turn_id, min(turn_index) AS ti FROM amsg GROUP BY ALL),
mlast AS (SELECT session_id, user_turn, max(turn_index) AS ti FROM amsg GROUP BY ALL),
fs AS (
    SELECT g.session_id, g.seq, bool_or(coalesce(f.stuck, false) AND f.kind <> 'waiting') AS f_stuck
    FROM signals g JOIN findings f
      ON f.session_id = g.session_id AND g.seq BETWEEN f.first_seq AND coalesce(f.last_seq, f.first_seq)
    WHERE g.session_id IN (SELECT session_id FROM _cal_scope) AND f.first_seq IS NOT NULL
    GROUP BY ALL
),
ls AS (
    SELECT g.session_id, g.seq, bool_or(l.label = 'stuck') AS l_stuck
    FROM signals g JOIN _cal_labels l ON l.session_id = g.session_id AND g.seq BETWEEN l.first_seq AND l.last_seq
    WHERE g.session_id IN (SELECT session_id FROM _cal_scope)
    GROUP BY ALL
),
c AS (
    SELECT g.session_id, g.seq, coalesce(g.user_turn, 0) AS user_turn, coalesce(g.tool, '?') AS tool,
           coalesce(g.nested, false) AS nested, g.streak, g.cycle2, g.cycle3, g.cycle4, g.cycle5, g.window5,
           g.window_count, g.window20, g.sim_prev, g.fail_run, g.nested_repeat, g.drift_run,
           coalesce(g.progress, false) AS progress,
           hash(k.call_key) AS key, k.result_key IS NOT NULL AS has_result,
           coalesce(m1.ti, m2.ti) AS ti0,
           CASE WHEN ls.l_stuck IS NOT NULL THEN CASE WHEN ls.l_stuck THEN 0 ELSE 3 END
                WHEN fs.f_stuck IS NULL THEN 2 WHEN fs.f_stuck THEN 0 ELSE 1 END AS cls
    FROM signals g
    JOIN calls k ON k.session_id = g.session_id AND k.seq = g.seq
    LEFT JOIN m1 ON m1.session_id = g.session_id AND m1.turn_id = g.turn_id AND m1.user_turn = coalesce(g.user_turn, 0)
    LEFT JOIN m2 ON m2.session_id = g.session_id AND m2.turn_id = g.turn_id
    LEFT JOIN fs ON fs.session_id = g.session_id AND fs.seq = g.seq
    LEFT JOIN ls ON ls.session_id = g.session_id AND ls.seq = g.seq
    WHERE g.session_id IN (SELECT session_id FROM _cal_scope)
),
c2 AS (
    SELECT *, coalesce(ti0, last_value(ti0 IGNORE NULLS) OVER (
                  PARTITION BY session_id, user_turn ORDER BY seq ROWS UNBOUNDED PRECEDING)) AS ti1
    FROM c
)
SELECT c2.* EXCLUDE (ti0, ti1), coalesce(c2.ti1, ml.ti, -1)::INTEGER AS turn_pos,
       coalesce(a.tok_after, 0)::BIGINT AS tok_after, coalesce(a.cost_after, 0)::DOUBLE AS cost_after,
       (count(*) OVER (PARTITION BY c2.session_id, c2.user_turn ORDER BY c2.seq
                       ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING))::BIGINT AS calls_after
FROM c2
LEFT JOIN mlast ml ON ml.session_id = c2.session_id AND ml.user_turn = c2.user_turn
LEFT JOIN amsg a ON a.session_id = c2.session_id AND a.turn_index = coalesce(c2.ti1, ml.ti)
ORDER BY c2.session_id, c2.seq
"""

_TEXTS_SQL = """
SELECT x.session_id, x.turn_index, coalesce(x.user_turn, 0) AS user_turn, x.sentence_repeats, x.same_count,
       x.similar_run, x.similar_count, coalesce(m.tok_after, 0)::BIGINT AS tok_after,
       coalesce(m.cost_after, 0)::DOUBLE AS cost_after
FROM text_signals x LEFT JOIN _cal_msg m ON m.session_id = x.session_id AND m.turn_index = x.turn_index
WHERE x.session_id IN (SELECT session_id FROM _cal_scope)
ORDER BY x.session_id, x.turn_index
"""

_EPISODES_SQL = """
SELECT session_id, first_seq::BIGINT AS first_seq, coalesce(last_seq, first_seq)::BIGINT AS last_seq
FROM findings f
WHERE stuck AND kind <> 'waiting' AND first_seq IS NOT NULL AND session_id IN (SELECT session_id FROM _cal_scope)
  AND NOT EXISTS (SELECT 1 FROM _cal_labels l WHERE l.session_id = f.session_id
                  AND l.first_seq <= coalesce(f.last_seq, f.first_seq) AND l.last_seq >= f.first_seq)
UNION ALL
SELECT session_id, first_seq, last_seq FROM _cal_labels
WHERE label = 'stuck' AND session_id IN (SELECT session_id FROM _cal_scope)
"""


# -- measures ----------------------------------------------------------------------------------------------------------
@dataclass
class Measured:
    """One base policy's measures at one (window, similarity): ``top`` holds the top-level calls with ``a`` (acts:
    warns or halts at ``a >= warn``), ``h`` (halts at ``h >= halt``) and the ``stop_*`` columns (what a halt there
    saves and hits); ``halts`` / ``acts`` are threshold-free events (pi's text rules): a halt per run with its
    ``halt_at`` position (between calls: ``seq`` +/- 0.25), and warnings at calls."""

    top: pl.DataFrame
    halts: pl.DataFrame | None = None
    acts: pl.DataFrame | None = None


_STOP = ["stop_seq", "stop_tok", "stop_cost", "stop_calls", "stop_cls"]


def measures(
    base: str, f: Frames, params: dict[str, Any], window: int | None = None, similarity: float | None = None
) -> Measured:
    """Compute one base policy's measures over the loaded frames."""
    spec = BASES[base]
    top = f.calls.filter(~pl.col("nested"))
    if spec.rule == "window":
        return _windowed(f, top, params, window, similarity)
    if spec.cycles:
        m = pl.max_horizontal("streak", *[f"cycle{k}" for k in range(2, spec.cycles + 1)])
    else:
        m = pl.col("streak")
    top = top.with_columns(m.cast(pl.Int64).alias("a"))
    if spec.rule == "turn-cap":
        return Measured(_gitagent(top, params))
    if spec.rule == "mistakes":
        top = _cline(top, params)
    elif spec.rule == "max":
        top = top.with_columns(pl.col("a").alias("h"))
    elif spec.rule == "stuck":
        top = _stuck(top, spec.cycles)
    else:
        raise ValueError(f"{base}: unknown sweep rule {spec.rule!r}")
    return Measured(_stop_here(top))


def _windowed(
    f: Frames, top: pl.DataFrame, params: dict[str, Any], window: int | None, similarity: float | None
) -> Measured:
    """pi's measure (rule ``window``) with its threshold-free text and script rules."""
    key = ("pi-texts", int(params.get("text_repeats") or 3), int(params.get("nested_repeats") or 2))
    if key not in f.cache:
        f.cache[key] = _pi_events(f, params)
    halts, acts = f.cache[key]
    return Measured(_pi(top, params, window or 10, similarity), halts, acts)


def _stuck(top: pl.DataFrame, cycles: int) -> pl.DataFrame:
    """loopscope's measure (rule ``stuck``): the streak, each cycle's full blocks and the drift run, each capped by
    the calls (blocks) since the last call of the run that made progress (``progress``)."""
    top = top.with_columns(pl.int_range(pl.len()).over("run").alias("_i"))
    top = top.with_columns(pl.when(pl.col("progress")).then(pl.col("_i")).alias("_p"))
    top = top.with_columns(
        (pl.col("_i") - pl.col("_p").shift(1).forward_fill().over("run")).fill_null(1 << 30).alias("_since")
    ).drop("_i", "_p")
    since = pl.col("_since")
    parts = [pl.min_horizontal("streak", since), pl.min_horizontal("drift_run", since)]
    parts += [pl.min_horizontal(f"cycle{k}", since // k) for k in range(2, cycles + 1)]
    return (
        top.with_columns(pl.max_horizontal(*parts).cast(pl.Int64).alias("a"))
        .with_columns(pl.col("a").alias("h"))
        .drop("_since")
    )


def _stop_here(top: pl.DataFrame) -> pl.DataFrame:
    return top.with_columns(
        pl.col("seq").alias("stop_seq"),
        pl.col("tok_after").alias("stop_tok"),
        pl.col("cost_after").alias("stop_cost"),
        pl.col("calls_after").alias("stop_calls"),
        pl.col("cls").alias("stop_cls"),
    )


def _cline(top: pl.DataFrame, params: dict[str, Any]) -> pl.DataFrame:
    """Cline also stops after ``mistakes`` error results in a row of tools other than the shell (a result that is
    not such an error clears the count; calls without a result leave it)."""
    limit = int(params.get("mistakes") or 0)
    if not limit:
        return top.with_columns(pl.col("a").alias("h"))
    err = pl.col("has_result") & (pl.col("fail_run") > 0) & ~pl.col("tool").is_in(list(params.get("shell_tools", ())))
    top = top.with_columns(
        err.alias("_err"), (pl.col("has_result") & ~err).cast(pl.Int64).cum_sum().over("run").alias("_grp")
    )
    top = top.with_columns(pl.col("_err").cast(pl.Int64).cum_sum().over("run", "_grp").alias("_mistakes"))
    h = pl.when(pl.col("_err") & (pl.col("_mistakes") >= limit)).then(ALWAYS).otherwise(pl.col("a"))
    return (
        top.with_columns(h.alias("h"))
        .with_columns(pl.max_horizontal("a", "h").alias("a"))
        .drop("_err", "_grp", "_mistakes")
    )


def _gitagent(top: pl.DataFrame, params: dict[str, Any]) -> pl.DataFrame:
    """gitagent acts after a call's result: calls without one neither count nor trip. The turn cap counts the
    assistant messages that issued a call with a result; a trip stops the run at the end of the first batch that
    terminated entirely — the trip's own message when the trip is its first call, else the next message."""
    max_turns = int(params.get("max_turns") or 0)
    tp = pl.when(pl.col("has_result")).then(pl.col("turn_pos"))
    prev_tp = tp.shift(1).forward_fill().over("run")
    new_turn = pl.col("has_result") & (prev_tp.is_null() | (pl.col("turn_pos") != prev_tp))
    top = top.with_columns(new_turn.cast(pl.Int64).cum_sum().over("run").alias("_turns"))
    capped = (pl.col("_turns") >= max_turns) if max_turns else pl.lit(False)
    top = top.with_columns(
        pl.when(~pl.col("has_result")).then(0).when(capped).then(ALWAYS).otherwise(pl.col("a")).alias("a")
    )
    top = top.with_columns(pl.col("a").alias("h"))
    msgs = (
        top.group_by("run", "turn_pos", maintain_order=True)
        .agg(pl.col("seq").min().alias("_first"), pl.col("seq").max().alias("_last"))
        .with_columns(pl.col("_last").shift(-1).over("run").alias("_next_last"))
    )
    top = top.join(msgs, on=["run", "turn_pos"], how="left", maintain_order="left")
    top = top.with_columns(
        pl.when(pl.col("seq") == pl.col("_first"))
        .then(pl.col("_last"))
        .otherwise(pl.col("_next_last"))
        .alias("stop_seq")
    )
    own = top.select(
        "sidx",
        pl.col("seq").alias("stop_seq"),
        pl.col("tok_after").alias("stop_tok"),
        pl.col("cost_after").alias("stop_cost"),
        pl.col("calls_after").alias("stop_calls"),
        pl.col("cls").alias("stop_cls"),
    )
    return top.join(own, on=["sidx", "stop_seq"], how="left", maintain_order="left").drop(
        "_turns", "_first", "_last", "_next_last"
    )


def _pi(top: pl.DataFrame, params: dict[str, Any], window: int, similarity: float | None) -> pl.DataFrame:
    col = WINDOW_COLUMNS.get(window)
    if col is None:
        raise ValueError(f"window {window} is not a stored window size ({', '.join(map(str, WINDOW_COLUMNS))})")
    m = pl.col(col).cast(pl.Int64)
    same_run = pl.col("run") == pl.col("run").shift(1)
    if similarity is not None and params.get("near_identical_calls", True):
        exact_only = list(params.get("exact_only_tools") or ())
        link = (pl.col("streak") > 1) | ((pl.col("sim_prev") >= similarity) & ~pl.col("tool").is_in(exact_only))
        link = (link & same_run).fill_null(False)
        pos = pl.int_range(pl.len(), dtype=pl.Int64)
        start = pl.when(~link).then(pos).forward_fill()
        m = pl.max_horizontal(m, (pos - start + 1).clip(upper_bound=window + 1))
    fails = int(params.get("fails") or 3)
    fail_block = (
        same_run & (pl.col("tool") == pl.col("tool").shift(1)) & (pl.col("fail_run").shift(1) >= fails)
    ).fill_null(False)
    excluded = pl.col("tool").is_in(list(params.get("exclude_tools") or ())) | (pl.col("tool") == "loop_ack")
    b = pl.when(excluded).then(0).when(fail_block).then(ALWAYS).otherwise(m)
    top = top.with_columns(b.alias("a")).with_row_index("_row")
    # The abort: blocked again after an earlier call with the same key was blocked in the run.
    by_key = top.select("_row", "run", "key", "a").sort("run", "key", "_row")
    seg = (pl.col("run") != pl.col("run").shift(1)) | (pl.col("key") != pl.col("key").shift(1))
    by_key = by_key.with_columns(seg.fill_null(True).cum_sum().alias("_seg"))
    by_key = by_key.with_columns(pl.min_horizontal("a", prev_max("a", "_seg")).alias("h")).select("_row", "h")
    top = top.join(by_key, on="_row", maintain_order="left").drop("_row")
    return _stop_here(top)


def prev_max(col: str, seg: str, floor: int = 0) -> pl.Expr:
    """The largest ``col`` over the earlier rows of the same segment (``floor`` when none), for a frame whose
    segments are contiguous and numbered increasingly (``seg``) and whose ``col`` lies in [0, ALWAYS]: one global
    cumulative maximum over ``col + seg * 4 * ALWAYS``, far faster than a windowed one over many small groups."""
    off = pl.col(seg).cast(pl.Int64) * (4 * ALWAYS)
    best = (pl.col(col).cast(pl.Int64) + off).cum_max().shift(1) - off
    same = pl.col(seg) == pl.col(seg).shift(1)
    return pl.when(same.fill_null(False)).then(best).otherwise(floor)


def _pi_events(f: Frames, params: dict[str, Any]) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """pi's rules that no swept setting changes. Text, from the stored counters: a message hits when a rule's
    counter reaches ``text_repeats``; the first hit of a run steers (a warning on the message's first call), the
    second aborts the run at that message (its halting call is the first call of that message or a later one of
    the run). Scripts: a nested call repeated ``nested_repeats`` times inside its script is blocked (a warning)."""
    limit = int(params.get("nested_repeats") or 2)
    excluded = list(params.get("exclude_tools") or ())
    nested = f.calls.filter(
        pl.col("nested") & (pl.col("nested_repeat") >= limit) & ~pl.col("tool").is_in(excluded)
    ).select("sidx", "seq", "run")
    if f.texts is None or f.texts.height == 0:
        return None, nested
    t = int(params.get("text_repeats") or 3)
    hit = pl.max_horizontal("sentence_repeats", "same_count", "similar_run", "similar_count") >= t
    x = f.texts.filter(hit).with_columns(pl.int_range(pl.len()).over("run").alias("_hit"))
    firsts = (
        f.calls.group_by("run", "turn_pos")
        .agg(pl.col("seq").min())
        .join(f.calls.select("run", "seq", "cls", "calls_after"), on=["run", "seq"])
    )
    steer = (
        x.filter(pl.col("_hit") == 0)
        .join(firsts, left_on=["run", "turn_index"], right_on=["run", "turn_pos"])
        .select("sidx", "seq", "run")
    )
    # Both sides are sorted on the key, hence within every run too (polars cannot check that with ``by``).
    abort = (
        x.filter(pl.col("_hit") == 1)
        .sort("turn_index")
        .join_asof(
            firsts.sort("turn_pos"),
            left_on="turn_index",
            right_on="turn_pos",
            by="run",
            strategy="forward",
            check_sortedness=False,
        )
    )
    # The abort marks its call like a halting call (seq + 0.25): before the message's calls run, so it wins a tie
    # with a call of that message (the sweep puts these events first and sorts stably).
    halts = abort.select(
        "run",
        "sidx",
        pl.col("seq").alias("stop_seq"),
        pl.col("tok_after").alias("stop_tok"),
        pl.col("cost_after").alias("stop_cost"),
        pl.col("calls_after").fill_null(0).alias("stop_calls"),
        pl.col("cls").fill_null(NONE).alias("stop_cls"),
        (pl.col("seq").cast(pl.Float64) + 0.25).fill_null(float("inf")).alias("halt_at"),
    )
    acts = pl.concat([steer, abort.filter(pl.col("seq").is_not_null()).select("sidx", "seq", "run"), nested])
    return halts, acts


# -- the sweep ---------------------------------------------------------------------------------------------------------
def first_reaching(df: pl.DataFrame, col: str, group: str, lo: int, hi: int, keep: list[str]) -> pl.DataFrame:
    """For every threshold ``t`` in ``lo..hi`` and every group: the first row (in frame order) whose ``col`` is at
    least ``t`` — as rows ``(group, t, *keep)``. Only rows that raise the group's running maximum can be such a row;
    each decides the thresholds between the previous maximum and its own value. Groups must be contiguous."""
    d = df.filter(pl.col(col) >= lo).select(group, col, *[k for k in keep if k not in (group, col)])
    seg = (pl.col(group) != pl.col(group).shift(1)).fill_null(True).cum_sum()
    d = d.with_columns(seg.alias("_seg")).with_columns(prev_max(col, "_seg", lo - 1).alias("_prev"))
    d = d.filter(pl.col(col) > pl.col("_prev"))
    start = pl.max_horizontal(pl.col("_prev") + 1, pl.lit(lo))
    end = pl.min_horizontal(pl.col(col), pl.lit(hi))
    d = d.filter(start <= end).with_columns(pl.int_ranges(start, end + 1).alias("t"))
    return d.explode("t").with_columns(pl.col("t").cast(pl.Int64)).drop("_prev", "_seg")


_HALT_COLS = ["run", "t", "sidx", "halt_at", *_STOP]


_SUMMED = [
    "halts",
    "halts_stuck",
    "halts_progress",
    "halts_none",
    "halts_benign",
    "sessions_halted",
    "false_halt_sessions",
    "tokens_saved",
    "calls_saved",
    "sessions_warned",
    "stuck_caught",
    "false_warn_sessions",
]
"""The integer figures of a sweep row: counts over halts, episodes or sessions, so the sum of a batch of sessions'
figures is the corpus's (a session lies in one batch; ``sessions_*`` count distinct sessions)."""
_VARIANT = ["window", "similarity"]


@dataclass
class SweepParts:
    """One batch of sessions' share of every sweep row, to be added up over batches (``finish_sweep``).

    ``sums``: per setting (``window``, ``similarity``, ``warn``, ``halt``), the ``_SUMMED`` figures. The two figures
    that are not sums of per-batch figures keep their inputs: ``costs`` holds each halt's ``stop_cost`` (``window``,
    ``similarity``, ``halt``), because a float sum taken batch by batch rounds differently from the one sum over the
    corpus; ``detect`` counts the caught episodes by calls to detection ``d`` (``window``, ``similarity``, ``warn``,
    ``halt``, ``d``, ``n``), because a median of medians is not the median."""

    sums: pl.DataFrame
    costs: pl.DataFrame
    detect: pl.DataFrame


def variant_parts(
    meas: Measured, f: Frames, settings: list[tuple[int, int]], window: int | None, similarity: float | None
) -> SweepParts:
    """The figures of every (warn, halt) pair in ``settings`` for one set of measures over ``f``'s sessions, as parts
    that add up over batches of sessions."""
    lits = [pl.lit(window, pl.Int64).alias("window"), pl.lit(similarity, pl.Float64).alias("similarity")]
    s = pl.DataFrame(settings, schema={"warn": pl.Int64, "halt": pl.Int64}, orient="row")
    if not settings:
        return SweepParts(
            s.with_columns(*lits, *[pl.lit(0, pl.Int64).alias(c) for c in _SUMMED]),
            pl.DataFrame(schema={**_COST_SCHEMA}),
            pl.DataFrame(schema={**_DETECT_SCHEMA}),
        )
    top = meas.top
    warns = sorted({w for w, _ in settings})
    halts = sorted({h for _, h in settings})
    lo, hi = min(warns + halts), max(warns + halts)
    thresholds = pl.DataFrame({"t": halts}, schema={"t": pl.Int64})

    # Halts: per run the first call whose halt measure reaches h (a gitagent trip with no batch left stops nothing),
    # or a threshold-free halt (pi's text rules) when that comes first.
    ht = (
        first_reaching(top, "h", "run", lo, hi, ["sidx", "seq", *_STOP])
        .filter(pl.col("t").is_in(halts) & pl.col("stop_seq").is_not_null())
        .with_columns((pl.col("seq").cast(pl.Float64) + 0.25).alias("halt_at"))
    )
    stops = ht.select(_HALT_COLS)
    if meas.halts is not None and meas.halts.height:
        extra = meas.halts.join(thresholds, how="cross").select(_HALT_COLS)
        stops = (
            pl.concat([extra, stops], how="vertical_relaxed")
            .sort("halt_at", maintain_order=True)
            .group_by("run", "t", maintain_order=True)
            .first()
        )
    not_stuck = pl.col("stop_cls") != STUCK
    per_halt = stops.group_by(pl.col("t").alias("halt")).agg(
        pl.len().alias("halts"),
        *[(pl.col("stop_cls") == k).sum().alias(f"halts_{name}") for k, name in enumerate(CLASSES)],
        pl.col("sidx").n_unique().alias("sessions_halted"),
        pl.col("sidx").filter(not_stuck).n_unique().alias("false_halt_sessions"),
        pl.col("stop_tok").sum().alias("tokens_saved"),
        pl.col("stop_calls").sum().alias("calls_saved"),
    )
    costs = stops.select(*lits, pl.col("t").alias("halt"), pl.col("stop_cost").cast(pl.Float64))
    warned = first_reaching(top, "a", "run", lo, hi, ["sidx"]).select("t", "sidx")
    if meas.acts is not None and meas.acts.height:
        warned = pl.concat(
            [
                warned,
                meas.acts.select("sidx")
                .join(pl.DataFrame({"t": warns}, schema={"t": pl.Int64}), how="cross")
                .select("t", "sidx"),
            ]
        )
    warned = warned.group_by(pl.col("t").alias("warn")).agg(pl.col("sidx").n_unique().alias("sessions_warned"))
    false_warned = _false_warns(top, meas.acts, f, s, stops, lo, hi)

    # Episodes: the first act inside each (a call whose act measure reaches w, or a threshold-free warning), caught
    # when it comes before its run's halt.
    mem = f.members.filter(~pl.col("nested")).join(top.select("sidx", "seq", "a"), on=["sidx", "seq"])
    det = first_reaching(mem.sort("ep", "seq"), "a", "ep", lo, hi, ["seq", "run"]).select("ep", "t", "seq", "run")
    if meas.acts is not None and meas.acts.height:
        fixed = (
            f.members.select("ep", "sidx", "seq")
            .join(meas.acts, on=["sidx", "seq"])
            .group_by("ep")
            .agg(pl.col("seq").min(), pl.col("run").sort_by("seq").first())
        )
        fixed = fixed.join(pl.DataFrame({"t": warns}, schema={"t": pl.Int64}), how="cross").select(det.columns)
        det = pl.concat([det, fixed]).sort("seq").group_by("ep", "t", maintain_order=True).first()
    det = det.join(f.episodes.select("ep", "first_seq"), on="ep").rename({"t": "warn", "seq": "det_seq"})
    trips = stops.select("run", pl.col("t").alias("halt"), "halt_at")
    caught = (
        det.join(s, on="warn")
        .join(trips, on=["run", "halt"], how="left")
        .filter(pl.col("halt_at").is_null() | (pl.col("det_seq") <= pl.col("halt_at")))
        .select("warn", "halt", (pl.col("det_seq") - pl.col("first_seq") + 1).cast(pl.Int64).alias("d"))
    )
    detect = caught.group_by("warn", "halt", "d").agg(pl.len().cast(pl.Int64).alias("n")).select(*lits, pl.all())
    counted = caught.group_by("warn", "halt").agg(pl.len().alias("stuck_caught"))

    out = (
        s.join(per_halt, on="halt", how="left")
        .join(warned, on="warn", how="left")
        .join(counted, on=["warn", "halt"], how="left")
        .join(false_warned, on=["warn", "halt"], how="left")
    )
    sums = out.select(*lits, "warn", "halt", *[pl.col(c).fill_null(0).cast(pl.Int64) for c in _SUMMED])
    return SweepParts(
        sums,
        costs.select(list(_COST_SCHEMA)).cast(_COST_SCHEMA),
        detect.select(list(_DETECT_SCHEMA)).cast(_DETECT_SCHEMA),
    )


_COST_SCHEMA: dict[str, Any] = {"window": pl.Int64, "similarity": pl.Float64, "halt": pl.Int64, "stop_cost": pl.Float64}
_DETECT_SCHEMA: dict[str, Any] = {
    "window": pl.Int64,
    "similarity": pl.Float64,
    "warn": pl.Int64,
    "halt": pl.Int64,
    "d": pl.Int64,
    "n": pl.Int64,
}


def finish_sweep(parts: list[SweepParts], sessions: int, stuck_episodes: int) -> pl.DataFrame:
    """The sweep rows of the batches' ``parts`` added up (every batch holds every setting, in the same order), with
    the corpus's ``sessions`` and ``stuck_episodes``: the same rows as one sweep over all the sessions at once."""
    if not parts:
        return pl.DataFrame(schema=SWEEP_SCHEMA)
    keys = [*_VARIANT, "warn", "halt"]
    sums = pl.concat([p.sums for p in parts]).group_by(keys, maintain_order=True).agg(pl.col(_SUMMED).sum())
    costs = pl.concat([p.costs for p in parts]).rechunk()
    # One sum per (variant, halt) over the halts in corpus order, as the one-pass sweep took it.
    dollars = costs.group_by([*_VARIANT, "halt"], maintain_order=True).agg(
        pl.col("stop_cost").sum().alias("dollars_saved")
    )
    detect = pl.concat([p.detect for p in parts])
    medians = (
        detect.group_by([*keys, "d"])
        .agg(pl.col("n").sum())
        .select(*keys, pl.col("d").repeat_by("n"))
        .explode("d")
        .group_by(keys)
        .agg(pl.col("d").median().alias("median_calls_to_detect"))
    )
    out = sums.join(dollars, on=[*_VARIANT, "halt"], how="left", nulls_equal=True, maintain_order="left").join(
        medians, on=keys, how="left", nulls_equal=True, maintain_order="left"
    )
    out = out.with_columns(
        pl.col("dollars_saved").fill_null(0.0).cast(pl.Float64),
        pl.lit(sessions, pl.Int64).alias("sessions"),
        pl.lit(stuck_episodes, pl.Int64).alias("stuck_episodes"),
    ).with_columns(
        (pl.col("false_halt_sessions") / pl.lit(max(sessions, 1))).alias("false_halt_rate"),
        (pl.col("false_warn_sessions") / pl.lit(max(sessions, 1))).alias("false_warn_rate"),
    )
    return out.select([pl.col(c).cast(t) for c, t in SWEEP_SCHEMA.items()])


def sweep_variant(
    meas: Measured, f: Frames, settings: list[tuple[int, int]], window: int | None, similarity: float | None
) -> pl.DataFrame:
    """The figures of every (warn, halt) pair in ``settings`` for one set of measures over all of ``f``."""
    return finish_sweep([variant_parts(meas, f, settings, window, similarity)], f.sessions, f.episodes.height)


def _false_warns(
    top: pl.DataFrame, acts: pl.DataFrame | None, f: Frames, s: pl.DataFrame, stops: pl.DataFrame, lo: int, hi: int
) -> pl.DataFrame:
    """Per (warn, halt): sessions where the guard acts (warns, or halts) on a call that is not stuck before its run
    stops. A warning blocks the call in open-codesign and pi, so a warning on healthy work costs too."""
    healthy = top.filter(pl.col("cls") != STUCK)
    first = first_reaching(healthy, "a", "run", lo, hi, ["sidx", "seq"]).select(
        "run", "sidx", "seq", pl.col("t").alias("warn")
    )
    if acts is not None and acts.height:
        fixed = (
            acts.join(f.calls.select("sidx", "seq", "cls"), on=["sidx", "seq"])
            .filter(pl.col("cls") != STUCK)
            .group_by("run")
            .agg(pl.col("sidx").first(), pl.col("seq").min())
        )
        warns = s.select("warn").unique()
        first = (
            pl.concat([first, fixed.join(warns, how="cross").select(first.columns)])
            .sort("seq")
            .group_by("run", "warn", maintain_order=True)
            .first()
        )
    trips = stops.select("run", pl.col("t").alias("halt"), "halt_at")
    return (
        first.join(s, on="warn")
        .join(trips, on=["run", "halt"], how="left")
        .filter(pl.col("halt_at").is_null() | (pl.col("seq") <= pl.col("halt_at")))
        .group_by("warn", "halt")
        .agg(pl.col("sidx").n_unique().alias("false_warn_sessions"))
    )


def fixed_false_halts(f: Frames, base: str, params: dict[str, Any]) -> int:
    """Sessions that rules no swept setting changes (pi's text rules) halt outside stuck loops: a floor under every
    row's ``false_halt_sessions``."""
    if not BASES[base].text_rules:
        return 0
    halts = measures(base, f, params).halts
    if halts is None:
        return 0
    return halts.filter(pl.col("stop_cls") != STUCK)["sidx"].n_unique()
