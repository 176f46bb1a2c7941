"""gitagent's loop guard (seed 001): ``afterToolCall`` bounds on repeats and on assistant turns.
docs/detectors.md#gitagent-loop-guard-seed-001.

It never blocks a call: the call runs, and when a bound trips every later result says ``terminate`` (the guard latches).
pi-agent-core stops only after a batch whose every result terminated, so a trip in the middle of a batch ends the run
after the next batch — the replay's stop point follows that rule (``BATCH_STOP``). One guard per ``query()``, i.e. per
user prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from analyzer.guards.base import (
    HALT,
    KEY_ATTR,
    KEY_WORDS,
    Call,
    Guard,
    Param,
    Recommended,
    SweepSpec,
    Verdict,
    key_param,
)


class GitagentGuard(Guard):
    ENGINE = "gitagent"
    SOURCE = "gitagent src/loop-guard.ts (seed 001)"
    UNIT = "call (repeats); assistant turn that requested tools (max_turns)"
    RANK = 2
    BATCH_STOP = True
    DESCRIPTION = "Seed guard: terminate after 5 identical calls in a row or 50 tool-requesting turns; latches."
    GUARD_FILE = "src/loop-guard.ts"
    SEED = True
    PASTE_NOTES = {
        "open-codesign": "open-codesign also halts 2- and 3-call cycles; warn = halt means no separate "
        "warning, as gitagent has none"
    }
    TRANSLATION_NOTE = "{base} counts {counts}; gitagent counts calls in a row only"
    SWEEP = SweepSpec(
        "streak (and the maxTurns cap)",
        False,
        one_threshold=True,
        rule="turn-cap",
        caveat=("canonical call key instead of JSON.stringify order; the turn cap is kept at the base's maxTurns."),
    )
    PARAMS = {
        "key": key_param("ordered"),
        "halt": Param(
            "int",
            5,
            "maxRepeats: identical calls in a row that terminate the run (below 2 is raised to 2).",
            minimum=2,
            below_min="clamp",
        ),
        "max_turns": Param(
            "int",
            50,
            "maxTurns: assistant turns that requested tools before the run terminates "
            "(the manifest's runtime.max_turns, else 50); 0 = no cap.",
            minimum=0,
        ),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self._key = attrgetter(KEY_ATTR[params["key"]])
        self._max_repeats = params["halt"]
        self._max_turns = params["max_turns"]
        self.on_user()

    @classmethod
    def paste(cls, rec: Recommended, params: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
        """The ``createLoopGuard`` options ``maxRepeats`` and ``maxTurns`` (seed 001; the turn cap can also come
        from the agent manifest's ``runtime.max_turns``)."""
        return cls._snippet(rec.halt, int(params.get("max_turns", defaults["max_turns"])))

    @classmethod
    def streak_stop(cls, warn: int, halt: int) -> tuple[int, int]:
        return halt, halt  # no warning

    @classmethod
    def translate(cls, base: type[Guard], warn: int, halt: int, defaults: Mapping[str, Any]) -> str:
        return cls._snippet(halt, int(defaults["max_turns"]), cls.translation_note(base, warn, halt))

    @classmethod
    def _snippet(cls, halt: int, max_turns: int, why: str | None = None) -> str:
        return (
            f"{cls.file_comment(why)}\ncreateLoopGuard({{ maxRepeats: {max(2, halt)}, maxTurns: {max_turns} }})\n"
            f"// or set the turn cap in the agent manifest: runtime.max_turns: {max_turns}"
        )

    @classmethod
    def describe(cls, p: Mapping[str, Any]) -> dict[str, str]:
        turns = f", or {p['max_turns']} tool-requesting turns" if p["max_turns"] else ""
        return {
            "key": KEY_WORDS[p["key"]],
            "window": "consecutive calls; turn count since the prompt",
            "reset": "each user prompt (one guard per query)",
            "exemptions": "none",
            "blocked_count": "n/a (never blocks; calls run)",
            "escalation": "terminate after the call (output kept); latched; the run stops after the first "
            "all-terminate batch",
            "thresholds": f"halt at {p['halt']} identical in a row{turns}",
        }

    def on_user(self) -> None:
        self.last: str | None = None
        self.count = 0
        self.turns: set[int] = set()
        self.tripped: str | None = None

    def on_result(self, call: Call) -> Verdict | None:
        if self.tripped is not None:
            return Verdict(HALT, "terminate", self.tripped, False)
        self.turns.add(call.turn)
        key = self._key(call)
        if key == self.last:
            self.count += 1
        else:
            self.last, self.count = key, 1
        if self.count >= self._max_repeats:
            self.tripped = f"{self.count} identical tool calls in a row"
        elif self._max_turns and len(self.turns) >= self._max_turns:
            self.tripped = f"{len(self.turns)} assistant turns requested tools (maxTurns {self._max_turns})"
        else:
            return None
        return Verdict(HALT, "terminate", self.tripped, False)
