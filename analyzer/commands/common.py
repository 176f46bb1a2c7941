"""What every command shares: the store option, the listing options (``--format``/``--output``), the session filter
options (``--since``/``--until``/``--agent``/``--project``), error handling, and progress.

As in sqlite-utils, one decorator gives every command that reads the store the same options: ``@scoped`` adds
``--db`` and the four filters and hands the command a ``Scope``; ``@listing`` adds ``--format``/``--output`` too and
hands it a ``Listing`` that writes its rows."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeVar

import typer
from rich.console import Console

from analyzer.errors import LoopscopeError
from analyzer.ingest import formats
from analyzer.store.filters import SessionFilter
from analyzer.commands.output import OutputFormat

if TYPE_CHECKING:
    import polars as pl

    from analyzer.store.store import Store

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


@dataclass(frozen=True)
class Scope:
    """The store and the sessions a command works on: ``--db`` and the four filter options, gathered."""

    db: Path
    filter: SessionFilter

    def store(self, read_only: bool = True) -> "Store":
        """The store, opened the one way every command opens it; use it as a context manager."""
        from analyzer.store.store import Store

        return Store(self.db, read_only=read_only)


@dataclass(frozen=True)
class Listing(Scope):
    """A ``Scope`` plus how to write the command's rows (``--format``, ``--output``)."""

    format: OutputFormat = OutputFormat.table
    output: Path | None = None

    def write(self, df: "pl.DataFrame", title: str, table_columns: list[str] | None = None) -> None:
        from analyzer.commands.output import write_frame

        write_frame(df, self.format, self.output, title=title, table_columns=table_columns)


_SCOPE_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("db", DbOpt, None), ("since", SinceOpt, None), ("until", UntilOpt, None), ("agent", AgentOpt, None),
    ("project", ProjectOpt, None),
)
_ROW_OPTIONS: tuple[tuple[str, Any, Any], ...] = (("format", FormatOpt, OutputFormat.table), ("output", OutputOpt, None))


def _adding_options(fn: F, name: str, options: tuple[tuple[str, Any, Any], ...], make: Callable[..., Any]) -> F:
    """``fn`` with ``options`` added to its signature (after its own); their values reach it as one object, the
    parameter ``name``. Errors are handled as ``handle_errors`` does."""
    sig = inspect.signature(fn, eval_str=True)
    own = [p for p in sig.parameters.values() if p.name != name]
    added = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a) for n, a, d in options]

    @wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        values = {n: kwargs.pop(n) for n, _, _ in options}
        flt = session_filter(values.pop("since"), values.pop("until"), values.pop("agent"), values.pop("project"))
        kwargs[name] = make(db=db_path(values.pop("db")), filter=flt, **values)
        return fn(**kwargs)

    wrapper.__signature__ = sig.replace(parameters=own + added)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**{p.name: p.annotation for p in own}, **{n: a for n, a, _ in options}}
    return handle_errors(wrapper)  # type: ignore[return-value]


def scoped(fn: F) -> F:
    """Add ``--db``, ``--since``, ``--until``, ``--agent``, ``--project``; the command receives ``scope: Scope``."""
    return _adding_options(fn, "scope", _SCOPE_OPTIONS, Scope)


def listing(fn: F) -> F:
    """``scoped`` plus ``--format`` and ``--output``; the command receives ``listing: Listing``."""
    return _adding_options(fn, "listing", _SCOPE_OPTIONS + _ROW_OPTIONS, Listing)


__all__ = [
    "AgentOpt", "DbOpt", "FormatOpt", "Listing", "OutputFormat", "OutputOpt", "ProjectOpt", "QuietOpt", "Scope",
    "SinceOpt", "UntilOpt", "db_path", "err", "handle_errors", "listing", "out", "scoped", "session_filter",
    "with_progress",
]
