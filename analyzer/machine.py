"""What this machine lets loopscope use: one answer for every stage that starts workers or threads (ingest's
parsers, the scan's DuckDB threads, guard replays, report pages), and the bounded pool of spawned workers that the
report's replays and pages share."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

R = TypeVar("R")


def cores() -> int:
    """The cores this process may run on: its CPU affinity where the OS has one (a container or ``taskset`` limits it
    below ``os.cpu_count()``), else every core."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration, then back as it was. For a bounded job that builds
    hundreds of thousands of Python objects which live to its end (a replay chunk's sessions, calls and guard
    state): each automatic collection would walk all of them again. The cycles the job leaves are collected once
    the collector is back, so keep the job bounded."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run_chunks(
    work: Callable[..., R],
    args_of: Callable[[int], tuple[Any, ...]],
    n: int,
    workers: int,
    done: Callable[[int, R], None],
    here: Callable[[int], None] | None = None,
    initializer: Callable[[], None] | None = None,
    worker_env: dict[str, str] | None = None,
) -> None:
    """Job ``i`` of ``n`` is ``work(*args_of(i))``: ``args_of`` runs in this process (it reads the store), ``work`` in
    up to ``workers`` spawned processes (spawn, not fork: this process holds DuckDB's and polars' threads), with at
    most two jobs a worker in flight, so memory stays bounded however many jobs there are; ``done(i, result)`` as each
    finishes. With one worker or one job, and for the jobs a broken pool left (a worker killed for memory, a caller's
    script that spawn cannot re-import without an ``if __name__ == "__main__"`` guard), the jobs run here: ``here(i)``
    when given, else ``done(i, work(*args_of(i)))``. ``worker_env``: environment variables set while the pool lives
    (its workers start on demand and inherit them)."""
    left = list(range(n))
    if workers > 1 and n > 1:
        from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool
        from multiprocessing import get_context

        saved = {k: os.environ.get(k) for k in worker_env or {}}
        os.environ.update(worker_env or {})
        pending: dict[Future[R], int] = {}

        def collect(futures: set[Future[R]] | list[Future[R]]) -> None:
            for f in futures:
                i = pending.pop(f)
                done(i, f.result())
                left.remove(i)

        try:
            with ProcessPoolExecutor(
                max_workers=min(workers, n), mp_context=get_context("spawn"), initializer=initializer
            ) as pool:
                for i in range(n):
                    if len(pending) >= 2 * workers:
                        collect(wait(pending, return_when=FIRST_COMPLETED)[0])
                    pending[pool.submit(work, *args_of(i))] = i
                collect(list(pending))
        except BrokenProcessPool:
            pass
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    for i in list(left):
        if here is not None:
            here(i)
        else:
            done(i, work(*args_of(i)))
