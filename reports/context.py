"""The typed context of each page. The report's inputs beyond the store (guard replay, calibration) are the plain
results of ``analyzer/results.py``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from analyzer.results import Recommendation, Totals

if TYPE_CHECKING:
    import polars as pl

    from reports.data import ReportScope


class ReportSource(Protocol):
    """Where the report's data comes from (``reports.data.ReportData`` over the store): the report only reads
    these frames, so it never queries a store itself."""

    scope: ReportScope
    filter: Any  # the session filter, for the "scope" line (since, until, agent, project)

    def totals(self) -> Totals: ...

    def findings(self) -> pl.DataFrame: ...

    def loop_sessions(self) -> pl.DataFrame: ...

    def ingest_errors(self, limit: int) -> tuple[int, pl.DataFrame]: ...

    def skipped_files(self, limit: int) -> tuple[int, pl.DataFrame]: ...

    def session_ids(self) -> pl.DataFrame: ...

    def read_order(self, ids: Sequence[str]) -> list[str]: ...  # ids in the order batches of them read fastest

    def session_batch(self, ids: Sequence[str]) -> dict[str, pl.DataFrame]: ...

    def all_sessions(self) -> pl.DataFrame: ...

    def fingerprints(self) -> dict[str, str]: ...  # session id -> what its data is (empty: unknown, always rebuild)

    def store_id(self) -> str: ...  # the store's id: a person's labels are kept in the browser under it


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
    charts: bool = True  # whether the page draws charts (loads plotly.js)
    store_id: str = ""  # the store's id: the browser keeps the labels made on the report's pages under it

    @property
    def home(self) -> Link:
        """The nav's entry of the home page, which the nav lists first (``site.NAV``): the brand and a session
        page's crumbs link to it."""
        return self.nav[0]


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
    skipped_count: int = 0  # files found but not read ("Files not read")
    skipped_files: Table | None = None
    all_sessions_href: str = ""
    tokens_split: list[tuple[str, str]] = ()  # type: ignore[assignment]


@dataclass(frozen=True)
class AllSessionsContext:
    """Every session in scope as rows for static/loopscope.js to sort, filter, search and page through: ``columns``
    names each position of a row; ``rows`` reach the page only through ``tojson``."""

    meta: PageMeta
    columns: list[str]
    rows: list[list[Any]]
    kinds: list[str]
    sessions: int
    with_loops: int
    lookups: dict[str, list[str]]  # agent, project, model, tool: the values rows refer to by position


@dataclass(frozen=True)
class Clip:
    """Transcript text, redacted, cut for the page: ``head`` is shown, ``rest`` sits in a collapsed ``<details>``,
    ``omitted`` characters are not in the page at all; ``whole`` is the command that prints all of it, when there is
    one (a call's result: ``loopscope show``, which reads it back from the transcript)."""

    head: str
    rest: str = ""
    omitted: int = 0
    whole: str | None = None


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
class ConvItem:
    """One step of the conversation around an episode: the user's prompt, an assistant message, or a call with its
    result. A call is numbered from 1 (``number``) and carries the page anchor (``anchor``, e.g. ``call-12``) that
    the timeline, the episode table and the guard table link to; ``anchor`` is empty when an earlier episode card
    on the page already holds it."""

    kind: str  # "user" | "assistant" | "call"
    text: Clip | None = None
    number: int | None = None
    anchor: str = ""
    href: str = ""
    tool: str | None = None
    summary: str = ""
    args: Clip | None = None
    result: Clip | None = None
    is_error: bool | None = None
    in_loop: bool = False
    same_as: int | None = None  # the earlier call with the same arguments and the same result: shown in one line


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
    conversation: list[ConvItem] = ()  # type: ignore[assignment]
    more_conversation: int = 0  # calls of the span left out of the conversation
    why: str | None = None
    open: bool = True  # shown open; later cards start collapsed
    finding_id: str = ""  # what a label of this card names (findings.finding_id)
    first_seq: int | None = None  # its calls (calls.seq), which a label of another span must not contradict
    last_seq: int | None = None


@dataclass(frozen=True)
class SessionContext:
    meta: PageMeta
    session_id: str
    facts: list[tuple[str, str]]
    tokens_split: list[tuple[str, str]]
    timeline: Chart | None  # None: the session made no tool call
    tokens: Chart | None
    episodes: list[Episode]
    episode_table: Table
    more_episodes: Table | None
    hidden_episodes: int
    guards: Table | None  # None: replay not computed
    session_key: str = ""  # how the labels made on the page name the session (``evaluate.labels.session_key``)
    calls: int = 0  # the session's calls: a label's span is checked against them
    conversation: list[ConvItem] = ()  # type: ignore[assignment]  # the whole conversation (sessions without findings)
    more_conversation: int = 0  # calls of the session left out of it


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
    frontier_rows: Table | None = None  # the sweep's frontier rows, shown open; the whole sweep is collapsed


@dataclass(frozen=True)
class EvaluationContext:
    """The findings and the guards measured on a person's labels (``analyze --labels``): ``loopscope eval``'s
    tables."""

    meta: PageMeta
    labels: str  # the labels files and what was resolved of them
    headline: str  # precision, recall and healthy-kept with the counts behind them
    figures: Table
    disagreements: Table | None  # None: none
    unlabelled: Table | None  # stuck findings on no label in the labelled sessions (listed, not counted)
    other_stuck: str  # stuck findings in sessions without labels, in words ("" for none)
    guards: Table | None  # None: the guards were not replayed
    notes: list[str]
