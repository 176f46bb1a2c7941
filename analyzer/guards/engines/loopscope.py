"""loopscope's own guard: the detector core's result-aware findings rules, as a guard (ours by default in the hook).

A call is counted against the *stuck episode* it continues: a streak of identical calls, a cycle of 2-5 calls or a
drift run of near-identical calls (the streaming signals of ``detect.stream.calls``), counted only since the last
call that made progress. A call made progress when it succeeded and its result differs from the previous identical
call's (a poll whose output changes), or, with no identical predecessor, when it changed state or its result differs
from the previous call of the same tool (``progress_of``, the core's own rule), or when it is a poll whose result says
the process still runs (``semantics.running_poll``: a wait on a CI run or an install, however often the agent looks).
So a poll whose output changes, or a wait on a running process, never counts past 1 and is never warned or halted;
the same command failing with the same error, or returning the same text, counts every time.

Before each call: ``repeats`` = the largest of the streak, the cycle's full blocks and the drift run, each capped by
the calls (blocks) since the last progress; warn at ``warn``, halt (block the call) at ``halt``. After a halt, a
repeat of the halted call is blocked again until a state change (a successful edit-like call) or a user prompt;
other calls run. Results take effect at the end of the assistant message that issued the call (``on_step_end``), so
the verdicts are the same whether a message's results arrive before its next call (Claude Code runs most tools one
by one) or after all of them (the replay). Counters reset at each user prompt.

The one place that judges "this repeat is stuck" is ``made_progress`` (and ``changed_state`` for the latch): the
per-call judgement of ``analyzer.detect.judge`` (action object, real failure) belongs there.

Calls are compared by their action (``Call.action``, the store's ``calls.action_key``: the arguments without what the
tool's semantics declare commentary or tuning, a shell command without its ``sleep``/``timeout``/``| head``
wrappers; ``detect.semantics``), as the scan's signals compare them: a Claude Code ``Bash`` command rerun with a
rewritten ``description`` is the same call again. Near-identical arguments are compared on the action arguments.

Memory is bounded: the detector keeps the last ``memory`` calls of the user turn (identical calls further back no
longer compare results), so the hook's state file stays small however long the session runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from analyzer.detect.keys import action_json, call_key
from analyzer.detect.rules import SIGNAL_FIELDS, is_mutating
from analyzer.detect.stream.calls import CallDetector, Config, progress_of
from analyzer.guards.base import HALT, WARN, Call, Guard, Message, Param, SweepSpec, Verdict, tools_text

# positions in the detector's pre-result signal tuple; this guard follows cycles of 2-5 calls (``SweepSpec.cycles``)
STREAK, DRIFT = SIGNAL_FIELDS.index("streak"), SIGNAL_FIELDS.index("drift_run")
CYCLES = tuple(SIGNAL_FIELDS.index(f"cycle{k}") for k in range(2, 6))
LABEL = 80  # characters of a command or path quoted in a reason


def made_progress(call: Call, same: bool | None, progress: bool) -> bool:
    """Whether a call's result breaks the stuck episode it belongs to: the core's ``progress`` signal, or a poll of a
    process that still runs (``Call.waiting``): waiting is not a loop, so the guard never warns or halts a wait; the
    same poll once the process has ended counts again."""
    return progress or getattr(call, "waiting", False)


def changed_state(call: Call, progress: bool) -> bool:
    """Whether a call changed the workspace, so a halted call may run again (a successful edit-like tool)."""
    return progress and not call.is_error and is_mutating(call.tool)


def action_of(call: Call) -> str:
    """The call's action key: the store's (``Call.action``), or computed from its arguments (a ``Call`` built without
    it; arguments the replay clipped fail to parse and keep their full key, as the store's own key was computed from
    the whole arguments)."""
    if getattr(call, "action", None) is None:  # a Call pickled before the field existed has no value there
        try:
            args = orjson.loads(call.args)
        except orjson.JSONDecodeError:
            call.action = call.key
        else:
            act = action_json(call.tool, args)
            call.action = call_key(call.tool, act)
            if getattr(call, "action_args", None) is None:
                call.action_args = act
    return call.action


def call_label(tool: str, args: str) -> str:
    """What the model would recognise: the command, path, pattern or URL of a call, else the tool's name."""
    try:
        a = orjson.loads(args)
    except orjson.JSONDecodeError:
        a = None
    text = None
    if isinstance(a, dict):
        for k in ("command", "cmd", "file_path", "path", "notebook_path", "pattern", "url", "query", "prompt"):
            v = a.get(k)
            if isinstance(v, str) and v.strip():
                text = v.strip()
                break
            if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
                text = " ".join(v)
                break
    if text is None:
        return tool
    text = " ".join(text.split())
    if len(text) > LABEL:
        text = text[: LABEL - 1] + "…"
    return f"{tool} `{text}`" if tool not in ("Bash", "bash", "shell") else f"`{text}`"


