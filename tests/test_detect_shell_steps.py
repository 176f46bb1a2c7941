"""How the judgement reads a shell command's steps (``judge._steps``), in both engines: quoted text is never split (an
awk program's ``;``, a ``grep -E "a|b"`` pattern's ``|``), an ``echo … |`` feeder, ``sudo -u USER`` and
``bash -c '…'`` are seen through, and a many-line inline program is the action itself."""

from __future__ import annotations

from typing import Any

import pytest
from test_detect_failures import STUCK, _found

from analyzer.detect.judge import action, same_object
from analyzer.detect.keys import canonical_json

Call = tuple[str, dict[str, Any], tuple[str, bool]]


def _bash(command: str, result: str = "", error: bool = False) -> Call:
    return ("Bash", {"command": command}, (result, error))


def _action(command: str):
    return action("Bash", canonical_json({"command": command}))


@pytest.mark.parametrize(
    ("command", "program", "exact"),
    [
        # an awk program's `;` and `/` are inside quotes: the pipeline is about its first stage
        ("ss -tulpnH | awk '{n=split($5,a,\":\"); port=a[n]; print port}'", "ss", ()),
        # the `|` of an alternation pattern is the pattern's
        ('rg -n "importmap|importMap" app/', "rg", ("importmap|importMap",)),
        ('grep -E "8231|8232" ports.txt && echo found; ls', "grep+echo+ls", ("8231|8232",)),
        # `cd x &&` and `|| echo` are steps of their own; a feeder stage gives its words to the next
        ("cd /repo && make || echo failed", "make+echo", ()),
        ("echo 'secret' | sudo -S -u bot bash -c 'grep -r TOKEN ~/.env'", "grep", ("TOKEN",)),
    ],
)
def test_a_commands_steps_are_split_outside_quotes(command: str, program: str, exact: tuple[str, ...]) -> None:
    a = _action(command)
    assert a.program == program
    assert a.exact == exact


def test_different_alternation_patterns_are_different_questions() -> None:
    a = _action('rg -n "importmap|importMap|generate:importmap" config/')
    b = _action('rg -n "import_map|javascript_importmap_tags" config/')
    assert not same_object(a, b)


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        # a pickaxe or --grep value is a search pattern: another string asks another question (awesumsawz, tuning)
        (
            "git -C /repo log --all -S mhrt-affiliate --oneline",
            "git -C /repo log --all -S overview-mhrt-affiliate",
            False,
        ),
        ("git log --grep login-page-fix --oneline", "git log --grep login-page-fix-2 --oneline", False),
        # a positional word names the object: another subcommand, branch or SWE-agent edit range is another object
        ("ssh prod-db-1 uptime", "ssh prod-db-2 uptime", False),
        ("git checkout feature-a", "git checkout feature-b", False),
        ("edit 29:30\nresult = compute(value)\nend_of_edit", "edit 30:31\nresult = compute(value)\nend_of_edit", False),
        # a flag's value may drift (the same action with drifted flags), and so may a quoted text
        ('psql -U postgres -c "select count(*) from users"', 'psql -U admin -c "select count(*) from users"', True),
        ("docker logs --tail 50 web", "docker logs --tail 200 web", True),
        # a boolean flag before a positional word: the words cannot say whether `-k` takes a value
        ("make all", "make -k all", True),
        # a redirection is no word of the command (sample_data's terraform plan, flags added one by one)
        (
            "terraform -chdir=envs/staging plan -no-color 2>&1",
            "terraform -chdir=envs/staging plan -input=false 2>&1",
            True,
        ),
    ],
)
def test_positional_words_name_the_object_and_flag_values_may_drift(first: str, second: str, same: bool) -> None:
    assert same_object(_action(first), _action(second)) is same


def test_a_many_line_inline_program_is_the_action() -> None:
    lines = ["import sys", "sys.modules['erfa'] = None", "from astropy import modeling"]
    first = 'python -c "\n{}\n"'.format("\n".join(lines))
    grown = 'python -c "\n{}\n"'.format("\n".join([*lines[:2], "sys.modules['erfa.ufunc'] = None", lines[2]]))
    assert same_object(_action(first), _action(first))
    assert not same_object(_action(first), _action(grown))


AWK_ERROR = "Exit code: 2\nawk: cmd. line:1: (FILENAME=- FNR=13) fatal: split: second argument is not an array\n"


def test_an_awk_pipeline_rewritten_around_the_same_fatal_error_is_stuck() -> None:
    """The same port table over ``ss`` three times, the awk program rewritten each time (the address split), the same
    fatal error at line 13 each time: the quoted program's ``;`` once made each rewrite look like another command."""
    programs = (
        '{n=split($5,a,":"); port=a[n]; split(proc,"/",p); print port,p[1]}',
        '{n=split($5,addr,/:/); port=addr[n]; split(proc,"/",p); print port,p[1]}',
        '{port=$5; sub(/.*:/,"",port); split(proc,"/",p); print port,p[1]}',
    )
    found = _found([[_bash(f"ss -tulpnH | awk -v OFS=',' '{p}'", AWK_ERROR, True)] for p in programs])
    assert [f[STUCK] for f in found] == [True]


def test_different_searches_piped_through_sudo_are_no_loop() -> None:
    """Three different greps for a token, each run as another user behind ``echo PASS | sudo -S -u bot bash -c``:
    the shared feeder once made them one action, retried."""
    wrap = "echo 'secret' | sudo -S -u bot bash -c '{}'"
    searches = (
        'grep -r "OAUTH_TOKEN" ~/.claude/session-env/ 2>/dev/null',
        'for d in ~/.claude/session-env/*/; do cat "$d"/* 2>/dev/null | head -5; done',
        'grep -r "token" ~/.*rc ~/.bash* ~/.profile 2>/dev/null',
    )
    found = _found([[_bash(wrap.format(s), "Exit code 1", True)] for s in searches])
    assert [f for f in found if f[STUCK]] == []


def test_inline_programs_that_grow_are_no_loop() -> None:
    """A ``python -c`` probe that gains a mock each time, failing on the same import: each attempt is a new program."""
    lines = ["import sys", "import types"]
    calls = []
    for mock in ("erfa", "erfa.ufunc", "astropy.utils._compiler"):
        lines.append(f"sys.modules['{mock}'] = types.ModuleType('{mock}')")
        script = "\n".join([*lines, "from astropy.modeling import models"])
        calls.append([_bash(f'cd /testbed && python -c "\n{script}\n"', "Traceback ...\nImportError: erfa", True)])
    assert [f for f in _found(calls) if f[STUCK]] == []


def test_powershell_searches_for_different_patterns_are_no_drift() -> None:
    """PowerShell's grep is Select-String and its pattern -Pattern: three searches of one file for three patterns,
    each finding nothing, ask three questions (akinori, a Codex rollout on Windows, tuning)."""
    patterns = ["OCR.|.*\\(ocrResult && \\(", "OCR.*\\(ocrResult && \\(", "\\{ocrResult && \\(\\s*<\\>"]
    calls = [
        (
            "shell",
            {
                "command": [
                    "pwsh.exe",
                    "-NoLogo",
                    "-Command",
                    f'Select-String -Path "src/pages/Edit.tsx" -Pattern "{p}" | ForEach-Object {{ $_.LineNumber }}',
                ]
            },
            ("", False),
        )
        for p in patterns
    ]
    assert [f for f in _found([[c] for c in calls]) if f[STUCK]] == []
