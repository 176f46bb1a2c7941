"""``loopscope export``: the store's tables as Parquet files."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from analyzer.commands.common import DbOpt, QuietOpt, db_path, handle_errors, out


class ExportFormat(str, Enum):
    parquet = "parquet"


@handle_errors
def export(
    out_dir: Annotated[Path, typer.Argument(help="Folder to write (DIR/<table>/...).")],
    format: Annotated[ExportFormat, typer.Option("--format", "-f", help="File format.")] = ExportFormat.parquet,
    db: DbOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Write every table of the store as Parquet, partitioned by format and session start date (the layout
    `loopscope spark run` writes and `loopscope report --from DIR` reads)."""
    from analyzer.store import db as store
    from analyzer.store.parquet import export as export_parquet

    con = store.connect(db_path(db), read_only=True)
    try:
        counts = export_parquet(con, out_dir)
    finally:
        con.close()
    if not quiet:
        rows = ", ".join(f"{n} {c:,}" for n, c in counts.items())
        out.print(f"wrote {out_dir}: {rows}", soft_wrap=True, markup=False)
