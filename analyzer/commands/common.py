"""What every command shares: the store option, the listing options (``--format``/``--output``), the session filter
options (``--since``/``--until``/``--agent``/``--project``), error handling, and progress.

As in sqlite-utils, one decorator gives every command that reads the store the same options: ``@selecting`` adds
``--db`` and the four filters and hands the command a ``Selection`` (whose ``store()`` opens the ``Store``);
``@listing`` adds ``--format``/``--output`` too and hands it a ``Listing`` that writes its rows. Option values that
are numbers or choices are typed by ``commands.params``."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from analyzer.commands.output import OutputFormat
from analyzer.commands.params import choice
from analyzer.errors import LoopscopeError, UsageError
from analyzer.ingest import formats
from analyzer.store.filters import SessionFilter

if TYPE_CHECKING:
    import polars as pl

    from analyzer.library import Store

err = Console(stderr=True, highlight=False)
out = Console(highlight=False)

F = TypeVar("F", bound=Callable[..., Any])

DbOpt = Annotated[
    Path | None,
    typer.Option("--db", help="DuckDB store file. Default: $LOOPSCOPE_DB or ./loopscope.duckdb.", show_default=False),
]
FormatOpt = Annotated[OutputFormat, choice(OutputFormat, "--format", "-f", help="Output format.")]
OutputOpt = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.", show_default=False)
]
SinceOpt = Annotated[
    str | None,
    typer.Option("--since", help="Only sessions started on or after this date (YYYY-MM-DD, UTC).", show_default=False),
]
UntilOpt = Annotated[
    str | None,
    typer.Option("--until", help="Only sessions started on or before this date (YYYY-MM-DD, UTC).", show_default=False),
]
AgentOpt = Annotated[
    str | None,
    typer.Option("--agent", help=f"Only this agent's sessions: {', '.join(formats.names())}.", show_default=False),
]
ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="Write the report even into the current folder or a folder that holds other files."),
]
ProjectOpt = Annotated[
    str | None,
    typer.Option("--project", help="Only sessions whose working directory contains this text.", show_default=False),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar and no summary.")]
FullResultsOpt = Annotated[
    bool | None,
    typer.Option(
        "--full-results/--clip-results",
        help="Store whole tool results, or only the head and tail of a long one (the default: detection is the same "
        "either way, and `loopscope show` reads a whole result back from its transcript). The store remembers the "
        "choice; switching re-reads the files stored the other way. Default: the store's choice.",
        show_default=False,
    ),
]


class SortOrder(str, Enum):
    asc = "asc"
    desc = "desc"


SortOpt = Annotated[
    str | None,
    typer.Option(
        "--sort", help="Sort the rows by this column (any of --all-columns).", show_default=False, metavar="COLUMN"
    ),
]
OrderOpt = Annotated[
    SortOrder | None,
    choice(
        SortOrder,
        "--order",
        help="Sort order: asc or desc. Default: desc for numbers, asc for text.",
        show_default=False,
    ),
]
ColumnsOpt = Annotated[
    str | None,
    typer.Option(
        "--columns",
        help="Show these columns, comma-separated (see --all-columns for their names).",
        show_default=False,
        metavar="A,B,...",
    ),
]
AllColumnsOpt = Annotated[bool, typer.Option("--all-columns", help="Show every column in the table view.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Shortcut for --format json.")]


def session_filter(since: str | None, until: str | None, agent: str | None, project: str | None) -> SessionFilter:
    """The one place the four filter options become a filter, so every command applies them the same way."""
    return SessionFilter.parse(since, until, agent, project, formats.agent_names() if agent else None)


def handle_errors(fn: F) -> F:
    """Library errors become one line on stderr and the error's exit code; never a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LoopscopeError as exc:  # its text as written (a path or DuckDB's words may hold [brackets])
            from rich.markup import escape

            err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except OSError as exc:  # disk full, a folder gone, permission: the system's own words, one line
            from rich.markup import escape

            err.print(f"[bold red]error:[/] {escape(os_error_text(exc))}", soft_wrap=True)
            raise typer.Exit(2) from None
        except Exception as exc:
            from concurrent.futures.process import BrokenProcessPool  # imported here: the CLI starts faster

            if not isinstance(exc, BrokenProcessPool):
                raise
            # a worker killed (out of memory, a signal)
            err.print(
                "[bold red]error:[/] a worker process died (out of memory, or killed); the store keeps every "
                "chunk that finished, run the command again",
                soft_wrap=True,
            )
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err.print("interrupted; the store keeps every chunk that finished")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def os_error_text(exc: OSError) -> str:
    """``[Errno 28] No space left on device: 'x'`` as a sentence: what failed and where."""
    what = exc.strerror or _first_line(exc)
    where = exc.filename if exc.filename is not None else None
    return f"{what}: {where}" if where else what


