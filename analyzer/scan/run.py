"""``loopscope scan``: run the detectors over every session that is new or changed since the last scan.

The store does the set work: it picks the sessions whose fingerprint changed, sizes texts (``estimate_tokens`` in
SQL), and reads each group of sessions (``analyzer.scan_io``). Each group goes through the vectorised detectors
(``analyzer.scan_batch``: polars, on every core) and lands in one transaction, so an interrupted scan leaves a
consistent store that the next run completes. Old rows of every session to rescan (and of sessions that
disappeared) are deleted first, together with their ``scan_state``: a session is either fully scanned or not at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import duckdb

from analyzer.detect.stream.calls import Config
from analyzer.errors import StoreError
from analyzer.machine import cores
from analyzer.store import connection

if TYPE_CHECKING:
    import polars as pl

# Bump when signals or findings change meaning: every session is rescanned.
# 2: findings judged (judge.py), repeat_tokens, why; 3: calls compared by action_key, drift claimed before streak;
# 4: `waiting` findings (polls of a running process), the stuck run before a success a stuck finding of its own;
#    cycles of up to 10 calls, short replies repeated 5+ times, text loops consecutive (or a repeated block);
# 5: a run of repeats whose answers all came back from earlier repeats is stuck (``judge._stale_runs``); one target's
#    failed changes with looks between are one retry (``rules.failure_key``); one message's calls are one attempt
# 6: a shell command's steps and pipeline stages split outside quotes only (an awk program's ``;``, a pattern's ``|``),
#    past an ``echo … |`` feeder, ``sudo -u USER`` and ``bash -c '…'``; a many-line inline program is the action
# 7: the action keys of schema 8 (shell wrappers); a run of 3+ repeats failing the same way is stuck wherever it ends
#    (before a success, another error, or the end); an empty read of a background task's output is a poll (waiting)
# 8: a shell command's positional words and a pattern flag's value (``git log -S X``) name its object: drift needs
#    each positional word among the other command's words (``judge.same_object``) and pattern values equal; Claude
#    Code's "String to replace not found" is a real failure of the edit; drift counts attempts (one message's
#    parallel calls are one), as failure runs do
# 9: a blind step's acknowledgement (a relative ``cd``'s silence, "Clicked at (x, y)") is no evidence of the same
#    result (``semantics.blind_step``); one change refused for permission through several tools is one blind retry
#    when a tool sends it again after its refusal (``keys.REFUSED``, ``judge._targets``); edits of one file
#    for different old texts, each "not found", are different questions (``semantics.TEXT_NOT_FOUND``); PowerShell's
#    Select-String is a search program
# 10: Claude Code's TeamDelete, refused while a teammate still runs ("1 active member(s)"), is a poll: waiting; a
#    patch (Codex's apply_patch, or run through its shell) is an edit: its files the object, its expected lines the
#    old text (``semantics.patch_parts``); two "not found" refusals quoting the same text are the same question; an
#    edit tool's call that came back an error made no change (``judge.changed_state``)
# 11: every "not found" refusal of an edit has one result key (``keys.NOT_FOUND``), and two of one file whose quotes
#    are the same text barely changed are the same question (``judge._same_text_not_found``); a failure of another
#    question between two failures of one action does not cut their run (``judge._threads``); a shell command's
#    targets are the files it names (``semantics.named_paths``), not every word with a slash; a run killed at its
#    time limit is compared by its output, not an error signature (``judge._TIMED_OUT``); a redirect into a quoted
#    path is a write; a change of another file is no fix for a change refused for its own text (``_SELF_REFUSAL``)
# 12: a read of a background task's output with ``tail -N``, or under the newer ``<project>/<session>/tasks/`` folder,
#    is a poll (``semantics.TASK_OUTPUT_READ``); a poll killed at its time limit before it printed anything waited
#    (``judge._cut_silent``); a shell action key drops label echoes (schema 13); Claude Code's Edit and MultiEdit
#    are one tool for a refused text (``semantics.EDIT_FAMILY``)
DETECTOR_VERSION = "12"
# Memory is bounded by these two, whatever the size of the store: a group's frames in the detectors (about 1.5 KB a
# call at the peak), and DuckDB's buffers, which otherwise keep every block the scan read (and the rows it landed
# since the last checkpoint) up to the cap, so that the process grew by ~1 KB a call over the whole store. Both are
# small enough that a store of one group and a store of many peak alike: 353 and 392 MB at 91k and 346k calls
# (100k calls and 192 MB gave 410 and 584 MB), in the same CPU time (each scan's blocks are read once).
BATCH_CALLS = 50_000  # calls per group, one transaction
DUCKDB_MEMORY = "64MB"
CHECKPOINT_EVERY = "64MB"  # of landed rows (~250k calls): written out as the scan goes instead of held to the end
BATCH_SESSIONS = 20_000

ProgressFn = Callable[[int, int], None]  # (calls done, calls total)


@dataclass
class ScanSummary:
    sessions: int = 0  # sessions in the store
    scanned: int = 0
    unchanged: int = 0
    removed: int = 0
    calls: int = 0
    texts: int = 0
    findings: int = 0
    seconds: float = 0.0
    workers: int = 1  # threads DuckDB may use (polars runs its own pool, one thread per core)
    # Where the time went (seconds): opening the store, planning and imports before the first group; then, summed
    # over the groups, reading them, the detectors, the waits for their rows to land (each lands while the next group
    # is detected). The benchmark prints them apart.
    startup: float = 0.0
    read: float = 0.0
    detect: float = 0.0
    land: float = 0.0
    notes: list[str] = field(default_factory=list)  # what the user should know (a store of an older schema rebuilt)


def detector_text(config: Config) -> str:
    return f"v{DETECTOR_VERSION};{config.describe()}"


class _Todo(NamedTuple):
    session_id: str
    fingerprint: str
    calls: int
    file_id: int


def _plan(con: duckdb.DuckDBPyConnection, config: Config, full: bool) -> tuple[list[_Todo], int, int]:
    """Sessions to scan, in store order (by file, as ingest wrote them); how many are unchanged; how many
    disappeared (their rows deleted here)."""
    det = detector_text(config)
    rows = con.execute(
        """
        SELECT s.session_id,
               md5(concat_ws('|', coalesce(f.content_hash, ''), coalesce(CAST(f.ingested_at AS VARCHAR), ''),
                             s.file_id, s.calls, s.turns, s.user_turns, s.total_tokens, s.cost_usd, ?)) AS fp,
               coalesce(s.calls, 0) AS calls, coalesce(s.file_id, 0) AS file_id, st.fingerprint
        FROM sessions s LEFT JOIN files f USING (file_id) LEFT JOIN scan_state st USING (session_id)
        ORDER BY file_id, s.session_id
    """,
        [det],
    ).fetchall()
    todo = [_Todo(sid, fp, calls, fid) for sid, fp, calls, fid, old in rows if full or old != fp]
    gone = con.execute(
        "SELECT session_id FROM scan_state WHERE session_id NOT IN (SELECT session_id FROM sessions)"
    ).fetchall()
    stale = [t.session_id for t in todo] + [r[0] for r in gone]
    if stale:
        with connection.transaction(con):
            con.execute(
                "CREATE OR REPLACE TEMP TABLE _scan_stale AS SELECT unnest(?::VARCHAR[]) AS session_id", [stale]
            )
            for table in ("signals", "text_signals", "findings", "scan_state"):
                con.execute(f"DELETE FROM {table} WHERE session_id IN (SELECT session_id FROM _scan_stale)")
            con.execute("DROP TABLE _scan_stale")
    return todo, len(rows) - len(todo), len(gone)


def _batches(todo: list[_Todo]) -> list[list[_Todo]]:
    """Groups of consecutive sessions (so each covers a narrow range of files) of at most ``BATCH_CALLS`` calls."""
    out: list[list[_Todo]] = []
    cur: list[_Todo] = []
    n = 0
    for item in todo:
        if cur and (n + item.calls > BATCH_CALLS or len(cur) >= BATCH_SESSIONS):
            out.append(cur)
            cur, n = [], 0
        cur.append(item)
        n += item.calls
    if cur:
        out.append(cur)
    return out


def scan(
    db: Path,
    config: Config | None = None,
    workers: int | None = None,
    full: bool = False,
    progress: ProgressFn | None = None,
) -> ScanSummary:
    """Scan every new or changed session of the store at ``db`` (``full``: every session)."""
    t0 = time.perf_counter()
    config = config or Config()
    if not Path(db).exists():
        raise StoreError(f"no store at {db}: run `loopscope ingest` first (or pass --db)")
    old = connection.schema_version(db)
    con = connection.connect(db)
    try:
        # Ingest's settings (a memory cap: DuckDB would otherwise keep up to 80% of RAM of what it read; few
        # checkpoints), with the scan's own cap and checkpoint interval: what bounds its memory.
        connection.tune_for_bulk_load(con)
        con.execute(f"SET memory_limit = '{DUCKDB_MEMORY}'")
        con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_EVERY}'")
        summary = _scan(con, config, workers, full, progress, t0)
        if connection.scan_is_stale(old):
            summary.notes.append(
                f"{db} was scanned by an older loopscope (store schema v{old}): its findings, signals and calibration "
                f"were dropped and every session scanned again"
            )
    except duckdb.Error as exc:
        raise StoreError(f"scan of {db} failed: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    summary.seconds = time.perf_counter() - t0
    return summary


def _scan(
    con: duckdb.DuckDBPyConnection,
    config: Config,
    workers: int | None,
    full: bool,
    progress: ProgressFn | None,
    t0: float,
) -> ScanSummary:
    todo, unchanged, removed = _plan(con, config, full)
    summary = ScanSummary(sessions=len(todo) + unchanged, unchanged=unchanged, removed=removed)
    if not todo:
        return summary
    from analyzer.scan import io as scan_io  # polars and the detectors load only when there is something to scan
    from analyzer.scan.batch import scan_group

    # Groups of sessions whose rows are neighbours read the fewest row groups (``scan_io.read_group``).
    connection.record_places(con)
    place = {sid: i for i, sid in enumerate(connection.in_place_order(con, [t.session_id for t in todo]))}
    todo.sort(key=lambda t: place[t.session_id])
    threads = workers if workers is not None else cores()
    con.execute(f"SET threads = {max(1, threads)}")
    summary.workers = max(1, threads)
    total = sum(t.calls for t in todo)
    detector = detector_text(config)
    words = scan_io.has_words(con)
    scan_io.compress_output(con)
    groups = _batches(todo)
    t = time.perf_counter()
    summary.startup = t - t0
    # The last group's rows land on a cursor of their own while this thread runs the detectors on the next group
    # (DuckDB writes without the GIL), so landing costs the scan only what the detectors leave uncovered; memory
    # holds one group and the rows of the one before. (Reading a group ahead as well saved little more and held a
    # third group: 1.24x the peak of 600 sessions at 2,400.) ``summary.land`` is the wait for it.
    lander = con.cursor()
    done = 0

    def landed(job: Future[dict[str, pl.DataFrame]]) -> None:
        nonlocal done
        out = job.result()
        st = out["scan_state"]
        n_calls = int(st["calls"].sum())
        summary.scanned += st.height
        summary.calls += n_calls
        summary.texts += int(st["texts"].sum())
        summary.findings += out["findings"].height
        done += n_calls
        if progress:
            progress(done, total)

    def land(out: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
        scan_io.land(lander, out, detector)
        return out

    try:
        with ThreadPoolExecutor(1) as lands:
            landing: Future[dict[str, pl.DataFrame]] | None = None
            for group in groups:
                sessions, calls, turns = scan_io.read_group(con, group, words)
                heads, turn_info = scan_io.lookups(con, group)
                t, before = time.perf_counter(), t
                summary.read += t - before
                out = scan_group(sessions, calls, turns, config, heads, turn_info)
                t, before = time.perf_counter(), t
                summary.detect += t - before
                if landing is not None:
                    landed(landing)
                    t, before = time.perf_counter(), t
                    summary.land += t - before
                landing = lands.submit(land, out)
            assert landing is not None
            landed(landing)
            t, before = time.perf_counter(), t
            summary.land += t - before
    finally:
        lander.close()
    return summary
