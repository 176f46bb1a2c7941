"""The library's exception tree. The CLI turns each of these into a one-line message and a non-zero exit."""

from __future__ import annotations


class LoopscopeError(Exception):
    """Base class: anything a user can cause and should read as a sentence, not a traceback."""

    exit_code = 1


class StoreError(LoopscopeError):
    """The DuckDB store cannot be opened or is not a loopscope store."""

    exit_code = 2


class StoreInUseError(StoreError):
    """Another process holds the store's write lock (DuckDB allows one writer)."""

    exit_code = 3


class NothingToIngestError(LoopscopeError):
    """No path given or found held a transcript that could be read."""

    exit_code = 4


class UsageError(LoopscopeError):
    """A bad option value: an unknown format, a bad date, a malformed policy or labels file."""

    exit_code = 2
