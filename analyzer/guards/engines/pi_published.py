"""pi-anti-doom-loop exactly as published in v0.0.7 (irfndi/pi-anti-doom-loop, tag v0.0.7, commit a2e33d9:
``extensions/detector.ts``, ``extensions/controller.ts``, ``extensions/index.ts``).

The seed preset (``pi-anti-doom-loop``, ``engines/pi.py``) adds what the seed README describes and v0.0.7 does not
ship: near-identical call arguments, ``loop_ack``, per-script rules for nested calls, scripts compared by identity.
This one is the published code alone:

- a call is blocked when its key (name + canonical JSON) occurs ``warn`` times counting the current call and the last
  ``window`` recorded calls, or when the tool's last ``fails`` results were errors (or, when set, its error share in
  the window reaches ``fail_rate``); a blocked call is not recorded and its result is ignored; blocking the same key a
  second time in a prompt aborts the turn;
- every call is checked the same way, whatever its ``parentToolCallId`` (v0.0.7 does not tell nested calls apart), and
  ``loop_ack`` is an ordinary tool (v0.0.7 does not register it);
- assistant text: the four ``checkText`` rules at ``text_repeats`` (similar texts at a 0.55 shared-token score), the
  first hit of a prompt steers, later hits abort, the first abort of the session also queues one resume
  (``RESUME_BUDGET`` = 1);
- everything resets at each user prompt (``before_agent_start``) except the session's resume budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analyzer.guards.base import Call, Guard, Verdict, tools_text
from analyzer.guards.engines.pi import PiGuard

PUBLISHED_PARAMS = ("warn", "window", "fails", "fail_rate", "fail_rate_min", "text_repeats", "exclude_tools")
# What v0.0.7 fixes in code (``TEXT_SIMILARITY_THRESHOLD``, ``RESUME_BUDGET``) or does not have.
_FIXED = {
    "similarity": 0.55,
    "near_identical_calls": False,
    "exact_only_tools": (),
    "nested_repeats": 2,
    "nested_memory": 100,
    "ack_per_tool": 0,
    "resume_budget": 1,
}


class PiPublishedGuard(PiGuard):
    ENGINE = "pi-anti-doom-loop@0.0.7"
    SOURCE = (
        "pi-anti-doom-loop v0.0.7 as published (irfndi/pi-anti-doom-loop@a2e33d9 extensions/detector.ts, "
        "controller.ts, index.ts)"
    )
    RANK = 3
    SEES_NESTED = True  # nested calls reach its tool_call handler like any other call
    DESCRIPTION = (
        "pi-anti-doom-loop exactly as published in v0.0.7: block identical calls at 3 in a 10-call window "
        "or 3 failures; re-issue aborts; text loops steer then abort. No near-identical call rule."
    )
    ALIASES = ("pi@0.0.7", "anti-doom-loop@0.0.7", "pi-anti-doom-loop-published")
    SEED = False
    PASTE_NOTES: Mapping[str, str] = {}
    TRANSLATION_NOTE = ""
    SWEEP = None  # replay only: calibration sweeps the seed preset
    PARAMS = {k: v for k, v in PiGuard.PARAMS.items() if k in PUBLISHED_PARAMS}

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__({**params, **_FIXED})

    @classmethod
    def describe(cls, p: Mapping[str, Any]) -> dict[str, str]:
        return {
            "key": "name + canonical JSON (identical arguments only)",
            "window": f"current call + last {p['window']} recorded calls; last {p['window']} texts",
            "reset": "each user prompt (resume budget lasts the session)",
            "exemptions": f"excluded: {tools_text(p['exclude_tools'])}",
            "blocked_count": "no (blocked calls not recorded)",
            "escalation": "block; same call blocked again -> abort; text: steer, then abort (+1 resume per session)",
            "thresholds": f"block at {p['warn']} in window, {p['fails']} consecutive fails; text rules at "
            f"{p['text_repeats']}",
        }

    @classmethod
    def translate(cls, base: type[Guard], warn: int, halt: int, defaults: Mapping[str, Any]) -> str:
        raise NotImplementedError(f"{cls.ENGINE} is not a seed guard")

    def on_call(self, call: Call) -> Verdict | None:
        """``LoopDetector.check`` then ``record`` (controller ``onToolCall``)."""
        tool = call.tool
        if tool in self._exclude:
            return None
        key = call.key
        total = 1 + sum(1 for e in self.sigs if e.key == key)
        reasons = []
        if total >= self._t:
            reasons.append(
                f"exact repeat: {tool!r} was called with identical arguments {total} times in the last "
                f"{self._w} tool calls"
            )
        return self._record_or_block(call, reasons + self._failure_reasons(tool))

    def on_result(self, call: Call) -> Verdict | None:
        """``recordResult`` for every executed call (blocked calls never reach here)."""
        self.results.append((call.tool, bool(call.is_error)))
        if len(self.results) > self._w:
            del self.results[0]
        return None
