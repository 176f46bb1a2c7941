"""OpenCode's doom-loop check (anomalyco/opencode@002d982 ``packages/opencode/src/session/processor.ts``).

When a tool call starts, the last 3 parts of the current assistant message are compared: all tool parts of the same
tool with ``JSON.stringify``-equal input means a doom loop, and OpenCode asks the ``doom_loop`` permission (default
"ask": the run waits for the user). Each model step is its own assistant message, so the check never spans messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from analyzer.guards.base import HALT, KEY_ATTR, KEY_WORDS, Call, Guard, Message, Param, Verdict, key_param


class OpencodeGuard(Guard):
    ENGINE = "opencode"
    SOURCE = "anomalyco/opencode@002d982 packages/opencode/src/session/processor.ts (DOOM_LOOP_THRESHOLD)"
    UNIT = "tool part of one assistant message"
    RANK = 7
    DESCRIPTION = "Ask doom_loop permission at 3 identical calls ending one assistant message."
    PARAMS = {
        "key": key_param("ordered"),
        "halt": Param("int", 3, "Identical tool parts ending one assistant message that ask doom_loop.", minimum=1),
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self._key = attrgetter(KEY_ATTR[params["key"]])
        self._n = params["halt"]
        self.parts: list[str] = []

    @classmethod
    def describe(cls, p: Mapping[str, Any]) -> dict[str, str]:
        return {
            "key": KEY_WORDS[p["key"]],
            "window": f"last {p['halt']} parts of the current assistant message",
            "reset": "each assistant message",
            "exemptions": "none",
            "blocked_count": "n/a",
            "escalation": "ask permission doom_loop (the run waits for the user)",
            "thresholds": f"{p['halt']} identical calls as the last parts of one message",
        }

    def on_message(self, msg: Message) -> Verdict | None:
        self.parts = []
        return None

    def on_call(self, call: Call) -> Verdict | None:
        key = self._key(call)
        parts = self.parts
        parts.append(key)
        n = self._n
        if len(parts) >= n and all(k == key for k in parts[-n:]):
            return Verdict(HALT, "ask", f"{n} identical {call.tool} calls in one message", False)
        return None
