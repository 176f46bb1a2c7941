"""The format registry: every module in this folder is one transcript format, found by listing the folder, so adding
a format is adding a module (and its tests).

What a format module provides is written once, in ``analyzer.ingest.base``: ``Format`` (its names, sniffing rank and
parser), at least one recognition protocol (``SniffsRecords``, ``SniffsDocuments``, ``SniffsFiles``) and, optionally,
the discovery hooks (``HasDefaultRoots``, ``ReadsNamedFiles``, ``HasCompanions``, ``HasCompanionFiles``,
``DescribesFiles``). The registry checks every module against it the first time it lists them, and picks the modules
of a hook by its protocol.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from types import ModuleType

from analyzer.ingest.base import (
    LOCAL,
    DescribesFiles,
    Files,
    GroupsFiles,
    HasCompanionFiles,
    HasCompanions,
    HasDefaultRoots,
    ReadsNamedFiles,
    contract_problems,
)


@cache
def modules() -> tuple[ModuleType, ...]:
    """Every format module, in sniffing order. A module that breaks the contract stops the registry here, naming
    what it lacks, rather than failing later on some file."""
    found = [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)]
    broken = {m.__name__: problems for m in found if (problems := contract_problems(m))}
    if broken:
        raise TypeError(
            "not a format module (analyzer.ingest.base.Format): "
            + "; ".join(f"{name}: {', '.join(p)}" for name, p in broken.items())
        )
    return tuple(sorted(found, key=lambda m: (m.SNIFF_RANK, m.FORMAT)))


def adapters() -> dict[str, ModuleType]:
    return {m.FORMAT: m for m in modules()}


@cache
def with_hook(hook: type) -> tuple[ModuleType, ...]:
    """The format modules that satisfy the protocol ``hook`` (``base.SniffsRecords``, ``base.HasDefaultRoots``, …), in
    sniffing order."""
    return tuple(m for m in modules() if isinstance(m, hook))


def names() -> tuple[str, ...]:
    return tuple(m.FORMAT for m in modules())


def agent_names() -> dict[str, str]:
    """Every name ``--agent`` accepts (formats and their aliases) -> the format."""
    out: dict[str, str] = {}
    for m in modules():
        out[m.FORMAT] = m.FORMAT
        out.update({a: m.FORMAT for a in m.ALIASES})
    return out


def default_roots() -> list[Path]:
    """The agents' own session folders (and files) that exist on this machine."""
    roots: list[Path] = []
    for m in with_hook(HasDefaultRoots):
        roots.extend(p for p in m.default_roots() if p.exists() and p not in roots)
    return roots


@cache
def agent_home_dirs() -> frozenset[str]:
    """The hidden folder names that hold agents' sessions (``.claude``, ``.codex``, ``.gemini``, ``.local``, ...),
    read off the formats' own default roots under the home folder. Discovery walks into these, where it skips other
    hidden folders (``.git``, ``.venv``): a backup or dotfiles repository keeps its sessions in them."""
    home = Path.home()
    names: set[str] = set()
    for m in with_hook(HasDefaultRoots):
        for p in m.default_roots():
            if p.is_relative_to(home):
                names.update(part for part in p.relative_to(home).parts if part.startswith("."))
    return frozenset(names)


def reads_named(name: str) -> bool:
    """Whether some format reads a file of this name whatever its suffix."""
    return any(m.reads_named(name) for m in with_hook(ReadsNamedFiles))


def companion_state(path: str, size: int, mtime_ns: int, files: Files = LOCAL) -> tuple[int, int] | None:
    """The (size, mtime) standing for ``path`` and its companion files (looked up in ``files``), or None for a plain
    file."""
    for m in with_hook(HasCompanions):
        state = m.companion_state(path, size, mtime_ns, files)
        if state is not None:
            return state
    return None


def companions_among(paths: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Of ``paths``, those read as part of another of them: companion path -> (format, the path that reads it)."""
    out: dict[str, tuple[str, str]] = {}
    for m in with_hook(HasCompanionFiles):
        for path, reader in m.companions_among(paths).items():
            out.setdefault(path, (m.FORMAT, reader))
    return out


def file_group(path: str) -> str:
    """The key of the files read together with ``path`` (``base.GroupsFiles``); ``path`` itself for a file read
    alone."""
    for m in with_hook(GroupsFiles):
        key = m.file_group(path)
        if key is not None:
            return key
    return path


def has_companions(path: str, files: Files = LOCAL) -> bool:
    return companion_state(path, 0, 0, files) is not None


def describe_file(path: Path) -> str | None:
    """A format's own reason for skipping a file it recognises by its place but does not read."""
    for m in with_hook(DescribesFiles):
        reason = m.describe_file(path)
        if reason:
            return reason
    return None
