"""What every command shares: the store option, the listing options (``--format``/``--output``), the session filter
options (``--since``/``--until``/``--agent``/``--project``), error handling, and progress."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer
from rich.console import Console

from analyzer.errors import LoopscopeError
from analyzer.ingest import formats
from analyzer.store.filters import SessionFilter
from analyzer.commands.output import OutputFormat

err = Console(stderr=True, highlight=False)
out = Console(highlight=False)

F = TypeVar("F", bound=Callable[..., Any])

DbOpt = Annotated[
    Optional[Path],
    typer.Option("--db", help="DuckDB store file. Default: $LOOPSCOPE_DB or ./loopscope.duckdb.", show_default=False),
]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")]
OutputOpt = Annotated[
    Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.", show_default=False)
]
SinceOpt = Annotated[Optional[str], typer.Option(
    "--since", help="Only sessions started on or after this date (YYYY-MM-DD, UTC).", show_default=False)]
UntilOpt = Annotated[Optional[str], typer.Option(
    "--until", help="Only sessions started on or before this date (YYYY-MM-DD, UTC).", show_default=False)]
AgentOpt = Annotated[Optional[str], typer.Option(
    "--agent", help=f"Only this agent's sessions: {', '.join(formats.names())}.", show_default=False)]
ProjectOpt = Annotated[Optional[str], typer.Option(
    "--project", help="Only sessions whose working directory contains this text.", show_default=False)]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar and no summary.")]


def db_path(db: Path | None) -> Path:
    from analyzer.store.db import default_db_path

    return db if db is not None else default_db_path()


def session_filter(since: str | None, until: str | None, agent: str | None, project: str | None) -> SessionFilter:
    """The one place the four filter options become a filter, so every command applies them the same way."""
    return SessionFilter.parse(since, until, agent, project, formats.agent_names() if agent else None)


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


def with_progress(label: str, quiet: bool, job: Callable[[Callable[[int, int], None] | None], Any],
                  unit: str = "bytes") -> Any:
    """Run ``job(progress)`` with a progress bar on stderr when stderr is a terminal; ``progress(done, total)``."""
    if quiet or not sys.stderr.isatty():
        return job(None)
    from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeRemainingColumn, TransferSpeedColumn)

    cols = (DownloadColumn(), TransferSpeedColumn()) if unit == "bytes" else (MofNCompleteColumn(),)
    with Progress(TextColumn(f"[bold]{label}"), BarColumn(), *cols, TimeRemainingColumn(), console=err,
                  transient=True) as bar:
        task = bar.add_task(label, total=None)

        def cb(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return job(cb)


__all__ = [
    "AgentOpt", "DbOpt", "FormatOpt", "OutputFormat", "OutputOpt", "ProjectOpt", "QuietOpt", "SinceOpt", "UntilOpt",
    "db_path", "err", "handle_errors", "out", "session_filter", "with_progress",
]
