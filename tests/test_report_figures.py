"""Figure builders and episode views, without a store: plotly accepts every figure, long sessions are thinned
rather than dumped, and the episode text helpers cut, diff and summarise as a reader expects."""

from __future__ import annotations

import math
from datetime import date
from typing import Any

import plotly.graph_objects as go
import polars as pl
import pytest

from reports import figures
from reports.context import DiffPart
from reports.episodes import HEAD_CHARS, SHOW_CHARS, Episodes, diff_parts, letters, pattern, pretty_args
from reports.pages import pareto
from reports.redact import redact


def valid(fig: dict[str, Any]) -> dict[str, Any]:
    """plotly's own validator: an unknown property or a bad value raises."""
    go.Figure(fig)
    return fig


def test_every_builder_produces_a_figure_plotly_accepts() -> None:
    bars = pl.DataFrame(
        {
            "kind": ["streak", "cycle"],
            "episodes": [3, 1],
            "stuck_tokens": [900, 0],
            "other_tokens": [100, 50],
            "tokens": [1000, 50],
            "cost_usd": [0.3, None],
            "full": ["streak", "cycle"],
        }
    )
    valid(figures.stuck_bars(bars, "kind"))
    days = bars.with_columns(pl.Series("day", [date(2026, 3, 1), date(2026, 3, 2)]))
    valid(figures.daily(days))
    hist = pl.DataFrame({"repeats": [3, 4, 90], "stuck": [2, 1, 1], "other": [1, 0, 0]})
    fig = valid(figures.repeat_histogram(hist, 3, 5))
    assert fig["data"][0]["customdata"][-1] == f"{figures.REPEATS_CAP}+"
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["warn at 3", "halt at 5"]
    same = figures.repeat_histogram(hist, 6, 6)  # one line, one label, when warn and halt coincide
    assert [a["text"] for a in same["layout"]["annotations"]] == ["warn and halt at 6"]
    assert len(same["layout"]["shapes"]) == 1
    calls = pl.DataFrame(
        {
            "seq": list(range(6)),
            "tool": ["bash", "bash", "read", "bash", "edit", "bash"],
            "is_error": [True, None, False, True, False, False],
        }
    )
    fig, note = figures.timeline(calls, [{"first_seq": 0, "last_seq": 3, "kind": "streak"}])
    valid(fig)
    # Calls are numbered from 1: the episode of seqs 0..3 shades calls #1..#4.
    assert note is None and fig["layout"]["shapes"][0]["x0"] == 0.5 and fig["data"][0]["x"][0] == 1
    turns = pl.DataFrame(
        {"turn_index": [1, 3, 5], "turn_id": ["a", "b", "c"], "tokens": [10, 0, 30], "last_seq": [0, None, 2]}
    )
    fig = valid(figures.cumulative_tokens(turns, {"c"}))
    assert fig["data"][0]["y"] == [10, 10, 40] and fig["data"][1]["x"] == [3]
    sweep = pl.DataFrame(
        {
            "warn": [2, 3, 3],
            "halt": [4, 5, 6],
            "tokens_saved": [10, 30, 20],
            "false_halt_rate": [0.0, 0.1, 0.1],
            "window": [10, 10, 10],
        }
    )
    valid(figures.frontier(sweep, pareto(sweep), {"warn": 3, "halt": 5, "false_halt_rate": 0.1, "tokens_saved": 30}))
    valid(figures.sweep_heatmap(sweep))


def test_every_chart_names_both_axes() -> None:
    """A chart reads on its own: an axis title (with its unit) on each axis of every builder's figure."""
    bars = pl.DataFrame(
        {
            "kind": ["streak"],
            "episodes": [3],
            "stuck_tokens": [900],
            "other_tokens": [100],
            "tokens": [1000],
            "cost_usd": [0.3],
            "full": ["streak"],
        }
    )
    days = bars.with_columns(pl.Series("day", [date(2026, 3, 1)]))
    hist = pl.DataFrame({"repeats": [3], "stuck": [2], "other": [1]})
    calls = pl.DataFrame({"seq": [0, 1], "tool": ["bash", "bash"], "is_error": [False, False]})
    turns = pl.DataFrame({"turn_index": [1], "turn_id": ["a"], "tokens": [10], "last_seq": [0]})
    sweep = pl.DataFrame({"warn": [2, 3], "halt": [4, 5], "tokens_saved": [10, 30], "false_halt_rate": [0.0, 0.1]})
    rec = {"warn": 3, "halt": 5, "false_halt_rate": 0.1, "tokens_saved": 30}
    figs = [
        figures.stuck_bars(bars, "kind", "tokens", "loop kind"),
        figures.daily(days),
        figures.repeat_histogram(hist, 3, 5),
        figures.timeline(calls, [])[0],
        figures.cumulative_tokens(turns, set()),
        figures.frontier(sweep, pareto(sweep), rec),
        figures.sweep_heatmap(sweep),
    ]
    for fig in figs:
        for axis in ("xaxis", "yaxis"):
            assert fig["layout"][axis]["title"]["text"], (axis, fig["layout"])
    # The recommendation's star sits inside the axes' ranges, not on their edge, and is never clipped.
    front = figs[5]
    star = front["data"][-1]
    assert star["cliponaxis"] is False
    assert front["layout"]["xaxis"]["range"][1] > 0.1 and front["layout"]["yaxis"]["range"][1] > 30


