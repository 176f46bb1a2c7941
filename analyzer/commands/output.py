"""One way to print a listing, shared by every listing command: table, json, ndjson, csv or parquet."""

from __future__ import annotations

import io
import sys
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING

import orjson

from analyzer.errors import UsageError

if TYPE_CHECKING:  # polars and rich load only when something is printed: the CLI starts faster
    import polars as pl
    from rich.table import Table


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    ndjson = "ndjson"
    csv = "csv"
    parquet = "parquet"


def _default(obj: Any) -> Any:
    if isinstance(obj, (datetime, date)):
        return obj.isoformat()
    raise TypeError


def _json_rows(df: "pl.DataFrame") -> list[dict[str, Any]]:
    return df.to_dicts()


def _flatten_for_csv(df: "pl.DataFrame") -> "pl.DataFrame":
    """CSV has no lists: join them with ``;``."""
    import polars as pl

    exprs = []
    for name, dtype in df.schema.items():
        if isinstance(dtype, pl.List):
            exprs.append(pl.col(name).cast(pl.List(pl.String)).list.join(";").alias(name))
        elif isinstance(dtype, (pl.Struct, pl.Object)):
            exprs.append(pl.col(name).map_elements(lambda v: orjson.dumps(v, default=_default).decode(),
                                                   return_dtype=pl.String).alias(name))
    return df.with_columns(exprs) if exprs else df


def _cell(v: Any, width: int) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        s = f"{v:,.4f}" if abs(v) < 1 else f"{v:,.2f}"
    elif isinstance(v, int) and not isinstance(v, bool):
        s = f"{v:,}"
    elif isinstance(v, list):
        s = ", ".join(map(str, v))
    elif isinstance(v, datetime):
        s = v.strftime("%Y-%m-%d %H:%M")
    else:
        s = str(v)
    s = s.replace("\n", " ")
    return s if len(s) <= width else s[: width - 1] + "…"


def render_table(df: "pl.DataFrame", title: str | None = None, width: int = 48) -> "Table":
    from rich.table import Table

    table = Table(title=title, show_lines=False, header_style="bold")
    rows = [[_cell(v, width) for v in row] for row in df.iter_rows()]
    for i, (name, dtype) in enumerate(df.schema.items()):
        natural = max([len(name)] + [len(r[i]) for r in rows])
        # When the table is too wide rich shrinks every column; short ones (kinds, counts, flags) keep their width
        # so only the long text columns are cut.
        table.add_column(name, justify="right" if dtype.is_numeric() else "left", no_wrap=True,
                         overflow="ellipsis", max_width=width, min_width=natural if natural <= 16 else 12)
    for r in rows:
        table.add_row(*r)
    return table


def write_frame(
    df: "pl.DataFrame",
    fmt: OutputFormat,
    output: Path | None = None,
    title: str | None = None,
    table_columns: list[str] | None = None,
) -> None:
    """Print or save ``df``. The table view may show fewer columns (``table_columns``); the machine formats always
    carry every column."""
    if fmt is OutputFormat.parquet:
        if output is None:
            if sys.stdout.isatty():
                raise UsageError("parquet is binary: pass --output FILE (or redirect stdout)")
            buf = io.BytesIO()
            df.write_parquet(buf)
            sys.stdout.buffer.write(buf.getvalue())
            return
        df.write_parquet(output)
        return
    if fmt is OutputFormat.table:
        from rich.console import Console

        shown = df.select([c for c in table_columns if c in df.columns]) if table_columns else df
        # Off a terminal rich assumes 80 columns; a listing piped to a file or pager reads better wide.
        wide = output is not None or not sys.stdout.isatty()
        console = Console(file=open(output, "w", encoding="utf-8") if output else None,
                          width=200 if wide else None)
        if df.height == 0:
            console.print("(no rows)")
        else:
            console.print(render_table(shown, title))
        if output:
            console.file.close()
        return
    if fmt is OutputFormat.json:
        data = orjson.dumps(_json_rows(df), default=_default, option=orjson.OPT_INDENT_2) + b"\n"
    elif fmt is OutputFormat.ndjson:
        data = b"".join(orjson.dumps(r, default=_default) + b"\n" for r in _json_rows(df))
    else:
        buf = io.BytesIO()
        _flatten_for_csv(df).write_csv(buf)
        data = buf.getvalue()
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        Path(output).write_bytes(data)
