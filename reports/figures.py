"""Plotly figures as plain ``{"data": [...], "layout": {...}}`` dicts.

Built by hand rather than through ``plotly.graph_objects``: validating a Figure object costs milliseconds, and a
report draws thousands of them. tests/test_report_figures.py checks every builder's output against plotly's own
validator instead. The dicts reach the page as JSON (``tojson``) and are drawn by static/loopscope.js.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from analyzer.detect.rules import LOOP_KINDS

Fig = dict[str, Any]

FONT = '-apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'
INK = "#1f2933"
MUTED = "#6b7785"
GRID = "#e8ebef"
STUCK = "#d1495b"
PROGRESS = "#9aaebf"
WARN = "#e0a100"
HALT = "#c0392b"
ACCENT = "#2f6fb0"
TOOL_COLORS = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#ff9da7",
    "#9c755f",
    "#e15759",
    "#bab0ac",
)
KIND_COLORS = {k.name: k.color for k in LOOP_KINDS}

TIMELINE_MAX = 2500
"""Calls drawn in one session's timeline; past it, calls in and around episodes stay and the rest are sampled."""
TIMELINE_TOOLS = 14
OTHER_TOOLS = "(other tools)"
TOKENS_MAX = 2500
BAR_TOP = 12
COUNTS = {"exponentformat": "B", "separatethousands": True}
"""Axis format for token counts: 1,000 then 20k, 3M, 2B (d3's SI "~s" would say 2G)."""


def _layout(height: int, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "height": height,
        "margin": {"l": 8, "r": 16, "t": 8, "b": 8},
        "font": {"family": FONT, "size": 12, "color": INK},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "hoverlabel": {"font": {"family": FONT, "size": 12}},
        # The legend starts at the figure's left edge, not the plot's: past long axis labels it would reach the
        # right, under the modebar plotly shows on hover.
        "legend": {
            "orientation": "h",
            "yanchor": "bottom",
            "y": 1.0,
            "xanchor": "left",
            "x": 0,
            "xref": "container",
            "traceorder": "normal",
        },
        "xaxis": {"gridcolor": GRID, "zerolinecolor": GRID, "automargin": True},
        "yaxis": {"gridcolor": GRID, "zerolinecolor": GRID, "automargin": True},
    }
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            base[k] = {**base[k], **v}
        else:
            base[k] = v
    return base


