"""What this machine lets loopscope use: one answer for every stage that starts workers or threads (ingest's
parsers, the scan's DuckDB threads, guard replays, report pages)."""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on: its CPU affinity where the OS has one (a container or ``taskset`` limits it
    below ``os.cpu_count()``), else every core."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
