"""``loopscope scan``: run the detector core over every session that is new or changed since the last scan.

The store does the set work: it picks the sessions whose fingerprint changed, sizes texts (``estimate_tokens`` in
SQL), and reads every group of sessions in one ordered pass per table. Groups are scanned in worker processes
(``analyzer.scan_batch``: the core is per-call Python, so processes, not threads) and land in transactions of whole
groups, so an interrupted scan leaves a consistent store that the next run completes. Old rows of every session to
rescan (and of sessions that disappeared) are deleted first, together with their ``scan_state``: a session is either
fully scanned or not at all.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from . import store
from .detect.core import Config
from .detect.episodes import RESULT_HEAD
from .detect.keys import estimate_tokens_sql
from .errors import StoreError
from .scan_batch import from_ipc, scan_batch, scan_packed, to_ipc

# Bump when signals or findings change meaning: every session is rescanned.
DETECTOR_VERSION = "1"
BATCH_CALLS = 12_000  # calls per group: one worker task
BATCH_SESSIONS = 1_000
LAND_CALLS = 60_000  # calls per transaction (groups are merged up to this)
MEMORY_LIMIT = "512MB"  # DuckDB's share of the scan process (sorts spill to disk beyond it)
IN_PROCESS_CALLS = 150_000  # below this, starting worker processes costs more than it saves

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
    workers: int = 1


def detector_text(config: Config) -> str:
    return f"v{DETECTOR_VERSION};{config.describe()}"


_CALLS_SQL = f"""
    SELECT c.session_id, c.seq, c.call_id, c.turn_id, c.user_turn, c.tool, hash(c.call_key) AS k, c.args,
           c.result_key, c.is_error, c.parent_call_id,
           left(c.result_text, {RESULT_HEAD}) AS result_head,
           ({estimate_tokens_sql('c.args')} + {estimate_tokens_sql('c.result_text')})::INTEGER AS est_tokens,
           b.batch
    FROM calls c JOIN _scan_work b ON c.session_id = b.session_id
    ORDER BY b.batch, c.session_id, c.seq
"""
_TURNS_SQL = f"""
    SELECT t.session_id, t.turn_id, t.turn_index, t.user_turn, t.text,
           {estimate_tokens_sql('t.text')}::INTEGER AS est_tokens, w.batch
    FROM turns t JOIN _scan_work w ON t.session_id = w.session_id
    WHERE t.role = 'assistant'
    ORDER BY w.batch, t.session_id, t.turn_index
"""
_USAGE_SQL = """
    SELECT t.session_id, t.turn_id, sum(t.total_tokens)::BIGINT AS tokens, sum(coalesce(t.cost_usd, 0)) AS cost,
           any_value(w.batch) AS batch
    FROM turns t JOIN _scan_work w ON t.session_id = w.session_id
    WHERE t.role = 'assistant' AND t.usage_counted AND t.turn_id IS NOT NULL
    GROUP BY t.session_id, t.turn_id
    ORDER BY batch, t.session_id, t.turn_id
