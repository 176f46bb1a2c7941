"""Exact replicas of the loop guards agents ship, as pure state machines over a session's events (``base``).

One module per guard under ``engines/``, holding all of that guard's facts on its engine class: engine name, source,
description, aliases, settings, its source file and the text to paste (``paste``, ``translate``), and how calibration
sweeps it (``SWEEP``, a ``SweepSpec``; None for replay-only guards). ``ENGINES`` maps each engine name (= its
preset's name) to its class; the policies, the sweep, the paste texts and the CLI read it. Adding a guard is adding a
module to ``engines/``: the registry finds it by listing the folder.
"""

from __future__ import annotations

from analyzer.guards.base import (
    HALT,
    LEVELS,
    OK,
    WARN,
    Call,
    Guard,
    Message,
    Param,
    Recommended,
    Step,
    SweepSpec,
    UserPrompt,
    Verdict,
)
from analyzer.guards.engines import engines

# Found by listing ``analyzer/guards/engines``; ordered by each guard's ``RANK`` (the presets' order in
# `loopscope policies` and `--policy all`).
ENGINES: dict[str, type[Guard]] = {g.ENGINE: g for g in engines()}


def sweepable() -> dict[str, type[Guard]]:
    """The guards calibration sweeps (those with a ``SWEEP``), in registry order."""
    return {name: g for name, g in ENGINES.items() if g.SWEEP is not None}


def seeds() -> dict[str, type[Guard]]:
    """The seed guards: each gets a translated setting to paste whatever guard was calibrated."""
    return {name: g for name, g in ENGINES.items() if g.SEED}


def aliases() -> dict[str, str]:
    """Every other name of a preset -> its engine name."""
    return {a: name for name, g in ENGINES.items() for a in g.ALIASES}


__all__ = [
    "ENGINES",
    "HALT",
    "LEVELS",
    "OK",
    "WARN",
    "Call",
    "Guard",
    "Message",
    "Param",
    "Recommended",
    "Step",
    "SweepSpec",
    "UserPrompt",
    "Verdict",
    "aliases",
    "seeds",
    "sweepable",
]
