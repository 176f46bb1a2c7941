"""The report's inputs beyond the store (guard replay, calibration) and the typed context of each page.

Replay and calibration are computed elsewhere (``analyzer.guards.policies``, ``analyzer.calibrate``); the report takes their
results as plain polars frames wrapped in the small types below, so it depends on their *shape*, not their code.
Either may be absent: the pages then say "not computed" where those sections would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from analyzer.errors import LoopscopeError


class ReportInputError(LoopscopeError):
    """A replay or calibration frame handed to the report lacks a column the report needs."""

    exit_code = 2


def _require(df: pl.DataFrame, needed: tuple[str, ...], what: str) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ReportInputError(f"{what} is missing column(s) {', '.join(missing)}; has {', '.join(df.columns)}")


REPLAY_COLUMNS = ("session_id", "policy", "first_warn_call_id", "halt_call_id", "calls_after_halt",
                  "tokens_after_halt", "cost_after_halt_usd", "halt_on")


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
    def from_presets(cls, frames: Mapping[str, pl.DataFrame]) -> "Replay":
        """Join per-preset frames (without a ``policy`` column) into one."""
        parts = [f.with_columns(pl.lit(name).alias("policy")) if "policy" not in f.columns else f
                 for name, f in frames.items()]
        return cls(pl.concat(parts, how="diagonal_relaxed") if parts else
                   pl.DataFrame(schema={c: pl.String for c in REPLAY_COLUMNS}))


SWEEP_COLUMNS = ("warn", "halt", "tokens_saved", "false_halt_rate")
SWEEP_OPTIONAL = ("window", "similarity", "stuck_caught", "median_calls_to_detect", "dollars_saved",
                  "false_halt_sessions")


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
class Chart:
    """One plotly figure: ``figure`` is a plain ``{"data", "layout"}`` dict that reaches the page only through
    ``tojson`` inside a ``<script type="application/json">`` block."""

    id: str
    title: str
    figure: dict[str, Any]
    note: str | None = None
    wide: bool = False


@dataclass(frozen=True)
class Kpi:
    label: str
    total: str
    in_loops: str | None = None
    share: float | None = None  # 0..1


@dataclass(frozen=True)
class Table:
    """Rows already formatted as text (or ``Link``); ``numeric`` marks right-aligned columns."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    numeric: frozenset[int] = frozenset()
    more: int = 0  # rows left out


@dataclass(frozen=True)
class Link:
    text: str
    href: str


@dataclass(frozen=True)
class PageMeta:
    """What every page's layout needs: title, links between pages, how the data was scoped."""

    title: str
    generated_at: datetime
    version: str
    scope: str
    redacted: bool
    nav: tuple[Link, ...] = ()
    page_id: str = "index"  # the element id of the page (a section's id in a single-file report)
    current: str = ""  # the nav entry this page is


@dataclass(frozen=True)
class IndexContext:
    meta: PageMeta
    kpis: list[Kpi]
    has_findings: bool
    loop_charts: list[Chart]
    loop_unit: str  # "tokens" (measured) or "estimated tokens" (no usage in the transcripts)
    worst: Table | None
    other_sessions: Table | None
    ingest_error_count: int
    ingest_errors: Table | None
    estimated_note: str | None


@dataclass(frozen=True)
class Clip:
    """Transcript text, redacted, cut for the page: ``head`` is shown, ``rest`` sits in a collapsed ``<details>``,
    ``omitted`` characters are not in the page at all."""

    head: str
    rest: str = ""
    omitted: int = 0


@dataclass(frozen=True)
class Variant:
    """A distinct repeated call (or result, or text) inside an episode, with how often it occurred."""

    label: str
    count: int
    body: Clip
    is_error: bool | None = None
    tool: str | None = None


@dataclass(frozen=True)
class DiffPart:
    op: str  # "equal" | "insert" | "delete"
    text: str


@dataclass(frozen=True)
class ArgDiff:
    before: str
    after: str
    parts: list[DiffPart]


@dataclass(frozen=True)
class Episode:
    anchor: str
    kind: str
    title: str
    facts: list[tuple[str, str]]
    stuck: bool | None
    pattern: str
    calls: list[Variant]
    more_calls: int
    results: list[Variant]
    more_results: int
    texts: list[Variant]
    diffs: list[ArgDiff]


@dataclass(frozen=True)
class SessionContext:
    meta: PageMeta
    session_id: str
    facts: list[tuple[str, str]]
    timeline: Chart
    tokens: Chart | None
    episodes: list[Episode]
    episode_table: Table
    more_episodes: Table | None
    hidden_episodes: int
    guards: Table | None  # None: replay not computed


@dataclass(frozen=True)
class CalibrationContext:
    meta: PageMeta
    computed: bool
    labels: str | None
    frontier: Chart | None
    sweep_chart: Chart | None
    recommendation: Recommendation | None
    recommendation_facts: list[tuple[str, str]]
    sweep: Table | None
    presets: Table | None
