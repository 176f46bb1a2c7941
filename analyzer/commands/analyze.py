"""``loopscope analyze``: the main job in one command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from analyzer.commands.common import (
    ForceOpt,
    FullResultsOpt,
    QuietOpt,
    Selection,
    check_report_target,
    err,
    out,
    selecting,
)
from analyzer.commands.params import whole_number
from analyzer.commands.report import NoRedactOpt, OutDirOpt, SingleFileOpt


@selecting
def analyze(
    selection: Selection,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Transcript files or folders. Default: the agents' own session folders that exist (the README's "
            "formats table names them).",
            show_default=False,
        ),
    ] = None,
    out_dir: OutDirOpt = Path("loopscope-report"),
    single_file: SingleFileOpt = False,
    no_redact: NoRedactOpt = False,
    workers: Annotated[
        int | None,
        whole_number(
            "--workers", min=1, help="Processes for parsing and scanning. Default: one per core.", show_default=False
        ),
    ] = None,
    quiet: QuietOpt = False,
    force: ForceOpt = False,
    full_results: FullResultsOpt = None,
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            help="A labels file (the report's Export labels, or your own): the calibration takes its truth from "
            "it, and the report gets an Evaluation page (the findings and the guards measured on it, as `loopscope "
            "eval` prints them).",
            show_default=False,
            metavar="FILE",
        ),
    ] = None,
) -> None:
    """Ingest, scan, calibrate and report in one go, then print where the report is.

    Ingest and scan are incremental, so running it again on the same folders is quick. The filters choose which
    sessions the calibration and the report cover; everything found is ingested and scanned.
    """
    import sys

    check_report_target(out_dir, single_file, force)  # before the ingest, not after it
    bars = None if quiet or not sys.stderr.isatty() else _Bars()
    try:
        with selection.store(write=True) as store:
            result = store.analyze(
                paths or None,
                out_dir,
                selection.filter,
                single_file=single_file,
                redact=not no_redact,
                workers=workers,
                full_results=full_results,
                stage_progress=bars.stage if bars else None,
                on_stage=None if quiet else _print_stage(bars),
                labels=labels,
            )
    finally:
        if bars:
            bars.close()
    if quiet:
        out.print(str(result.index.resolve()), soft_wrap=True)
        return
    out.print(
        f"report: {result.index.resolve()}  ({result.seconds:.1f} s; open it in a browser, it works offline)",
        soft_wrap=True,
    )
    if no_redact:
        err.print("warning: secrets found in transcripts are shown unredacted (--no-redact); do not share this report")


def _print_stage(bars: _Bars | None):  # noqa: ANN202 - a small closure
    def on_stage(stage: str, text: str) -> None:
        if bars:
            bars.finish(stage)
        out.print(f"{stage:>9}: {text}", soft_wrap=True, markup=False)

    return on_stage


class _Bars:
    """One transient progress bar per stage, on stderr (only on a terminal)."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from analyzer.commands.common import err

        self.progress = Progress(
            TextColumn("[bold]{task.description:>9}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
        )
        self.progress.start()
        self.tasks: dict[str, int] = {}

    def stage(self, name: str):  # noqa: ANN201
        task = self.tasks[name] = self.progress.add_task(name, total=None)

        def cb(done: int, total: int) -> None:
            self.progress.update(task, completed=done, total=total)

        return cb

    def finish(self, name: str) -> None:
        if name in self.tasks:
            self.progress.remove_task(self.tasks.pop(name))

    def close(self) -> None:
        self.progress.stop()