class LoopscopeGuard(Guard):
    ENGINE = "loopscope"
    SOURCE = "loopscope detector core (analyzer/detect/stream/calls.py): streak, cycles, drift, progress"
    UNIT = "call"
    RANK = 100  # listed after the shipped guards it is compared with
    DESCRIPTION = (
        "loopscope's own: warn at 3, block at 5 repeats of a stuck episode (streak, cycle or drift with no "
        "progress); a poll whose output changes never counts."
    )
    ALIASES = ("ours", "stuck")
    SWEEP = SweepSpec(
        "max(streak, cycle2..5 blocks, drift_run), each capped by the calls since the last progress",
        True,
        cycles=5,
        rule="stuck",
        caveat=(
            "the sweep reads the scan's progress, computed with each result right after its call; the "
            "guard applies a message's results at its end, and forgets calls beyond its memory."
        ),
    )
    COUNTS = "repeats of a stuck episode"
    PASTE_TEMPLATE = (
        "# ~/.config/loopscope/hook-settings.json (written by `loopscope calibrate --write-settings`)\n"
        '{{"policy": "loopscope", "settings": {{"warn": {warn}, "halt": {halt}}}}}'
    )
    PARAMS = {
        "warn": Param("int", 3, "Repeats of a stuck episode that get a warning (the call runs).", minimum=2),
        "halt": Param("int", 5, "Repeats of a stuck episode that block the call.", minimum=2),
        "memory": Param(
            "int",
            64,
            "Calls of the user turn the detector remembers (results further back are not compared).",
            minimum=21,
        ),
        "exempt_tools": Param("tools", (), "Tools neither counted nor breaking a pattern."),
        "latch": Param(
            "bool", True, "After a halt, a repeat of the halted call is blocked until a state change or a user prompt."
        ),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self._warn, self._halt, self._memory = params["warn"], params["halt"], params["memory"]
        self._latch = params["latch"]
        self.det = CallDetector(Config(exempt_tools=frozenset(params["exempt_tools"])))
        self._exempt = frozenset(params["exempt_tools"])
        self._reset()

    def _reset(self) -> None:
        self.det.reset()
        self.det._tok.clear()
        self.pos = 0  # top-level, counted calls since the reset
        self.last_progress = -1  # position of the last call that made progress (-1: none)
        self.results: dict[str, tuple[str, bool]] = {}  # key -> (result key, error) of its latest result
        self.prev: tuple[str, str | None] | None = None  # (tool, result key) of the latest call
        self.open: dict[str, int] = {}  # call id -> position, calls of the current message awaiting results
        self.done: list[tuple[Call, int]] = []  # results of the current message, applied at its end
        self.halted: set[str] = set()

    @classmethod
    def describe(cls, p: Mapping[str, Any]) -> dict[str, str]:
        return {
            "key": "name + the action arguments (commentary and tuning dropped; near-identical arguments count as "
            "drift)",
            "window": f"the user turn's last {p['memory']} calls; streak, cycles of 2-5, drift",
            "reset": "each user prompt; a call that made progress restarts the episode",
            "exemptions": tools_text(p["exempt_tools"]),
            "blocked_count": "yes (a blocked call made no progress)",
            "escalation": "warn = the call runs with a note; halt = block the call"
            + ("; its repeats stay blocked until a state change" if p["latch"] else ""),
            "thresholds": f"warn {p['warn']}, halt {p['halt']} repeats of a stuck episode",
        }

    # -- events ---------------------------------------------------------------------------------------------------
    def on_user(self) -> None:
        self._reset()

    def on_message(self, msg: Message) -> Verdict | None:
        self._apply()
        return None

    def on_step_end(self, msg: Message) -> Verdict | None:
        self._apply()
        return None

    def on_call(self, call: Call) -> Verdict | None:
        if call.parent is not None or call.tool in self._exempt:
            return None
        if self._latch and action_of(call) in self.halted:
            self._feed(call)
            return Verdict(
                HALT,
                "block",
                f"{call_label(call.tool, call.args)} was blocked as a stuck loop and nothing has changed since",
                True,
            )
        t = self._feed(call)
        pre = self._pre
        since = t - self.last_progress if self.last_progress >= 0 else 1 << 30
        reps, period = min(pre[STREAK], since), 1
        for k, i in enumerate(CYCLES, start=2):
            r = min(pre[i], since // k)
            if r > reps:
                reps, period = r, k
        drift = min(pre[DRIFT], since)
        kind = "drift" if drift > reps else ("streak" if period == 1 else "cycle")
        reps = max(reps, drift)
        if reps >= self._halt:
            if self._latch:
                self.halted.add(action_of(call))
            return Verdict(HALT, "block", self._reason(call, reps, kind, period), True)
        if reps >= self._warn:
            return Verdict(WARN, "warn", self._reason(call, reps, kind, period), False)
        return None

    def on_result(self, call: Call) -> Verdict | None:
        if call.call_id in self.open:
            self.done.append((call, self.open.pop(call.call_id)))
        return None

    # -- state ----------------------------------------------------------------------------------------------------
    def _feed(self, call: Call) -> int:
        det = self.det
        self._pre = det.call(action_of(call), call.tool, getattr(call, "action_args", None) or call.args)
        det.result(None, None)  # results are judged here (they may arrive after the message's next call)
        if len(det._hist) > 2 * self._memory:
            det.trim(self._memory)
        t = self.pos
        self.pos = t + 1
        self.open[call.call_id] = t
        return t

    def _apply(self) -> None:
        """The results of the message that just ended, in call order."""
        for call, t in sorted(self.done, key=lambda x: x[1]):
            rk, err = call.result_key, bool(call.is_error)
            key = action_of(call)
            prev = self.results.get(key)
            nb = self.prev[1] if self.prev is not None and self.prev[0] == call.tool else None
            same, progress = progress_of(call.tool, rk, err, prev[0] if prev else None, nb)
            if made_progress(call, same, progress):
                self.last_progress = max(self.last_progress, t)
                if changed_state(call, progress):
                    self.halted.clear()
            if rk is not None:
                self.results[key] = (rk, err)
                if len(self.results) > self._memory:
                    del self.results[next(iter(self.results))]
            self.prev = (call.tool, rk)
        self.done = []
        self.open = {}

    def _reason(self, call: Call, reps: int, kind: str, period: int) -> str:
        what = call_label(call.tool, call.args)
        last = self.results.get(action_of(call))
        if kind == "cycle":
            return f"a {period}-call cycle ending with {what} repeated {reps} times with no progress"
        if kind == "drift":
            return f"{reps} near-identical variants of {what} in a row with no progress"
        if last is not None and last[1]:  # the current call has not run yet
            return f"the same {what} failed {reps - 1} times in a row with the same error"
        return f"the same {what} ran {reps} times with the same result"
