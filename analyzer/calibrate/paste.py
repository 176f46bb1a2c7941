"""The recommended setting as text to paste into each seed guard (and the base guard when it is another one).

The base policy's own guard gets its exact setting (``Guard.paste``, declared in the guard's module with its source
file, ``Guard.GUARD_FILE``). A seed guard (``Guard.SEED``: open-codesign, gitagent, pi-anti-doom-loop) with other
semantics gets a *translation* (``Guard.translate``) with a comment saying what differs and which stop point it
preserves: the warning and halt of a streak of identical calls (``Guard.streak_stop`` of the base; pi blocks the R-th
occurrence and aborts when the blocked call is re-issued, so a streak stops at R + 1). The comment is the base's own
note for that seed (``Guard.PASTE_NOTES``) or, when it has none, the seed's default (``Guard.TRANSLATION_NOTE``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analyzer.guards import ENGINES, Recommended, seeds


def paste_settings(
    base: str,
    warn: int,
    halt: int,
    window: int | None,
    similarity: float | None,
    params: dict[str, Any],
    defaults: Mapping[str, Mapping[str, Any]],
) -> dict[str, str]:
    """Guard name -> text to paste, for the recommended (warn, halt, window, similarity) of ``base`` (whose other
    settings are ``params``); ``defaults`` holds each seed guard's default settings."""
    cls = ENGINES[base]
    rec = Recommended(warn, halt, window, similarity)
    out = {base: cls.paste(rec, params, defaults.get(base) or _defaults(base))}
    stop_warn, stop_halt = cls.streak_stop(warn, halt)
    for name, seed in seeds().items():
        if name != base:
            out[f"{name} (translation)"] = seed.translate(
                cls, stop_warn, stop_halt, defaults.get(name) or _defaults(name)
            )
    return out


def _defaults(engine: str) -> dict[str, Any]:
    return {k: p.default for k, p in ENGINES[engine].PARAMS.items()}
