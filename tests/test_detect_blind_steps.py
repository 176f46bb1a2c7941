"""Blind steps, in both engines: a move whose result only acknowledges it (a relative ``cd``'s silence, a click
answered "Clicked at (x, y)") goes one step further each time, so the same acknowledgement again is no evidence of
"the same result" (``semantics.blind_step``); a look after the moves still is."""

from __future__ import annotations

from typing import Any

from test_detect_failures import _found
from test_detect_shell_steps import _bash

from analyzer.detect.rules import FINDINGS
from analyzer.detect.semantics import blind_step

STUCK, REPEATS = (FINDINGS.names.index(c) for c in ("stuck", "repeats"))

TAB = "\n\n\nTab Context:\n- Executed on tabId: 1593283066"
CHROME = "mcp__claude-in-chrome__computer"


def _click(x: int, y: int) -> tuple[str, dict[str, Any], tuple[str, bool]]:
    return (
        CHROME,
        {"action": "left_click", "coordinate": [x, y], "tabId": 1593283066},
        (f"Clicked at ({x}, {y}){TAB}", False),
    )


def test_a_relative_cd_repeated_climbs_and_is_no_loop():
    """`cd ..` three times climbs three folders: the same silence each time says nothing of where it got."""
    found = _found([[_bash("ls")], [_bash("cd ..")], [_bash("cd ..")], [_bash("cd ..")], [_bash("ls", "repo/")]])
    assert [f for f in found if f[STUCK]] == []


def test_the_same_click_three_times_is_no_loop_by_its_acknowledgement():
    """Three clicks on a "+" (three passengers): each answered "Clicked at (500, 414)", which says nothing of the
    page; the screenshot after them is the evidence."""
    shot = (CHROME, {"action": "screenshot", "tabId": 1593283066}, (f"Successfully captured screenshot{TAB}", False))
    found = _found([[shot], [_click(500, 414)], [_click(500, 414)], [_click(500, 414)], [shot]])
    assert [f for f in found if f[STUCK]] == []


def test_an_absolute_cd_or_a_look_repeated_alike_is_still_stuck():
    """A `cd` to one absolute folder goes nowhere new, and `ls` answering the same listing is the same result: both
    still loop when repeated with nothing in between."""
    found = _found([[_bash("cd /repo/src")] for _ in range(3)] + [[_bash("ls src", "a.py\nb.py")] for _ in range(3)])
    assert [f[REPEATS] for f in found if f[STUCK]] == [3, 3]


def test_blind_step_reads_the_action_and_its_acknowledgement():
    assert blind_step({"command": "cd .."}, "")
    assert blind_step({"command": "cd ../.."}, None)
    assert blind_step({"command": "cd ..\\.."}, "")
    assert blind_step({"command": "cd build"}, "")
    assert not blind_step({"command": "cd /repo"}, "")  # absolute: the same place each time
    assert not blind_step({"command": "cd .."}, "bash: cd: ..: Permission denied")  # a failure is a result
    assert blind_step({"action": "left_click", "coordinate": [1, 2]}, f"Clicked at (1, 2){TAB}")
    assert blind_step({"action": "scroll"}, "Scrolled down by 3 ticks at (640, 400)")
    assert not blind_step({"action": "screenshot"}, "Successfully captured screenshot")
    assert not blind_step({"action": "left_click"}, "Error: element is not visible")
    # what follows the acknowledgement says where the step got: a screenshot, a navigation
    assert not blind_step({"action": "left_click"}, "Clicked at (1, 2)\n[image/png, 5120 bytes, sha1 0123456789ab]")
    assert not blind_step({"action": "key"}, "Pressed Return\n\nPage navigated to https://example.com/next")


def test_a_codex_relative_cd_is_blind_behind_its_envelope():
    """Codex prints an exit code, a wall time and "Output:" before a command's output: the body behind it is what
    says a `cd ..` printed nothing."""
    done = "Exit code: 0\nWall time: 0.1 seconds\nOutput:\n"
    messages = [[("shell", {"command": ["bash", "-lc", "cd .."]}, (done, False))] for _ in range(3)]
    assert [f for f in _found(messages) if f[STUCK]] == []
