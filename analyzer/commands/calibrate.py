"""``loopscope calibrate``: sweep a guard's thresholds over the store and recommend a setting for a false-halt
target."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from analyzer.commands.common import Listing, QuietOpt, err, listing
from analyzer.commands.output import OutputFormat
from analyzer.commands.params import number, whole_number
from analyzer.guards import ENGINES, SweepSpec, aliases, sweepable

if TYPE_CHECKING:
    import polars as pl
    from rich.console import Console
    from rich.table import Table

    from analyzer.calibrate.recommend import CalibrationResult

# polars, DuckDB and the sweep are imported inside the command, so the CLI starts fast.

BASES_TEXT = ", ".join(sweepable())  # each guard module declares whether it is swept (``Guard.SWEEP``)


def _named(pick: str) -> list[str]:
    """The sweepable guards whose ``SweepSpec`` has ``pick`` set (e.g. ``one_threshold``, ``sweeps_window``)."""
    return [name for name, g in sweepable().items() if getattr(g.SWEEP, pick)]


def _and(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


ONE_THRESHOLD_TEXT = _and(_named("one_threshold"))
WINDOWED_TEXT = _and(_named("sweeps_window"))
FRONTIER_COLUMNS = [
    "warn",
    "halt",
    "window",
    "similarity",
    "halts",
    "stuck_caught",
    "median_calls_to_detect",
    "tokens_saved",
    "dollars_saved",
    "false_halt_sessions",
    "false_halt_rate",
]


@listing
def calibrate(
    listing: Listing,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            "-p",
            help=f"Base guard whose thresholds are swept: {BASES_TEXT}. Default: open-codesign "
            "(loopscope with --write-settings).",
            show_default=False,
        ),
    ] = None,
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            help="A labels file (the report's Export labels, or your own; README, \"Measuring it on your own "
            "sessions\"): loop spans are stuck, not_loop spans and loop-free sessions healthy, overriding the scan's "
            "stuck/progress proxy; unsure labels are left out.",
            show_default=False,
        ),
    ] = None,
    target: Annotated[
        float, number("--target-false-halt-rate", help="Share of sessions allowed a false halt (0.01 = 1%).")
    ] = 0.01,
    warn_range: Annotated[
        str, typer.Option("--warn-range", help="Warning thresholds to sweep: 2-15, 3,5,8 or both (2-5,8).")
    ] = "2-15",
    halt_range: Annotated[
        str, typer.Option("--halt-range", help=f"Halt thresholds to sweep; the one threshold of {ONE_THRESHOLD_TEXT}.")
    ] = "2-15",
    windows: Annotated[
        str | None,
        typer.Option(
            "--windows", help=f"{WINDOWED_TEXT} window sizes (of 5, 10, 20). Default: all three.", show_default=False
        ),
    ] = None,
    similarities: Annotated[
        str | None,
        typer.Option(
            "--similarities",
            help=f"{WINDOWED_TEXT} near-identical bars, `off` for exact arguments only. Default: off,0.55,0.7,0.85.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force-recommendation",
            help="Recommend the sweep's best setting even when the corpus has too few loops "
            "to support the target (by default the guard's shipped defaults are kept, "
            "and the output says why).",
        ),
    ] = False,
    verify: Annotated[
        bool,
        typer.Option("--verify/--no-verify", help="Replay the recommended setting exactly and print both figures."),
    ] = True,
    save: Annotated[
        bool,
        typer.Option(
            "--save/--no-save",
            help="Record the run in the store (calibration_runs, calibration_sweep) for the "
            "report; --no-save opens the store read-only.",
        ),
    ] = True,
    write_settings: Annotated[
        bool,
        typer.Option(
            "--write-settings",
            help="Write the recommended setting to the hook's settings file, which `loopscope hook "
            "claude-code|codex|gemini-cli` then runs (~/.config/loopscope/hook-settings.json); with --agent "
            "claude-code|codex|gemini-cli, that agent's section, calibrated on that agent's sessions.",
        ),
    ] = False,
    workers: Annotated[
        int | None,
        whole_number(
            "--workers",
            min=1,
            help="Processes for the exact replay of each batch of sessions. Default: one "
            "per batch under 200k calls (forking costs more than it saves below that).",
            show_default=False,
        ),
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """Sweep warn/halt thresholds (and pi's window and similarity) over the stored signals; print the frontier of
    tokens saved against sessions with a false halt, and the setting to paste into each guard.

    The sweep reads `loopscope scan`'s signals (no rescan) and approximates the guard; the recommended setting is
    then replayed exactly and both figures are printed. The table (the default) shows the sweep's frontier;
    `--format json` (or `--json`) prints one object (run, recommendation, settings to paste, exact replay, every
    sweep row); csv, ndjson and parquet print the sweep rows, with `on_frontier` and `recommended` columns.
    --sort/--order and --columns/--all-columns apply to the sweep rows wherever they are printed: the frontier
    table, the object's `sweep`, the rows of the other formats.
    """
    from analyzer.calibrate.recommend import Grid, parse_range, parse_similarities, parse_windows

    policy = policy or ("loopscope" if write_settings else "open-codesign")
    grid = Grid(
        parse_range(warn_range, "--warn-range"),
        parse_range(halt_range, "--halt-range"),
        parse_windows(windows) if windows else None,
        parse_similarities(similarities) if similarities else None,
    )
    base = aliases().get(policy.strip().lower(), policy.strip().lower())
    spec: SweepSpec | None = ENGINES[base].SWEEP if base in ENGINES else None
    if (windows or similarities) and not (spec and spec.sweeps_window):
        err.print(f"note: --windows and --similarities apply to {WINDOWED_TEXT} only; ignored", soft_wrap=True)
    if warn_range != "2-15" and spec and spec.one_threshold:
        err.print(f"note: {base} has one threshold, swept from --halt-range; --warn-range is ignored", soft_wrap=True)
    with listing.store(write=save) as store:  # the run is recorded (--save) in a store open for writing
        res = store.calibrate(
            policy, listing.filter, labels, target, grid, verify=verify, workers=workers, enough=not force
        )
    if not quiet:
        for note in res.notes:
            err.print(f"note: {note}", soft_wrap=True)
    _write(res, listing)
    if write_settings:
        _write_settings(res, HOOK_AGENTS.get(listing.filter.agent or ""))


# the store's format -> the hook's agent (its section of the hook settings file)
HOOK_AGENTS = {"claude_code": "claude-code", "codex": "codex", "gemini_cli": "gemini-cli"}


def _write_settings(res: CalibrationResult, agent: str | None = None) -> None:
    """The recommended thresholds into the hook's settings file (nothing without a recommendation)."""
    from analyzer.calibrate.recommend import base_policy
    from analyzer.hook.settings import write_settings

    if res.recommended is None:
        err.print("note: no recommendation, so no hook settings were written", soft_wrap=True)
        return
    pol = base_policy(res.base)
    settings = pol.engine_class.sweep_settings(res.recommended, pol.params)
    within = "" if res.qualified else ", NOT within the target"
    path = write_settings(
        pol.name,
        settings,
        f"loopscope calibrate --policy {pol.name} (target false-halt rate "
        f"{res.target:.2%}, {res.sessions:,} {agent + ' ' if agent else ''}sessions{within})",
        agent=agent,
    )
    shown = ", ".join(f"{k} {v}" for k, v in settings.items())
    part = f" ({agent}'s section)" if agent else ""
    err.print(f"hook settings written to {path}{part}: {pol.name}, {shown}", soft_wrap=True, markup=False)


def _write(res: CalibrationResult, listing: Listing) -> None:
    import orjson

    if listing.fmt is OutputFormat.table:
        _print_table(res, listing)
    elif listing.fmt is OutputFormat.json:
        rows = listing.arrange(res.sweep)
        if listing.columns:
            rows = rows.select(listing.chosen_columns(rows, None))
        data = (
            orjson.dumps({**res.to_json(), "sweep": rows.to_dicts()}, option=orjson.OPT_INDENT_2 | orjson.OPT_NAIVE_UTC)
            + b"\n"
        )
        if listing.output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            listing.output.write_bytes(data)
    else:
        listing.write(res.sweep, "calibration sweep")


def _console(output: Path | None) -> Console:
    from rich.console import Console

    wide = output is not None or not sys.stdout.isatty()
    return Console(
        file=open(output, "w", encoding="utf-8") if output else None, width=200 if wide else None, highlight=False
    )


def _fmt(name: str, v: object) -> str:
    if v is None:
        return "—"
    if name.endswith("_rate"):
        return f"{float(v):.2%}"  # type: ignore[arg-type]
    if name.startswith("dollars"):
        return f"${float(v):,.2f}"  # type: ignore[arg-type]
    if name == "similarity" or name.startswith("median"):
        return f"{float(v):g}"  # type: ignore[arg-type]
    return f"{v:,}" if isinstance(v, int) else str(v)


def _texts(df: pl.DataFrame) -> pl.DataFrame:
    """Every cell as display text (rates as percentages, dollars with a sign), numbers still right-aligned by rich."""
    import polars as pl

    rows = [{k: _fmt(k, v) for k, v in r.items()} for r in df.iter_rows(named=True)]
    return pl.DataFrame(rows, schema={c: pl.String for c in df.columns})


def _print_table(res: CalibrationResult, listing: Listing) -> None:
    """The frontier (sorted and its columns chosen as the listing options ask), then the recommendation with the
    sweep's and the exact replay's figures, then what to paste."""
    import polars as pl
    from rich.markup import escape

    from analyzer.commands.output import render_table

    frontier = listing.arrange(res.frontier)  # a bad --sort or --columns fails before --output is opened
    cols = (
        listing.chosen_columns(
            frontier,
            [c for c in FRONTIER_COLUMNS if c not in ("window", "similarity") or res.sweep[c].is_not_null().any()],
        )
        or frontier.columns
    )
    front = frontier.select(pl.when(pl.col("recommended")).then(pl.lit("*")).otherwise(pl.lit("")).alias("rec"), *cols)
    output = listing.output
    console = _console(output)
    try:
        console.print(
            f"{res.base}: {res.sweep.height:,} settings over {res.sessions:,} sessions "
            f"({res.stuck_episodes:,} stuck episodes, {res.total_tokens:,} tokens) in "
            f"{res.sweep_seconds:.2f} s; stuck comes from {res.labels_text}.",
            markup=False,
            soft_wrap=True,
        )
        console.print(_right(render_table(_texts(front), "frontier (* = recommended)")))
        if res.recommended is None:
            console.print("no recommendation: nothing was swept")
            return
        r = res.recommended
        where = "".join(f", {k} {_fmt(k, r[k])}" for k in ("window", "similarity") if r[k] is not None)
        flag = "  [NOT within the target]" if not res.qualified else ""
        console.print(
            f"\nrecommended for a false-halt rate of at most {res.target:.2%}: warn {r['warn']}, "
            f"halt {r['halt']}{where}{flag}",
            markup=False,
            soft_wrap=True,
        )
        console.print(res.rationale, markup=False, soft_wrap=True)
        if res.verification is not None:
            cmp = res.comparison()
            shown = pl.DataFrame(
                [(f, _fmt(f, _back(f, a)), _fmt(f, _back(f, b))) for f, a, b in cmp.iter_rows()],
                schema={"figure": pl.String, "sweep": pl.String, "exact replay": pl.String},
                orient="row",
            )
            console.print(
                f"\nsweep vs exact replay of {res.verification.policy} ({res.verification.seconds:.2f} s):",
                markup=False,
                soft_wrap=True,
            )
            console.print(_right(render_table(shown)))
        console.print(f"approximation ({res.base}): {res.caveat}", markup=False, soft_wrap=True)
        for guard, text in res.settings.items():
            console.print(f"\n[bold]{escape(guard)}[/]")
            console.print(text, markup=False, highlight=False, soft_wrap=True)
    finally:
        if output:
            console.file.close()


def _right(table: Table) -> Table:
    """Figures read best right-aligned (the cells are text, so rich cannot tell)."""
    for col in table.columns[1:]:
        col.justify = "right"
    return table


def _back(name: str, v: float | None) -> object:
    """A compared figure back in its type: counts are integers."""
    if v is None or name.endswith("_rate") or name.startswith(("dollars", "median")):
        return v
    return int(v)
