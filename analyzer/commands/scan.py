"""``loopscope scan``, ``loopscope findings`` and ``loopscope summary``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from analyzer.commands.common import (
    DbOpt,
    Listing,
    OutputFormat,
    QuietOpt,
    err,
    handle_errors,
    listing,
    out,
    with_progress,
)
from analyzer.commands.params import whole_number
from analyzer.detect.rules import KINDS

if TYPE_CHECKING:
    import polars as pl

# polars, DuckDB and the detector are imported inside the commands, so every command starts fast.


@handle_errors
def scan(
    db: DbOpt = None,
    quiet: QuietOpt = False,
    workers: Annotated[
        int | None,
        whole_number(
            "--workers",
            min=1,
            help="Threads for reading and landing (the detectors run vectorised in polars, which uses "
            "every core). Default: one per core.",
            show_default=False,
        ),
    ] = None,
    reset_on_user: Annotated[
        bool,
        typer.Option(
            "--reset-on-user/--no-reset-on-user",
            help="Restart every counter at each user prompt (as almost every guard does).",
        ),
    ] = True,
    full: Annotated[bool, typer.Option("--full", help="Rescan every session, changed or not.")] = False,
) -> None:
    """Find every loop: run the detector core over each session that is new or changed since the last scan.

    Writes per-call signals (`signals`), per-message text counters (`text_signals`) and loop episodes (`findings`).
    Each group of sessions lands in one transaction; an interrupted scan is completed by the next one.
    """
    from analyzer.detect.stream.calls import Config
    from analyzer.library import Store

    config = Config(reset_on_user=reset_on_user)
    with Store.open(db, write=True) as store:
        s = with_progress(
            "scan", quiet, lambda cb: store.scan(config, workers=workers, full=full, progress=cb), unit="calls"
        )
    for note in s.notes:
        err.print(f"note: {note}", soft_wrap=True, markup=False)
    if quiet:
        return
    rate = f", {s.calls / s.seconds:,.0f} calls/s" if s.calls >= 10_000 and s.seconds > 0 else ""
    out.print(
        f"sessions: {s.sessions:,} in the store, {s.scanned:,} scanned, {s.unchanged:,} unchanged"
        + (f", {s.removed:,} removed" if s.removed else "")
        + f"\ncalls: {s.calls:,}  messages: {s.texts:,}  findings: {s.findings:,}  "
        f"({s.seconds:.2f} s, {s.workers} worker{'s' if s.workers != 1 else ''}{rate})",
        soft_wrap=True,
    )


@listing
def findings(
    listing: Listing,
    kind: Annotated[
        str | None, typer.Option("--kind", help=f"Only this kind: {', '.join(KINDS)}.", show_default=False)
    ] = None,
    min_repeats: Annotated[
        int | None,
        whole_number("--min-repeats", min=1, help="Only episodes that repeated at least N times.", show_default=False),
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="Only this session's findings.", show_default=False)
    ] = None,
    stuck: Annotated[
        bool | None,
        typer.Option(
            "--stuck/--progress", help="Only stuck loops, or only loops that made progress.", show_default=False
        ),
    ] = None,
    limit: Annotated[
        int | None, whole_number("--limit", min=0, help="At most this many rows.", show_default=False)
    ] = None,
) -> None:
    """List loop episodes, in the order they happened."""
    from analyzer.store.queries import FINDING_TABLE_COLUMNS

    with listing.store() as store:
        df = store.findings(
            listing.filter,
            kind=kind,
            min_repeats=min_repeats,
            session=session,
            stuck=stuck,
            limit=None if listing.sort else limit,
        )
    listing.write(df, "findings", FINDING_TABLE_COLUMNS, limit=limit)


@listing
def summary(listing: Listing) -> None:
    """What loops cost: sessions with loops, loops by kind and by tool, tokens and dollars in loops and their share.

    `--format json` prints one object {totals, by_kind, by_tool}; csv, ndjson and parquet print one long table with a
    `section` column.
    """
    with listing.store() as store:
        parts = store.summary(listing.filter)
    write_summary(parts, listing.fmt, listing.output)
    totals = parts["totals"].row(0, named=True)
    if totals["scanned_sessions"] < totals["sessions"]:
        err.print(
            f"{totals['sessions'] - totals['scanned_sessions']:,} of {totals['sessions']:,} sessions not "
            "scanned yet: run `loopscope scan`"
        )


def write_summary(parts: dict[str, pl.DataFrame], fmt: OutputFormat, output: Path | None) -> None:
    import orjson
    import polars as pl
    from rich.console import Console

    from analyzer.commands.output import render_table, write_frame

    if fmt is OutputFormat.table:
        wide = output is not None or not sys.stdout.isatty()
        fh = open(output, "w", encoding="utf-8") if output else None
        try:
            console = Console(file=fh, width=200 if wide else None, highlight=False)
            totals = parts["totals"].row(0, named=True)
            pairs = pl.DataFrame({"metric": list(totals), "value": [_fmt(k, v) for k, v in totals.items()]})
            console.print(render_table(pairs, "loops: totals"))
            for name, title in (("by_kind", "loops by kind"), ("by_tool", "loops by tool")):
                df = parts[name]
                console.print(render_table(df, title) if df.height else f"{title}: (none)")
        finally:
            if fh:
                fh.close()
        return
    if fmt is OutputFormat.json:
        data = (
            orjson.dumps(
                {
                    "totals": parts["totals"].row(0, named=True),
                    "by_kind": parts["by_kind"].to_dicts(),
                    "by_tool": parts["by_tool"].to_dicts(),
                },
                option=orjson.OPT_INDENT_2,
            )
            + b"\n"
        )
        if output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            Path(output).write_bytes(data)
        return
    long = pl.concat(
        [df.with_columns(pl.lit(name).alias("section")).select("section", *df.columns) for name, df in parts.items()],
        how="diagonal_relaxed",
    )
    write_frame(long, fmt, output)


def _fmt(name: str, v: Any) -> str:
    if v is None:
        return ""
    if name.endswith("_share"):
        return f"{v:.2%}"
    if name.endswith("_usd"):
        return f"${v:,.2f}"
    return f"{v:,}" if isinstance(v, int) else str(v)
