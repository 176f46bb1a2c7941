"""The ``loopscope`` command: a thin shell over the library. Each area's commands live in ``analyzer.commands``;
this module only builds the app and registers them."""

from __future__ import annotations

from typing import Annotated

import typer

from analyzer import __version__
from analyzer.commands import analyze as analyze_cmds
from analyzer.commands import calibrate as calibrate_cmds
from analyzer.commands import eval as eval_cmds
from analyzer.commands import export as export_cmds
from analyzer.commands import hook as hook_cmds
from analyzer.commands import ingest as ingest_cmds
from analyzer.commands import replay as replay_cmds
from analyzer.commands import report as report_cmds
from analyzer.commands import scan as scan_cmds
from analyzer.commands import spark as spark_cmds
from analyzer.commands.common import out

app = typer.Typer(
    name="loopscope",
    help="Find doom loops in coding-agent transcripts, what they cost, and how loop guards would have done.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        out.print(f"loopscope {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Find doom loops in coding-agent transcripts, what they cost, and how loop guards would have done."""


app.command("analyze")(analyze_cmds.analyze)
app.command("ingest")(ingest_cmds.ingest)
app.command("sessions")(ingest_cmds.sessions)
app.command("show")(ingest_cmds.show)
app.command("scan")(scan_cmds.scan)
app.command("findings")(scan_cmds.findings)
app.command("summary")(scan_cmds.summary)
app.command("policies")(replay_cmds.policies)
app.command("replay")(replay_cmds.replay)
app.command("calibrate")(calibrate_cmds.calibrate)
app.command("eval")(eval_cmds.evaluate)
app.command("report")(report_cmds.report)
app.command("export")(export_cmds.export)
app.add_typer(spark_cmds.app, name="spark")
app.add_typer(hook_cmds.app, name="hook")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
