"""Cline's repeated-tool-call check (cline/cline@21cb8d2 ``src/core/task/loop-detection.ts``) and mistake limit.

The signature is the tool name and its parameters with keys sorted, ``task_progress`` (progress metadata that changes
on every call) left out. A soft notice is appended at exactly ``warn`` identical calls in a row; at ``halt`` or more the
mistake count is set to the limit, so Cline asks the user before the next request (the call itself runs). Error
results of tools other than the shell count as mistakes (a tool that worked clears them; a failing command is the
command's output, not a broken tool call): ``mistakes`` in a row also stop for the user. The identical-call counter
lives for the whole conversation (task); user feedback clears the mistake count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from analyzer.detect.keys import call_key, canonical_json
from analyzer.guards.base import HALT, SHELL_TOOLS, WARN, Call, Guard, Param, SweepSpec, Verdict, tools_text

IGNORED_PARAMS = ("task_progress",)


def cline_key(call: Call) -> str:
    """Canonical key without Cline's metadata parameters (parsed only when one is present)."""
    if '"task_progress"' not in call.args:
        return call.key
    try:
        args = orjson.loads(call.args)
    except orjson.JSONDecodeError:
        return call.key
    if isinstance(args, dict):
        args = {k: v for k, v in args.items() if k not in IGNORED_PARAMS}
    return call_key(call.tool, canonical_json(args))


class ClineGuard(Guard):
    ENGINE = "cline"
    SOURCE = "cline/cline@21cb8d2 src/core/task/loop-detection.ts, consecutiveMistakeCount"
    UNIT = "call"
    RANK = 5
    DESCRIPTION = "Soft notice at exactly 3 identical calls, stop for the user at 5+; 3 consecutive mistakes."
    GUARD_FILE = "src/core/task/loop-detection.ts"
    PASTE_TEMPLATE = (
        "{file} (constant names not verified)\n// soft notice at exactly {warn} identical calls in a row, "
        "hard stop at {halt}"
    )
    SWEEP = SweepSpec(
        "streak",
        True,
        rule="mistakes",
        caveat=("the sweep resets the identical-call count at user prompts (cline never does)."),
    )
    PARAMS = {
        "warn": Param("int", 3, "Identical calls in a row that get the soft notice (exactly this count).", minimum=1),
        "halt": Param("int", 5, "Identical calls in a row (or more) that stop for the user.", minimum=1),
        "mistakes": Param(
            "int", 3, "Consecutive error results that stop for the user (CLI 3, SDK 6; 0 = off).", minimum=0
        ),
        "shell_tools": Param("tools", SHELL_TOOLS, "Tools whose failures are command output, not mistakes."),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self._warn, self._halt, self._mistakes = params["warn"], params["halt"], params["mistakes"]
        self._shell = frozenset(params["shell_tools"])
        self.last: str | None = None
        self.count = 0
        self.errors = 0

    @classmethod
    def describe(cls, p: Mapping[str, Any]) -> dict[str, str]:
        mist = f"; {p['mistakes']} consecutive tool errors (not shell) stop" if p["mistakes"] else ""
        return {
            "key": "name + canonical JSON without task_progress",
            "window": "consecutive calls",
            "reset": "never (per conversation); a different call breaks the streak; user feedback clears mistakes",
            "exemptions": f"shell failures are not mistakes ({tools_text(p['shell_tools'])})",
            "blocked_count": "n/a (never blocks; calls run)",
            "escalation": "soft notice in the tool result; hard = ask the user (mistake_limit_reached)",
            "thresholds": f"notice at exactly {p['warn']}, stop at >= {p['halt']}{mist}",
        }

    def on_user(self) -> None:
        self.errors = 0

    def on_call(self, call: Call) -> Verdict | None:
        key = cline_key(call)
        if key == self.last:
            self.count += 1
        else:
            self.last, self.count = key, 1
        if self.count >= self._halt:
            return Verdict(HALT, "ask", f"{self.count} identical tool calls in a row", False)
        if self.count == self._warn:
            return Verdict(WARN, "notice", f"{self.count} identical tool calls in a row", False)
        return None

    def on_result(self, call: Call) -> Verdict | None:
        if not call.is_error or call.tool in self._shell:
            self.errors = 0
            return None
        self.errors += 1
        if self._mistakes and self.errors >= self._mistakes:
            return Verdict(HALT, "ask", f"{self.errors} consecutive mistakes", False)
        return None