def _probe_folder(folder: Path) -> None:
    """Create and remove a file in ``folder``: the only test of writability that holds for root, read-only mounts
    and full disks alike."""
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".loopscope-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"cannot write in {folder}: {exc.strerror or _first_line(exc)}") from None


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_output_file(path: Path) -> None:
    """Fail before any work when ``--output`` cannot be written: its folder missing, it is a folder, or the folder is
    read-only."""
    if str(path) in ("", "."):
        raise UsageError("--output needs a file name")
    if path.is_dir():
        raise UsageError(f"--output {path} is a folder; give a file name")
    parent = path.absolute().parent
    if not parent.is_dir():
        raise UsageError(f"--output {path}: folder {parent} does not exist")
    if path.exists() and not path.is_file():
        raise UsageError(f"--output {path} is not a regular file")
    _probe_folder(parent)


def check_report_target(out_dir: Path, single_file: bool, force: bool) -> None:
    """Fail before any work when the report cannot be written where ``--out`` says, or would overwrite what is not a
    loopscope report: the current folder (``--out ''``), or a folder of other files, need ``--force``."""
    from reports.render import MANIFEST

    if str(out_dir) in ("", ".") and not force:
        raise UsageError("--out names the current folder; give the report a folder of its own (or pass --force)")
    html_file = single_file and out_dir.suffix.lower() in (".html", ".htm")
    folder = out_dir.absolute().parent if html_file else out_dir
    if html_file and out_dir.is_dir():
        raise UsageError(f"--out {out_dir} is a folder, not an .html file")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder} exists and is not a folder")
    if not folder.exists():
        base = _existing_ancestor(folder)
        if not base.is_dir():
            raise UsageError(f"cannot create {folder}: {base} is not a folder")
        _probe_folder(base)
        return
    if not force and not html_file and any(folder.iterdir()) and not (folder / MANIFEST).is_file():
        raise UsageError(
            f"--out {out_dir} is a folder that holds other files, not an earlier loopscope report; "
            "choose another folder (or pass --force to write into it)"
        )
    if html_file and out_dir.exists() and not force and not out_dir.is_file():
        raise UsageError(f"--out {out_dir} is not a regular file")
    _probe_folder(folder)


