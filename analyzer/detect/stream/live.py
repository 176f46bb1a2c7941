"""The detector core, live: embed a ``Detector`` in an agent, tell it what happens, act on its verdicts.

    from analyzer.detect.stream.live import Detector, Thresholds

    guard = Detector(Thresholds(warn=3, halt=5))
    seen = guard.observe_call("bash", {"command": "make"})      # before the call runs
    if seen.verdict == "halt": ...                              # block it, or stop the run
    done = guard.observe_result("make: *** [all] Error 2", is_error=True)   # after it ran
    said = guard.observe_text("Let me try again:")              # at the end of each assistant message
    guard.observe_user()                                        # a user prompt was delivered: counters reset

Calls are compared by their action key and result keys, the store's own (``detect.keys.action_key``: commentary and
tuning arguments dropped, docs/detectors.md), so a guard fed a transcript sees exactly the signals ``loopscope scan``
stores for it (a property test pins this). Report results in call order: a call observed before
the previous one's result arrived closes the previous one without a result. A call the agent then blocks still
counts, as in open-codesign's guard (blocked attempts keep counting).

A policy is anything with ``call_verdict(CallSignals)`` and ``text_verdict(TextSignals)``; ``Thresholds`` is a simple
one, the presets that mirror real guards live in ``analyzer.guards.policies``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple, Protocol

from analyzer.detect.keys import action_json, call_key, result_key
from analyzer.detect.rules import MAX_PERIOD, SIGNAL_FIELDS, CallSignals, TextSignals
from analyzer.detect.stream.calls import CallDetector, Config
from analyzer.detect.stream.text import TextDetector

_CYCLE_AT = SIGNAL_FIELDS.index("cycle2")  # cycle2 .. cycle<MAX_PERIOD> follow one another


class Level(str, Enum):
    ok = "ok"
    warn = "warn"
    halt = "halt"


class SignalPolicy(Protocol):
    def call_verdict(self, s: CallSignals) -> Level: ...

    def text_verdict(self, s: TextSignals) -> Level: ...


@dataclass(frozen=True)
class Thresholds:
    """Warn/halt over the strongest repeat signal of a call: the streak, cycles of up to ``max_period`` calls a round
    (at most ``rules.MAX_PERIOD``), the window count (W = ``window``: 5, 10 or 20; None: off), the drift run
    (``drift``), and, once the result is known, the failure run (``failures``). A nested call halts at ``nested``
    repeats inside its script; a message at ``text`` on any text rule, or ``chunks`` repeated 50-char chunks.
    ``None`` turns a level off."""

    warn: int | None = 3
    halt: int | None = 5
    max_period: int = 5
    window: int | None = None
    drift: bool = False
    failures: bool = True
    nested: int | None = 2
    text: int | None = 3
    chunks: int | None = 10

    def level(self, s: CallSignals) -> int:
        cycles = s[_CYCLE_AT : _CYCLE_AT + max(0, min(self.max_period, MAX_PERIOD) - 1)]
        level = max(s.streak, *cycles) if cycles else s.streak
        if self.window is not None:
            level = max(level, {5: s.window5, 10: s.window_count, 20: s.window20}[self.window])
        if self.drift:
            level = max(level, s.drift_run)
        if self.failures and s.fail_run:
            level = max(level, s.fail_run)
        return level

    def call_verdict(self, s: CallSignals) -> Level:
        if self.nested is not None and s.nested_repeat >= self.nested:
            return Level.halt
        level = self.level(s)
        if self.halt is not None and level >= self.halt:
            return Level.halt
        if self.warn is not None and level >= self.warn:
            return Level.warn
        return Level.ok

    def text_verdict(self, s: TextSignals) -> Level:
        hit = (
            self.text is not None and max(s.sentence_repeats, s.same_count, s.similar_run, s.similar_count) >= self.text
        )
        if hit or (self.chunks is not None and s.chunk_repeats >= self.chunks):
            return Level.halt
        return Level.ok


class CallObservation(NamedTuple):
    signals: CallSignals
    verdict: Level


class TextObservation(NamedTuple):
    signals: TextSignals
    verdict: Level


class Detector:
    """One agent run's guard: the streaming core plus a policy."""

    def __init__(self, policy: SignalPolicy | None = None, config: Config | None = None) -> None:
        self.policy: SignalPolicy = policy if policy is not None else Thresholds()
        self.config = config or Config()
        self._calls = CallDetector(self.config)
        self._texts = TextDetector(self.config.similarity, self.config.reset_on_user)

    def observe_call(self, tool: str, args: Any, parent_call_id: str | None = None) -> CallObservation:
        """A tool call about to run (``args`` as the agent sent them; ``parent_call_id`` for a call made inside a
        script). Returns the signals known before its result, and the policy's verdict on them."""
        act = action_json(tool, args if args is not None else {})
        sig = self._calls.call(call_key(tool, act), tool, act, parent_call_id)
        return CallObservation(sig, self.policy.call_verdict(sig))

    def observe_result(self, text: str | None, is_error: bool | None = False) -> CallObservation | None:
        """The result of the last observed call (``text`` None and ``is_error`` None: it got none). Returns its full
        signals and verdict, or None when no call waits for a result."""
        sig = self._calls.result(result_key(text, is_error), is_error)
        if sig is None:
            return None
        return CallObservation(sig, self.policy.call_verdict(sig))

    def observe_text(self, text: str | None) -> TextObservation | None:
        """An assistant message ended with this text; None for a blank message (never a loop signal)."""
        sig = self._texts.feed(text)
        if sig is None:
            return None
        return TextObservation(sig, self.policy.text_verdict(sig))

    def observe_user(self) -> None:
        """A user prompt was delivered: every counter resets (unless the config keeps them across prompts)."""
        self._calls.user_prompt()
        self._texts.user_prompt()
