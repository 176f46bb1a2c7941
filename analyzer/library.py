"""The library's one object, ``Store``, as sqlite-utils has ``Database``: a loopscope store opened once, with a method
for each thing the CLI does with it (ingest, scan, replay, calibrate, export, report, and the listings' reads).

The commands work only through it: they never hold a DuckDB connection nor know DuckDB's errors, which every method
turns into the library's own (``StoreError``, one line). It sits above every stage it runs (``tests/
test_architecture.py``); the stages below keep taking a connection (``analyzer.store.connection``), which is this
object's private business.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from analyzer.errors import StoreError
from analyzer.store.connection import default_db_path, store_errors
from analyzer.store.filters import SessionFilter

if TYPE_CHECKING:
    import duckdb
    import polars as pl

    from analyzer.analyze import AnalyzeResult, StageProgress
    from analyzer.calibrate.recommend import CalibrationResult, Grid
    from analyzer.detect.stream.calls import Config
    from analyzer.evaluate.evaluation import Evaluation
    from analyzer.guards.policies import Policy
    from analyzer.guards.replay import Replay
    from analyzer.ingest.pipeline import IngestSummary
    from analyzer.ingest.show import ShownCall
    from analyzer.scan.run import ScanSummary
    from reports.render import ReportResult

Progress = Callable[[int, int], None]  # (done, total)


class Store:
    """A loopscope store: ``with Store.open(path) as store: store.findings(flt)``.

    ``Store.open`` names the DuckDB file and whether it may be written; the file is opened on first use, the one way
    every command opens it (a missing, locked, damaged or foreign file gives the same one-line ``StoreError``
    everywhere), and stays open until ``close``. Only ``ingest`` creates a store (or rebuilds one an older loopscope
    wrote); every other use of a missing file says to ingest first. ``Store.from_parquet`` is a read-only store over
    Parquet results (``export``, ``loopscope spark run``)."""

    def __init__(self, path: Path | None, write: bool, parquet: str | None = None) -> None:
        """Use ``Store.open`` or ``Store.from_parquet``."""
        self._path = path
        self._write = write
        self._parquet = parquet
        self._con: duckdb.DuckDBPyConnection | None = None

    @classmethod
    def open(cls, path: str | Path | None = None, write: bool = False) -> Store:
        """The store at ``path`` (default: ``$LOOPSCOPE_DB`` or ``./loopscope.duckdb``), read-only unless ``write``."""
        return cls(Path(path) if path is not None else default_db_path(), write)

    @classmethod
    def from_parquet(cls, root: str | Path) -> Store:
        """A read-only store whose tables are the Parquet results under ``root`` (a folder or a URL pyarrow reads)."""
        return cls(None, False, str(root))

    @property
    def path(self) -> Path | None:
        """The DuckDB file (None for Parquet results)."""
        return self._path

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._con is not None:
            con, self._con = self._con, None
            con.close()

    # -- the connection, private ---------------------------------------------------------------------------------------
    def _require_file(self, first: str = "`loopscope ingest`") -> None:
        """Refuse a DuckDB file that does not exist (only the ingest creates one), saying what to run ``first``."""
        if self._path is not None and not self._path.exists():
            raise StoreError(f"no store at {self._path}: run {first} first (or pass --db)")

    def _connection(self) -> duckdb.DuckDBPyConnection:
        """The open connection, opened on first use in the store's mode."""
        if self._con is None:
            if self._parquet is not None:
                from analyzer.store.parquet import open_dir

                self._con = open_dir(self._parquet)
            else:
                from analyzer.store.connection import connect

                assert self._path is not None
                self._require_file()
                self._con = connect(self._path, read_only=not self._write)
        return self._con

    def _file_for_a_run(self) -> Path:
        """The DuckDB file, for a stage that opens it for a long run of its own (the ingest, the scan): they tune the
        connection (a memory cap, rare checkpoints) in ways no other use wants, so this store's own connection is
        closed first (it is opened again on next use)."""
        if self._path is None:
            raise StoreError("Parquet results are read-only: ingest and scan write a DuckDB store (pass --db)")
        if not self._write:
            raise ValueError(f"{self._path} was opened read-only: use Store.open(path, write=True) to change it")
        self.close()
        return self._path

    # -- the stages ----------------------------------------------------------------------------------------------------
    @store_errors()
    def ingest(
        self,
        paths: Sequence[Path] | None = None,
        workers: int | None = None,
        progress: Progress | None = None,
        full_results: bool | None = None,
    ) -> IngestSummary:
        """Load every transcript under ``paths`` (default: the agents' own folders): ``analyzer.ingest.pipeline``."""
        from analyzer.ingest.pipeline import ingest

        return ingest(paths, self._file_for_a_run(), workers=workers, progress=progress, full_results=full_results)

    @store_errors()
    def scan(
        self,
        config: Config | None = None,
        workers: int | None = None,
        full: bool = False,
        progress: Progress | None = None,
    ) -> ScanSummary:
        """Find the loops of every session new or changed since the last scan: ``analyzer.scan.run``."""
        from analyzer.scan.run import scan

        return scan(self._file_for_a_run(), config, workers=workers, full=full, progress=progress)

    @store_errors()
    def replay(
        self,
        policies: Sequence[Policy],
        flt: SessionFilter = SessionFilter(),
        scope: str = "run",
        workers: int | None = None,
        verdicts: bool = False,
    ) -> Replay:
        """What each guard in ``policies`` would have done on the filtered sessions: ``analyzer.guards.replay``."""
        from analyzer.guards.replay import replay_store

        return replay_store(self._connection(), policies, flt, scope=scope, workers=workers, verdicts=verdicts)

    @store_errors()
    def calibrate(
        self,
        policy: str,
        flt: SessionFilter = SessionFilter(),
        labels: Path | None = None,
        target: float | None = None,
        grid: Grid | None = None,
        verify: bool = True,
        workers: int | None = None,
        enough: bool = True,
    ) -> CalibrationResult:
        """Sweep ``policy``'s thresholds and recommend a setting for ``target``: ``analyzer.calibrate.recommend``. The
        run is recorded in the store when it is open for writing."""
        from analyzer.calibrate.recommend import DEFAULT_TARGET, calibrate_store

        self._require_file("`loopscope ingest` and `loopscope scan`")
        return calibrate_store(
            self._connection(),
            policy,
            flt,
            labels,
            DEFAULT_TARGET if target is None else target,
            grid,
            verify=verify,
            save=self._write,
            workers=workers,
            enough=enough,
        )

    @store_errors()
    def evaluate(
        self,
        labels: Sequence[str | Path],
        flt: SessionFilter = SessionFilter(),
        by: Sequence[str] = (),
        policies: Sequence[Policy] | None = None,
        roots: Sequence[str | Path] = (),
        guards: bool = True,
        workers: int | None = None,
    ) -> Evaluation:
        """The findings and (``guards``) the guards, ``policies`` (default every preset), measured on the labels
        files ``labels``: ``analyzer.analyze.evaluate_labels``. ``roots``: folders a label's relative ``file`` may
        start from."""
        from analyzer.analyze import evaluate_labels, show_command

        self._require_file("`loopscope ingest` and `loopscope scan`")
        return evaluate_labels(
            self._connection(), labels, flt, by, policies, roots, guards, workers, show=show_command(self._path)
        )

    @property
    @store_errors()
    def store_id(self) -> str:
        """The store's id (``loopscope_meta`` key ``store_id``): what a person's labels are kept under. Reading it
        writes nothing: a store from before ids were kept has one derived from its first file, which its next write
        records (``analyzer.store.connection.store_id``)."""
        from analyzer.store.connection import store_id

        return store_id(self._connection())

    @store_errors()
    def export(self, out: str | Path) -> dict[str, int]:
        """Every table as Parquet under ``out`` (``analyzer.store.parquet``); rows per table."""
        from analyzer.store.parquet import export

        return export(self._connection(), out)

    @store_errors()
    def report(
        self,
        out: Path,
        flt: SessionFilter = SessionFilter(),
        single_file: bool = False,
        redact: bool = True,
        workers: int | None = None,
        progress: Progress | None = None,
    ) -> ReportResult:
        """The HTML report of the filtered sessions (``analyzer.analyze.write_report``): drawn from this store, whose
        guard replays are kept beside its file between runs (none are kept for Parquet results)."""
        from analyzer.analyze import replay_cache_path, write_report

        cache = replay_cache_path(self._path) if self._path is not None else None
        return write_report(
            self._connection(),
            out,
            flt,
            single_file=single_file,
            redact=redact,
            workers=workers,
            progress=progress,
            cache=cache,
        )

    @store_errors()
    def analyze(
        self,
        paths: Sequence[Path] | None,
        out: Path,
        flt: SessionFilter = SessionFilter(),
        single_file: bool = False,
        redact: bool = True,
        workers: int | None = None,
        full_results: bool | None = None,
        stage_progress: StageProgress | None = None,
        on_stage: Callable[[str, str], None] | None = None,
        labels: Path | None = None,
    ) -> AnalyzeResult:
        """Ingest, scan, calibrate and report in one go (with ``labels``, calibrated and evaluated on them):
        ``analyzer.analyze.analyze``."""
        from analyzer.analyze import analyze

        return analyze(
            paths,
            self._file_for_a_run(),
            out,
            flt,
            single_file=single_file,
            redact=redact,
            workers=workers,
            full_results=full_results,
            stage_progress=stage_progress,
            on_stage=on_stage,
            labels=labels,
        )

    # -- the listings' reads -------------------------------------------------------------------------------------------
    @store_errors()
    def sessions(self, flt: SessionFilter = SessionFilter(), limit: int | None = None) -> pl.DataFrame:
        from analyzer.store import queries

        return queries.sessions(self._connection(), flt, limit)

    @store_errors()
    def findings(self, flt: SessionFilter = SessionFilter(), **kw: Any) -> pl.DataFrame:
        from analyzer.store import queries

        return queries.findings(self._connection(), flt, **kw)

    @store_errors()
    def summary(self, flt: SessionFilter = SessionFilter()) -> dict[str, pl.DataFrame]:
        from analyzer.store import queries

        return queries.summary(self._connection(), flt)

    @store_errors()
    def call(self, ref: str) -> ShownCall:
        """One call with its whole result (``loopscope show``): ``analyzer.ingest.show``."""
        from analyzer.ingest.show import show_call

        return show_call(self._connection(), ref, self._path)
