"""``loopscope report``: write the static HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from analyzer.commands.common import (
    AgentOpt, DbOpt, ProjectOpt, QuietOpt, SinceOpt, UntilOpt, db_path, handle_errors, out, session_filter,
    with_progress,
)

OutDirOpt = Annotated[Path, typer.Option(
    "--out", help="Folder to write the report into (or, with --single-file, a .html file).")]
SingleFileOpt = Annotated[bool, typer.Option(
    "--single-file", help="Write one self-contained HTML file (plotly.js inlined) instead of a folder.")]
NoRedactOpt = Annotated[bool, typer.Option(
    "--no-redact", help="Show secrets found in transcripts (API keys, tokens, passwords) instead of redacting "
                        "them. Do not share such a report.")]


@handle_errors
def report(
    db: DbOpt = None,
    out_dir: OutDirOpt = Path("loopscope-report"),
    single_file: SingleFileOpt = False,
    no_redact: NoRedactOpt = False,
    since: SinceOpt = None,
    until: UntilOpt = None,
    agent: AgentOpt = None,
    project: ProjectOpt = None,
    from_dir: Annotated[Optional[str], typer.Option(
        "--from", help="Draw the report from Parquet results (`loopscope export --format parquet` or `loopscope spark "
                       "run`): a folder, or a URL pyarrow reads (s3://..., gs://...), instead of the store.",
        show_default=False)] = None,
    quiet: QuietOpt = False,
) -> None:
    """Write a static HTML report: overview, one page per session with loops, calibration.

    Open index.html from disk; the report makes no network request. Loop sections need `loopscope scan` first; the
    guard replay is computed here, and the calibration is the latest `loopscope calibrate` run (a default one
    otherwise).
    """
    from analyzer.analyze import write_report
    from analyzer.store import db as store

    flt = session_filter(since, until, agent, project)
    if from_dir:
        from analyzer.store.parquet import open_dir

        con = open_dir(from_dir)
    else:
        con = store.connect(db_path(db), read_only=True)
    try:
        result = with_progress("report", quiet, lambda cb: write_report(
            con, out_dir, flt, single_file=single_file, redact=not no_redact, progress=cb), unit="pages")
    finally:
        con.close()
    if not quiet:
        loops = "" if result.has_findings else " (no findings: run `loopscope scan` for the loop sections)"
        files = len(result.files)
        out.print(f"wrote {result.index}: {files:,} file{'s' if files != 1 else ''}, "
                  f"{result.session_pages:,} session pages, "
                  f"{result.bytes / 1e6:,.1f} MB in {result.seconds:.2f} s{loops}", soft_wrap=True, markup=False)
