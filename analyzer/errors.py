"""The library's exception tree, every class of it. The CLI turns each ``LoopscopeError`` into a one-line message
and a non-zero exit (its ``exit_code``)."""

from __future__ import annotations


class LoopscopeError(Exception):
    """Base class: anything a user can cause and should read as a sentence, not a traceback."""

    exit_code = 1


class StoreError(LoopscopeError):
    """The DuckDB store cannot be opened, is not a loopscope store, or DuckDB failed in it (a disk full, a damaged
    page: ``store.connection.store_errors``)."""

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


class ReportInputError(LoopscopeError):
    """A replay or calibration frame handed to the report lacks a column the report needs."""

    exit_code = 2


class ReportError(LoopscopeError):
    """The report cannot be written where asked."""


class LockTimeout(RuntimeError):
    """The live hook's state file stayed locked past its timeout (the hook then allows the call: it fails open)."""
