"""The shared worker pool (``analyzer.machine.run_chunks``): every job is done once, in a spawned worker or here."""

from __future__ import annotations

import os

from analyzer.machine import run_chunks


def _square_or_die(i: int, parent: int) -> int:
    if i == 2 and os.getpid() != parent:
        os._exit(1)  # a worker killed mid-job (for memory, say): the pool breaks
    return i * i


def test_every_job_is_done_once_and_a_broken_pools_jobs_are_done_here() -> None:
    got: dict[int, list[int]] = {}
    run_chunks(_square_or_die, lambda i: (i, os.getpid()), 6, 2, lambda i, r: got.setdefault(i, []).append(r))
    assert got == {i: [i * i] for i in range(6)}


def test_one_worker_runs_every_job_here_in_order() -> None:
    order: list[int] = []
    run_chunks(_square_or_die, lambda i: (i, os.getpid()), 4, 1, lambda i, r: order.append(r))
    assert order == [0, 1, 4, 9]
