"""The format registry: every module in this folder is one transcript format, found by listing the folder, so adding
a format is adding a module (and its tests).

A format module declares ``FORMAT`` (the name stored in ``sessions.format`` and accepted by ``--agent``), ``ALIASES``
(other names ``--agent`` accepts), ``SNIFF_RANK`` (lower is tried first: strict shapes before loose ones), optionally
``default_roots()`` (the agent's own session folders, read by ``loopscope analyze`` without a path), a ``Parser``,
and at least one way to recognise its files from their content:

- ``sniff(record)``: one JSON record of a JSON-lines file;
- ``sniff_document(doc)``: a file that is one JSON document; the parser is fed it once, as record 1;
- ``sniff_file(path, head)``: a file the parser reads itself (``Parser.read(path)``), e.g. a zip or SQLite file.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from pathlib import Path
from types import ModuleType


@lru_cache(maxsize=1)
def modules() -> tuple[ModuleType, ...]:
    """Every format module, in sniffing order."""
    found = [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)]
    return tuple(sorted(found, key=lambda m: (m.SNIFF_RANK, m.FORMAT)))


def adapters() -> dict[str, ModuleType]:
    return {m.FORMAT: m for m in modules()}


def with_hook(hook: str) -> tuple[ModuleType, ...]:
    """The format modules that recognise files by ``hook`` (``sniff``, ``sniff_document``, ``sniff_file``)."""
    return tuple(m for m in modules() if hasattr(m, hook))


def names() -> tuple[str, ...]:
    return tuple(m.FORMAT for m in modules())


def agent_names() -> dict[str, str]:
    """Every name ``--agent`` accepts (formats and their aliases) -> the format."""
    out: dict[str, str] = {}
    for m in modules():
        out[m.FORMAT] = m.FORMAT
        out.update({a: m.FORMAT for a in getattr(m, "ALIASES", ())})
    return out


def default_roots() -> list[Path]:
    """The agents' own session folders that exist on this machine."""
    roots: list[Path] = []
    for m in modules():
        roots.extend(p for p in getattr(m, "default_roots", lambda: [])() if p.is_dir() and p not in roots)
    return roots