"""


def _plan(con: duckdb.DuckDBPyConnection, config: Config, full: bool) -> tuple[list[tuple[str, str, int]], int, int]:
    """Sessions to scan as (session_id, fingerprint, calls); how many are unchanged; how many disappeared (their
    rows deleted here)."""
    det = detector_text(config)
    rows = con.execute("""
        SELECT s.session_id,
               md5(concat_ws('|', coalesce(f.content_hash, ''), coalesce(CAST(f.ingested_at AS VARCHAR), ''),
                             s.file_id, s.calls, s.turns, s.user_turns, s.total_tokens, s.cost_usd, ?)) AS fp,
               coalesce(s.calls, 0) AS calls, st.fingerprint
        FROM sessions s LEFT JOIN files f USING (file_id) LEFT JOIN scan_state st USING (session_id)
        ORDER BY s.session_id
    """, [det]).fetchall()
    todo = [(sid, fp, calls) for sid, fp, calls, old in rows if full or old != fp]
    gone = con.execute("SELECT session_id FROM scan_state WHERE session_id NOT IN (SELECT session_id FROM sessions)"
                       ).fetchall()
    stale = [sid for sid, _, _ in todo] + [r[0] for r in gone]
    if stale:
        with store.transaction(con):
            con.execute("CREATE OR REPLACE TEMP TABLE _scan_stale AS SELECT unnest(?::VARCHAR[]) AS session_id",
                        [stale])
            for table in ("signals", "text_signals", "findings", "scan_state"):
                con.execute(f"DELETE FROM {table} WHERE session_id IN (SELECT session_id FROM _scan_stale)")
            con.execute("DROP TABLE _scan_stale")
    return todo, len(rows) - len(todo), len(gone)


def _batches(todo: list[tuple[str, str, int]]) -> list[list[tuple[str, str, int]]]:
    out: list[list[tuple[str, str, int]]] = []
    cur: list[tuple[str, str, int]] = []
    n = 0
    for item in todo:
        if cur and (n + item[2] > BATCH_CALLS or len(cur) >= BATCH_SESSIONS):
            out.append(cur)
            cur, n = [], 0
        cur.append(item)
        n += item[2]
    if cur:
        out.append(cur)
    return out


def _readers(con: duckdb.DuckDBPyConnection, batches: list[list[tuple[str, str, int]]]
             ) -> Iterator[tuple[int, pa.Table, pa.Table, pa.Table]]:
    """Each group's calls, messages and usage, read in one ordered pass per table (not one scan per group), on
    cursors of their own so groups can land on ``con`` meanwhile."""
    work = pa.table({
        "session_id": pa.array([sid for b in batches for sid, _, _ in b], pa.string()),
        "batch": pa.array([i for i, b in enumerate(batches) for _ in b], pa.int32()),
    })
    cursors = []
    streams = []
    try:
        for sql in (_CALLS_SQL, _TURNS_SQL, _USAGE_SQL):
            cur = con.cursor()
            cursors.append(cur)
            cur.register("_scan_work", work)
            streams.append(_by_batch(cur.sql(sql).to_arrow_reader(batch_size=64 * 1024)))
        for i in range(len(batches)):
            tables = []
            for it in streams:
                b, table = next(it)
                if b != i:  # pragma: no cover - _by_batch yields every group in order
                    raise StoreError("scan: the store changed while it was being read; run the scan again")
                tables.append(table)
            yield i, tables[0], tables[1], tables[2]
    finally:
        for cur in cursors:
            cur.close()


def _by_batch(reader: pa.RecordBatchReader) -> Iterator[tuple[int, pa.Table]]:
    """Cut a stream sorted by group number into one table per group, yielding every group number in order (an empty
    table for a group without rows), then empty tables forever."""
    schema = reader.schema
    idx = schema.get_field_index("batch")
    pending: list[pa.RecordBatch] = []
    current = 0
    for rb in reader:
        if rb.num_rows == 0:
            continue
        runs = pc.run_end_encode(rb.column(idx))
        start = 0
        for b, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist()):
            while b > current:
                yield current, pa.Table.from_batches(pending, schema)
                pending = []
                current += 1
            pending.append(rb.slice(start, end - start))
            start = end
    while True:
        yield current, pa.Table.from_batches(pending, schema)
        pending = []
        current += 1



class _Lander:
    """Lands scanned groups in transactions of at least ``LAND_CALLS`` calls: each commit has a fixed cost, and a
    worker's group is sized for load balance, not for the store."""

    def __init__(self, con: duckdb.DuckDBPyConnection, detector: str, summary: ScanSummary, total: int,
                 progress: ProgressFn | None) -> None:
        self.con, self.detector, self.summary, self.total, self.progress = con, detector, summary, total, progress
        self.pending: list[dict[str, pa.Table]] = []
        self.pending_calls = 0
        self.done = 0

    def add(self, out: dict[str, pa.Table]) -> None:
        self.pending.append(out)
        self.pending_calls += len(out["signals"])
        if self.pending_calls >= LAND_CALLS:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        merged = {name: pa.concat_tables([o[name] for o in self.pending]) for name in self.pending[0]}
        con = self.con
        with store.transaction(con):
            for table in ("signals", "text_signals", "findings"):
                if merged[table].num_rows:
                    con.register("_scan_out", merged[table])
                    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _scan_out")
                    con.unregister("_scan_out")
            con.register("_scan_out", merged["scan_state"])
            con.execute("INSERT INTO scan_state BY NAME SELECT *, ? AS detector, now()::TIMESTAMP AS scanned_at "
                        "FROM _scan_out", [self.detector])
            con.unregister("_scan_out")
        st = merged["scan_state"]
        calls = pc.sum(st.column("calls")).as_py() or 0
        s = self.summary
        s.scanned += st.num_rows
        s.calls += calls
        s.texts += pc.sum(st.column("texts")).as_py() or 0
        s.findings += merged["findings"].num_rows
        self.done += calls
        self.pending, self.pending_calls = [], 0
        if self.progress:
            self.progress(self.done, self.total)


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
    con = store.connect(db)
    try:
        # DuckDB keeps what it read cached up to its limit (80% of RAM by default); the scan reads every result
        # once to size it, so without a cap a large store would sit in memory for nothing. Checkpointing at each
        # commit (the default past 16 MB of WAL) would rewrite the store once per group: once, at the end, is enough.
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        con.execute("SET checkpoint_threshold = '1GB'")
        summary = _scan(con, config, workers, full, progress)
    except duckdb.Error as exc:
        raise StoreError(f"scan of {db} failed: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    summary.seconds = time.perf_counter() - t0
    return summary


def _scan(con: duckdb.DuckDBPyConnection, config: Config, workers: int | None, full: bool,
          progress: ProgressFn | None) -> ScanSummary:
    todo, unchanged, removed = _plan(con, config, full)
    summary = ScanSummary(sessions=len(todo) + unchanged, unchanged=unchanged, removed=removed)
    if not todo:
        return summary
    batches = _batches(todo)
    total = sum(x[2] for x in todo)
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    lander = _Lander(con, detector_text(config), summary, total, progress)
    reader = _readers(con, batches)
    if n_workers <= 1 or total <= IN_PROCESS_CALLS or len(batches) == 1:
        summary.workers = 1
        for i, calls, turns, usage in reader:
            lander.add(scan_batch([(sid, fp) for sid, fp, _ in batches[i]], calls, turns, usage, config))
        lander.flush()
        return summary

    summary.workers = min(n_workers, len(batches))
    with ProcessPoolExecutor(max_workers=summary.workers, mp_context=mp.get_context("spawn")) as pool:
        for _ in range(summary.workers):
            pool.submit(int)  # start the workers now: they import while the store is read
        pending: set[Future] = set()
        for i, calls, turns, usage in reader:
            if i == 0:
                # the store has been read (the ordered passes run on the first group); from here DuckDB only
                # appends results, and its threads would take the cores the workers need
                con.execute("SET threads = 1")
            pending.add(pool.submit(scan_packed, [(sid, fp) for sid, fp, _ in batches[i]], to_ipc(calls),
                                    to_ipc(turns), to_ipc(usage), config))
            if len(pending) >= 2 * summary.workers:  # keep every worker busy while groups land
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    lander.add({k: from_ipc(v) for k, v in fut.result().items()})
        for fut in pending:
            lander.add({k: from_ipc(v) for k, v in fut.result().items()})
    lander.flush()
    return summary
