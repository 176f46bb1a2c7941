"""Exact replicas of the loop guards agents ship, as pure state machines over a session's events (``base``).

One module per guard; ``ENGINES`` maps each engine name (= its preset's name) to its class.
"""

from __future__ import annotations

from .base import HALT, LEVELS, OK, WARN, Call, Guard, Message, Param, Step, UserPrompt, Verdict
from .cline import ClineGuard
from .codesign import CodesignGuard
from .gemini import GeminiGuard
from .gitagent import GitagentGuard
from .opencode import OpencodeGuard
from .openhands import OpenhandsGuard
from .pi import PiGuard
from .roo import RooGuard

ENGINES: dict[str, type[Guard]] = {
    g.ENGINE: g
    for g in (CodesignGuard, GitagentGuard, PiGuard, GeminiGuard, ClineGuard, RooGuard, OpencodeGuard,
              OpenhandsGuard)
}

__all__ = ["ENGINES", "HALT", "LEVELS", "OK", "WARN", "Call", "Guard", "Message", "Param", "Step", "UserPrompt",
           "Verdict"]