def test_no_usage_means_no_token_chart() -> None:
    turns = pl.DataFrame({"turn_index": [0], "turn_id": ["a"], "tokens": [0], "last_seq": [0]})
    assert figures.cumulative_tokens(turns, set()) is None


def test_a_long_session_timeline_keeps_episode_calls_and_samples_the_rest() -> None:
    n = 20_000
    calls = pl.DataFrame({"seq": list(range(n)), "tool": ["bash"] * n, "is_error": [False] * n})
    fig, note = figures.timeline(calls, [{"first_seq": 15_000, "last_seq": 15_299, "kind": "streak"}], limit=2000)
    xs = fig["data"][0]["x"]
    assert len(xs) <= 2000 and set(range(15_000, 15_300)) <= set(xs)
    assert note and "20,000" in note


def test_a_timeline_with_dozens_of_tools_folds_the_rarest_into_one_row() -> None:
    tools = [f"mcp_{i:02d}" for i in range(40)] * 2 + ["bash"] * 10
    calls = pl.DataFrame({"seq": list(range(len(tools))), "tool": tools, "is_error": [False] * len(tools)})
    fig, _ = figures.timeline(calls, [])
    rows = fig["layout"]["yaxis"]["categoryarray"]
    assert len(rows) == figures.TIMELINE_TOOLS and rows[-1] == "bash" and rows[0] == figures.OTHER_TOOLS
    assert sum(len(t["x"]) for t in fig["data"]) == len(tools)


def _tick_labels(axis: dict[str, Any]) -> list[str]:
    """The labels plotly draws on a linear axis with ``tick0``/``dtick`` set: every multiple of the step inside the
    range, printed with the axis's d3 percent format (``.N%``)."""
    lo, hi = axis["range"]
    step, decimals = axis["dtick"], int(axis["tickformat"][1:-1])
    first = math.ceil((lo - axis["tick0"]) / step - 1e-9)
    values = [axis["tick0"] + k * step for k in range(first, math.floor((hi - axis["tick0"]) / step + 1e-9) + 1)]
    return [f"{v * 100:.{decimals}f}%" for v in values]


@pytest.mark.parametrize("top", [0.04, 0.0, 0.003, 0.012, 0.07, 0.25, 0.6, 1.0])
def test_frontier_x_axis_never_repeats_a_tick_label(top: float) -> None:
    """A 0-4% false-halt axis read 0%, 1%, 1%, 2%, 2%, ... (a 0.5% step printed without decimals): the step now
    follows the range and the labels carry the decimals it needs, on any range."""
    sweep = pl.DataFrame(
        {"warn": [2, 3, 4], "halt": [4, 5, 6], "tokens_saved": [10, 30, 20], "false_halt_rate": [0.0, top / 2, top]}
    )
    fig = valid(figures.frontier(sweep, pareto(sweep), None))
    labels = _tick_labels(fig["layout"]["xaxis"])
    assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
    assert "0%" in labels[0] and float(labels[-1][:-1]) >= 100 * top * 0.7


def test_pareto_frontier_keeps_only_undominated_settings() -> None:
    sweep = pl.DataFrame(
        {
            "warn": [1, 2, 3, 4],
            "halt": [2, 3, 4, 5],
            "tokens_saved": [100, 80, 150, 90],
            "false_halt_rate": [0.0, 0.05, 0.1, 0.2],
        }
    )
    assert pareto(sweep)["tokens_saved"].to_list() == [100, 150]


@pytest.mark.parametrize(
    ("labels", "period", "expected"),
    [
        (["A"] * 6, 1, "A ×6"),
        (["A", "B"] * 3, 2, "(A B) ×3"),
        (["A", "B", "C"] * 2 + ["A"], 3, "(A B C) ×2 + A"),
        (["A", "A", "B", "A"], None, "A ×2 · B · A"),
        (["A", "B", "C", "D"], None, "A · B · C · D"),
    ],
)
def test_pattern(labels: list[str], period: int | None, expected: str) -> None:
    assert pattern(labels, period) == expected


