"""``loopscope ingest`` and ``loopscope sessions``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from analyzer.commands.common import (
    DbOpt,
    FullResultsOpt,
    Listing,
    QuietOpt,
    err,
    handle_errors,
    listing,
    out,
    with_progress,
)
from analyzer.commands.params import whole_number


@handle_errors
def ingest(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Transcript files or folders. Default: the agents' own folders that exist "
            "(~/.pi/agent/sessions, ~/.claude/projects, ~/.codex/sessions).",
            show_default=False,
        ),
    ] = None,
    db: DbOpt = None,
    quiet: QuietOpt = False,
    workers: Annotated[
        int | None,
        whole_number("--workers", min=1, help="Parser processes. Default: one per core.", show_default=False),
    ] = None,
    full_results: FullResultsOpt = None,
) -> None:
    """Load every transcript under PATHS into the DuckDB store.

    The format is detected from content. Unchanged files are skipped; a changed file replaces its rows; each chunk
    of files lands in one transaction, so an interrupted ingest leaves a consistent store that the next run completes.
    """
    from analyzer.library import Store

    with Store.open(db, write=True) as store:
        summary = with_progress(
            "ingest",
            quiet,
            lambda cb: store.ingest(paths or None, workers=workers, progress=cb, full_results=full_results),
        )
    for note in summary.notes:
        err.print(f"note: {note}", soft_wrap=True, markup=False)
    if not quiet:
        print_ingest_summary(summary)


def print_ingest_summary(s: Any) -> None:
    out.print(
        f"files: {s.files_seen} seen, {s.files_ingested} ingested{s.companion_text()}, {s.files_unchanged} unchanged, "
        f"{len(s.skipped)} skipped\n"
        f"sessions: {s.sessions:,}  calls: {s.calls:,}  tokens: {s.tokens:,}  "
        f"errors: {s.errors:,}  ({s.bytes / 1e6:,.1f} MB in {s.seconds:.2f} s)",
        soft_wrap=True,
    )
    for line in s.skipped_lines():
        out.print(f"  {line}", soft_wrap=True, markup=False)
    if s.errors:
        out.print(f"  {s.errors:,} unreadable line(s) recorded in the ingest_errors table")


@listing
def sessions(
    listing: Listing,
    limit: Annotated[
        int | None, whole_number("--limit", min=0, help="At most this many rows.", show_default=False)
    ] = None,
) -> None:
    """List sessions with their totals, most expensive first.

    The table shows session, agent, project, cost, wasted $ (the cost of stuck loops), loops and the main repeated
    call; --columns and --all-columns show others (tokens split into input, output, cache read and cache write).
    """
    from analyzer.store.queries import SESSION_TABLE_COLUMNS

    with listing.store() as store:
        df = store.sessions(listing.filter, None if listing.sort else limit)
    listing.write(df, "sessions", SESSION_TABLE_COLUMNS, limit=limit)
    _price_notes(df)


def _price_notes(df: Any) -> None:
    """Never a silent price: say which sessions were priced by an inexact model match or have no price at all."""
    from analyzer.commands.common import err

    if "cost_sources" not in df.columns or df.height == 0:
        return
    inexact: dict[str, int] = {}
    unknown = 0
    for sources in df["cost_sources"].to_list():
        srcs = sources or []
        for s in {s for s in srcs if s.startswith("genai-prices~")}:
            inexact[s.split("~", 1)[1]] = inexact.get(s.split("~", 1)[1], 0) + 1
        unknown += 1 if "unknown model" in srcs else 0
    for model, n in sorted(inexact.items()):
        err.print(
            f"note: {n:,} session(s) priced as {model} by an inexact model match (genai-prices); see turns.cost_source",
            soft_wrap=True,
            markup=False,
        )
    if unknown:
        err.print(
            f"note: {unknown:,} session(s) use a model with no known price: their cost leaves those turns out",
            soft_wrap=True,
            markup=False,
        )


@handle_errors
def show(
    call: Annotated[
        str, typer.Argument(help="A call id, or SESSION:SEQ (the session id and the call's seq).", show_default=False)
    ],
    db: DbOpt = None,
) -> None:
    """Print one call: its tool, arguments and whole result.

    The store keeps only the head and tail of a long result (unless ingested with --full-results); the rest is read
    back from the call's transcript file.
    """
    import sys

    from analyzer.library import Store

    with Store.open(db) as store:
        c = store.call(call)
    where = f"{c.path}:{c.line}" if c.line is not None else c.path
    result = (
        "(no result)"
        if c.result is None
        else f"{'error' if c.is_error else 'result'} ({len(c.result):,} characters):\n{c.result}"
    )
    text = f"call {c.session_id}:{c.seq}  id {c.call_id}  tool {c.tool}  ({where})\nargs: {c.args}\n{result}\n"
    sys.stdout.write(text.encode("utf-8", "replace").decode("utf-8"))  # lone surrogates (\ud800 escapes) as '?'
