"""The format registry: every module in this folder is one transcript format, found by listing the folder, so adding
a format is adding a module (and its tests).

A format module declares ``FORMAT`` (the name stored in ``sessions.format`` and accepted by ``--agent``), ``ALIASES``
(other names ``--agent`` accepts), ``SNIFF_RANK`` (lower is tried first: strict shapes before loose ones), optionally
``default_roots()`` (the agent's own session folders, read by ``loopscope analyze`` without a path), a ``Parser``,
and at least one way to recognise its files from their content:

- ``sniff(record)``: one JSON record of a JSON-lines file;
- ``sniff_document(doc)``: a file that is one JSON document; the parser is fed it once, as record 1;
- ``sniff_file(path, head)``: a file the parser reads itself (``Parser.read(path)``), e.g. a zip or SQLite file.

A format may also say why a file of its agent that it does not read is skipped: ``describe_file(path)`` -> a reason
or None (e.g. Claude Code's workflow ``journal.jsonl``).

Optional hooks for discovery: ``reads_named(name)`` (a file read whatever its suffix says, e.g. ``opencode.db``) and
``companion_state(path, size, mtime_ns)`` (the size and mtime that stand for a file whose content lives partly in
other files, so re-ingest notices when those change).
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


@lru_cache(maxsize=None)
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
    """The agents' own session folders (and files) that exist on this machine."""
    roots: list[Path] = []
    for m in with_hook("default_roots"):
        roots.extend(p for p in m.default_roots() if p.exists() and p not in roots)
    return roots


def reads_named(name: str) -> bool:
    """Whether some format reads a file of this name whatever its suffix."""
    return any(m.reads_named(name) for m in with_hook("reads_named"))


def companion_state(path: str, size: int, mtime_ns: int) -> tuple[int, int] | None:
    """The (size, mtime) standing for ``path`` and its companion files, or None for a plain file."""
    for m in with_hook("companion_state"):
        state = m.companion_state(path, size, mtime_ns)
        if state is not None:
            return state
    return None


def has_companions(path: str) -> bool:
    return companion_state(path, 0, 0) is not None


def describe_file(path: Path) -> str | None:
    """A format's own reason for skipping a file it recognises by its place but does not read."""
    for m in with_hook("describe_file"):
        reason = m.describe_file(path)
        if reason:
            return reason
    return None