def test_letters_go_past_z() -> None:
    assert [letters(i) for i in (0, 25, 26, 27)] == ["A", "Z", "AA", "AB"]


def test_diff_is_word_level() -> None:
    parts = diff_parts("grep -n x | head -20", "grep -n x | head -30")
    assert parts == [DiffPart("equal", "grep -n x | head -"), DiffPart("delete", "20"), DiffPart("insert", "30")]


def test_pretty_args_unquotes_strings_and_keeps_multiline_commands() -> None:
    assert pretty_args('{"command":"ls -la\\npwd","timeout":5}') == "command: \n  ls -la\n  pwd\ntimeout: 5"
    assert pretty_args('{"path":"a"') == '{"path":"a"'  # clipped JSON is shown as stored


def test_clip_redacts_before_cutting_and_counts_what_is_left_out() -> None:
    key = "sk-ant-" + "api03-" + "x" * 40
    text = "a" * (HEAD_CHARS - 10) + " " + key + " " + "b" * 10_000  # the key straddles the cut
    c = Episodes(redact).clip(text, stored_len=len(text) + 50_000)
    shown = c.head + c.rest
    assert "x" * 20 not in shown and "[REDACTED anthropic-key]" in shown
    assert len(shown) == SHOW_CHARS and c.omitted == len(redact(text)) + 50_000 - SHOW_CHARS


def test_diff_of_unrelated_edits_stays_readable() -> None:
    """Four unrelated edits diff line by line (whole lines removed and added), not character by character; a flag
    that changed inside one long line still diffs word by word."""
    from reports.episodes import diff_parts

    before = "path: src/a.py\nold: def alpha(x):\n    return x + 1\nnew: def alpha(x):\n    return x + 2"
    after = "path: docs/readme.md\nold: ## Install\nRun make.\nnew: ## Install\nRun make install."
    parts = diff_parts(before, after)
    deleted = "".join(p.text for p in parts if p.op == "delete")
    inserted = "".join(p.text for p in parts if p.op == "insert")
    assert "def alpha(x):" in deleted and "## Install" in inserted
    # No part is a fragment of a word: every changed part is made of whole lines or whole words.
    assert len(parts) <= 8
    word = diff_parts("grep -n handler src/app.js | head -20", "grep -n handler src/app.js | head -30")
    assert [(p.op, p.text) for p in word if p.op != "equal"] == [("delete", "20"), ("insert", "30")]


def test_calls_that_differ_only_in_commentary_are_one_variant_of_the_episode() -> None:
    """A streak of one Bash command whose `description` the model rewrote each time is one action repeated (the
    finding counts it so): the card shows one variant `A ×3` and no diff of descriptions; a different command is a
    second variant."""
    calls = [
        {
            "call_id": f"c{i}",
            "seq": i,
            "tool": "Bash",
            "args": f'{{"command": "{cmd}", "description": "{desc}"}}',
            "call_key": f"Bash|{cmd}|{desc}",
            "action_key": f"Bash|{cmd}",
            "result_key": "r1",
            "result_text": "psql: FATAL: password authentication failed",
        }
        for i, (cmd, desc) in enumerate(
            [("psql -c 1", "check db"), ("psql -c 1", "retry db check"), ("psql -c 1", "db again"), ("ls", "list")]
        )
    ]
    f = {"kind": "streak", "call_ids": [c["call_id"] for c in calls], "first_seq": 0, "last_seq": 3, "stuck": True}
    ep = Episodes(redact).build(f, calls, [], "e1")
    assert [(v.label, v.count) for v in ep.calls] == [("A", 3), ("B", 1)]
    assert ep.pattern.startswith("A") and "B" in ep.pattern
    assert [(d.before, d.after) for d in ep.diffs] == [("A", "B")]


def test_dollars_with_progress_are_not_the_rounding_residue_of_two_sums() -> None:
    """The same loops summed in another order (a Parquet export) leave a residue of 1e-17 dollars, which the index
    printed as "<$0.01" beside the store's "$0.00"."""
    from reports.fmt import usd
    from reports.pages import progress_usd

    loops = [0.1, 0.2, 0.3]
    assert usd(progress_usd(sum(loops), sum(reversed(loops)))) == "$0.00"
    assert usd(progress_usd(0.3, 0.1)) == "$0.20" and progress_usd(0.1, 0.3) == 0.0
