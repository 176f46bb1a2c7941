"""``loopscope policies`` and ``loopscope replay``: what each shipped loop guard would have done on the store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from analyzer.commands.common import FormatOpt, Listing, OutputOpt, err, handle_errors, listing
from analyzer.commands.output import OutputFormat, table_width
from analyzer.commands.params import choice, whole_number
from analyzer.errors import UsageError

if TYPE_CHECKING:
    import polars as pl
    from rich.console import Console

# The library (polars, DuckDB, the guards) is imported inside the commands, so every other command starts fast.

PolicyOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--policy",
        "-p",
        help="Policy to use: a preset (open-codesign, gitagent, pi-anti-doom-loop (the seed's rules), "
        "pi-anti-doom-loop@0.0.7 (the published code), gemini-cli, cline, roo-code, opencode, "
        "openhands), a policy from --policy-file, or all. Repeatable.",
        show_default=False,
        metavar="NAME",
    ),
]
PolicyFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--policy-file",
        help="TOML file of custom policies ([policies.<name>] tables with base = a preset).",
        show_default=False,
    ),
]


class HaltScope(str, Enum):
    """What a halt saves (``--scope``): the rest of its run, or the rest of the session."""

    run = "run"
    session = "session"


SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Change a setting for this run: NAME=VALUE (tool lists comma-separated). Repeatable.",
        show_default=False,
        metavar="NAME=VALUE",
    ),
]


def _overrides(sets: list[str] | None, warn: int | None, halt: int | None, window: int | None) -> dict[str, str]:
    from analyzer.guards.policies import parse_sets

    out = parse_sets(sets or [])
    for name, value in (("warn", warn), ("halt", halt), ("window", window)):
        if value is not None:
            out[name] = str(value)
    return out


@handle_errors
def policies(
    policy: PolicyOpt = None,
    policy_file: PolicyFileOpt = None,
    format: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
) -> None:
    """List the loop-guard policies with how each counts, resets and escalates.

    With one --policy, list every setting of that policy with the guard's default and its meaning.
    """
    from analyzer.commands.output import write_frame
    from analyzer.guards.policies import policies_frame, resolve, settings_frame

    chosen = resolve(policy or ["all"], policy_file)
    if policy and len(chosen) == 1 and "all" not in [p.lower() for p in policy]:
        write_frame(settings_frame(chosen[0]), format, output, title=f"{chosen[0].name} ({chosen[0].engine})")
        return
    df = policies_frame(chosen)
    if format is OutputFormat.table:
        _print_cards(df, output)
    else:
        write_frame(df, format, output, title="policies")


CARD_WIDTH = 100
"""The policy cards' width at most, on a terminal or not (piped, rich would be told 200): their values are sentences,
wrapped to it."""


def _print_cards(df: pl.DataFrame, output: Path | None) -> None:
    """One card per policy: the descriptions are sentences, too long for the columns of one table. Every field is
    there whole, wrapped to fit ``CARD_WIDTH`` (or a narrower terminal)."""
    from rich.table import Table

    from analyzer.guards.policies import POLICY_TABLE_COLUMNS

    with _console(output, max_width=CARD_WIDTH) as console:
        for row in df.to_dicts():
            card = Table(title=f"{row['policy']}", title_justify="left", show_header=False, box=None, padding=(0, 2))
            card.add_column(style="bold", no_wrap=True)
            card.add_column(overflow="fold")
            for field in ["description"] + POLICY_TABLE_COLUMNS[1:] + ["source"]:
                card.add_row(field, row[field])
            console.print(card)
            console.print()


@listing
def replay(
    listing: Listing,
    policy: PolicyOpt = None,
    policy_file: PolicyFileOpt = None,
    sets: SetOpt = None,
    warn: Annotated[
        int | None, whole_number("--warn", min=1, help="Shortcut for --set warn=N.", show_default=False)
    ] = None,
    halt: Annotated[
        int | None, whole_number("--halt", min=1, help="Shortcut for --set halt=N.", show_default=False)
    ] = None,
    window: Annotated[
        int | None, whole_number("--window", min=1, help="Shortcut for --set window=N.", show_default=False)
    ] = None,
    scope: Annotated[
        HaltScope,
        choice(
            HaltScope,
            "--scope",
            help="What a halt saves: the rest of its run, up to the next user prompt (run), or the "
            "rest of the session (session).",
        ),
    ] = HaltScope.run,
    halted: Annotated[bool, typer.Option("--halted", help="Only sessions the policy halted.")] = False,
    totals: Annotated[bool, typer.Option("--totals", help="Only the corpus totals, one row per policy.")] = False,
    calls: Annotated[
        bool,
        typer.Option(
            "--calls",
            help="One row per call the policy warned or halted (its verdict, "
            "action and reason) instead of one per session.",
        ),
    ] = False,
    workers: Annotated[
        int | None,
        whole_number(
            "--workers", min=1, help="Processes. Default: one, or one per core for large stores.", show_default=False
        ),
    ] = None,
) -> None:
    """Replay loop guards over the stored sessions: where each would warn and halt, and what a halt saves.

    One row per session and policy (first warning, halting call, calls/tokens/dollars after the halt, and whether
    the halt landed in a stuck loop, a progressing repeat, or no loop — from `loopscope scan`), then corpus totals.
    """
    from analyzer.guards.policies import resolve
    from analyzer.guards.replay import TOTALS_TABLE_COLUMNS

    if totals and calls:
        raise UsageError("--totals and --calls are two different listings; choose one")
    if not policy:
        raise UsageError("--policy is required (a preset name, a policy from --policy-file, or all)")
    chosen = resolve(policy, policy_file, _overrides(sets, warn, halt, window))
    with listing.store() as store:
        result = store.replay(chosen, listing.filter, scope=scope.value, workers=workers, verdicts=calls)
    if result.unscanned:
        n = result.sessions["session_id"].n_unique()
        err.print(
            f"note: {result.unscanned:,} of {n:,} sessions have no current findings, so their halt_on is empty; "
            "run `loopscope scan` to classify halts as stuck or progress",
            soft_wrap=True,
        )
    rows = result.sessions.filter(result.sessions["halts"] > 0) if halted else result.sessions
    tot = result.totals()
    if totals:
        listing.write(tot, "replay totals", TOTALS_TABLE_COLUMNS)
    elif calls:
        listing.write(result.verdicts, "verdicts")
    elif listing.fmt is OutputFormat.table:
        _print_tables(listing.arrange(rows), tot, listing.output, listing.chosen_columns(rows, None))
    else:
        listing.write(rows, "replay")


@contextmanager
def _console(output: Path | None, max_width: int | None = None) -> Iterator[Console]:
    """A console on stdout or the --output file; wide when not a terminal (rich assumes 80 columns there), but never
    wider than ``max_width``."""
    from rich.console import Console

    fh = open(output, "w", encoding="utf-8") if output else None
    try:
        console = Console(file=fh, width=table_width(output), highlight=False)
        if max_width is not None and console.width > max_width:
            console.width = max_width
        yield console
    finally:
        if fh:
            fh.close()


def _call_numbers(rows: pl.DataFrame) -> pl.DataFrame:
    """The warning and halting calls as a person counts them, from 1 (``#12``), instead of the transcript's ids."""
    import polars as pl

    def number(col: str) -> pl.Expr:
        return (
            pl.when(pl.col(col).is_null())
            .then(pl.lit(None, dtype=pl.String))
            .otherwise(pl.format("#{}", pl.col(col) + 1))
        )

    out = []
    for seq, name in (("first_warn_seq", "first_warn_call_id"), ("halt_seq", "halt_call_id")):
        if seq in rows.columns:
            out.append(number(seq).alias(name))
    return rows.with_columns(out) if out else rows


def _print_tables(rows: pl.DataFrame, tot: pl.DataFrame, output: Path | None, columns: list[str] | None = None) -> None:
    """The session table, then the totals, on one console (``write_frame`` would overwrite --output)."""
    from analyzer.commands.output import render_table
    from analyzer.guards.replay import SESSION_TABLE_COLUMNS, TOTALS_TABLE_COLUMNS

    shown = _call_numbers(rows).rename({"first_warn_call_id": "first_warn", "halt_call_id": "halt"})
    table_cols = [
        {"first_warn_call_id": "first_warn", "halt_call_id": "halt"}.get(c, c)
        for c in (columns or SESSION_TABLE_COLUMNS)
    ]

    with _console(output) as console:
        if rows.height == 0:
            console.print("(no sessions)")
        else:
            console.print(
                render_table(
                    shown.select([c for c in table_cols if c in shown.columns]), "replay", total_width=console.width
                )
            )
        console.print(render_table(tot.select(TOTALS_TABLE_COLUMNS), "totals", total_width=console.width))
