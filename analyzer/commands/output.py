"""One way to print a listing, shared by every listing command: table, json, ndjson, csv or parquet."""

from __future__ import annotations

import io
import sys
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


def _json_rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    return df.to_dicts()


def _flatten_for_csv(df: pl.DataFrame) -> pl.DataFrame:
    """CSV has no lists: join them with ``;``."""
    import polars as pl

    exprs = []
    for name, dtype in df.schema.items():
        if isinstance(dtype, pl.List):
            exprs.append(pl.col(name).cast(pl.List(pl.String)).list.join(";").alias(name))
        elif isinstance(dtype, (pl.Struct, pl.Object)):
            exprs.append(
                pl.col(name)
                .map_elements(lambda v: orjson.dumps(v, default=_default).decode(), return_dtype=pl.String)
                .alias(name)
            )
    return df.with_columns(exprs) if exprs else df


def _cell(v: Any, width: int, money: bool = False) -> str:
    if v is None:
        return ""
    if money and isinstance(v, (int, float)) and not isinstance(v, bool):
        s = f"${v:,.2f}" if v == 0 or abs(v) >= 0.01 else f"${v:.4f}"
    elif isinstance(v, float):
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


def table_width(output: Path | None) -> int | None:
    """The table's width: the terminal's (or $COLUMNS); off a terminal, where rich would assume 80 columns, 200 unless
    $COLUMNS says otherwise (a listing piped to a file or pager reads better wide)."""
    import os

    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    wide = output is not None or not sys.stdout.isatty()
    return 200 if wide else None


ID_WIDTH = 13
"""A session id cut to this many characters still tells sessions apart; it gives up its width first."""


def fit_widths(
    natural: list[int],
    total: int | None,
    floor: int = 8,
    ids: frozenset[int] = frozenset(),
    numeric: frozenset[int] = frozenset(),
) -> list[int]:
    """Column widths that fit ``total`` characters (the gaps between columns included): short columns (counts,
    money, kinds, flags) keep their width; id columns (``ids``) shrink first, to ``ID_WIDTH``; then the long text
    columns share what is left, in proportion to their length."""
    if total is None:
        return natural
    room = total - 2 * (len(natural) - 1)  # two spaces between columns, no outer border
    if sum(natural) <= room:
        return natural
    natural = list(natural)
    for i in ids:
        over = sum(natural) - room
        if over > 0 and natural[i] > ID_WIDTH:
            natural[i] = max(ID_WIDTH, natural[i] - over)
    if sum(natural) <= room:
        return natural
    long = [i for i, w in enumerate(natural) if w > 16 and i not in numeric]
    fixed = sum(w for i, w in enumerate(natural) if i not in long)
    budget = max(room - fixed, floor * len(long))
    want = sum(natural[i] for i in long) or 1
    out = list(natural)
    for i in long:
        out[i] = max(floor, min(natural[i], budget * natural[i] // want))
    return out


def render_table(df: pl.DataFrame, title: str | None = None, width: int = 48, total_width: int | None = None) -> Table:
    """``df`` as a rich table; with ``total_width`` (the console's) the long text columns are cut so that the table
    fits it, and the short ones are never squeezed."""
    from rich import box
    from rich.table import Table

    # Columns two spaces apart under a rule, no outer border: narrow terminals keep room for the data.
    table = Table(
        title=title,
        show_lines=False,
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        title_justify="left",
    )
    money = [name.endswith(("_usd", "cost")) for name in df.columns]
    rows = [[_cell(v, width, m) for v, m in zip(row, money)] for row in df.iter_rows()]
    natural = [max([len(name)] + [len(r[i]) for r in rows]) for i, name in enumerate(df.columns)]
    fitted = fit_widths(
        natural,
        total_width,
        ids=frozenset(i for i, c in enumerate(df.columns) if c.endswith("_id")),
        numeric=frozenset(i for i, t in enumerate(df.dtypes) if t.is_numeric()),
    )
    for i, (name, dtype) in enumerate(df.schema.items()):
        table.add_column(
            name,
            justify="right" if dtype.is_numeric() else "left",
            no_wrap=True,
            overflow="ellipsis",
            min_width=fitted[i],
            max_width=fitted[i],
        )
    for r in rows:
        table.add_row(*r)
    return table


def write_frame(
    df: pl.DataFrame,
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
        console = Console(file=open(output, "w", encoding="utf-8") if output else None, width=table_width(output))
        if df.height == 0:
            console.print("(no rows)")
        else:
            console.print(render_table(shown, title, total_width=console.width))
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
