"""Exact replicas of the loop guards agents ship, as pure state machines over a session's events (``base``).

One module per guard, holding all of that guard's facts on its engine class: engine name, source, description,
aliases, settings, its source file and the text to paste (``paste``, ``translate``), and how calibration sweeps it
(``SWEEP``, a ``SweepSpec``; None for replay-only guards). ``ENGINES`` maps each engine name (= its preset's name) to
its class; the policies, the sweep, the paste texts and the CLI read it. Adding a guard is adding a module and listing
its class here.
"""

from __future__ import annotations

from analyzer.guards.base import (HALT, LEVELS, OK, WARN, Call, Guard, Message, Param, Step, SweepSpec, UserPrompt,
                                 Verdict)
from analyzer.guards.cline import ClineGuard
from analyzer.guards.codesign import CodesignGuard
from analyzer.guards.gemini import GeminiGuard
from analyzer.guards.gitagent import GitagentGuard
from analyzer.guards.opencode import OpencodeGuard
from analyzer.guards.openhands import OpenhandsGuard
from analyzer.guards.pi import PiGuard
from analyzer.guards.roo import RooGuard

# Listing order is the presets' order (`loopscope policies`, `--policy all`).
ENGINES: dict[str, type[Guard]] = {
    g.ENGINE: g
    for g in (CodesignGuard, GitagentGuard, PiGuard, GeminiGuard, ClineGuard, RooGuard, OpencodeGuard,
              OpenhandsGuard)
}

__all__ = ["ENGINES", "HALT", "LEVELS", "OK", "WARN", "Call", "Guard", "Message", "Param", "Step", "SweepSpec",
           "UserPrompt", "Verdict", "aliases", "seeds", "sweepable"]


def sweepable() -> dict[str, type[Guard]]:
    """The guards calibration sweeps (those with a ``SWEEP``), in registry order."""
    return {name: g for name, g in ENGINES.items() if g.SWEEP is not None}


def seeds() -> dict[str, type[Guard]]:
    """The seed guards: each gets a translated setting to paste whatever guard was calibrated."""
    return {name: g for name, g in ENGINES.items() if g.SEED}


def aliases() -> dict[str, str]:
    """Every other name of a preset -> its engine name."""
    return {a: name for name, g in ENGINES.items() for a in g.ALIASES}
