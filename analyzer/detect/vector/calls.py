"""The call signals of a whole group of sessions at once, as polars expressions: the batch scan's detector core.

An independent implementation of ``core.CallDetector`` (the streaming reference a live agent embeds): the same
signals, computed over a frame sorted by session and ``seq`` instead of call by call, so Rust does the loops. A
property test feeds random sequences to both and requires equal output.

How each streaming counter becomes a frame expression (a *scope* is the history between two resets: a session, cut
at every user turn when ``reset_on_user``; top-level calls are the non-exempt calls without a parent):

- ``streak``: the run of equal keys ending here, ``1 + run_len(key == previous key)``;
- ``cycleK``: the run ``L`` of positions whose key equals the key K calls back, ``1 + L // K``, and 0 while the last
  K keys are one key repeated (``streak >= K``) or the scope is shorter than K calls;
- ``windowW``: 1 + how many of the W previous calls of the scope have this key (W shifted comparisons);
- ``sim_prev`` and ``drift_run``: Jaccard of argument words with the previous call when it used the same tool; the
  drift run is the run of such calls at or above the bar or with the same key;
- ``fail_run``: the run of failed calls of one tool; ``same_result``: the previous call with this key in the scope;
- nested calls: each script's last ``script_memory`` calls are joined to it as (call, earlier call) pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from analyzer.detect.rules import (
    CYCLE_PERIODS,
    CYCLE_SIGNALS,
    SIGNAL_COLUMNS,
    SIGNAL_FIELDS,
    SIGNALS,
    WINDOWS,
    is_mutating,
)
from analyzer.detect.stream.calls import Config
from analyzer.detect.vector.frames import ROW, changed, jaccard, pos_in_segment, row_index, run_len, scope_starts
from analyzer.detect.vector.words import args_words_series

PRE_ZERO = ("streak", *CYCLE_SIGNALS, "window5", "window_count", "window20")
SCHEMA: dict[str, pl.DataType] = {c.name: c.polars for c in SIGNALS.columns if c.name in SIGNAL_FIELDS}

WordsFn = Callable[[pl.Series], pl.Series]


@dataclass
class CallFrames:
    """Signals (``SIGNAL_FIELDS``, one row per input row, same order), ``shared`` (argument words a top-level call
    shares with the previous one when it used the same tool, else null: drift episodes need 2) and the nested links:
    ``row`` repeats the earlier call ``partner`` of its script (row numbers of the input frame)."""

    signals: pl.DataFrame
    shared: pl.Series
    links: pl.DataFrame


def call_signals(calls: pl.DataFrame, config: Config | None = None, words: WordsFn = args_words_series) -> CallFrames:
    """Every call's signals; equal, call for call, to ``core.scan_calls`` over each session. ``calls``: sorted by
    session, then seq, with ``session_id, user_turn, tool, k`` (the action key as a number: calls are compared by
    their action, ``detect.semantics``), ``result_key`` (likewise), ``is_error, parent_call_id`` and ``args`` with
    ``action_args`` (canonical JSON; the action arguments, null where they equal the arguments: tokenised only for
    calls that meet a call of the same tool) or ``words`` (the distinct words of the action arguments,
    ``keys.args_words``, when the store keeps them)."""
    cfg = config or Config()
    exempt = pl.col("tool").is_in(sorted(cfg.exempt_tools)) if cfg.exempt_tools else pl.lit(False)
    text = ["words"] if "words" in calls.columns else ["args", *(["action_args"] if "action_args" in calls else [])]
    frame = calls.with_columns(row_index()).select(
        ROW,
        "tool",
        "k",
        *text,
        "result_key",
        "is_error",
        "parent_call_id",
        scope_starts("session_id", "user_turn", cfg.reset_on_user).cum_sum().alias("scope"),
        exempt.alias("exempt"),
    )
    mutating = [t for t in frame["tool"].unique().to_list() if t is not None and is_mutating(t)]
    top = frame.filter(~pl.col("exempt") & pl.col("parent_call_id").is_null())
    nested = frame.filter(~pl.col("exempt") & pl.col("parent_call_id").is_not_null())
    parts = [_top_level(top, cfg, mutating, words)]
    links = _empty_links()
    if nested.height:
        nested_sig, links = _nested(nested, cfg, mutating, words)
        parts.append(nested_sig)
    others = frame.filter(pl.col("exempt")).select(pl.col(ROW).alias("row"))
    if others.height:
        parts.append(others.select("row", *_exempt_signals()))
    out = pl.concat(parts, how="diagonal_relaxed").sort("row")
    return CallFrames(out.select(SIGNAL_FIELDS), out["shared"], links)


def _zeros(*names: str) -> list[pl.Expr]:
    return [pl.lit(0, pl.Int32).alias(n) for n in names]


def _exempt_signals() -> list[pl.Expr]:
    """An exempt call changes nothing and shows nothing (``stream.calls._EXEMPT``): every counter 0, nothing
    compared (null)."""
    return [pl.lit(0 if sql == "INTEGER" else None, SCHEMA[name]).alias(name) for name, sql, _ in SIGNAL_COLUMNS]


def _empty_links() -> pl.DataFrame:
    return pl.DataFrame(schema={"row": pl.Int64, "partner": pl.Int64})


def _with_words(frame: pl.DataFrame, need: pl.Series, words: WordsFn) -> pl.DataFrame:
    """Add the argument words ``w`` of the rows in ``need`` (an empty list elsewhere): the store's ``words`` when
    it has them, else tokenised here, each key once."""
    if "words" in frame.columns:
        return frame.with_columns(pl.col("words").fill_null(pl.lit([], pl.List(pl.String))).alias("w"))
    text = pl.coalesce("action_args", "args") if "action_args" in frame.columns else pl.col("args")
    keys = frame.filter(need).unique("k", keep="first").select("k", text.alias("args"))
    table = keys.select("k", words(keys["args"]).alias("w"))
    return frame.join(table, on="k", how="left", maintain_order="left").with_columns(
        pl.col("w").fill_null(pl.lit([], pl.List(pl.String)))
    )


def _progress(same: pl.Expr, neighbour_res: pl.Expr, err: pl.Expr, mutating: list[str]) -> pl.Expr:
    """``CallDetector.result``'s progress rule."""
    res = pl.col("result_key")
    return (
        pl.when(res.is_null() | err)
        .then(False)
        .when(same.is_not_null())
        .then(~same)
        .when(pl.col("tool").is_in(mutating))
        .then(True)
        .otherwise(neighbour_res.is_null() | (neighbour_res != res))
    )


