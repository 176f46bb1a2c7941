"""Page contexts: the store's frames and the optional replay/calibration inputs, shaped into what each template
shows. Formatting decisions live here, markup in the templates, drawing in figures.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from analyzer.detect.rules import WAITING
from analyzer.evaluate.labels import session_key
from analyzer.results import Calibration, Recommendation, Totals
from reports import figures
from reports.context import (
    AllSessionsContext,
    CalibrationContext,
    Chart,
    Episode,
    EvaluationContext,
    IndexContext,
    Kpi,
    Link,
    PageMeta,
    ReportSource,
    SessionContext,
    Table,
)
from reports.episodes import CallAnchors, Episodes, Redactor
from reports.fmt import compact, num, pct, project_label, share, usd, when
from reports.paths import ALL_SESSIONS, Links, section_id

if TYPE_CHECKING:
    from analyzer.evaluate.evaluation import Evaluation

WORST_SESSIONS = 25
LISTED_SESSIONS = 2000
LISTED_ERRORS = 200
DETAILED_EPISODES = 30
OPEN_EPISODES = 20
LISTED_EPISODES = 500
SWEEP_ROWS = 200
OPEN_CARDS = 3
CONVERSATIONS = 8
"""Episode cards of one page that show their conversation (the first ones, in call order); a page of hundreds of
loops would otherwise repeat the same calls and results hundreds of times."""
"""Episode cards shown open on a session page; the rest start collapsed so a long page stays scannable."""


# ---- index ---------------------------------------------------------------------------------------------------------


def _kpis(t: Totals, has_findings: bool) -> list[Kpi]:
    """Dollars first: tokens are dominated by cache reads, so a token share reads larger than the money it is."""
    stuck_cost = t.stuck_cost_usd if t.stuck_cost_usd is not None else t.loop_cost_usd
    stuck_tokens = t.stuck_tokens if t.stuck_tokens is not None else t.loop_tokens
    loops = [
        (f"{usd(stuck_cost)} wasted in stuck loops", share(stuck_cost, t.cost_usd)),
        (f"{num(t.loop_sessions)} with loops", share(t.loop_sessions, t.sessions)),
        (f"{num(t.loop_calls)} in loops", share(t.loop_calls, t.calls)),
        (f"{compact(stuck_tokens)} wasted in stuck loops", share(stuck_tokens, t.tokens)),
    ]
    totals = [
        ("Cost", usd(t.cost_usd)),
        ("Sessions", num(t.sessions)),
        ("Tool calls", num(t.calls)),
        ("Tokens", compact(t.tokens)),
    ]
    return [Kpi(label, total, *(loop if has_findings else (None, None))) for (label, total), loop in zip(totals, loops)]


def _token_metric(fdf: pl.DataFrame) -> tuple[pl.Expr, str]:
    """Measured wasted tokens when the transcripts carry usage; the ~4 chars/token estimate when none do."""
    if int(fdf["wasted_tokens"].fill_null(0).sum() or 0) > 0:
        return pl.col("wasted_tokens").fill_null(0), "tokens"
    return pl.col("estimated_tokens").fill_null(0), "estimated tokens"


def _breakdown(fdf: pl.DataFrame, tok: pl.Expr, by: str) -> pl.DataFrame:
    """Episodes, tokens (stuck / made progress) and dollars per value of ``by``; ``full`` is the hover name."""
    stuck = pl.col("stuck").fill_null(False)
    return (
        fdf.with_columns(tok.alias("_t"))
        .group_by(by)
        .agg(
            pl.len().alias("episodes"),
            pl.col("_t").filter(stuck).sum().alias("stuck_tokens"),
            pl.col("_t").filter(~stuck).sum().alias("other_tokens"),
            pl.col("_t").sum().alias("tokens"),
            pl.col("cost_usd").fill_null(0).sum().alias("cost_usd"),
        )
        .with_columns(pl.col(by).cast(pl.String).alias("full"))
    )


def _project_labels(full: list[str]) -> list[str]:
    """Short project names, falling back to the whole path where two projects would share a short name."""
    short = [project_label(p) for p in full]
    dup = {s for s in short if short.count(s) > 1}
    return [p if s in dup else s for s, p in zip(short, full)]


def loop_charts(fdf: pl.DataFrame, redact: Redactor) -> tuple[list[Chart], str]:
    """Loops by kind, tool, model, agent, project and day; and the token unit they are measured in."""
    tok, axis = _token_metric(fdf)
    fdf = fdf.with_columns(
        pl.col("model").fill_null("(unknown)"),
        pl.col("format").fill_null("(unknown)"),
        pl.col("cwd").map_elements(lambda c: redact(c) or "(unknown)", return_dtype=pl.String).alias("project"),
    )
    charts: list[Chart] = []
    kinds = _breakdown(fdf, tok, "kind")
    charts.append(Chart("by-kind", "By kind", figures.stuck_bars(kinds, "kind", axis, "loop kind")))
    # Tool names that differ only by an agent's convention (Bash/bash) are one bar, labelled with every spelling.
    exploded = fdf.explode("tools").with_columns(pl.col("tools").fill_null("(none)"))
    exploded = exploded.with_columns(pl.col("tools").str.strip_chars().str.to_lowercase().alias("tool_group"))
    spellings = exploded.group_by("tool_group").agg(pl.col("tools").unique().sort().str.join("/").alias("label"))
    tools = _breakdown(exploded, tok, "tool_group").join(spellings, on="tool_group", how="left")
    tools = tools.with_columns(pl.col("label").alias("full"))
    charts.append(
        Chart(
            "by-tool",
            "By tool",
            figures.stuck_bars(tools, "label", axis, "tool"),
            note="An episode that spans several tools counts under each; names that differ only in "
            "case (Bash/bash) are one tool.",
        )
    )
    charts.append(
        Chart(
            "by-model",
            "By model",
            figures.stuck_bars(_breakdown(fdf, tok, "model"), "model", axis, "model"),
            note="The model that issued the episode's first call.",
        )
    )
    charts.append(
        Chart("by-agent", "By agent", figures.stuck_bars(_breakdown(fdf, tok, "format"), "format", axis, "agent"))
    )
    proj = _breakdown(fdf, tok, "project").sort("project")
    proj = proj.with_columns(pl.Series("label", _project_labels(proj["project"].to_list())))
    charts.append(
        Chart(
            "by-project",
            "By project",
            figures.stuck_bars(proj, "label", axis, "project"),
            wide=True,
            note="Working directory of the session; the largest twelve.",
        )
    )
    dated = fdf.filter(pl.col("day").is_not_null())
    if dated.height:
        days = _breakdown(dated, tok, "day").sort("day")
        undated = fdf.height - dated.height
        charts.append(
            Chart(
                "by-day",
                "Over time",
                figures.daily(days, axis),
                wide=True,
                note=f"{num(undated)} episodes without a timestamp are not shown." if undated else None,
            )
        )
    return charts, axis


def repeat_chart(fdf: pl.DataFrame, rec: Recommendation | None) -> Chart:
    hist = fdf.group_by(pl.col("repeats").fill_null(0)).agg(
        pl.col("stuck").fill_null(False).sum().alias("stuck"), (~pl.col("stuck").fill_null(False)).sum().alias("other")
    )
    fig = figures.repeat_histogram(hist, rec.warn if rec else None, rec.halt if rec else None)
    note = (
        f"Dashed lines: the recommended setting from calibration, warn at {rec.warn} and halt at {rec.halt}."
        if rec
        else "Calibration was not computed for this report, so no recommended warn/halt lines are drawn."
    )
    return Chart("repeats", "Episodes by repeat count", fig, note=note, wide=True)


def session_tables(sessions: pl.DataFrame, links: Links, redact: Redactor) -> tuple[Table, Table | None]:
    # Dollars first: a token share is dominated by cache reads and reads larger than the money it is.
    cols = (
        "Session",
        "Agent",
        "Project",
        "Started",
        "Loop cost",
        "Session cost",
        "Calls",
        "Episodes",
        "Stuck",
        "Wasted tokens",
        "Share of session",
    )
    rows = []
    for r in sessions.head(LISTED_SESSIONS).iter_rows(named=True):
        rows.append(
            (
                Link(redact(r["session_id"]) or "", links.session(r["session_id"])),
                r["format"] or "—",
                project_label(redact(r["cwd"])),
                when(r["started_at"]),
                usd(r["loop_cost_usd"]),
                usd(r["cost_usd"]),
                num(r["calls"]),
                num(r["episodes"]),
                num(r["stuck_episodes"]),
                num(r["wasted_tokens"]),
                pct(share(r["wasted_tokens"] or 0, r["total_tokens"] or 0)),
            )
        )
    numeric = frozenset(range(4, 11))
    worst = Table(cols, rows[:WORST_SESSIONS], numeric)
    rest = rows[WORST_SESSIONS:]
    other = Table(cols, rest, numeric, more=max(0, sessions.height - LISTED_SESSIONS)) if rest else None
    return worst, other


def error_table(errors: pl.DataFrame, redact: Redactor) -> Table:
    rows = [
        (
            redact(r["path"]) or "—",
            num(r["line"]) if r["line"] is not None else "—",
            r["reason"] or "",
            (redact(r["excerpt"]) or "")[:200],
        )
        for r in errors.iter_rows(named=True)
    ]
    return Table(("File", "Line", "Reason", "Excerpt"), rows, frozenset({1}))


def skipped_table(skipped: pl.DataFrame, redact: Redactor) -> Table:
    """Files not read, with why; paths are transcript-derived text, so they are redacted like the rest."""
    rows = [(redact(r["path"]) or "—", r["reason"] or "") for r in skipped.iter_rows(named=True)]
    return Table(("File", "Why it was not read"), rows, frozenset())


def progress_usd(loop_usd: float, stuck_usd: float) -> float:
    """Dollars of loops that made progress: all loops' less the stuck ones', rounded, so the last bits of two sums
    taken in different orders (the store, a Parquet export of it) never show as "<$0.01" of nothing."""
    return max(0.0, round(loop_usd - stuck_usd, 9))


def index_page(
    meta: PageMeta,
    totals: Totals,
    has_findings: bool,
    fdf: pl.DataFrame | None,
    sessions: pl.DataFrame | None,
    error_count: int,
    errors: pl.DataFrame,
    calibration: Calibration | None,
    links: Links,
    redact: Redactor,
    skipped: tuple[int, pl.DataFrame] | None = None,
) -> IndexContext:
    charts: list[Chart] = []
    unit = "tokens"
    worst = other = None
    estimated_note = None
    if has_findings and fdf is not None and fdf.height:
        loops = fdf.filter(pl.col("kind").ne_missing(WAITING))  # a wait is no loop: not in the loops' charts
        if loops.height:
            charts, unit = loop_charts(loops, redact)
            charts.append(repeat_chart(loops, calibration.recommendation if calibration else None))
        assert sessions is not None
        worst, other = session_tables(sessions, links, redact)
        if totals.estimated_tokens:
            estimated_note = (
                f"Plus ~{compact(totals.estimated_tokens)} tokens estimated from repeated text in "
                f"loops of transcripts that record no usage."
            )
    split = [
        ("input", compact(totals.input_tokens)),
        ("output", compact(totals.output_tokens)),
        ("cache read", compact(totals.cache_read_tokens)),
        ("cache write", compact(totals.cache_write_tokens)),
    ]
    if has_findings and totals.stuck_cost_usd is not None:
        split.append(("repeated with progress", usd(progress_usd(totals.loop_cost_usd, totals.stuck_cost_usd))))
    return IndexContext(
        meta,
        _kpis(totals, has_findings),
        has_findings,
        charts,
        unit,
        worst,
        other,
        error_count,
        error_table(errors, redact) if error_count else None,
        estimated_note,
        skipped[0] if skipped else 0,
        skipped_table(skipped[1], redact) if skipped and skipped[0] else None,
        links.page(ALL_SESSIONS),
        split,
    )


# ---- all sessions --------------------------------------------------------------------------------------------------

PROMPT_CHARS = 160
SEARCH_CHARS = 300
ALL_COLUMNS = [
    "id",
    "href",
    "agent",
    "project",
    "models",
    "started",
    "calls",
    "cost",
    "cost_note",
    "tokens",
    "loops",
    "kinds",
    "tools",
    "wasted",
    "loop",
    "search",
    "prompt",
]
"""One all-sessions row: ``agent``, ``project``, ``models`` and ``tools`` are positions in the page's lookup lists;
``tokens`` is [input, output, cache read, cache write, estimated]; ``cost_note`` is
``""``, ``"estimated"`` (no usage recorded: an estimate from the text), ``"unknown"`` (no price) or ``"inexact"``
(a price matched by another model's name); ``search`` is the loops' repeated calls, searched but not shown."""


def _cost_note(sources: list[str] | None, total: int, est_cost: float | None) -> str:
    srcs = sources or []
    if not total:
        return "estimated" if est_cost is not None else "unknown"
    if any(s == "unknown model" for s in srcs):
        return "unknown"
    if any(s.startswith("genai-prices~") for s in srcs):
        return "inexact"
    return ""


def all_sessions_page(
    meta: PageMeta, df: pl.DataFrame, has_page: set[str], links: Links, redact: Redactor
) -> AllSessionsContext:
    """Every session in scope, as compact rows (arrays, not objects: 10,000 sessions stay a few MB)."""
    rows: list[list[Any]] = []
    kinds: set[str] = set()
    with_loops = 0
    # Values many rows share (agent, project, model, tool) are written once and referred to by number.
    lookups: dict[str, dict[str, int]] = {"agent": {}, "project": {}, "model": {}, "tool": {}}

    def ref(table: str, value: str) -> int:
        return lookups[table].setdefault(value, len(lookups[table]))

    for r in df.iter_rows(named=True):
        sid = r["session_id"]
        total = int(r["total_tokens"] or 0)
        est_cost = r.get("estimated_cost_usd")
        cost = r["cost_usd"] if total else est_cost
        loops_text = [redact(t) or "" for t in (r.get("loops_text") or [])]
        prompt = (redact(r.get("first_prompt")) or "").strip()
        started = r.get("started_at")
        k = list(r.get("kinds") or [])
        kinds.update(k)
        with_loops += 1 if r["loops"] else 0
        rows.append(
            [
                redact(sid) or "",
                links.session(sid) if sid in has_page else "",
                ref("agent", r["format"] or ""),
                ref("project", redact(r["cwd"]) or ""),
                [ref("model", m) for m in (r.get("models") or [])],
                started.strftime("%Y-%m-%d %H:%M") if started else "",
                int(r["calls"] or 0),
                None if cost is None else round(float(cost), 4),
                _cost_note(r.get("cost_sources"), total, est_cost),
                [
                    int(r["input_tokens"] or 0),
                    int(r["output_tokens"] or 0),
                    int(r["cache_read_tokens"] or 0),
                    int(r["cache_write_tokens"] or 0),
                    0 if total else int(r["estimated_tokens"] or 0),
                ],
                int(r["loops"] or 0),
                k,
                [ref("tool", t) for t in (r.get("loop_tools") or [])],
                round(float(r["wasted_usd"] or 0), 4),
                loops_text[0] if loops_text else "",
                " | ".join(loops_text[1:])[:SEARCH_CHARS],
                " ".join(prompt.split())[:PROMPT_CHARS],
            ]
        )
    return AllSessionsContext(
        meta, ALL_COLUMNS, rows, sorted(kinds), len(rows), with_loops, {k: list(v) for k, v in lookups.items()}
    )


# ---- session -------------------------------------------------------------------------------------------------------


def _guard_table(replay: pl.DataFrame | None, seq_of: dict[str, int], anchors: CallAnchors) -> Table | None:
    if replay is None:
        return None

    def at(call_id: Any) -> Any:
        if call_id is None:
            return "—"
        seq = seq_of.get(str(call_id))
        if seq is None:
            return "a call not in the store"
        href = anchors.href(seq + 1)
        return Link(f"call #{seq + 1}", href) if href else f"call #{seq + 1}"

    def warn_at(r: dict[str, Any]) -> str:
        """The first warning's place: its call, or the message without calls it came at (before the next call)."""
        if r["first_warn_call_id"] is not None or r.get("first_warn_turn_id") is None:
            return at(r["first_warn_call_id"])
        seq = r.get("first_warn_seq")
        return "a message" + (f" before call #{seq}" if seq is not None else "")

    rows = []
    # Sorted in Python: a polars sort per page costs more than the few rows it sorts.
    for r in sorted(replay.iter_rows(named=True), key=lambda r: r["policy"]):
        halted = r["halt_call_id"] is not None
        hit = (
            "—"
            if not halted
            else ("stuck loop" if r["halt_on"] == "stuck" else f"{r['halt_on'] or 'progress'} (false halt)")
        )
        rows.append(
            (
                r["policy"],
                warn_at(r),
                at(r["halt_call_id"]),
                hit,
                num(r["calls_after_halt"]) if halted else "—",
                num(r["tokens_after_halt"]) if halted else "—",
                usd(r["cost_after_halt_usd"]) if halted else "—",
            )
        )
    return Table(
        ("Guard", "First warning", "Halt", "Halt hit", "Calls after halt", "Tokens after halt", "Cost after halt"),
        rows,
        frozenset({4, 5, 6}),
    )


def _seq_range(f: dict[str, Any], calls: CallAnchors | None = None) -> Any:
    """The episode's calls, numbered from 1; a link to its first call where the page holds that call."""
    if f.get("first_seq") is None:
        return "—"  # a text loop whose messages issued no calls
    text = f"#{f['first_seq'] + 1}–#{f['last_seq'] + 1}"
    href = calls.href(int(f["first_seq"]) + 1) if calls is not None else None
    return Link(text, href) if href else text


def _episode_tables(
    findings: list[dict[str, Any]], anchors: dict[int, str], calls: CallAnchors | None = None
) -> tuple[Table, Table | None]:
    """Every episode in call order: the first ``OPEN_EPISODES`` in view, the rest (up to ``LISTED_EPISODES``)
    collapsed, so a session with hundreds of loops does not bury its details under a table."""
    rows = []
    for i, f in enumerate(findings[:LISTED_EPISODES]):
        kind: Any = Link(f["kind"], "#" + anchors[i]) if i in anchors else f["kind"]
        rows.append(
            (
                kind,
                ", ".join(f.get("tools") or []),
                _seq_range(f, calls),
                num(f["repeats"]),
                "yes" if f.get("stuck") else "no",
                num(f["wasted_tokens"]),
                usd(f["cost_usd"]),
            )
        )
    cols = ("Kind", "Tools", "Calls", "Repeats", "Stuck", "Wasted tokens", "Cost")
    numeric = frozenset({3, 5, 6})
    more = max(0, len(findings) - LISTED_EPISODES)
    if len(rows) <= OPEN_EPISODES:
        return Table(cols, rows, numeric, more), None
    return Table(cols, rows[:OPEN_EPISODES], numeric), Table(cols, rows[OPEN_EPISODES:], numeric, more)


def _cost_from(sources: list[str] | None) -> str:
    """Where a session's cost came from, said plainly; an inexact price match or an unknown model is said first."""
    srcs = list(sources or [])
    if not srcs:
        return "no usage recorded"
    notes = []
    for src in sorted(srcs, key=lambda x: (not x.startswith("genai-prices~"), x != "unknown model", x)):
        if src == "transcript":
            notes.append("recorded in the transcript")
        elif src == "unknown model":
            notes.append("unknown model: no price (counted as $0)")
        elif src.startswith("genai-prices~"):
            notes.append(f"inexact price match: {src.split('~', 1)[1]} (genai-prices)")
        elif src.startswith("genai-prices:"):
            notes.append(f"price table: {src.split(':', 1)[1]} (genai-prices)")
        else:
            notes.append(src)
    return "; ".join(notes)


def _tokens_split(s: dict[str, Any]) -> list[tuple[str, str]]:
    """Tokens the way users count them: input, output, cache read, cache write (cache reads dominate counts)."""
    return [
        ("input", num(s.get("input_tokens"))),
        ("output", num(s.get("output_tokens"))),
        ("cache read", num(s.get("cache_read_tokens"))),
        ("cache write", num(s.get("cache_write_tokens"))),
    ]


def session_page(
    meta: PageMeta,
    frames: dict[str, pl.DataFrame],
    replay: pl.DataFrame | None,
    redact: Redactor,
    call_prefix: str = "",
) -> SessionContext:
    """``replay``: this session's replay rows, or None when replay was not computed at all. ``call_prefix`` goes
    before each call anchor (``call-12``): a single-file report holds several sessions in one document."""
    s = frames["sessions"].row(0, named=True)
    sid = s["session_id"]
    calls = frames["calls"]
    findings = frames["findings"].to_dicts()
    ep_calls = frames["episode_calls"].to_dicts()
    texts = frames["texts"].to_dicts()
    conv = frames["conversation"].to_dicts() if "conversation" in frames else []

    # The costliest episodes get a full section; all of them are listed in the table.
    weight = [(f.get("wasted_tokens") or 0, f.get("estimated_tokens") or 0, -i) for i, f in enumerate(findings)]
    chosen = sorted(sorted(range(len(findings)), key=lambda i: weight[i], reverse=True)[:DETAILED_EPISODES])
    prefix = section_id(sid)
    anchors = {i: f"{prefix}-ep-{i + 1}" for i in chosen}
    call_anchors = CallAnchors(call_prefix)
    builder = Episodes(redact)
    episodes: list[Episode] = []
    texts_of: dict[str, list[dict[str, Any]]] = {}
    for t in texts:
        texts_of.setdefault(t["finding_id"], []).append(t)
    conv_of: dict[str, list[dict[str, Any]]] = {}
    for m in conv:
        conv_of.setdefault(m["finding_id"], []).append(m)
    for n, i in enumerate(chosen):
        f = findings[i]
        episodes.append(
            builder.build(
                f,
                ep_calls,
                texts_of.get(f["finding_id"], []),
                anchors[i],
                conv_of.get(f["finding_id"], []) if n < CONVERSATIONS else [],
                call_anchors,
                open=n < OPEN_CARDS,
            )
        )

    # A session without findings shows its whole conversation, where a person reads it for a loop the scan missed.
    conversation, more_conversation = [], 0
    if not findings and "session_calls" in frames:
        conversation, more_conversation = builder.session(
            frames["session_calls"].to_dicts(), frames["session_turns"].to_dicts(), call_anchors
        )

    timeline_fig, timeline_note = figures.timeline(
        calls, findings, call_anchor=call_anchors.id(0)[:-1], linked=sorted(call_anchors.known)
    )
    loop_turns = {c["turn_id"] for c in ep_calls if c.get("turn_id")}
    tokens_fig = figures.cumulative_tokens(frames["turns"], loop_turns)

    seq_of = {str(c): int(q) for c, q in zip(calls["call_id"].to_list(), calls["seq"].to_list())}
    total = s.get("total_tokens") or 0
    if total:
        tokens = num(total)
        cost = usd(s.get("cost_usd"))
    else:
        est = int(s.get("estimated_tokens") or 0)
        tokens = f"none recorded; ~{num(est)} estimated (about four characters a token)" if est else "none recorded"
        est_cost = s.get("estimated_cost_usd")
        cost = (
            f"none recorded; ~{usd(est_cost)} estimated (the estimated tokens priced as input)"
            if est_cost is not None
            else "unknown: no usage recorded"
        )
    facts = [
        ("agent", s.get("format") or "—"),
        ("project", redact(s.get("cwd")) or "—"),
        ("started", when(s.get("started_at"))),
        ("ended", when(s.get("ended_at"))),
        ("models", ", ".join(s.get("models") or []) or "—"),
        ("calls", f"{num(s.get('calls'))} ({num(s.get('error_calls'))} errors)"),
        ("user prompts", num(s.get("user_turns"))),
        ("cost", cost),
        ("cost from", _cost_from(s.get("cost_sources"))),
        ("tokens", tokens),
        ("file", redact(s.get("source_path")) or "—"),
    ]
    if s.get("parent_session_id"):
        facts.append(("spawned by", redact(s["parent_session_id"])))
    guards = _guard_table(replay, seq_of, call_anchors)
    first, rest = _episode_tables(findings, anchors, call_anchors)
    return SessionContext(
        meta=meta,
        session_id=redact(sid) or "",
        facts=facts,
        tokens_split=_tokens_split(s) if total else [],
        timeline=(
            Chart(f"{prefix}-timeline", "Call timeline", timeline_fig, note=timeline_note, wide=True)
            if calls.height
            else None  # a session without calls (its pages are every session's now) has nothing to draw
        ),
        tokens=(Chart(f"{prefix}-tokens", "Cumulative tokens", tokens_fig, wide=True) if tokens_fig else None),
        episodes=episodes,
        episode_table=first,
        more_episodes=rest,
        hidden_episodes=len(findings) - len(chosen),
        guards=guards,
        session_key=session_key(sid),
        calls=calls.height,
        conversation=conversation,
        more_conversation=more_conversation,
    )


# ---- calibration ---------------------------------------------------------------------------------------------------


def pareto(sweep: pl.DataFrame) -> pl.DataFrame:
    """Settings no other setting beats on both axes: fewer false halts and more tokens saved."""
    rows = sweep.sort(["false_halt_rate", "tokens_saved"], descending=[False, True]).to_dicts()
    best = -1.0
    keep = []
    for r in rows:
        t = float(r["tokens_saved"] or 0)
        if t > best:
            keep.append(r)
            best = t
    return pl.DataFrame(keep, schema=sweep.schema) if keep else sweep.head(0)


def _sweep_table(sweep: pl.DataFrame, rows_of: pl.DataFrame | None = None) -> Table:
    """The sweep as a table: ``rows_of`` (the frontier) when given, else the best ``SWEEP_ROWS`` settings."""
    spec: list[tuple[str, str, Callable[[Any], str]]] = [
        ("warn", "Warn", num),
        ("halt", "Halt", num),
        ("window", "Window", num),
        ("similarity", "Similarity", lambda v: "—" if v is None else f"{float(v):.2f}"),
        ("stuck_caught", "Stuck caught", num),
        ("median_calls_to_detect", "Median calls to detect", lambda v: "—" if v is None else f"{float(v):,.1f}"),
        ("tokens_saved", "Tokens saved", num),
        ("dollars_saved", "Saved", usd),
        ("false_halt_sessions", "False halts", num),
        ("false_halt_rate", "False-halt rate", pct),
    ]
    spec = [s for s in spec if s[0] in sweep.columns]
    if rows_of is not None:
        top = rows_of.sort(["false_halt_rate", "tokens_saved"], descending=[False, True])
        more = 0
    else:
        top = sweep.sort(["tokens_saved", "false_halt_rate"], descending=[True, False]).head(SWEEP_ROWS)
        more = max(0, sweep.height - SWEEP_ROWS)
    rows = [tuple(f(r[c]) if c in top.columns else "—" for c, _, f in spec) for r in top.iter_rows(named=True)]
    return Table(tuple(h for _, h, _ in spec), rows, frozenset(range(len(spec))), more=more)


def preset_table(replay: pl.DataFrame) -> Table:
    halted = pl.col("halt_call_id").is_not_null()
    stuck = halted & (pl.col("halt_on") == "stuck")
    # A warning at a message without calls has no call id; its message (first_warn_turn_id) still counts.
    warned = pl.col("first_warn_call_id").is_not_null()
    if "first_warn_turn_id" in replay.columns:
        warned = warned | pl.col("first_warn_turn_id").is_not_null()
    g = (
        replay.group_by("policy")
        .agg(
            pl.len().alias("sessions"),
            warned.sum().alias("warned"),
            halted.sum().alias("halted"),
            stuck.sum().alias("stuck"),
            (halted & ~stuck).sum().alias("false"),
            pl.col("calls_after_halt").filter(halted).sum().alias("calls"),
            pl.col("tokens_after_halt").filter(halted).sum().alias("tokens"),
            pl.col("cost_after_halt_usd").filter(halted).sum().alias("cost"),
        )
        .sort("policy")
    )
    rows = [
        (
            r["policy"],
            num(r["sessions"]),
            num(r["warned"]),
            num(r["halted"]),
            num(r["stuck"]),
            num(r["false"]),
            num(r["calls"]),
            num(r["tokens"]),
            usd(r["cost"]),
        )
        for r in g.iter_rows(named=True)
    ]
    return Table(
        (
            "Guard",
            "Sessions",
            "Warned",
            "Halted",
            "Halts on stuck loops",
            "False halts",
            "Calls after halt",
            "Tokens after halt",
            "Cost after halt",
        ),
        rows,
        frozenset(range(1, 9)),
    )


def calibration_page(
    meta: PageMeta, calibration: Calibration | None, replay: pl.DataFrame | None
) -> CalibrationContext:
    presets = preset_table(replay) if replay is not None else None
    if calibration is None:
        return CalibrationContext(meta, False, None, None, None, None, [], None, presets, None)
    rec = calibration.recommendation
    front = calibration.frontier if calibration.frontier is not None else pareto(calibration.sweep)
    rec_dict = None
    facts: list[tuple[str, str]] = []
    if rec is not None:
        rec_dict = {
            "warn": rec.warn,
            "halt": rec.halt,
            "false_halt_rate": rec.false_halt_rate,
            "tokens_saved": rec.tokens_saved,
        }
        facts = [("warn at", num(rec.warn)), ("halt at", num(rec.halt))]
        if rec.window is not None:
            facts.append(("window", num(rec.window)))
        if rec.similarity is not None:
            facts.append(("similarity", f"{rec.similarity:.2f}"))
        if rec.target_false_halt_rate is not None:
            facts.append(("target false-halt rate", pct(rec.target_false_halt_rate)))
        if rec.false_halt_rate is not None:
            facts.append(("false-halt rate", pct(rec.false_halt_rate)))
        if rec.stuck_caught is not None:
            facts.append(("stuck episodes caught", num(rec.stuck_caught)))
        if rec.tokens_saved is not None:
            facts.append(("tokens saved", num(rec.tokens_saved)))
        if rec.dollars_saved is not None:
            facts.append(("dollars saved", usd(rec.dollars_saved)))
    sweep = calibration.sweep
    return CalibrationContext(
        meta,
        True,
        calibration.labels,
        Chart("frontier", "Frontier", figures.frontier(sweep, front, rec_dict), wide=True),
        Chart(
            "sweep",
            "Sweep: tokens saved by warn and halt",
            figures.sweep_heatmap(sweep),
            wide=True,
            note="Each cell is the best over the other swept settings (window, similarity).",
        ),
        rec,
        facts,
        _sweep_table(sweep),
        presets,
        _sweep_table(sweep, front),
    )


# ---- the pages over the whole scope (site.PAGES) -------------------------------------------------------------------


@dataclass(frozen=True)
class ReportInputs:
    """What each page over the whole scope is drawn from. Its context function (``site.PAGES``) takes these and
    reads from ``data`` what it shows."""

    data: ReportSource
    sessions: pl.DataFrame | None  # the sessions with findings, worst first (None before a scan)
    replay: pl.DataFrame | None  # the guard replay's rows in scope (None: replay not computed)
    calibration: Calibration | None  # None: not computed
    links: Links  # from a page at the report's root
    redact: Redactor
    evaluation: Evaluation | None = None  # the findings and guards on a person's labels (``analyze --labels``)


def index_context(meta: PageMeta, src: ReportInputs) -> IndexContext:
    data = src.data
    has_findings = data.scope.has_findings
    totals = data.totals()
    fdf = data.findings() if has_findings else None
    n_err, errors = data.ingest_errors(LISTED_ERRORS)
    return index_page(
        meta,
        totals,
        has_findings,
        fdf,
        src.sessions,
        n_err,
        errors,
        src.calibration,
        src.links,
        src.redact,
        data.skipped_files(LISTED_ERRORS),
    )


def calibration_context(meta: PageMeta, src: ReportInputs) -> CalibrationContext:
    return calibration_page(meta, src.calibration, src.replay)


def all_sessions_context(meta: PageMeta, src: ReportInputs) -> AllSessionsContext:
    # Once the store is scanned every session has a page (render._paged_sessions), loop-free ones too.
    rows = src.data.all_sessions()
    has_page = set(rows["session_id"].to_list()) if src.sessions is not None else set()
    return all_sessions_page(meta, rows, has_page, src.links, src.redact)


def evaluation_context(meta: PageMeta, src: ReportInputs) -> EvaluationContext:
    assert src.evaluation is not None  # the page exists only with labels (``site.ReportPage.needs``)
    return evaluation_page(meta, src.evaluation, src.links, src.redact)


# ---- evaluation ----------------------------------------------------------------------------------------------------


def _ratio(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def evaluation_page(meta: PageMeta, ev: Evaluation, links: Links, redact: Redactor) -> EvaluationContext:
    """``loopscope eval``'s tables: the figures per group, the disagreements (each linked to its session's page, with
    the command that prints its first call), the unlabelled stuck findings, the guard scorecard. Ids, notes and
    whys are redacted as everywhere in the report."""
    figures_rows = [
        (
            r["group"] if r["group"] == "all" else f"{r['group']} = {r['value']}",
            num(r["stuck_on_labels"]),
            num(r["on_loop"]),
            _ratio(r["precision"]),
            num(r["loops"]),
            num(r["found"]),
            _ratio(r["recall"]),
            num(r["healthy"]),
            num(r["kept"]),
            _ratio(r["healthy_kept"]),
        )
        for r in ev.figures.iter_rows(named=True)
    ]
    figures_table = Table(
        (
            "Group",
            "Stuck findings on labels",
            "On a loop",
            "Precision",
            "Loops",
            "Found",
            "Recall",
            "Healthy labels",
            "Kept",
            "Healthy-kept",
        ),
        figures_rows,
        frozenset(range(1, 10)),
    )

    def rows(df: pl.DataFrame, what: str) -> list[tuple[Any, ...]]:
        return [
            (
                r["disagreement"],
                Link(redact(r["session_id"]), links.session(r["session_id"])),
                r["kind"] or "",
                r["calls"] or (f"message {r['message_index']}" if r["message_index"] is not None else ""),
                r["label"] or "",
                redact(r[what] or ""),
                redact(r["show"] or ""),
            )
            for r in df.iter_rows(named=True)
        ]

    d = ev.disagreements
    unlabelled = d.filter(pl.col("disagreement") == "unlabelled")
    shown = d.filter(pl.col("disagreement") != "unlabelled")
    columns = ("Disagreement", "Session", "Kind", "Calls (seq)", "Label", "Note", "Read it")
    disagreements = Table(columns, rows(shown, "note")) if shown.height else None
    extra = Table((*columns[:5], "Why", columns[6]), rows(unlabelled, "why")) if unlabelled.height else None
    n, s = ev.other_stuck
    other = f"{num(n)} stuck findings in {num(s)} sessions without labels are not counted." if n else ""
    guards = None
    if ev.guards is not None:
        guards = Table(
            (
                "Guard",
                "Loops",
                "Halted",
                "Calls to halt",
                "Healthy",
                "Healthy halted",
                "False halts",
                "Other halts",
                "Tokens saved",
                "$ saved",
                "Tokens cut",
            ),
            [
                (
                    r["policy"],
                    num(r["loops"]),
                    num(r["loops_halted"]),
                    "–" if r["median_calls_to_halt"] is None else f"{r['median_calls_to_halt']:g}",
                    num(r["healthy"]),
                    num(r["healthy_halted"]),
                    num(r["false_halts"]),
                    num(r["other_halts"]),
                    num(r["tokens_saved"]),
                    usd(r["dollars_saved"]),
                    num(r["tokens_cut"]),
                )
                for r in ev.guards.iter_rows(named=True)
            ],
            frozenset(range(1, 11)),
        )
    files = ", ".join(f.path.rsplit("/", 1)[-1] for f in ev.files)
    return EvaluationContext(
        meta,
        f"{files}: {ev.labels.text()}",
        ev.headline(),
        figures_table,
        disagreements,
        extra,
        other,
        guards,
        [redact(n) for n in ev.notes],
    )
