"""The shared worker pool (``analyzer.machine.run_chunks``): every job is done once, in a spawned worker or here."""

from __future__ import annotations

import gc
import os

from pytest import MonkeyPatch

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


class _Replayed:
    sessions = "rows"


def test_a_report_replay_chunk_runs_with_the_collector_paused_then_restores_it(monkeypatch: MonkeyPatch) -> None:
    """The report's replay chunks build and replay with the cyclic collector off (4% of a cold report's CPU at 2,400
    sessions), and leave it as they found it."""
    import analyzer.guards.replay as replay_mod
    from analyzer.analyze import _replay_chunk

    seen: list[bool] = []

    def fake_replay(corpus: object, policies: object, workers: int) -> _Replayed:
        seen.append(gc.isenabled())
        return _Replayed()

    monkeypatch.setattr(replay_mod, "build_corpus", lambda frames: frames)
    monkeypatch.setattr(replay_mod, "replay", fake_replay)
    assert gc.isenabled()
    assert _replay_chunk(None, []) == "rows"  # type: ignore[arg-type]
    assert seen == [False] and gc.isenabled()