def with_progress(
    label: str, quiet: bool, job: Callable[[Callable[[int, int], None] | None], Any], unit: str = "bytes"
) -> Any:
    """Run ``job(progress)`` with a progress bar on stderr when stderr is a terminal; ``progress(done, total)``."""
    if quiet or not sys.stderr.isatty():
        return job(None)
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    cols = (DownloadColumn(), TransferSpeedColumn()) if unit == "bytes" else (MofNCompleteColumn(),)
    with Progress(
        TextColumn(f"[bold]{label}"), BarColumn(), *cols, TimeRemainingColumn(), console=err, transient=True
    ) as bar:
        task = bar.add_task(label, total=None)

        def cb(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return job(cb)


@dataclass(frozen=True)
class Selection:
    """The store and the sessions a command works on: ``--db`` (None: the default store) and the four filter
    options, gathered."""

    db: Path | None
    filter: SessionFilter

    def store(self, write: bool = False) -> Store:
        """The ``Store``, read-only unless ``write``; use it as a context manager."""
        from analyzer.library import Store

        return Store.open(self.db, write=write)


@dataclass(frozen=True)
class Listing(Selection):
    """A ``Selection`` plus how to write the command's rows: ``--format``/``--json``, ``--output``,
    ``--sort``/``--order``, ``--columns``/``--all-columns``."""

    format: OutputFormat = OutputFormat.table
    output: Path | None = None
    sort: str | None = None
    order: SortOrder | None = None
    columns: str | None = None
    all_columns: bool = False
    json: bool = False

    @property
    def fmt(self) -> OutputFormat:
        return OutputFormat.json if self.json else self.format

    def arrange(self, df: pl.DataFrame, limit: int | None = None) -> pl.DataFrame:
        """``df`` sorted as ``--sort``/``--order`` ask, then cut to ``limit`` rows."""
        if self.sort:
            col = self.sort.strip()
            if col not in df.columns:
                raise UsageError(f"--sort: no column {col!r}; choose from {', '.join(df.columns)}")
            numeric = df.schema[col].is_numeric() or df.schema[col].is_temporal()
            desc = self.order is SortOrder.desc if self.order is not None else numeric
            df = df.sort(col, descending=desc, nulls_last=True, maintain_order=True)
        elif self.order is not None:
            raise UsageError("--order needs --sort COLUMN")
        return df.head(limit) if limit is not None else df

    def chosen_columns(self, df: pl.DataFrame, default: list[str] | None) -> list[str] | None:
        """The columns to show: ``--columns``, every one with ``--all-columns``, else ``default``."""
        if self.columns:
            wanted = [c.strip() for c in self.columns.split(",") if c.strip()]
            unknown = [c for c in wanted if c not in df.columns]
            if unknown:
                raise UsageError(
                    f"--columns: no column {', '.join(map(repr, unknown))}; choose from {', '.join(df.columns)}"
                )
            return wanted
        if self.all_columns:
            return None
        return default

    def write(
        self, df: pl.DataFrame, title: str, table_columns: list[str] | None = None, limit: int | None = None
    ) -> None:
        """Write the rows: sorted, cut to ``limit``; the table shows ``table_columns`` (or what ``--columns`` and
        ``--all-columns`` ask for); the machine formats carry every column unless ``--columns`` names some."""
        from analyzer.commands.output import write_frame

        df = self.arrange(df, limit)
        cols = self.chosen_columns(df, table_columns)
        if self.columns and self.fmt is not OutputFormat.table and cols:
            df = df.select(cols)
        write_frame(df, self.fmt, self.output, title=title, table_columns=cols)


_SELECTION_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("db", DbOpt, None),
    ("since", SinceOpt, None),
    ("until", UntilOpt, None),
    ("agent", AgentOpt, None),
    ("project", ProjectOpt, None),
)
_ROW_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("format", FormatOpt, OutputFormat.table),
    ("json", JsonOpt, False),
    ("output", OutputOpt, None),
    ("sort", SortOpt, None),
    ("order", OrderOpt, None),
    ("columns", ColumnsOpt, None),
    ("all_columns", AllColumnsOpt, False),
)


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
        if values.get("output") is not None:
            check_output_file(values["output"])
        kwargs[name] = make(filter=flt, **values)
        return fn(**kwargs)

    wrapper.__signature__ = sig.replace(parameters=own + added)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**{p.name: p.annotation for p in own}, **{n: a for n, a, _ in options}}
    return handle_errors(wrapper)  # type: ignore[return-value]


def selecting(fn: F) -> F:
    """Add ``--db``, ``--since``, ``--until``, ``--agent``, ``--project``; the command receives
    ``selection: Selection``."""
    return _adding_options(fn, "selection", _SELECTION_OPTIONS, Selection)


def listing(fn: F) -> F:
    """``selecting`` plus ``--format``/``--json``, ``--output``, ``--sort``/``--order`` and
    ``--columns``/``--all-columns``; the command receives ``listing: Listing``."""
    return _adding_options(fn, "listing", _SELECTION_OPTIONS + _ROW_OPTIONS, Listing)


__all__ = [
    "AgentOpt",
    "DbOpt",
    "ForceOpt",
    "FormatOpt",
    "FullResultsOpt",
    "Listing",
    "OutputFormat",
    "OutputOpt",
    "ProjectOpt",
    "QuietOpt",
    "Selection",
    "SinceOpt",
    "UntilOpt",
    "check_output_file",
    "check_report_target",
    "err",
    "handle_errors",
    "listing",
    "out",
    "selecting",
    "session_filter",
    "with_progress",
]
