"""``loopscope report``: write the static HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from analyzer.commands.common import ForceOpt, QuietOpt, Selection, check_report_target, out, selecting, with_progress

OutDirOpt = Annotated[
    Path, typer.Option("--out", help="Folder to write the report into (or, with --single-file, a .html file).")
]
SingleFileOpt = Annotated[
    bool,
    typer.Option("--single-file", help="Write one self-contained HTML file (plotly.js inlined) instead of a folder."),
]
NoRedactOpt = Annotated[
    bool,
    typer.Option(
        "--no-redact",
        help="Show secrets found in transcripts (API keys, tokens, passwords) instead of redacting "
        "them. Do not share such a report.",
    ),
]


@selecting
def report(
    selection: Selection,
    out_dir: OutDirOpt = Path("loopscope-report"),
    single_file: SingleFileOpt = False,
    no_redact: NoRedactOpt = False,
    from_dir: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Draw the report from Parquet results (`loopscope export --format parquet` or `loopscope spark "
            "run`): a folder, or a URL pyarrow reads (s3://..., gs://...), instead of the store.",
            show_default=False,
        ),
    ] = None,
    quiet: QuietOpt = False,
    force: ForceOpt = False,
) -> None:
    """Write a static HTML report: overview, one page per session with loops, calibration.

    Open index.html from disk; the report makes no network request. Loop sections need `loopscope scan` first; the
    guard replay is computed here, and the calibration is the latest `loopscope calibrate` run (a default one
    otherwise).
    """
    from analyzer.library import Store

    check_report_target(out_dir, single_file, force)
    with Store.from_parquet(from_dir) if from_dir else selection.store() as store:
        result = with_progress(
            "report",
            quiet,
            lambda cb: store.report(
                out_dir, selection.filter, single_file=single_file, redact=not no_redact, progress=cb
            ),
            unit="pages",
        )
    if not quiet:
        loops = "" if result.has_findings else " (no findings: run `loopscope scan` for the loop sections)"
        files = len(result.files)
        if result.kept and result.generated_at:
            out.print(
                f"kept {result.index}: nothing in the store changed since it was written "
                f"({result.generated_at:%Y-%m-%d %H:%M} UTC, {files:,} file{'s' if files != 1 else ''})",
                soft_wrap=True,
                markup=False,
            )
            return
        out.print(
            f"wrote {result.index}: {files:,} file{'s' if files != 1 else ''}, "
            f"{result.session_pages:,} session pages ({result.session_pages_written:,} rebuilt), "
            f"{result.bytes / 1e6:,.1f} MB in {result.seconds:.2f} s{loops}",
            soft_wrap=True,
            markup=False,
        )
