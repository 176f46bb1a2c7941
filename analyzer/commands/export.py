"""``loopscope export``: the store's tables as Parquet files."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from analyzer.commands.common import DbOpt, QuietOpt, handle_errors, out
from analyzer.commands.params import choice


class ExportFormat(str, Enum):
    parquet = "parquet"


@handle_errors
def export(
    out_dir: Annotated[Path, typer.Argument(help="Folder to write (DIR/<table>/...).")],
    format: Annotated[ExportFormat, choice(ExportFormat, "--format", "-f", help="File format.")] = ExportFormat.parquet,
    db: DbOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Write every table of the store as Parquet, partitioned by format and session start date (the layout
    `loopscope spark run` writes and `loopscope report --from DIR` reads)."""
    from analyzer.library import Store

    with Store.open(db) as store:
        counts = store.export(out_dir)
    if not quiet:
        rows = ", ".join(f"{n} {c:,}" for n, c in counts.items())
        out.print(f"wrote {out_dir}: {rows}", soft_wrap=True, markup=False)
