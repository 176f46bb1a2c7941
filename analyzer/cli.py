"""The ``loopscope`` command: a thin shell over the library. Options are parsed here, work is done in the library,
and library errors become one line on stderr and a non-zero exit."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer
from rich.console import Console

from . import __version__, queries, store
from .errors import LoopscopeError
from .filters import SessionFilter
from .output import OutputFormat, write_frame

app = typer.Typer(
    name="loopscope",
    help="Find doom loops in coding-agent transcripts, what they cost, and how loop guards would have done.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False)
out = Console(highlight=False)

F = TypeVar("F", bound=Callable[..., Any])

# -- options every command shares ------------------------------------------------------------------------------------
DbOpt = Annotated[
    Optional[Path],
    typer.Option("--db", help="DuckDB store file. Default: $LOOPSCOPE_DB or ./loopscope.duckdb.", show_default=False),
]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")]
OutputOpt = Annotated[
    Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.", show_default=False)
]
SinceOpt = Annotated[Optional[str], typer.Option("--since", help="Only sessions started on or after this date (YYYY-MM-DD).", show_default=False)]
UntilOpt = Annotated[Optional[str], typer.Option("--until", help="Only sessions started on or before this date (YYYY-MM-DD).", show_default=False)]
AgentOpt = Annotated[Optional[str], typer.Option("--agent", help="Only this agent's sessions: pi, claude_code, codex, openai_messages.", show_default=False)]
ProjectOpt = Annotated[Optional[str], typer.Option("--project", help="Only sessions whose working directory contains this text.", show_default=False)]


def _db(db: Path | None) -> Path:
    return db if db is not None else store.default_db_path()


def handle_errors(fn: F) -> F:
    """Library errors become one line on stderr and the error's exit code; never a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LoopscopeError as exc:
            err.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err.print("interrupted; the store keeps every chunk that finished")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def _version(value: bool) -> None:
    if value:
        out.print(f"loopscope {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")] = False,
) -> None:
    """Find doom loops in coding-agent transcripts, what they cost, and how loop guards would have done."""


@app.command()
@handle_errors
def ingest(
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Transcript files or folders. Default: the agents' own folders that exist "
             "(~/.pi/agent/sessions, ~/.claude/projects, ~/.codex/sessions).", show_default=False)] = None,
    db: DbOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar and no summary.")] = False,
    workers: Annotated[Optional[int], typer.Option("--workers", help="Parser processes. Default: one per core.", show_default=False)] = None,
) -> None:
    """Load every transcript under PATHS into the DuckDB store. Unchanged files are skipped; changed files replace
    their rows; each chunk of files lands in one transaction."""
    from .ingest.pipeline import ingest as run_ingest

    summary = _with_progress("ingest", quiet, lambda cb: run_ingest(paths or None, _db(db), workers=workers, progress=cb))
    if not quiet:
        _print_ingest_summary(summary)


def _with_progress(label: str, quiet: bool, job: Callable[[Callable[[int, int], None] | None], Any]) -> Any:
    """Run ``job`` with a byte progress bar on stderr when stderr is a terminal."""
    if quiet or not sys.stderr.isatty():
        return job(None)
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    with Progress(TextColumn(f"[bold]{label}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeRemainingColumn(), console=err, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def cb(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return job(cb)


def _print_ingest_summary(s: Any) -> None:
    out.print(
        f"files: {s.files_seen} seen, {s.files_ingested} ingested, {s.files_unchanged} unchanged, "
        f"{len(s.skipped)} skipped\n"
        f"sessions: {s.sessions:,}  calls: {s.calls:,}  tokens: {s.tokens:,}  "
        f"errors: {s.errors:,}  ({s.bytes / 1e6:,.1f} MB in {s.seconds:.2f} s)"
    )
    by_reason: dict[str, list[str]] = {}
    for path, reason in s.skipped:
        by_reason.setdefault(reason, []).append(path)
    for reason, paths in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        more = f" (+{len(paths) - 1} more)" if len(paths) > 1 else ""
        out.print(f"  skipped: {reason}: {paths[0]}{more}", soft_wrap=True)
    if s.errors:
        out.print(f"  {s.errors:,} unreadable line(s) recorded in the ingest_errors table")


@app.command()
@handle_errors
def sessions(
    db: DbOpt = None,
    format: FormatOpt = OutputFormat.table,
    output: OutputOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    agent: AgentOpt = None,
    project: ProjectOpt = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="At most this many rows.", show_default=False)] = None,
) -> None:
    """List sessions with their totals, most expensive first."""
    flt = SessionFilter.parse(since, until, agent, project)
    con = store.connect(_db(db), read_only=True)
    try:
        df = queries.sessions(con, flt, limit)
    finally:
        con.close()
    write_frame(df, format, output, title="sessions", table_columns=queries.SESSION_TABLE_COLUMNS)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