def _same_result(prev_res: pl.Expr) -> pl.Expr:
    res = pl.col("result_key")
    return pl.when(prev_res.is_null() | res.is_null()).then(None).otherwise(prev_res == res)


def _top_level(top: pl.DataFrame, cfg: Config, mutating: list[str], words: WordsFn) -> pl.DataFrame:
    """Signals of the top-level calls: shifts inside the frame of top-level calls only, bounded by the scope."""
    f = top.rename({ROW: "row"}).with_columns(row_index())
    f = f.with_columns(pos_in_segment(changed("scope")).alias("t"))
    t, key, tool = pl.col("t"), pl.col("k"), pl.col("tool")

    def back(d: int) -> pl.Expr:  # the key d top-level calls back, in this scope, is this call's key
        return (t >= d) & (key == key.shift(d)).fill_null(False)

    same_tool = ((t >= 1) & (tool == tool.shift(1))).fill_null(False)
    err = pl.col("is_error").fill_null(False)
    f = f.with_columns(
        (1 + run_len(back(1))).alias("streak"),
        *[run_len(back(k)).alias(f"_m{k}") for k in CYCLE_PERIODS],
        *[(1 + pl.sum_horizontal([back(d) for d in range(1, w + 1)])).alias(f"_w{w}") for w in WINDOWS],
        same_tool.alias("_same_tool"),
        err.alias("_err"),
        (err & (t >= 1) & err.shift(1).fill_null(False) & same_tool).alias("_fail_cont"),
    )
    f = f.with_columns(_previous_same_key(f))
    need = f["_same_tool"] | f["_same_tool"].shift(-1).fill_null(False)
    f = _with_words(f, need, words)
    w, prev_w = pl.col("w"), pl.col("w").shift(1)
    inter = w.list.set_intersection(prev_w).list.len()
    sim = pl.when(pl.col("_same_tool")).then(jaccard(w, prev_w, inter))
    f = f.with_columns(sim.alias("sim_prev"), pl.when(pl.col("_same_tool")).then(inter).alias("shared"))
    drift_link = (pl.col("_same_tool") & ((pl.col("sim_prev") >= cfg.similarity) | (key == key.shift(1)))).fill_null(
        False
    )
    same = _same_result(pl.col("_prev_res"))
    neighbour_res = pl.when(pl.col("_same_tool")).then(pl.col("result_key").shift(1))
    streak = pl.col("streak")
    return f.with_columns(
        *[
            pl.when((t >= k - 1) & (streak < k)).then(1 + pl.col(f"_m{k}") // k).otherwise(0).alias(f"cycle{k}")
            for k in CYCLE_PERIODS
        ],
        pl.col("_w5").alias("window5"),
        pl.col("_w10").alias("window_count"),
        pl.col("_w20").alias("window20"),
        (1 + run_len(drift_link)).alias("drift_run"),
        pl.when(pl.col("_err")).then(1 + run_len(pl.col("_fail_cont"))).otherwise(0).alias("fail_run"),
        same.alias("same_result"),
        _progress(same, neighbour_res, pl.col("_err"), mutating).alias("progress"),
        pl.lit(0).alias("nested_repeat"),
    ).select("row", *[pl.col(c).cast(SCHEMA[c]) for c in SIGNAL_FIELDS], pl.col("shared").cast(pl.Int32))


def _previous_same_key(f: pl.DataFrame) -> pl.Series:
    """The result of the previous call with the same key in the scope (``same_result``'s reference): rows sorted by
    (scope, key, position), shifted, and put back (a sort is several times faster than ``shift().over()``)."""
    g = f.select(ROW, "scope", "k", "result_key").sort(["scope", "k", ROW])
    g = g.with_columns(
        pl.when(~(changed("scope") | changed("k"))).then(pl.col("result_key").shift(1)).alias("_prev_res")
    )
    return g.sort(ROW)["_prev_res"]


def _nested(
    nested: pl.DataFrame, cfg: Config, mutating: list[str], words: WordsFn
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Signals of calls made inside scripts: each is paired with its script's last ``script_memory`` calls."""
    f = nested.rename({ROW: "row"}).sort(["scope", "parent_call_id", "row"]).with_columns(row_index())
    start = changed("scope") | changed("parent_call_id")
    f = f.with_columns(pos_in_segment(start).alias("q"))
    f = _with_words(f, pl.Series([True] * f.height), words)
    tool = pl.col("tool")
    err = pl.col("is_error").fill_null(False)
    memory = cfg.script_memory
    pairs = (
        f.select(ROW, pl.int_ranges(1, pl.min_horizontal("q", pl.lit(memory)) + 1).alias("d"))
        .explode("d")
        .drop_nulls("d")
        .with_columns((pl.col(ROW) - pl.col("d")).alias("p"))
    )
    left = f.select(ROW, "row", "k", "tool", "w")
    right = f.select(
        pl.col(ROW).alias("p"),
        pl.col("row").alias("p_row"),
        pl.col("k").alias("p_k"),
        pl.col("tool").alias("p_tool"),
        pl.col("w").alias("p_w"),
        pl.col("result_key").alias("p_res"),
    )
    pairs = pairs.join(left, on=ROW).join(right, on="p")
    same_key = pl.col("k") == pl.col("p_k")
    pairs = pairs.with_columns(
        same_key.alias("same_key"),
        (
            same_key | ((pl.col("tool") == pl.col("p_tool")) & (jaccard(pl.col("w"), pl.col("p_w")) >= cfg.similarity))
        ).alias("match"),
    )
    per_call = (
        pairs.sort([ROW, "d"])
        .group_by(ROW)
        .agg(
            pl.col("match").sum().alias("_matches"),
            pl.col("p_res").filter(pl.col("same_key")).first().alias("_prev_res"),  # the latest identical call
            pl.col("p_res")
            .filter((pl.col("d") == 1) & (pl.col("tool") == pl.col("p_tool")))
            .first()
            .alias("_neighbour_res"),
        )
    )
    f = f.join(per_call, on=ROW, how="left", maintain_order="left")
    fail_cont = err & (pl.col("q") >= 1) & err.shift(1).fill_null(False) & (tool == tool.shift(1)).fill_null(False)
    same = _same_result(pl.col("_prev_res"))
    sig = (
        f.with_columns(fail_cont.alias("_fail_cont"), err.alias("_err"))
        .with_columns(
            *_zeros(*PRE_ZERO, "drift_run"),
            pl.lit(None, pl.Float64).alias("sim_prev"),
            pl.when(pl.col("_err")).then(1 + run_len(pl.col("_fail_cont"))).otherwise(0).alias("fail_run"),
            same.alias("same_result"),
            _progress(same, pl.col("_neighbour_res"), pl.col("_err"), mutating).alias("progress"),
            (1 + pl.col("_matches").fill_null(0)).alias("nested_repeat"),
        )
        .select("row", *[pl.col(c).cast(SCHEMA[c]) for c in SIGNAL_FIELDS])
    )
    links = pairs.filter(pl.col("match")).select("row", pl.col("p_row").alias("partner")).sort(["row", "partner"])
    return sig, links
