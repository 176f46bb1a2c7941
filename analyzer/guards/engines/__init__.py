"""The guard registry: every module in this folder is one guard engine, found by listing the folder, so adding a
guard is adding a module (and its tests).

A guard module defines one ``Guard`` subclass (``analyzer.guards.base``) that declares all of that guard's facts:
``ENGINE`` (its name, which is also its preset's name), ``RANK`` (listing order), ``SOURCE``, ``UNIT``,
``DESCRIPTION``, ``ALIASES``, ``PARAMS``, ``GUARD_FILE``, ``SEED``, ``SWEEP`` (a ``SweepSpec``, or None when
calibration does not sweep it), and the text to paste (``paste`` or ``PASTE_TEMPLATE``, ``translate``,
``streak_stop``, ``PASTE_NOTES``, ``TRANSLATION_NOTE``).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import lru_cache

from analyzer.guards.base import Guard


@lru_cache(maxsize=1)
def engines() -> tuple[type[Guard], ...]:
    """Every guard engine class defined in this folder, in listing order (``RANK``)."""
    found: list[type[Guard]] = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.extend(
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, Guard) and obj.__module__ == module.__name__
        )
    return tuple(sorted(found, key=lambda g: (g.RANK, g.ENGINE)))
