"""The ingest's worker processes: what they run (``parse_chunk``) and how they start. Kept apart from the pipeline,
which imports DuckDB and the store, so a spawned worker loads only the parsers: ~0.1 s of CPU less per worker."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from analyzer.ingest import formats
from analyzer.ingest.base import LOCAL, Files

if TYPE_CHECKING:
    from analyzer.ingest.parse import FileOutcome, FileTask


_progress_counter = None


def init_worker(counter: mp.sharedctypes.Synchronized[int] | None, parent: int | None = None) -> None:
    global _progress_counter
    _progress_counter = counter
    if parent is not None:
        die_with_parent(parent)
    # A worker only parses: load the parser modules now, then move every object they made out of the collector's
    # reach (``gc.freeze``), so the collections that parsing's allocations trigger stop re-scanning the interpreter's
    # and Arrow's long-lived objects (3-7% of a worker's CPU on pi and Codex files).
    import gc
    import sys

    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())
    import pyarrow.parquet  # noqa: F401

    import analyzer.ingest.parse  # noqa: F401

    gc.freeze()


class _NoPandas:
    """An import finder that refuses pandas. The spool's Arrow arrays are built from Python lists, and pyarrow then
    imports pandas, when it is installed, only to ask whether a list is a pandas object: 0.4-0.7 s of CPU a worker.
    A worker never uses pandas; pyarrow takes the refused import as "no pandas"."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"{name} is not used by loopscope's ingest workers", name=name)
        return None


def die_with_parent(parent: int) -> None:
    """Make this worker exit when the ingest that started it dies, even by ``kill -9`` (which runs no cleanup): on
    Linux the kernel sends it SIGKILL (``PR_SET_PDEATHSIG``); elsewhere, and as a second line, a daemon thread
    checks every second that the parent is still there."""
    import signal
    import sys
    import threading

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(1.0)

    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=watch, name="loopscope-parent-watch", daemon=True).start()


def _bump(n: int) -> None:
    if _progress_counter is not None:
        with _progress_counter.get_lock():
            _progress_counter.value += n


def parse_chunk(
    chunk: list[FileTask],
    spool_dir: str,
    tag: str,
    bump: Callable[[int], None] | None = None,
    full_results: bool = False,
    files: Files = LOCAL,
) -> tuple[list[FileOutcome], dict[str, list[str]]]:
    """Worker entry point: parse a chunk of files (read through ``files``: the disk, or a Spark task's bytes) into
    one Parquet spool per table."""
    from analyzer.ingest.parse import parse_file
    from analyzer.ingest.rows import RowSink

    sink = RowSink(Path(spool_dir), tag, full_results=full_results)
    outcomes = [parse_file(t, sink, bump or _bump, files) for t in chunk]
    for t, o in zip(chunk, outcomes):
        o.full_results = full_results
        if formats.has_companions(t.path, files):
            o.size = t.size  # the composite size discover() gave, so an unchanged session stays unchanged
    paths = {k: [v] for k, v in sink.close().items()}
    _give_back_memory()
    return outcomes, paths


def _give_back_memory() -> None:
    """Return the heap a parsed chunk freed to the system (glibc keeps it otherwise): a worker waiting for its next
    chunk holds ~40 MB less while the others parse."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
