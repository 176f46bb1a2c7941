"""The plain results that guard replay and calibration hand to the report: small frozen types around polars frames,
checked for the columns the report reads, so the report depends on their shape and not on the code that made them.
Either may be absent: the pages then say "not computed" where those sections would be."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

from analyzer.errors import ReportInputError


def _require(df: pl.DataFrame, needed: tuple[str, ...], what: str) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ReportInputError(f"{what} is missing column(s) {', '.join(missing)}; has {', '.join(df.columns)}")


REPLAY_COLUMNS = (
    "session_id",
    "policy",
    "first_warn_call_id",
    "halt_call_id",
    "calls_after_halt",
    "tokens_after_halt",
    "cost_after_halt_usd",
    "halt_on",
)


@dataclass(frozen=True)
class Replay:
    """Guard replay, one row per (preset, session) — every preset's rows in one frame.

    Columns: ``session_id``; ``policy`` (preset name); ``first_warn_call_id`` and ``halt_call_id`` (the transcript's
    call ids where the guard would first warn / halt, null if never); ``calls_after_halt``, ``tokens_after_halt``,
    ``cost_after_halt_usd`` (what a halt would have saved); ``halt_on`` — ``"stuck"`` when the halt hit a stuck loop,
    anything else (``"progress"``) when it interrupted healthy work (a false halt), null without a halt. Extra columns
    are ignored.
    """

    frame: pl.DataFrame

    def __post_init__(self) -> None:
        _require(self.frame, REPLAY_COLUMNS, "replay frame")

    @classmethod
    def from_presets(cls, frames: Mapping[str, pl.DataFrame]) -> Replay:
        """Join per-preset frames (without a ``policy`` column) into one."""
        parts = [
            f.with_columns(pl.lit(name).alias("policy")) if "policy" not in f.columns else f
            for name, f in frames.items()
        ]
        return cls(
            pl.concat(parts, how="diagonal_relaxed")
            if parts
            else pl.DataFrame(schema={c: pl.String for c in REPLAY_COLUMNS})
        )


SWEEP_COLUMNS = ("warn", "halt", "tokens_saved", "false_halt_rate")
SWEEP_OPTIONAL = (
    "window",
    "similarity",
    "stuck_caught",
    "median_calls_to_detect",
    "dollars_saved",
    "false_halt_sessions",
)


@dataclass(frozen=True)
class Recommendation:
    """The setting calibration recommends and the exact text to paste into each guard (guard name -> snippet)."""

    warn: int
    halt: int
    window: int | None = None
    similarity: float | None = None
    target_false_halt_rate: float | None = None
    stuck_caught: int | None = None
    tokens_saved: int | None = None
    dollars_saved: float | None = None
    false_halt_rate: float | None = None
    settings: Mapping[str, str] = field(default_factory=dict)
    rationale: str | None = None


@dataclass(frozen=True)
class Calibration:
    """A threshold sweep over the store.

    ``sweep``: one row per setting with ``warn``, ``halt``, ``tokens_saved``, ``false_halt_rate`` (0..1) and, when
    known, ``window``, ``similarity``, ``stuck_caught`` (stuck episodes caught), ``median_calls_to_detect``,
    ``dollars_saved``, ``false_halt_sessions``. ``frontier``: the sweep rows on the trade-off frontier (computed from
    the sweep when not given). ``labels``: where "stuck" came from (``"proxy"`` or a labels file), shown on the page.
    """

    sweep: pl.DataFrame
    frontier: pl.DataFrame | None = None
    recommendation: Recommendation | None = None
    labels: str | None = None

    def __post_init__(self) -> None:
        _require(self.sweep, SWEEP_COLUMNS, "calibration sweep")
        if self.frontier is not None:
            _require(self.frontier, SWEEP_COLUMNS, "calibration frontier")


# ---- page contexts -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Totals:
    """The corpus in scope and what its loops cost: the report's headline figures."""

    sessions: int
    calls: int
    tokens: int
    cost_usd: float
    loop_sessions: int
    loop_calls: int
    loop_tokens: int
    loop_cost_usd: float
    estimated_tokens: int  # repeated text in loops of sessions that carry no usage
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    stuck_tokens: int | None = None  # wasted: tokens of the turns that repeated a stuck loop (None: not computed)
    stuck_cost_usd: float | None = None  # their cost
