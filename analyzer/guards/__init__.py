"""Exact replicas of the loop guards agents ship, as pure state machines over a session's events (``base``).

One module per guard; ``ENGINES`` maps each engine name (= its preset's name) to its class.
"""

from __future__ import annotations

from analyzer.guards.base import HALT, LEVELS, OK, WARN, Call, Guard, Message, Param, Step, UserPrompt, Verdict
from analyzer.guards.cline import ClineGuard
from analyzer.guards.codesign import CodesignGuard
from analyzer.guards.gemini import GeminiGuard
from analyzer.guards.gitagent import GitagentGuard
from analyzer.guards.opencode import OpencodeGuard
from analyzer.guards.openhands import OpenhandsGuard
from analyzer.guards.pi import PiGuard
from analyzer.guards.roo import RooGuard

ENGINES: dict[str, type[Guard]] = {
    g.ENGINE: g
    for g in (CodesignGuard, GitagentGuard, PiGuard, GeminiGuard, ClineGuard, RooGuard, OpencodeGuard,
              OpenhandsGuard)
}

__all__ = ["ENGINES", "HALT", "LEVELS", "OK", "WARN", "Call", "Guard", "Message", "Param", "Step", "UserPrompt",
           "Verdict"]
