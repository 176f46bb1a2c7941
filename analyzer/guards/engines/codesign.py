"""open-codesign's tool-loop guard (seed 000): streaks and 2-/3-call cycles over a short history.
docs/detectors.md#open-codesign-tool-loop-guard-seed-000.

Every call enters the history, blocked ones included, so a model that ignores the warning still reaches the halt;
``done`` is neither counted nor breaks a streak; after the halt every later call is blocked until a user message is
delivered. The settings make the same engine usable for custom policies (e.g. ``blocked_count = false``).
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from analyzer.guards.base import (
    HALT,
    KEY_ATTR,
    KEY_PARAM,
    KEY_WORDS,
    WARN,
    Call,
    Guard,
    Param,
    Recommended,
    SweepSpec,
    Verdict,
    tools_text,
)


def trailing_repeats(seq: list[str], k: int) -> int:
    """How many times the last-k block repeats contiguously at the end of ``seq``."""
    n = len(seq)
    if k == 0 or k > n:
        return 0
    block = seq[n - k :]
    reps, pos = 0, n
    while pos - k >= 0 and seq[pos - k : pos] == block:
        reps += 1
        pos -= k
    return reps


class CodesignGuard(Guard):
    ENGINE = "open-codesign"
    SOURCE = "open-codesign tool-loop guard (seed 000, packages/core/src/tool-loop-guard.ts)"
    UNIT = "call"
    RANK = 1
    DESCRIPTION = "Seed guard: streaks and 2-/3-call cycles, warn (block) at 3, halt at 5; blocked calls count."
    ALIASES = ("codesign", "open_codesign")
    GUARD_FILE = "packages/core/src/tool-loop-guard.ts"
    SEED = True
    PASTE_NOTES = {
        "gitagent": "gitagent counts identical calls in a row only (no 2-/3-call cycles, no warning) and "
        "terminates after the call has run"
    }
    TRANSLATION_NOTE = (
        "{base} counts {counts}; open-codesign counts streaks and 2-/3-call cycles, resetting at user prompts"
    )
    SWEEP = SweepSpec(
        "max(streak, cycle2, cycle3)",
        True,
        cycles=3,
        caveat=("`done` calls count in the sweep (the guard exempts them); otherwise the measure is the guard's."),
    )
    PARAMS = {
        "key": KEY_PARAM,
        "warn": Param("int", 3, "Repeats (of a call or of a cycle) that block the call with a warning.", minimum=1),
        "halt": Param("int", 5, "Repeats that halt the run.", minimum=1),
        "max_cycle": Param("int", 3, "Longest cycle detected (1 = identical calls in a row only).", minimum=1),
        "window": Param("int", 0, "History length in calls; 0 = halt x max_cycle (15 by default).", minimum=0),
        "exempt_tools": Param("tools", ("done",), "Tools neither counted nor breaking a streak."),
        "blocked_count": Param("bool", True, "Calls blocked after a warning still enter the history."),
        "reset": Param(
            "str", "prompt", "Reset at each delivered user message (prompt) or never.", choices=("prompt", "never")
        ),
        "latch": Param("bool", True, "After the halt every later call is blocked until the reset."),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self._key = attrgetter(KEY_ATTR[params["key"]])
        self._warn, self._halt = params["warn"], params["halt"]
        self._cycles = tuple(range(2, params["max_cycle"] + 1))
        self._limit = params["window"] or params["halt"] * params["max_cycle"]
        self._exempt = frozenset(params["exempt_tools"])
        self._blocked_count = params["blocked_count"]
        self._reset = params["reset"] == "prompt"
        self._latch = params["latch"]
        self.history: list[str] = []
        self.halted = False

    @classmethod
    def paste(cls, rec: Recommended, params: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
        """The constants ``TOOL_LOOP_WARN_REPEATS`` / ``TOOL_LOOP_HALT_REPEATS`` (seed 000)."""
        return cls._snippet(rec.warn, rec.halt)

    @classmethod
    def translate(cls, base: type[Guard], warn: int, halt: int, defaults: Mapping[str, Any]) -> str:
        return cls._snippet(warn, halt, cls.translation_note(base, warn, halt))

    @classmethod
    def _snippet(cls, warn: int, halt: int, why: str | None = None) -> str:
        return (
            f"{cls.file_comment(why)}\nconst TOOL_LOOP_WARN_REPEATS = {warn};\nconst TOOL_LOOP_HALT_REPEATS = {halt};"
        )

    @classmethod
    def describe(cls, p: Mapping[str, Any]) -> dict[str, str]:
        window = p["window"] or p["halt"] * p["max_cycle"]
        cyc = f", cycles of 2..{p['max_cycle']}" if p["max_cycle"] >= 2 else ""
        return {
            "key": KEY_WORDS[p["key"]],
            "window": f"last {window} calls (streak{cyc})",
            "reset": "each delivered user message" if p["reset"] == "prompt" else "never",
            "exemptions": tools_text(p["exempt_tools"]),
            "blocked_count": "yes" if p["blocked_count"] else "no",
            "escalation": "warn = block the call with a reason; halt = block it and end the run"
            + ("; every later call blocked" if p["latch"] else ""),
            "thresholds": f"warn {p['warn']}, halt {p['halt']} repeats",
        }

    def on_user(self) -> None:
        if self._reset:
            self.history = []
            self.halted = False

    def on_call(self, call: Call) -> Verdict | None:
        if self.halted and self._latch:
            return Verdict(HALT, "halt", "the run was halted; every later call is blocked", True)
        if call.tool in self._exempt:
            return None
        hist = self.history
        hist.append(self._key(call))
        dropped = hist.pop(0) if len(hist) > self._limit else None
        reps = trailing_repeats(hist, 1)
        period = 1
        for k in self._cycles:
            if len(set(hist[-k:])) > 1:
                r = trailing_repeats(hist, k)
                if r > reps:
                    reps, period = r, k
        if reps >= self._halt:
            level, action = HALT, "halt"
            self.halted = True
        elif reps >= self._warn:
            level, action = WARN, "warn"
        else:
            return None
        if not self._blocked_count:
            hist.pop()
            if dropped is not None:
                hist.insert(0, dropped)
        what = "the same call" if period == 1 else f"a {period}-call cycle"
        return Verdict(level, action, f"{what} repeated {reps} times", True)
