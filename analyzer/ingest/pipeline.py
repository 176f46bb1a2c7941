"""Ingest: find transcript files, parse the new and changed ones in parallel, load each chunk in one transaction."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from analyzer.errors import NothingToIngestError, UsageError
from analyzer.ingest import formats, land
from analyzer.ingest.base import LOCAL, Files
from analyzer.ingest.reader import ReadStats
from analyzer.ingest.rows import display_path
from analyzer.ingest.worker import init_worker, parse_chunk
from analyzer.machine import cores
from analyzer.store import connection
from analyzer.store.schema import KEYS_VERSION, old_keys

FULL_RESULTS = "full_results"  # the store's setting (loopscope_meta): results stored whole, "true" or "false"

if TYPE_CHECKING:  # the parsers (and pyarrow) load only when a file needs parsing: a no-change re-ingest skips them
    from analyzer.ingest.parse import FileOutcome, FileTask

# A chunk of files is parsed by one worker and lands in one transaction, and each landing also runs some twenty
# statements over the store (the chunk's old rows, duplicate sessions, usage winners, totals): many small chunks cost
# the main process more than the parsers (2.4 GB in 72 chunks of 32 MB: 24 s of landing; in 19 of 128 MB: 15 s),
# while a few big ones leave the pool idle at the start and the end. So each worker gets about four chunks, within
# these bounds (a big chunk's transaction spills to disk past DuckDB's memory limit rather than grow the process).
CHUNK_BYTES_MIN = 32 << 20
CHUNK_BYTES_MAX = 128 << 20
CHUNKS_PER_WORKER = 4
CHUNK_FILES = 1024
IN_PROCESS_BYTES = 8 << 20  # below this, a worker pool costs more than it saves
SKIPPED_LISTED = 20  # skipped files the ingest summary names one by one
COMPANION = "companion"  # ``files.status`` of a file read as part of another one (``Found.read_with``)


# Files in a walked folder with these suffixes are documentation, code or media, never a transcript: they are not
# read (a file named on the command line is always read, whatever its name).
NOT_TRANSCRIPTS = frozenset(
    {
        ".md",
        ".rst",
        ".txt",
        ".py",
        ".pyc",
        ".js",
        ".ts",
        ".html",
        ".css",
        ".toml",
        ".yaml",
        ".yml",
        ".ini",
        ".cfg",
        ".lock",
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".svg",
        ".webp",
        ".pdf",
        ".zip",
        ".gz",
        ".tar",
        ".duckdb",
        ".sqlite",
        ".db",
        ".wal",
    }
)


@dataclass(frozen=True)
class Found:
    path: str
    size: int
    mtime_ns: int
    composite: bool = False  # size/mtime stand for the file and its companions (``composite_state``)
    ignored: str | None = None  # why the file is not read at all (its suffix); recorded as skipped, never opened
    # the file that reads this one (an opencode session file, for its message and part files), and its format: this
    # file is recorded as read with it (``companion_outcome``), never parsed alone
    read_with: str | None = None
    read_format: str | None = None


def discover(paths: Iterable[Path], exclude: Path | None = None) -> list[Found]:
    """Every regular, non-hidden file under the given files and folders (hidden folders are skipped, but for the
    agents' own homes such as ``.claude`` and ``.codex``: ``formats.agent_home_dirs``), with its size and mtime
    (format is decided by content later). Walks with ``os.scandir`` and reuses its stat: re-ingesting an unchanged
    corpus is mostly this walk. Skips the store itself and its companions (``exclude``, its ``.wal`` and spool
    folders), so ``loopscope ingest .`` next to ``loopscope.duckdb`` does not ingest the store, and files whose suffix
    says they are not transcripts (``NOT_TRANSCRIPTS``): those are listed with ``ignored`` set, so they are recorded as
    skipped with that reason rather than vanish. A file another one found here reads as its own part
    (``formats.companions_among``: opencode's message and part files, read with their session file) has ``read_with``
    set: it is recorded as read with that file, not parsed alone."""
    own = str(Path(exclude).resolve()) if exclude is not None else None
    found: dict[str, Found] = {}
    homes = formats.agent_home_dirs()

    def add(path: str, st: os.stat_result, ignored: str | None = None) -> None:
        if own is None or not (path == own or path == own + ".wal" or path.startswith(own + ".spool-")):
            found[path] = found_file(path, st.st_size, st.st_mtime_ns, ignored)

    def walk(folder: str) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if e.name.startswith(".") and not (e.name in homes and e.is_dir()):
                continue
            try:
                if e.is_dir():
                    if not e.is_symlink():
                        walk(e.path)
                elif e.is_file():
                    path = os.path.realpath(e.path) if e.is_symlink() else e.path
                    add(path, e.stat(), not_read(e.name))
            except OSError:
                continue

    for root in paths:
        root = Path(root).expanduser()
        try:
            st = os.stat(root)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) or not os.path.lexists(root):
                raise UsageError(f"no such file or folder: {display_path(str(root))}") from None
            raise UsageError(f"cannot read {display_path(str(root))}: {exc.strerror or exc}") from None
        if stat.S_ISREG(st.st_mode):
            rp = str(root.resolve())
            add(rp, os.stat(rp))
        elif stat.S_ISDIR(st.st_mode):
            walk(str(root.resolve()))
        else:
            raise UsageError(f"{display_path(str(root))} is {_kind(st.st_mode)}, not a transcript file or folder")
    return link_companions(found)


def walked(name: str, is_dir: bool) -> bool:
    """Whether a folder walk enters this entry: not hidden, but for the agents' own homes (``.claude``, ...)."""
    return not name.startswith(".") or (is_dir and name in formats.agent_home_dirs())


def not_read(name: str) -> str | None:
    """Why a file met in a walked folder is not read at all (its suffix: ``NOT_TRANSCRIPTS``), or None."""
    ext = os.path.splitext(name)[1].lower()
    if ext in NOT_TRANSCRIPTS and not formats.reads_named(name):
        return (
            f"not read: a {ext} file is documentation, code or media, not a transcript "
            f"(name it on the command line to read it anyway)"
        )
    return None


def found_file(path: str, size: int, mtime_ns: int, ignored: str | None = None, files: Files | None = None) -> Found:
    """A listed file as discovery records it: ignored, or standing for itself and its companions (looked up in
    ``files``, the local disk by default: ``formats.companion_state``)."""
    if ignored is not None:
        return Found(path, size, mtime_ns, ignored=ignored)
    comp = formats.companion_state(path, size, mtime_ns, files or LOCAL)
    return Found(path, size, mtime_ns) if comp is None else Found(path, *comp, True)


def link_companions(found: dict[str, Found]) -> list[Found]:
    """Every listed file in path order (the order file ids follow), a file read as part of another one
    (``formats.companions_among``) marked as read with it."""
    for p, (fmt, reader) in formats.companions_among(list(found)).items():
        c = found[p]
        if c.ignored is None and not c.composite and p != reader:
            found[p] = replace(c, read_with=reader, read_format=fmt)
    return [found[k] for k in sorted(found)]


def companion_outcome(file_id: int, f: Found) -> FileOutcome:
    """The ``files`` row of a file read as part of another (``f.read_with``): status ``companion``, the format of
    the file that reads it, and that file's path as the reason. Nothing else: its rows are that file's."""
    from analyzer.ingest.parse import FileOutcome

    assert f.read_with is not None
    return FileOutcome(
        file_id,
        display_path(f.path),
        f.size,
        f.mtime_ns,
        status=COMPANION,
        format=f.read_format,
        reason=f"read with {display_path(f.read_with)}",
    )


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


@dataclass
class IngestSummary:
    files_seen: int = 0
    files_ingested: int = 0
    files_companion: int = 0  # read as part of another file (``files.status`` companion), not parsed alone
    files_unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    sessions: int = 0
    calls: int = 0
    tokens: int = 0
    errors: int = 0
    bytes: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # what the user must know about the store (a rebuild)

    @property
    def anything_read(self) -> bool:
        return self.files_ingested > 0 or self.files_unchanged > 0

    def companion_text(self) -> str:
        """What follows the count of files ingested when some were read with them: `` (+N companion files read with
        them)``; empty otherwise."""
        return f" (+{self.files_companion:,} companion files read with them)" if self.files_companion else ""

    def skipped_lines(self, limit: int = SKIPPED_LISTED) -> list[str]:
        """Every file this run skipped, as ``path: reason`` (the first ``limit``, by path), then how many more and
        where to find them: nothing found is left out silently."""
        rows = sorted(self.skipped)
        lines = [f"skipped {path}: {reason}" for path, reason in rows[:limit]]
        if len(rows) > limit:
            lines.append(
                f"… and {len(rows) - limit:,} more skipped files (all of them: SELECT path, reason FROM "
                f"files WHERE status = 'skipped')"
            )
        return lines


def clean_stale_spools(db: Path) -> None:
    """Remove the spool folders (``<store>.spool-<pid>``, beside the store) a killed run left. Called with the store's
    write lock held, so no live run is using them."""
    for stale in Path(db).parent.glob(f"{Path(db).name}.spool-*"):
        shutil.rmtree(stale, ignore_errors=True)


def chunk_bytes(total: int, workers: int) -> int:
    """The size of a chunk for ``total`` bytes to parse with ``workers`` workers: about ``CHUNKS_PER_WORKER`` a
    worker, within ``CHUNK_BYTES_MIN`` and ``CHUNK_BYTES_MAX``."""
    return max(CHUNK_BYTES_MIN, min(CHUNK_BYTES_MAX, total // (max(1, workers) * CHUNKS_PER_WORKER)))


def _chunks(tasks: Sequence[FileTask], limit: int) -> list[list[FileTask]]:
    """Group small files, up to ``limit`` bytes, so a transaction and a Parquet spool serve many; a big file is a
    chunk of its own. In file-id order, the order they land in (of a session id in several files, the lowest file id
    lands first: ``land.load_chunk``); ``by_size`` gives the order to parse them in, largest first, so two workers
    finish together."""
    chunks: list[list[FileTask]] = []
    cur: list[FileTask] = []
    size = 0
    for t in sorted(tasks, key=lambda t: t.file_id):
        if cur and (t.size >= limit or size + t.size > limit or len(cur) >= CHUNK_FILES):
            chunks.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += t.size
        if size >= limit:  # a big file: a chunk of its own
            chunks.append(cur)
            cur, size = [], 0
    if cur:
        chunks.append(cur)
    return chunks


def by_size(chunks: Sequence[list[FileTask]]) -> list[int]:
    """The chunks' indices, largest chunk first: the order to parse them in."""
    return sorted(range(len(chunks)), key=lambda i: -sum(t.size for t in chunks[i]))


def _same_content(path: str, old_hash: str | None) -> bool:
    if old_hash is None:
        return False
    stats = ReadStats()
    try:
        with open(path, "rb") as f:
            while block := f.read(4 << 20):
                stats.hasher.update(block)
    except OSError:
        return False
    return stats.content_hash == old_hash


ProgressFn = Callable[[int, int], None]  # (bytes done, bytes total)


def ingest(
    paths: Sequence[Path] | None,
    db: Path,
    workers: int | None = None,
    progress: ProgressFn | None = None,
    full_results: bool | None = None,
) -> IngestSummary:
    """Ingest every transcript under ``paths`` (default: the agents' own folders) into the store at ``db``.
    ``full_results``: store whole results (True) or clipped ones (False) from now on, re-reading the files stored the
    other way; None keeps the store's choice (clipped for a new store)."""
    t0 = time.perf_counter()
    roots = list(paths) if paths else formats.default_roots()
    if not roots:
        raise NothingToIngestError(
            "no path given and no agent session folder found (the README's formats table names each agent's folder)"
        )
    files = discover(roots, exclude=db)
    summary = IngestSummary(files_seen=len(files))
    old = connection.schema_version(db)
    con = connection.connect(db, rebuild_old=True)
    if old is not None and old < KEYS_VERSION:
        summary.notes.append(
            f"{display_path(str(db))} was written by an older loopscope (store schema v{old}, {old_keys(old)}): it was "
            f"emptied and rebuilt from the transcripts read now (files it held from other folders need ingesting "
            f"again)"
        )
    elif connection.scan_is_stale(old):
        summary.notes.append(
            f"{display_path(str(db))} was scanned by an older loopscope (store schema v{old}): its findings, signals "
            f"and calibration were dropped (older rules made them); the next scan rebuilds them for every session"
        )
    try:
        clean_stale_spools(db)
        if full_results is None:
            full_results = connection.get_setting(con, FULL_RESULTS) == "true"
        else:
            connection.set_setting(con, FULL_RESULTS, "true" if full_results else "false")
        connection.tune_for_bulk_load(con, whole_results=full_results)
        _ingest_files(con, files, db, summary, workers, progress, full_results)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    summary.seconds = time.perf_counter() - t0
    if not summary.anything_read:
        if not files:
            raise NothingToIngestError(f"no files found under {', '.join(map(str, roots))}")
        reasons = sorted({r for _, r in summary.skipped})
        raise NothingToIngestError(f"nothing could be read: {len(files)} file(s) skipped ({'; '.join(reasons[:3])})")
    return summary


def _ingest_files(
    con: duckdb.DuckDBPyConnection,
    files: list[Found],
    db: Path,
    summary: IngestSummary,
    workers: int | None,
    progress: ProgressFn | None,
    full_results: bool,
) -> None:
    known = land.file_states(con, full_results)
    ignored_before = {
        r[0]
        for r in con.execute(
            "SELECT path FROM files WHERE status = 'skipped' AND content_hash IS NULL "
            "AND starts_with(reason, 'not read: ')"
        ).fetchall()
    }
    next_id = land.next_file_id(con)
    tasks: list[FileTask] = []
    unparsed: list[FileOutcome] = []  # skipped for their suffix, or read with another file: never opened
    touched: list[tuple[int, int, int]] = []
    for f in files:
        old = known.get(display_path(f.path))
        if old is not None:
            fid, size, mtime, chash, status = old
            # (a file last recorded as not read for its suffix is looked at again when it is now to be read: named on
            # the command line; one recorded otherwise, skipped by an older loopscope, that is now read with another
            # file is recorded again as such)
            if (
                size == f.size
                and mtime == f.mtime_ns
                and (f.ignored is not None or f.path not in ignored_before)
                and (f.read_with is None or status == COMPANION)
            ):
                summary.files_unchanged += 1
                continue
            if size == f.size and not f.composite and f.read_with is None and _same_content(f.path, chash):
                touched.append((fid, f.size, f.mtime_ns))
                summary.files_unchanged += 1
                continue
        else:
            fid = next_id
            next_id += 1
        from analyzer.ingest.parse import FileOutcome, FileTask

        if f.ignored is not None:
            unparsed.append(FileOutcome(fid, f.path, f.size, f.mtime_ns, status="skipped", reason=f.ignored))
        elif f.read_with is not None:
            unparsed.append(companion_outcome(fid, f))
        else:
            tasks.append(FileTask(fid, f.path, f.size, f.mtime_ns))
    land.touch_files(con, touched)
    # A session id in several files is kept from one (``land.load_chunk``): when a file holding a kept copy is read
    # again, the files holding its other copies are read again with it, so the session is decided again among all
    # of them (the lowest file id) rather than lost or kept from a stale copy.
    listed = {display_path(f.path): f for f in files}
    again = {t.file_id for t in tasks} | {o.file_id for o in unparsed}
    for fid, path in land.other_copies(con, sorted(again)):
        f = listed.get(path)
        if f is not None and f.ignored is None and f.read_with is None and fid not in again:
            from analyzer.ingest.parse import FileTask

            tasks.append(FileTask(fid, f.path, f.size, f.mtime_ns))
            again.add(fid)
            summary.files_unchanged -= 1
    land.pending(con, [t.file_id for t in tasks])
    if unparsed:
        _land(con, unparsed, {}, summary)
    if not tasks:
        return

    total = sum(t.size for t in tasks)
    summary.bytes = total
    spool = Path(f"{db}.spool-{os.getpid()}")
    spool.mkdir(parents=True, exist_ok=True)
    try:
        n_workers = workers if workers is not None else cores()
        chunks = _chunks(tasks, chunk_bytes(total, n_workers))
        # One chunk (a single huge file, say) gains nothing from a worker: it would parse while we wait, then we
        # would load; in-process saves an interpreter's worth of memory.
        if total <= IN_PROCESS_BYTES or n_workers <= 1 or len(chunks) == 1:
            done = 0
            for i, chunk in enumerate(chunks):

                def bump(n: int) -> None:
                    nonlocal done
                    done += n
                    if progress:
                        progress(done, total)

                outcomes, paths = parse_chunk(chunk, str(spool), f"c{i}", bump, full_results)
                _land(con, outcomes, paths, summary)  # in file-id order: the lowest file id of a session lands first
        else:
            _parse_parallel(con, chunks, spool, n_workers, total, summary, progress, full_results)
    finally:
        shutil.rmtree(spool, ignore_errors=True)
    if progress:
        progress(total, total)
    row = connection.one(
        con,
        "SELECT count(*), coalesce(sum(calls), 0), coalesce(sum(total_tokens), 0) FROM sessions "
        "WHERE file_id IN (SELECT unnest(?::INTEGER[]))",
        [[t.file_id for t in tasks]],
    )
    summary.sessions, summary.calls, summary.tokens = int(row[0]), int(row[1]), int(row[2])


def _parse_parallel(
    con: duckdb.DuckDBPyConnection,
    chunks: list[list[FileTask]],
    spool: Path,
    n_workers: int,
    total: int,
    summary: IngestSummary,
    progress: ProgressFn | None,
    full_results: bool,
) -> None:
    ctx = mp.get_context("spawn")
    counter = ctx.Value("q", 0)
    with ProcessPoolExecutor(
        max_workers=min(n_workers, len(chunks)),
        mp_context=ctx,
        initializer=init_worker,
        initargs=(counter, os.getpid()),
    ) as pool:
        # parsed largest first, landed in file-id order (a chunk parsed early waits, on disk, for those before it):
        # of a session id in several files read now, the lowest file id lands first and is kept
        job: dict[Future, int] = {
            pool.submit(parse_chunk, chunks[i], str(spool), f"c{i}", None, full_results): i for i in by_size(chunks)
        }
        pending, parsed, landed = set(job), {}, 0
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            if progress:
                progress(min(counter.value, total), total)
            for fut in done:
                parsed[job[fut]] = fut.result()
            while landed in parsed:
                outcomes, paths = parsed.pop(landed)
                landed += 1
                _land(con, outcomes, paths, summary)
                for files in paths.values():
                    for p in files:
                        Path(p).unlink(missing_ok=True)


def _land(
    con: duckdb.DuckDBPyConnection, outcomes: list[FileOutcome], paths: dict[str, list[str]], summary: IngestSummary
) -> None:
    land.load_chunk(con, outcomes, paths)
    for o in outcomes:
        if o.status == "skipped":
            summary.skipped.append((o.path, o.reason or "skipped"))
        elif o.status == COMPANION:
            summary.files_companion += 1
        else:
            summary.files_ingested += 1
        summary.errors += o.error_count
