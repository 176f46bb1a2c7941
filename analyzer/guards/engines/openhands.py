"""OpenHands V0 ``StuckDetector`` (All-Hands-AI/OpenHands@331a1a4 ``openhands/controller/stuck.py``).

Checked before each model request over the history since the last user message; when stuck, the controller raises
``AgentStuckInLoopError`` and the run stops after the call that completed the pattern. Scenarios replayed:

1. the last ``halt`` actions identical and the last ``halt`` observations identical;
2. the last ``error_halt`` actions identical and the last ``error_halt`` observations all errors;
3. the last ``monologue`` agent messages (assistant replies without a tool call) identical with no observation
   between them — three empty replies are three identical messages;
4. the last ``pattern`` actions and observations alternating A-B-A-B.

Actions are tool calls and call-less agent messages; a call's action carries its message's text as ``thought`` on the
first call of a message only (OpenHands compares the whole action, thought included). Command observations compare by
command + exit code only (here: the call and its error flag), others by their content. The context-window error loop
and the IPython syntax-error variant need events transcripts do not keep.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from analyzer.guards.base import HALT, SHELL_TOOLS, Call, Guard, Message, Param, Verdict, tools_text


class OpenhandsGuard(Guard):
    ENGINE = "openhands"
    SOURCE = "All-Hands-AI/OpenHands@331a1a4 openhands/controller/stuck.py (V0)"
    UNIT = "event (actions and observations since the last user message)"
    RANK = 8
    DESCRIPTION = (
        "Stop at 4 identical action+observation pairs, 3 identical failing actions, A-B-A-B over 6, "
        "3 identical messages."
    )
    ALIASES = ("openhands-v0",)
    PARAMS = {
        "halt": Param("int", 4, "Identical action+observation pairs that stop the run.", minimum=2),
        "error_halt": Param("int", 3, "Identical actions whose observations are all errors.", minimum=2),
        "monologue": Param("int", 3, "Identical agent messages with no observation between them.", minimum=2),
        "pattern": Param(
            "int", 6, "Actions and observations alternating A-B-A-B over this many (even; 0 = off).", minimum=0
        ),
        "command_tools": Param("tools", SHELL_TOOLS, "Tools whose observations compare by command + exit code."),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        p = params
        self._halt, self._err, self._mono, self._pattern = p["halt"], p["error_halt"], p["monologue"], p["pattern"]
        self._keep = max(self._halt, self._err, self._pattern, 1)
        self._commands = frozenset(p["command_tools"])
        self.on_user()

    @classmethod
    def describe(cls, p: Mapping[str, Any]) -> dict[str, str]:
        pat = f"; A-B-A-B over {p['pattern']}" if p["pattern"] else ""
        return {
            "key": "the whole action (name + canonical args + thought); observations by content, commands by "
            "exit status",
            "window": f"last {max(p['halt'], p['pattern'])} actions and observations since the last user message",
            "reset": "each user message",
            "exemptions": f"none (commands compared by exit status: {tools_text(p['command_tools'])})",
            "blocked_count": "n/a (never blocks; calls run)",
            "escalation": "stop the run (AgentStuckInLoopError) after the call that completed the pattern",
            "thresholds": f"{p['halt']} identical action+observation, {p['error_halt']} with errors, "
            f"{p['monologue']} identical messages{pat}",
        }

    def on_user(self) -> None:
        self.actions: deque[tuple] = deque(maxlen=self._keep)
        self.observations: deque[tuple[Any, bool]] = deque(maxlen=self._keep)
        self.messages: deque[tuple[str, int]] = deque(maxlen=self._mono)
        self.n_obs = 0
        self.stuck: str | None = None

    def on_message(self, msg: Message) -> Verdict | None:
        if not msg.calls:  # an agent MessageAction
            text = msg.text or ""
            self.actions.append(("msg", text))
            self.messages.append((text, self.n_obs))
        return None

    def on_call(self, call: Call) -> Verdict | None:
        if self.stuck is not None:
            return Verdict(HALT, "stuck", self.stuck, True)
        return None

    def on_step_end(self, msg: Message) -> Verdict | None:
        if self.stuck is not None:
            return None
        first = True
        for call in msg.calls:
            self.actions.append(("call", call.key, (msg.text or "") if first else ""))
            first = False
            if call.has_result:
                obs = (call.key, bool(call.is_error)) if call.tool in self._commands else call.result_key
                self.observations.append((obs, bool(call.is_error)))
                self.n_obs += 1
        reason = self._check()
        if reason is None:
            return None
        self.stuck = reason
        return Verdict(HALT, "stuck", reason, False)

    def _same(self, items: list, n: int) -> bool:
        return len(items) >= n and all(x == items[-1] for x in items[-n:])

    def _check(self) -> str | None:
        acts, obs = list(self.actions), list(self.observations)
        if len(acts) + len(obs) < 3:
            return None
        o_keys = [o for o, _ in obs]
        if self._same(acts, self._halt) and self._same(o_keys, self._halt):
            return f"{self._halt} identical actions with identical observations"
        if self._same(acts, self._err) and len(obs) >= self._err and all(err for _, err in obs[-self._err :]):
            return f"{self._err} identical actions, each an error"
        msgs = list(self.messages)
        if len(msgs) >= self._mono and all(m[0] == msgs[-1][0] for m in msgs) and msgs[0][1] == msgs[-1][1]:
            return f"{self._mono} identical agent messages with no observation between"
        p = self._pattern
        if p and len(acts) >= p and len(obs) >= p:
            a, o = acts[-p:], o_keys[-p:]
            if all(a[i] == a[i % 2] for i in range(p)) and all(o[i] == o[i % 2] for i in range(p)):
                return "actions and observations alternating A-B-A-B"
        return None
