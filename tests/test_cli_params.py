"""Every option that takes a number or a choice is typed by ``analyzer.commands.params``: a bad value is refused in one
plain line, in click's form, never in the words of typer's validation library ("Input should be ...")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.commands.params import Choice, Number, WholeNumber

runner = CliRunner()

# A typed option as --help shows it: "--limit <int range>", "-f, --format <table|json|...>", "--target-... <float>".
TYPED = re.compile(r"^\s+(?:-\w, )?(--[\w-]+) <(int range|int|float|(?!str>|path>)[\w-]+(?:\|[\w-]+)*)>", re.MULTILINE)
ARGUMENTS = {
    ("export",): ["OUT"],
    ("spark", "run"): ["IN", "--out", "OUT"],
    ("hook", "install"): ["claude-code"],
    ("hook", "uninstall"): ["claude-code"],
}
EXPECTED = {"int range": "is not a whole number", "int": "is not a whole number", "float": "is not a number"}


def _commands() -> list[tuple[str, ...]]:
    """Every command, the sub-apps' ones as (group, name)."""
    names: list[tuple[str, ...]] = [(c.name,) for c in app.registered_commands if c.name]
    for group in app.registered_groups:
        sub = group.typer_instance
        assert sub is not None and group.name
        names += [(group.name, c.name) for c in sub.registered_commands if c.name]
    return names


def _typed_options() -> list[tuple[tuple[str, ...], str, str]]:
    found = []
    for command in _commands():
        res = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "300"})
        assert res.exit_code == 0, (command, res.output)
        found += [(command, option, kind) for option, kind in TYPED.findall(res.output)]
    return found


def test_the_typed_options_are_found() -> None:
    options = {(c, o) for c, o, _ in _typed_options()}
    assert {
        (("sessions",), "--limit"),
        (("calibrate",), "--target-false-halt-rate"),
        (("calibrate",), "--order"),
        (("replay",), "--scope"),
        (("export",), "--format"),
    } <= options


@pytest.mark.parametrize(
    "command,option,kind", _typed_options(), ids=lambda v: "-".join(v) if isinstance(v, tuple) else v
)
def test_a_bad_value_is_one_plain_line(tmp_path: Path, command: tuple[str, ...], option: str, kind: str) -> None:
    extra = [str(tmp_path / a) if a in ("IN", "OUT") else a for a in ARGUMENTS.get(command, [])]
    res = runner.invoke(app, [*command, *extra, option, "nope"])
    assert res.exit_code == 2, res.output
    assert f"Invalid value for '{option}'" in res.output, res.output
    assert EXPECTED.get(kind, "'nope' is not one of") in res.output, res.output
    assert "Input should" not in res.output and "Value error" not in res.output and "Traceback" not in res.output


def test_the_agent_argument_is_a_choice() -> None:
    res = runner.invoke(app, ["hook", "install", "nope"])
    assert res.exit_code == 2 and "'nope' is not one of 'claude-code', 'codex', 'gemini-cli'." in res.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["findings", "--limit", "-1"], "-1 is not in the range x>=0"),
        (["sessions", "--limit", "1.5"], "'1.5' is not a whole number"),
        (["replay", "--policy", "cline", "--halt", "0"], "0 is not in the range x>=1"),
        (["calibrate", "--order", "up"], "'up' is not one of 'asc', 'desc'."),
    ],
)
def test_ranges_and_choices_are_said_plainly(tmp_path: Path, args: list[str], message: str) -> None:
    res = runner.invoke(app, [*args, "--db", str(tmp_path / "none.duckdb")])
    assert res.exit_code == 2 and message in res.output, res.output


def test_the_types_convert_and_keep_defaults() -> None:
    from analyzer.commands.output import OutputFormat

    assert WholeNumber(0)(" 12 ") == 12 and WholeNumber(1)(3) == 3
    assert Number()("0.25") == 0.25 and Number()(1) == 1.0
    fmt = Choice(OutputFormat)
    assert fmt("json") is OutputFormat.json and fmt(OutputFormat.csv) is OutputFormat.csv
    for parse, value in ((WholeNumber(), "x"), (WholeNumber(2), "1"), (Number(), "x"), (Choice(OutputFormat), "JSON")):
        with pytest.raises(typer.BadParameter):
            parse(value)
