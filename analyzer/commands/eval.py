"""``loopscope eval``: the findings and the guards measured on a person's labels."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from analyzer.commands.common import Listing, QuietOpt, err, listing
from analyzer.commands.output import OutputFormat, table_width
from analyzer.commands.params import choice, whole_number
from analyzer.commands.replay import PolicyFileOpt, SetOpt
from analyzer.errors import UsageError

if TYPE_CHECKING:
    import polars as pl
    from rich.table import Table

    from analyzer.evaluate.evaluation import Evaluation
    from analyzer.guards.policies import Policy

# polars, DuckDB, the scorer and the guards are imported inside the command, so the CLI starts fast.


CELL = 160  # characters of a disagreement's cell: a `loopscope show` command is copied whole


class Rows(str, Enum):
    """Which rows ``--rows`` lists (and ``--sort``/``--columns`` apply to)."""

    figures = "figures"
    disagreements = "disagreements"
    scorecard = "scorecard"


@listing
def evaluate(
    listing: Listing,
    files: Annotated[
        list[Path] | None,
        typer.Argument(help="More labels files (as --labels).", show_default=False, metavar="[FILE]..."),
    ] = None,
    labels: Annotated[
        list[Path] | None,
        typer.Option(
            "--labels",
            help='Labels file: JSON as the report\'s "Export labels" writes it, a JSON array or JSON Lines of label '
            "objects (the project's realdata records too), or CSV. Repeatable.",
            show_default=False,
            metavar="FILE",
        ),
    ] = None,
    by: Annotated[
        str | None,
        typer.Option("--by", help="Also score per group: format, kind, tool (comma-separated).", show_default=False),
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            "-p",
            help="Score this policy too, beside every preset: a preset changed by --set, or a policy of "
            "--policy-file. Repeatable.",
            show_default=False,
            metavar="NAME",
        ),
    ] = None,
    policy_file: PolicyFileOpt = None,
    sets: SetOpt = None,
    guards: Annotated[
        bool, typer.Option("--guards/--no-guards", help="Replay the guards over the labelled sessions and score them.")
    ] = True,
    rows: Annotated[
        Rows | None,
        choice(
            Rows,
            "--rows",
            help="List only these rows: figures, disagreements or scorecard (csv, ndjson and parquet list the "
            "figures unless told). --sort and --columns apply to them.",
            show_default=False,
        ),
    ] = None,
    roots: Annotated[
        list[Path] | None,
        typer.Option(
            "--root",
            help="Folder a label's relative `file` may start from (besides the current folder). Repeatable.",
            show_default=False,
            metavar="DIR",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        whole_number("--workers", min=1, help="Processes for the guard replay.", show_default=False),
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """Measure the findings and the loop guards on your own labels.

    Precision (stuck findings on a `loop` label / stuck findings on a `loop` or `not_loop` label), recall (`loop`
    labels with a stuck finding on them / `loop` labels) and healthy-kept (`not_loop` labels, and `loop-free`
    sessions, with no stuck finding on them / those labels), overall and per --by group; every disagreement, with
    the `loopscope show` command that prints its first call; then the guard scorecard: for every preset (and the
    --policy-file/--set policies) the labelled loops its halts land in, the median calls from a loop's start to the
    halt, the false halts (on a `not_loop` span or in a `loop-free` session), and the tokens and dollars its halts
    on loops save. `--format json` prints one object with all of it.
    """
    from analyzer.evaluate.evaluation import parse_by

    paths = [*(labels or []), *(files or [])]
    if not paths:
        raise UsageError("--labels FILE is required (a labels file: the report's export, or your own)")
    groups = parse_by(by)
    policies = _policies(policy, policy_file, sets) if guards else None
    with listing.store() as store:
        ev = store.evaluate(paths, listing.filter, groups, policies, roots or (), guards=guards, workers=workers)
    if not quiet:
        for note in ev.notes:
            err.print(f"note: {note}", soft_wrap=True, markup=False)
    _write(ev, listing, rows)


def _policies(names: list[str] | None, policy_file: Path | None, sets: list[str] | None) -> list[Policy]:
    """Every preset, then the policies asked for: those --policy names (changed by --set), or every policy of
    --policy-file."""
    from analyzer.guards.policies import parse_sets, resolve

    presets = resolve(["all"])
    overrides = parse_sets(sets or [])
    if names:
        extra = resolve(names, policy_file, overrides)
    elif policy_file is not None:
        custom = [p for p in resolve(["all"], policy_file) if p.name not in {q.name for q in presets}]
        extra = [p.with_settings(overrides, origin="flags", from_text=True) for p in custom] if overrides else custom
    elif overrides:
        raise UsageError("--set changes a policy: name it with --policy (e.g. --policy open-codesign --set halt=8)")
    else:
        extra = []
    seen = {p.name for p in presets}
    return presets + [p for p in extra if not (p.name in seen or seen.add(p.name))]


def _write(ev: Evaluation, listing: Listing, rows: Rows | None) -> None:
    import orjson

    from analyzer.evaluate.evaluation import (
        DISAGREEMENT_TABLE_COLUMNS,
        FIGURE_TABLE_COLUMNS,
        GUARD_TABLE_COLUMNS,
    )

    frames = {
        Rows.figures: (ev.figures, FIGURE_TABLE_COLUMNS, "figures"),
        Rows.disagreements: (ev.disagreements, DISAGREEMENT_TABLE_COLUMNS, "disagreements"),
        Rows.scorecard: (ev.guards, GUARD_TABLE_COLUMNS, "guard scorecard"),
    }
    if rows is Rows.scorecard and ev.guards is None:
        raise UsageError("--rows scorecard needs the guard replay: leave out --no-guards")
    if rows is not None:
        df, cols, title = frames[rows]
        listing.write(df, title, cols)  # type: ignore[arg-type]
        return
    if listing.fmt is OutputFormat.json:
        data = ev.to_json()
        arranged = listing.arrange(ev.figures)
        if listing.columns:
            arranged = arranged.select(listing.chosen_columns(arranged, None))
        data["figures"] = arranged.to_dicts()
        blob = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NAIVE_UTC) + b"\n"
        if listing.output is None:
            sys.stdout.buffer.write(blob)
            sys.stdout.flush()
        else:
            listing.output.write_bytes(blob)
    elif listing.fmt is OutputFormat.table:
        _print_tables(ev, listing)
    else:
        listing.write(ev.figures, "figures")


def _texts(df: pl.DataFrame) -> pl.DataFrame:
    """Ratios with two decimals and dollars with a sign, as text (rich right-aligns them by the column's name)."""
    import polars as pl

    out = []
    for name, dtype in df.schema.items():
        col = pl.col(name)
        if name in ("precision", "recall", "healthy_kept", "halted_share"):
            out.append(col.map_elements(lambda v: f"{v:.2f}", return_dtype=pl.String).fill_null("–").alias(name))
        elif name.startswith("dollars"):
            out.append(col.map_elements(lambda v: f"${v:,.2f}", return_dtype=pl.String).alias(name))
        elif name.startswith("median"):
            out.append(col.map_elements(lambda v: f"{v:g}", return_dtype=pl.String).alias(name))
        elif dtype.is_integer():
            out.append(col.map_elements(lambda v: f"{v:,}", return_dtype=pl.String).alias(name))
    return df.with_columns(out) if out else df


def _print_tables(ev: Evaluation, listing: Listing) -> None:
    """The labels used and the headline, the figures (sorted and their columns chosen as the listing options ask),
    the disagreements, the unlabelled stuck findings, then the guard scorecard."""
    import polars as pl
    from rich.console import Console

    from analyzer.commands.output import render_table
    from analyzer.evaluate.evaluation import (
        DISAGREEMENT_TABLE_COLUMNS,
        FIGURE_TABLE_COLUMNS,
        GUARD_TABLE_COLUMNS,
        UNLABELLED,
    )

    figures = listing.arrange(ev.figures)  # a bad --sort or --columns fails before --output is opened
    cols = listing.chosen_columns(figures, FIGURE_TABLE_COLUMNS) or figures.columns
    output = listing.output
    fh = open(output, "w", encoding="utf-8") if output else None
    try:
        console = Console(file=fh, width=table_width(output), highlight=False)
        files = ", ".join(f.path for f in ev.files)
        console.print(f"labels: {files}: {ev.labels.text()}", markup=False, soft_wrap=True)
        console.print(ev.headline(), markup=False, soft_wrap=True)
        console.print(_right(render_table(_texts(figures.select(cols)), "figures", total_width=console.width), 2))
        d = ev.disagreements
        shown = d.filter(pl.col("disagreement") != UNLABELLED)
        if shown.height:
            console.print(render_table(shown.select(DISAGREEMENT_TABLE_COLUMNS), "disagreements", CELL, console.width))
        else:
            console.print("\nno disagreements: every stuck finding on a label agrees with it, and every loop was found")
        extra = d.filter(pl.col("disagreement") == UNLABELLED)
        if extra.height:
            console.print(
                render_table(
                    extra.select("session_id", "kind", "calls", "why", "show"),
                    "stuck findings on no label in the labelled sessions (listed, not counted)",
                    CELL,
                    console.width,
                )
            )
        n, s = ev.other_stuck
        if n:
            console.print(
                f"{n:,} stuck findings in {s:,} sessions without labels: not counted", markup=False, soft_wrap=True
            )
        if ev.guards is not None:
            console.print(
                _right(
                    render_table(
                        _texts(ev.guards.select(GUARD_TABLE_COLUMNS)),
                        "guard scorecard (halts on the labels; tokens saved by halts on loops)",
                        total_width=console.width,
                    ),
                    1,
                )
            )
    finally:
        if fh:
            fh.close()


def _right(table: Table, skip: int) -> Table:
    """Figures read best right-aligned (the cells are text here, so rich cannot tell); the first ``skip`` columns
    are names."""
    for col in table.columns[skip:]:
        col.justify = "right"
    return table