def plain(text: Any) -> str:
    """Transcript text bound for a chart label. plotly.js reads a small HTML subset in labels (``<br>``, ``<b>``,
    ``<a href>``) and turns entities back into characters, so escaping makes a tool called ``<a href=...>`` show
    as those characters instead of a link."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _ints(s: pl.Series) -> list[int]:
    return [int(v or 0) for v in s.to_list()]


def stuck_bars(df: pl.DataFrame, label: str, unit: str = "tokens", what: str | None = None) -> Fig:
    """Horizontal bars of wasted tokens per ``label``, split into stuck loops and loops that made progress; the
    largest on top. ``df`` has ``label``, ``episodes``, ``stuck_tokens``, ``other_tokens``, ``cost_usd``, ``full``
    (the hover name)."""
    df = df.sort(["tokens", "episodes", "full"], descending=[True, True, False]).head(BAR_TOP).reverse()
    labels = [plain(v) for v in df[label].to_list()]
    custom = [
        [plain(f), e, c]
        for f, e, c in zip(
            df["full"].to_list(), _ints(df["episodes"]), [round(float(c or 0), 2) for c in df["cost_usd"].to_list()]
        )
    ]
    hover = (
        "%{customdata[0]}<br>%{x:,} "
        + unit
        + " · %{customdata[1]:,} episodes · $%{customdata[2]:,.2f}<extra>%{fullData.name}</extra>"
    )
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": "stuck",
            "y": labels,
            "x": _ints(df["stuck_tokens"]),
            "marker": {"color": STUCK},
            "customdata": custom,
            "hovertemplate": hover,
        },
        {
            "type": "bar",
            "orientation": "h",
            "name": "made progress",
            "y": labels,
            "x": _ints(df["other_tokens"]),
            "marker": {"color": PROGRESS},
            "customdata": custom,
            "hovertemplate": hover,
        },
    ]
    return {
        "data": data,
        "layout": _layout(
            80 + 26 * max(len(labels), 2),
            barmode="stack",
            showlegend=True,
            xaxis={"title": {"text": f"{unit} in loops", "font": {"size": 11, "color": MUTED}}, **COUNTS},
            yaxis={
                "title": {"text": what or label, "font": {"size": 11, "color": MUTED}},
                "type": "category",
                "gridcolor": "rgba(0,0,0,0)",
            },
            margin={"t": 28},
        ),
    }


def daily(df: pl.DataFrame, unit: str = "tokens") -> Fig:
    """Wasted tokens per day (stuck / progress) with the number of episodes in the hover."""
    days = [d.isoformat() for d in df["day"].to_list()]
    custom = _ints(df["episodes"])
    hover = "%{x|%Y-%m-%d}<br>%{y:,} " + unit + " · %{customdata:,} episodes<extra>%{fullData.name}</extra>"
    data = [
        {
            "type": "bar",
            "name": "stuck",
            "x": days,
            "y": _ints(df["stuck_tokens"]),
            "marker": {"color": STUCK},
            "customdata": custom,
            "hovertemplate": hover,
        },
        {
            "type": "bar",
            "name": "made progress",
            "x": days,
            "y": _ints(df["other_tokens"]),
            "marker": {"color": PROGRESS},
            "customdata": custom,
            "hovertemplate": hover,
        },
    ]
    return {
        "data": data,
        "layout": _layout(
            260,
            barmode="stack",
            margin={"t": 28},
            xaxis={
                "title": {"text": "day (UTC)", "font": {"size": 11, "color": MUTED}},
                "type": "date",
                "tickformat": "%b %d",
            },
            yaxis={"title": {"text": f"{unit} in loops", "font": {"size": 11, "color": MUTED}}, **COUNTS},
        ),
    }


def _vline(x: float, color: str) -> dict[str, Any]:
    return {
        "type": "line",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "yref": "paper",
        "line": {"color": color, "width": 2, "dash": "dash"},
    }


def _vlabel(x: float, color: str, text: str) -> dict[str, Any]:
    return {
        "x": x,
        "y": 1,
        "xref": "x",
        "yref": "paper",
        "text": text,
        "showarrow": False,
        "xanchor": "left",
        "yanchor": "top",
        "xshift": 4,
        "font": {"color": color, "size": 11},
        "bgcolor": "rgba(255,255,255,0.85)",
    }


REPEATS_CAP = 40


def repeat_histogram(df: pl.DataFrame, warn: int | None, halt: int | None) -> Fig:
    """Episodes by repeat count (stuck / progress); repeat counts above ``REPEATS_CAP`` share the last bar. The
    recommended warn and halt thresholds are drawn as lines: everything right of halt is what the guard stops."""
    capped = (
        df.with_columns(pl.col("repeats").clip(upper_bound=REPEATS_CAP).alias("r"))
        .group_by("r")
        .agg(pl.col("stuck").sum(), pl.col("other").sum())
        .sort("r")
    )
    xs = _ints(capped["r"])
    names = [f"{x}+" if x == REPEATS_CAP else str(x) for x in xs]
    hover = "%{customdata} repeats<br>%{y:,} episodes<extra>%{fullData.name}</extra>"
    data = [
        {
            "type": "bar",
            "name": "stuck",
            "x": xs,
            "y": _ints(capped["stuck"]),
            "customdata": names,
            "marker": {"color": STUCK},
            "hovertemplate": hover,
        },
        {
            "type": "bar",
            "name": "made progress",
            "x": xs,
            "y": _ints(capped["other"]),
            "customdata": names,
            "marker": {"color": PROGRESS},
            "hovertemplate": hover,
        },
    ]
    hi = max([*xs, warn or 0, halt or 0, 10])  # a lone bar stays a bar, not a wall
    shapes, labels = [], []
    lines = ((warn, WARN, "warn"), (halt, HALT, "halt")) if warn != halt else ((halt, HALT, "warn and halt"),)
    for x, color, text in lines:  # one line when they coincide: two labels on one spot would overprint
        if x is not None:
            shapes.append(_vline(x - 0.5, color))
            labels.append(_vlabel(x - 0.5, color, f"{text} at {x}"))
    return {
        "data": data,
        "layout": _layout(
            280,
            barmode="stack",
            bargap=0.15,
            shapes=shapes,
            annotations=labels,
            margin={"t": 28},
            xaxis={
                "title": {"text": "repeats in the episode (count)", "font": {"size": 11, "color": MUTED}},
                "dtick": 5 if hi > 20 else 1,
                "range": [0.5, hi + 0.5],
            },
            yaxis={"title": {"text": "episodes (count)", "font": {"size": 11, "color": MUTED}}},
        ),
    }


def _keep(n: int, seqs: list[int], spans: list[tuple[int, int]], limit: int) -> list[int]:
    """Row positions to draw: all of them up to ``limit``; past it, every call in or near an episode and an even
    sample of the rest."""
    if n <= limit:
        return list(range(n))
    near = [False] * n
    pos = {s: i for i, s in enumerate(seqs)}
    for lo, hi in spans:
        for s in range(lo - 10, hi + 11):
            i = pos.get(s)
            if i is not None:
                near[i] = True
    n_near = sum(near)
    if n_near > limit // 2:  # loops everywhere: an even sample of the whole session shows them as well
        step = -(-n // limit)
        return list(range(0, n, step))
    room = limit - n_near
    step = max(1, -(-(n - n_near) // room))
    keep, k = [], 0
    for i in range(n):
        if near[i]:
            keep.append(i)
        else:
            if k % step == 0:
                keep.append(i)
            k += 1
    return keep


def timeline(
    calls: pl.DataFrame,
    episodes: list[dict[str, Any]],
    limit: int = TIMELINE_MAX,
    call_anchor: str = "call-",
    linked: list[int] | None = None,
) -> tuple[Fig, str | None]:
    """Every call as a mark on its tool's row, coloured by tool, errors crossed, loop episodes shaded by kind.
    Calls are numbered from 1 (the store's seq + 1). Clicking a call whose anchor (``call_anchor`` + number) is on
    the page jumps to it (static/loopscope.js reads ``layout.meta``). Plain lists rather than frame operations: a
    report draws a thousand of these, each small."""
    seqs = [int(v) + 1 for v in calls["seq"].to_list()]
    tools = [plain(t) for t in calls["tool"].to_list()]
    errors = calls["is_error"].to_list()
    spans = [(int(e["first_seq"]) + 1, int(e["last_seq"]) + 1) for e in episodes if e.get("first_seq") is not None]
    keep = _keep(len(seqs), seqs, spans, limit)
    counts: dict[str, int] = {}
    for t in tools:
        counts[t] = counts.get(t, 0) + 1
    order = sorted(counts, key=lambda t: (-counts[t], t))
    if len(order) > TIMELINE_TOOLS:  # dozens of MCP tools: the rarest share one row
        rare = set(order[TIMELINE_TOOLS - 1 :])
        tools = [OTHER_TOOLS if t in rare else t for t in tools]
        order = order[: TIMELINE_TOOLS - 1] + [OTHER_TOOLS]
    xs: dict[str, list[int]] = {t: [] for t in order}
    err_x: list[int] = []
    err_y: list[str] = []
    for i in keep:
        xs[tools[i]].append(seqs[i])
        if errors[i]:
            err_x.append(seqs[i])
            err_y.append(tools[i])
    data: list[dict[str, Any]] = []
    for i, tool in enumerate(order):
        color = TOOL_COLORS[i % len(TOOL_COLORS)]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": tool,
                "x": xs[tool],
                "y": [tool] * len(xs[tool]),
                "marker": {"color": color, "symbol": "line-ns", "size": 14, "line": {"width": 2, "color": color}},
                "hovertemplate": "call #%{x} · %{y}<extra></extra>",
                "showlegend": False,
            }
        )
    if err_x:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "error result",
                "x": err_x,
                "y": err_y,
                "marker": {"color": INK, "symbol": "x-thin-open", "size": 7, "line": {"width": 1.5}},
                "hovertemplate": "call #%{x} · %{y} · error<extra></extra>",
                "showlegend": True,
            }
        )
    shapes = []
    for e in episodes:
        if e.get("first_seq") is None:
            continue
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": int(e["first_seq"]) + 0.5,
                "x1": int(e["last_seq"]) + 1.5,
                "y0": 0,
                "y1": 1,
                "layer": "below",
                "fillcolor": KIND_COLORS.get(str(e.get("kind")), MUTED),
                "opacity": 0.18,
                "line": {"width": 0},
            }
        )
    # One marker-only legend entry per episode kind present, so the shading can be read.
    for kind in dict.fromkeys(str(e.get("kind")) for e in episodes if e.get("first_seq") is not None):
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{plain(kind)} episode",
                "x": [None],
                "y": [None],
                "marker": {"color": KIND_COLORS.get(kind, MUTED), "symbol": "square", "size": 12, "opacity": 0.45},
                "hoverinfo": "skip",
                "showlegend": True,
            }
        )
    note = (
        (
            f"Showing {len(keep):,} of {len(seqs):,} calls (an even sample, with the calls in and around loop "
            f"episodes kept where they are few enough)."
        )
        if len(keep) < len(seqs)
        else None
    )
    fig = {
        "data": data,
        "layout": _layout(
            70 + 30 * max(len(order), 2),
            shapes=shapes,
            showlegend=True,
            margin={"t": 30},
            meta={"callAnchor": call_anchor},
            xaxis={
                "title": {"text": "call number (from 1)", "font": {"size": 11, "color": MUTED}},
                "showgrid": False,
                "range": [-0.5, max(seqs, default=1) + 1.5],
                "zeroline": False,
            },
            yaxis={
                "title": {"text": "tool", "font": {"size": 11, "color": MUTED}},
                "type": "category",
                "categoryorder": "array",
                "categoryarray": list(reversed(order)),
                "gridcolor": GRID,
            },
        ),
    }
    return fig, note


def cumulative_tokens(turns: pl.DataFrame, loop_turns: set[str], limit: int = TOKENS_MAX) -> Fig | None:
    """Tokens spent so far against the call number, with the turns that issued loop calls marked: the slope under
    the red marks is what the loops cost. ``None`` when the transcript records no usage."""
    tokens = [int(v or 0) for v in turns["tokens"].to_list()]
    if not any(tokens):
        return None
    cum, x, loop = [], [], []
    total, last = 0, 0
    for t, seq, tid in zip(tokens, turns["last_seq"].to_list(), turns["turn_id"].to_list()):
        total += t
        last = int(seq) + 1 if seq is not None else last
        cum.append(total)
        x.append(last)
        loop.append(tid in loop_turns)
    n = len(cum)
    step = max(1, -(-n // limit))
    line = [i for i in range(n) if i % step == 0 or i == n - 1]
    marks = [i for i in range(n) if loop[i]]
    marks = marks[:: max(1, -(-len(marks) // limit))]
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "all turns",
            "x": [x[i] for i in line],
            "y": [cum[i] for i in line],
            "line": {"color": ACCENT, "width": 2, "shape": "hv"},
            "hovertemplate": "call #%{x}<br>%{y:,} tokens so far<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "turn in a loop",
            "x": [x[i] for i in marks],
            "y": [cum[i] for i in marks],
            "marker": {"color": STUCK, "size": 6},
            "hovertemplate": "call #%{x}<br>%{y:,} tokens so far · loop turn<extra></extra>",
        },
    ]
    return {
        "data": data,
        "layout": _layout(
            240,
            showlegend=True,
            margin={"t": 30},
            # The same x range as the timeline above it, so a loop's slope sits under its shaded episode.
            xaxis={
                "title": {"text": "call number (from 1)", "font": {"size": 11, "color": MUTED}},
                "zeroline": False,
                "range": [-0.5, max(max(x), 1) + 1.5],
            },
            yaxis={
                "title": {"text": "cumulative tokens (tokens)", "font": {"size": 11, "color": MUTED}},
                **COUNTS,
                "rangemode": "tozero",
            },
        ),
    }


def _setting_text(df: pl.DataFrame) -> list[str]:
    cols = [c for c in ("warn", "halt", "window", "similarity") if c in df.columns]
    rows = df.select(cols).to_dicts()
    return [" · ".join(f"{c} {r[c]}" for c in cols if r[c] is not None) for r in rows]


def percent_ticks(top: float, ticks: int = 6) -> dict[str, Any]:
    """Axis ticks for a share from 0 to ``top`` (0.044 is 4.4%): about ``ticks`` of them, a step of 1, 2 or 5 times
    a power of ten, and as many decimals as the step needs, so no two labels read the same (a 0-4% axis left to
    plotly gets a 0.5% step, which ``.0%`` prints as 1%, 1%, 2%, 2%)."""
    top = top if top > 0 else 0.01
    raw = top / ticks
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * (1 - 1e-9))
    decimals = max(0, -math.floor(math.log10(step * 100) + 1e-9))
    return {"tick0": 0, "dtick": round(step, 12), "tickformat": f".{decimals}%"}


def frontier(sweep: pl.DataFrame, front: pl.DataFrame, rec: dict[str, Any] | None) -> Fig:
    """Every swept setting as a point (false-halt rate against tokens saved), the frontier as a line, the
    recommendation as a star: settings below the line are dominated."""
    front = front.sort("false_halt_rate")
    data = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": "setting",
            "x": [float(v or 0) for v in sweep["false_halt_rate"]],
            "y": _ints(sweep["tokens_saved"]),
            "text": _setting_text(sweep),
            "marker": {"color": PROGRESS, "size": 6, "opacity": 0.7},
            "hovertemplate": "%{text}<br>false halts %{x:.1%} · %{y:,} tokens saved<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "frontier",
            "x": [float(v or 0) for v in front["false_halt_rate"]],
            "y": _ints(front["tokens_saved"]),
            "text": _setting_text(front),
            "line": {"color": ACCENT, "width": 2, "shape": "hv"},
            "marker": {"color": ACCENT, "size": 7},
            "hovertemplate": "%{text}<br>false halts %{x:.1%} · %{y:,} tokens saved<extra>frontier</extra>",
        },
    ]
    if rec and rec.get("false_halt_rate") is not None and rec.get("tokens_saved") is not None:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "recommended",
                "x": [float(rec["false_halt_rate"])],
                "y": [int(rec["tokens_saved"])],
                "text": [f"warn {rec['warn']} · halt {rec['halt']}"],
                "marker": {"color": HALT, "size": 16, "symbol": "star", "line": {"color": "#fff", "width": 1}},
                "cliponaxis": False,
                "hovertemplate": "%{text}<br>false halts %{x:.1%} · %{y:,} tokens saved<extra>recommended</extra>",
            }
        )
    # Ranges with room around the largest point, so the recommendation's star is never cut at the plot's edge.
    xs = [float(v or 0) for v in sweep["false_halt_rate"]] + (
        [float(rec["false_halt_rate"])] if rec and rec.get("false_halt_rate") is not None else []
    )
    ys = _ints(sweep["tokens_saved"]) + (
        [int(rec["tokens_saved"])] if rec and rec.get("tokens_saved") is not None else []
    )
    xmax, ymax = max(xs, default=0.0) or 0.01, max(ys, default=0) or 1
    return {
        "data": data,
        "layout": _layout(
            340,
            showlegend=True,
            margin={"t": 30, "r": 24},
            xaxis={
                "title": {"text": "sessions with a false halt (%)", "font": {"size": 11, "color": MUTED}},
                **percent_ticks(1.1 * xmax),
                "range": [-0.06 * xmax, 1.1 * xmax],
            },
            yaxis={
                "title": {"text": "tokens saved (tokens)", "font": {"size": 11, "color": MUTED}},
                **COUNTS,
                "range": [-0.06 * ymax, 1.12 * ymax],
            },
        ),
    }


def sweep_heatmap(sweep: pl.DataFrame) -> Fig:
    """Tokens saved for each warn × halt pair (the best over window and similarity), false-halt rate in the hover."""
    g = sweep.group_by("warn", "halt").agg(pl.col("tokens_saved").max(), pl.col("false_halt_rate").min())
    warns = sorted(int(v) for v in g["warn"].unique().to_list())
    halts = sorted(int(v) for v in g["halt"].unique().to_list())
    cell = {(int(r["warn"]), int(r["halt"])): r for r in g.to_dicts()}
    z = [[(int(cell[(w, h)]["tokens_saved"] or 0) if (w, h) in cell else None) for h in halts] for w in warns]
    fh = [[(float(cell[(w, h)]["false_halt_rate"] or 0) if (w, h) in cell else None) for h in halts] for w in warns]
    return {
        "data": [
            {
                "type": "heatmap",
                "x": halts,
                "y": warns,
                "z": z,
                "customdata": fh,
                "colorscale": [[0, "#eef3f9"], [1, ACCENT]],
                "colorbar": {"title": {"text": "tokens saved", "side": "right"}, **COUNTS, "thickness": 12},
                "hovertemplate": "warn %{y} · halt %{x}<br>%{z:,} tokens saved<br>false halts %{customdata:.1%}"
                "<extra></extra>",
                "xgap": 2,
                "ygap": 2,
            }
        ],
        "layout": _layout(
            60 + 34 * max(len(warns), 3),
            margin={"t": 8},
            xaxis={
                "title": {"text": "halt at (repeats)", "font": {"size": 11, "color": MUTED}},
                "dtick": 1,
                "showgrid": False,
            },
            yaxis={
                "title": {"text": "warn at (repeats)", "font": {"size": 11, "color": MUTED}},
                "dtick": 1,
                "showgrid": False,
            },
        ),
    }
