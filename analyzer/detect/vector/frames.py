"""Building blocks of the vectorised detectors: positions, runs and reset scopes as polars expressions.

The streaming core carries counters from call to call; over a whole sorted frame the same counters are positions
inside runs. Every helper takes a non-null boolean column and the row index ``_i`` (Int64, 0..n-1), so a counter is
one forward fill and a subtraction, with no group-by.
"""

from __future__ import annotations

import polars as pl

ROW = "_i"


def row_index() -> pl.Expr:
    return pl.int_range(pl.len(), dtype=pl.Int64).alias(ROW)


def run_len(flag: pl.Expr) -> pl.Expr:
    """How many rows in a row, ending at this one, have ``flag`` true (0 where it is false)."""
    i = pl.col(ROW)
    return i - pl.when(~flag).then(i).forward_fill().fill_null(-1)


def pos_in_segment(start: pl.Expr) -> pl.Expr:
    """0-based position since the last row where ``start`` is true (true on the first row)."""
    i = pl.col(ROW)
    return i - pl.when(start).then(i).forward_fill()


def changed(col: str) -> pl.Expr:
    """The value differs from the previous row's (true on the first row)."""
    return (pl.col(col) != pl.col(col).shift(1)).fill_null(True)


def scope_starts(session: str, user_turn: str, reset_on_user: bool) -> pl.Expr:
    """Where the core's history starts afresh: at each session, and (``reset_on_user``) wherever the user turn
    differs from the last non-null one of the session. A null user turn changes nothing, as in ``CallDetector``."""
    new_session = changed(session)
    if not reset_on_user:
        return new_session
    ut = pl.col(user_turn)
    i = pl.col(ROW)
    session_start = pl.when(new_session).then(i).forward_fill()
    last_known = pl.when(ut.is_not_null()).then(i).forward_fill().shift(1)  # the last non-null row before this one
    prev_ut = ut.forward_fill().shift(1)
    turn_changed = ut.is_not_null() & (last_known >= session_start) & (ut != prev_ut)
    return new_session | turn_changed.fill_null(False)


def jaccard(a: pl.Expr, b: pl.Expr, inter: pl.Expr | None = None) -> pl.Expr:
    """``keys.jaccard`` of two columns of distinct-word lists: |A∩B| / |A∪B|, 0.0 when either is empty (``inter``:
    |A∩B| when the caller has it already)."""
    la, lb = a.list.len(), b.list.len()
    if inter is None:
        inter = a.list.set_intersection(b).list.len()
    return pl.when((la == 0) | (lb == 0)).then(pl.lit(0.0)).otherwise(inter / (la + lb - inter))
