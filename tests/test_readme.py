"""The README is part of the product: its set-up commands, its store schema and every command's help are checked."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.store.schema import ALL_TABLES
from analyzer.store.schema_doc import END, START, markdown

README = (ROOT / "README.md").read_text()


def fenced_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", README)


def test_setup_is_two_commands_and_ci_runs_the_test_one() -> None:
    main, tests = fenced_commands()[:2]
    assert "loopscope analyze sample_data" in main and "pip install" in main
    assert "pytest" in tests and "'.[test]'" in tests
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.splitlines(), ".ci/run must run the README's test command verbatim"


def test_store_schema_section_is_current() -> None:
    start, end = README.index(START), README.index(END) + len(END)
    assert README[start:end] == markdown(), "run `python -m analyzer.store.schema_doc --write`"
    for table in ALL_TABLES:
        for column in table.columns:
            assert f"| `{column.name}` |" in README


def test_every_command_has_help() -> None:
    runner = CliRunner()
    names = [c.name for c in app.registered_commands]
    assert {"analyze", "ingest", "sessions", "scan", "findings", "summary", "policies", "replay", "report"} <= set(
        names
    )
    for name in names:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, name
        assert "Usage:" in result.output and len(result.output.splitlines()) > 5, name
        assert f"`loopscope {name}" in README, f"{name} is not in the README's command table"


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_cli_entry_point(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "analyzer.cli", *args], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout
