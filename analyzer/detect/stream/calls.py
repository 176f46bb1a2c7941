"""The detector core for tool calls: a pure streaming state machine, one per session (or per live agent).

Fed calls in transcript order, it returns each call's signals from what came before (and the call itself), never
from what comes after, so the signal at call i is exactly what a runtime guard would have seen at call i. It knows
nothing of formats or DuckDB: a live agent embeds it (``detect.stream.live.Detector``). The batch scan computes the same
signals for whole groups of sessions at once (``detect.vector.calls``, polars); this module is the reference it is held
to (tests/test_detect_properties.py). Semantics: docs/detectors.md#vocabulary and docs/detectors.md#the-seed-guards;
every signal is threshold-free, policies put thresholds on them.

Keys are whatever hashable identity the caller gives (the scan passes 64-bit ints of ``calls.action_key``, the live
``Detector`` the same key: calls are compared by their action, ``detect.semantics``); the arguments are the action
arguments, whose token sets are computed lazily, only when a call meets a call of the same tool, and cached by key.

A call is fed in two steps so a guard can look before the call runs: ``call()`` returns the signals that do not need
the result (streak, cycles, window counts, similarity, drift, nested repeats); ``result()`` completes them (failure
run, same result, progress). ``scan_calls`` calls both for each call of a session.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from analyzer.detect.keys import args_token_set, jaccard
from analyzer.detect.rules import (
    CYCLE_PERIODS,
    CYCLE_SIGNALS,
    RESULT_FIELDS,
    SCRIPT_MEMORY,
    SIGNAL_COLUMNS,
    SIGNAL_FIELDS,
    SIMILARITY,
    CallSignals,
    is_mutating,
)

# A call's signals are built as one tuple through ``tuple.__new__`` (calling the class repacks its fields: several
# times the cost, on the hot path of the guard replays); its result then fills ``RESULT_FIELDS``, one slice of the
# record, in one step.
_new = tuple.__new__
_AT = SIGNAL_FIELDS.index(RESULT_FIELDS[0])
_AFTER = _AT + len(RESULT_FIELDS)
assert SIGNAL_FIELDS[_AT:_AFTER] == RESULT_FIELDS
# The pre-result signals are built as one tuple in this order (the cycles by period, from ``rules.CYCLE_PERIODS``).
_PRE_ORDER = ("streak", *CYCLE_SIGNALS, "window5", "window_count", "window20", "sim_prev", "drift_run")
assert SIGNAL_FIELDS[: len(_PRE_ORDER)] == _PRE_ORDER and SIGNAL_FIELDS[_AFTER:] == ("nested_repeat",)
_PERIODS = CYCLE_PERIODS
_LONGEST = CYCLE_PERIODS[-1]


@dataclass(frozen=True)
class Config:
    """What the core needs to know beyond the calls. The defaults are the scan's; a change rescans every session."""

    reset_on_user: bool = True
    similarity: float = SIMILARITY
    script_memory: int = SCRIPT_MEMORY
    exempt_tools: frozenset[str] = field(default_factory=frozenset)

    def describe(self) -> str:
        """A stable text form, stored with each scanned session so a different configuration triggers a rescan."""
        ex = ",".join(sorted(self.exempt_tools))
        return f"reset_on_user={int(self.reset_on_user)};sim={self.similarity};script={self.script_memory};exempt={ex}"


_NO_PENDING = None
# What a call outside the counting shows (an exempt tool's, and a nested call's top-level signals): every counter 0,
# nothing compared (NULL); before the result, the result's signals unknown.
_EXEMPT = CallSignals(**{name: 0 if sql == "INTEGER" else None for name, sql, _ in SIGNAL_COLUMNS})
_EXEMPT_PRE = _EXEMPT._replace(**dict.fromkeys(RESULT_FIELDS))
_EXEMPT_PENDING: tuple = ("exempt",)  # an exempt call waiting for its result: it changes no state


class _Script:
    """One script's nested calls: its last ``script_memory`` calls as ``[key, tool, pos, result, args]`` and its
    failure run."""

    __slots__ = ("entries", "fail", "fail_tool")

    def __init__(self, memory: int) -> None:
        self.entries: deque[list[Any]] = deque(maxlen=memory)
        self.fail = 0
        self.fail_tool: str | None = None


class CallDetector:
    """Streaming signals for one sequence of calls. Not thread-safe; one instance per session or agent."""

    __slots__ = (
        "cfg",
        "_bar",
        "_exempt",
        "_reset_on_user",
        "_ut",
        "n",
        "links",
        "_tok",
        "_hist",
        "_res",
        "_occ",
        "_streak",
        "_m",
        "_drift",
        "_prev_tool",
        "_prev_key",
        "_prev_args",
        "_fail",
        "_fail_tool",
        "_scripts",
        "_pending",
    )

    def __init__(self, config: Config | None = None, token_cache: dict[Any, frozenset[str]] | None = None) -> None:
        self.cfg = config or Config()
        self._bar = self.cfg.similarity
        self._exempt = self.cfg.exempt_tools
        self._reset_on_user = self.cfg.reset_on_user
        self._ut: int | None = None
        self.n = 0  # calls fed so far, exempt ones included: the position of the next call
        # position of a nested call -> positions of the earlier calls of its script it repeats (for episodes)
        self.links: dict[int, list[int]] = {}
        self._tok = token_cache if token_cache is not None else {}
        self._pending: tuple | None = _NO_PENDING
        self.reset()

    # -- state ----------------------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget everything but the position counter: a user prompt starts a fresh history."""
        self._hist: list[Any] = []  # keys of the top-level calls since the reset
        self._res: list[Any] = []  # their result keys (None: no result yet or never)
        self._occ: dict[Any, list[int]] = {}  # key -> its positions in _hist
        self._streak = self._drift = self._fail = 0
        # per period k (index k - 2): the run of calls whose key equals the key k calls back, ending at the last call
        self._m: list[int] = [0] * len(_PERIODS)
        self._prev_tool: str | None = None
        self._prev_key: Any = None
        self._prev_args: str | None = None
        self._fail_tool: str | None = None
        self._scripts: dict[str, _Script] = {}
        self._pending = _NO_PENDING

    def user_prompt(self) -> None:
        """A user prompt was delivered: reset, unless the configuration keeps counting across prompts."""
        self._finish_pending()
        if self._reset_on_user:
            self.reset()

    def _tokens(self, key: Any, args: str | None) -> frozenset[str]:
        tok = self._tok.get(key)
        if tok is None:
            tok = self._tok[key] = args_token_set(args) if args else frozenset()
        return tok

    def _finish_pending(self) -> None:
        if self._pending is not _NO_PENDING:
            self.result(None, None)

    # -- feeding --------------------------------------------------------------------------------------------------
    def call(
        self, key: Any, tool: str, args: str | None, parent: str | None = None, user_turn: int | None = None
    ) -> CallSignals:
        """Record a call and return its pre-result signals (``RESULT_FIELDS`` None until ``result``). ``args`` is
        the action arguments' canonical JSON (read only when the call meets a call of the same tool). ``user_turn``,
        when given, resets the state whenever it changes (the batch form of ``user_prompt``)."""
        if self._pending is not _NO_PENDING:
            self.result(None, None)
        if user_turn is not None and user_turn != self._ut:
            if self._ut is not None and self._reset_on_user:
                self.reset()
            self._ut = user_turn
        pos = self.n
        self.n = pos + 1
        if tool in self._exempt:
            self._pending = _EXEMPT_PENDING
            return _EXEMPT_PRE
        if parent is not None:
            return self._nested_call(pos, key, tool, args, parent)

        hist = self._hist
        t = len(hist)
        prev_tool = self._prev_tool
        streak = self._streak + 1 if t and hist[-1] == key else 1
        # m: per period k, the run of calls whose key equals the key k calls back; the cycle signal is the trailing
        # repetitions of the last-k block, 0 while the block is one key repeated (a streak, not a cycle)
        last = self._m
        if t >= _LONGEST:
            m = [last[i] + 1 if hist[-k] == key else 0 for i, k in enumerate(_PERIODS)]
        else:
            m = [last[i] + 1 if t >= k and hist[-k] == key else 0 for i, k in enumerate(_PERIODS)]
        cycles = [1 + m[i] // k if t >= k - 1 and streak < k else 0 for i, k in enumerate(_PERIODS)]

        # window counts: this call and the W = 5, 10, 20 calls before it, as pi-anti-doom-loop counts (its window
        # holds the last W executed calls and the check adds the current one); window_count is its W = 10
        occ = self._occ.get(key)
        if occ is None:
            self._occ[key] = [t]
            w5 = w10 = w20 = 1
            prev_same = -1
        else:
            prev_same = occ[-1]
            occ.append(t)
            w5 = w10 = w20 = 0
            for p in reversed(occ):
                d = t - p
                if d > 20:
                    break
                w20 += 1
                if d <= 10:
                    w10 += 1
                    if d <= 5:
                        w5 += 1

        if prev_tool == tool:
            a = self._tokens(self._prev_key, self._prev_args)
            b = self._tokens(key, args)
            sim: float | None = jaccard(a, b)
            drift = self._drift + 1 if sim >= self._bar or key == self._prev_key else 1
            neighbor = t - 1
        else:
            sim = None
            drift = 1
            neighbor = -1

        hist.append(key)
        self._res.append(None)
        self._streak, self._m, self._drift = streak, m, drift
        self._prev_tool, self._prev_key, self._prev_args = tool, key, args
        pre = _new(CallSignals, (streak, *cycles, w5, w10, w20, sim, drift, None, None, None, 0))
        self._pending = (pre, t, prev_same, neighbor, tool, None)
        return pre

    def _nested_call(self, pos: int, key: Any, tool: str, args: str | None, parent: str) -> CallSignals:
        """A call made inside a script: compared only with the script's own earlier calls (identical, or the same
        tool with near-identical arguments); it never enters the top-level history."""
        script = self._scripts.get(parent)
        if script is None:
            script = self._scripts[parent] = _Script(self.cfg.script_memory)
        matches: list[int] = []
        prev_same: list[Any] | None = None
        neighbor: list[Any] | None = None
        tok: frozenset[str] | None = None
        for e in script.entries:
            if e[0] == key:
                matches.append(e[2])
                prev_same = e
            elif e[1] == tool:
                if tok is None:
                    tok = self._tokens(key, args)
                if jaccard(tok, self._tokens(e[0], e[4])) >= self._bar:
                    matches.append(e[2])
        if script.entries and script.entries[-1][1] == tool:
            neighbor = script.entries[-1]
        if matches:
            self.links[pos] = matches
        entry = [key, tool, pos, None, args]
        script.entries.append(entry)
        pre = _EXEMPT_PRE._replace(nested_repeat=1 + len(matches))
        self._pending = (pre, entry, prev_same, neighbor, tool, script)
        return pre

    def result(self, result: Any, is_error: bool | None) -> CallSignals | None:
        """Complete the last call with its result key (None: no result) and error flag; return its full signals.
        None when no call is waiting for a result."""
        pending = self._pending
        if pending is _NO_PENDING:
            return None
        self._pending = _NO_PENDING
        if pending is _EXEMPT_PENDING:
            return _EXEMPT
        pre, slot, prev_same, neighbor, tool, script = pending
        if script is None:
            res = self._res
            res[slot] = result
            prev_res = res[prev_same] if prev_same >= 0 else None
            nb_res = res[neighbor] if neighbor >= 0 else None
            if is_error:
                fail = self._fail + 1 if self._fail_tool == tool else 1
                self._fail, self._fail_tool = fail, tool
            else:
                fail = 0
                self._fail, self._fail_tool = 0, None
        else:
            slot[3] = result
            prev_res = prev_same[3] if prev_same is not None else None
            nb_res = neighbor[3] if neighbor is not None else None
            if is_error:
                fail = script.fail + 1 if script.fail_tool == tool else 1
                script.fail, script.fail_tool = fail, tool
            else:
                fail = 0
                script.fail, script.fail_tool = 0, None
        same, progress = progress_of(tool, result, is_error, prev_res, nb_res)
        return _new(CallSignals, pre[:_AT] + (fail, same, progress) + pre[_AFTER:])  # RESULT_FIELDS

    def trim(self, keep: int) -> None:
        """Forget the top-level calls more than ``keep`` calls back (a bounded memory for a long-lived guard): their
        keys leave the window counts and their results the same-result comparison. Counters are kept. Closes a call
        still waiting for its result (as the next call would)."""
        self._finish_pending()
        drop = len(self._hist) - keep
        if drop <= 0:
            return
        self._hist = self._hist[drop:]
        self._res = self._res[drop:]
        occ: dict[Any, list[int]] = {}
        for k, ps in self._occ.items():
            kept = [p - drop for p in ps if p >= drop]
            if kept:
                occ[k] = kept
        self._occ = occ
        live = set(occ)
        live.add(self._prev_key)
        for k in [k for k in self._tok if k not in live]:
            del self._tok[k]


def progress_of(tool: str, result: Any, is_error: bool | None, prev_res: Any, nb_res: Any) -> tuple[bool | None, bool]:
    """The result-aware rule, once: ``same_result`` and ``progress`` of a call from its result key, its error flag,
    the result of the previous identical call (``prev_res``) and of the previous call when it used the same tool
    (``nb_res``); None for any missing result."""
    same = None if prev_res is None or result is None else prev_res == result
    if result is None or is_error:
        progress = False
    elif same is not None:
        progress = not same
    elif is_mutating(tool):
        progress = True
    else:
        progress = nb_res is None or nb_res != result
    return same, progress


def scan_calls(
    keys: Sequence[Any],
    tools: Sequence[str],
    args: Sequence[str | None],
    results: Sequence[Any],
    errors: Sequence[bool | None],
    parents: Sequence[str | None],
    user_turns: Sequence[int],
    config: Config | None = None,
    token_cache: dict[Any, frozenset[str]] | None = None,
) -> tuple[list[CallSignals], dict[int, list[int]]]:
    """Every call of one session, in order, through one ``CallDetector``: one ``CallSignals`` per call and the
    nested links. The per-session reference for the vectorised scan (``detect.vector.calls``) and its episodes."""
    d = CallDetector(config, token_cache)
    call, result = d.call, d.result
    out: list[CallSignals] = []
    append = out.append
    for i in range(len(keys)):
        call(keys[i], tools[i], args[i], parents[i], user_turns[i])
        append(result(results[i], errors[i]))
    return out, d.links
