"""Roo Code ``ToolRepetitionDetector.ts`` (RooCodeInc/Roo-Code@3747946).

The key is ``JSON.stringify({name, parameters})`` with only the top-level parameter keys sorted. The counter counts
repeats after the first call, so with Roo's limit of 3 the 4th identical call in a row is refused and the user is
asked (``mistake_limit_reached``); then the counter and the remembered call clear, so the 8th is refused next.
Browser scroll actions are exempt and do not touch the state. The detector lives for the task: user messages do not
reset it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from analyzer.guards.base import HALT, Call, Guard, Param, SweepSpec, Verdict

SCROLL_ACTIONS = ("scroll_down", "scroll_up")


def is_scroll(call: Call) -> bool:
    if call.tool != "browser_action":
        return False
    try:
        args = orjson.loads(call.args)
    except orjson.JSONDecodeError:
        return False
    return isinstance(args, dict) and args.get("action") in SCROLL_ACTIONS


class RooGuard(Guard):
    ENGINE = "roo-code"
    SOURCE = "RooCodeInc/Roo-Code@3747946 src/core/tools/ToolRepetitionDetector.ts"
    UNIT = "call"
    RANK = 6
    DESCRIPTION = "Refuse the 4th identical call in a row and ask the user; clears after firing."
    ALIASES = ("roo", "roocode")
    GUARD_FILE = "src/core/tools/ToolRepetitionDetector.ts"
    PASTE_TEMPLATE = (
        "{file} (setting name not verified)\n// refuse the {halt}th identical call in a row: repetition "
        "limit {below_halt}"
    )
    SWEEP = SweepSpec(
        "streak",
        False,
        one_threshold=True,
        caveat=("the sweep resets at user prompts (roo-code does only after firing); top-level key sort ignored."),
    )
    PARAMS = {
        "halt": Param(
            "int", 4, "Identical calls in a row whose last is refused (Roo's limit + 1; 0 = unlimited).", minimum=0
        ),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self._limit = params["halt"] - 1 if params["halt"] else 0
        self.prev: str | None = None
        self.count = 0

    @classmethod
    def describe(cls, p: Mapping[str, Any]) -> dict[str, str]:
        return {
            "key": "name + JSON with top-level keys sorted",
            "window": "consecutive calls",
            "reset": "after firing (not at user prompts)",
            "exemptions": "browser_action scroll_down / scroll_up",
            "blocked_count": "no (the refused call clears the counter)",
            "escalation": "refuse the call and ask the user",
            "thresholds": f"refuse at {p['halt']} identical calls in a row" if p["halt"] else "unlimited",
        }

    def on_call(self, call: Call) -> Verdict | None:
        if is_scroll(call):
            return None
        key = call.key_shallow
        if key == self.prev:
            self.count += 1
        else:
            self.prev, self.count = key, 0
        if self._limit > 0 and self.count >= self._limit:
            n = self.count + 1
            self.prev, self.count = None, 0
            return Verdict(HALT, "refuse", f"{n} identical tool calls in a row", True)
        return None
