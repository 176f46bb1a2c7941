"""The main job, end to end: ingest, scan, calibrate, report. Also what the report needs beyond the store's tables:
every preset guard's replay and the latest calibration."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from analyzer.errors import UsageError
from analyzer.store.filters import SessionFilter

if TYPE_CHECKING:
    import duckdb

    from reports.render import ReportResult

    from analyzer.results import Calibration, Replay

Progress = Callable[[int, int], None]
StageProgress = Callable[[str], Progress | None]


def report_inputs(con: "duckdb.DuckDBPyConnection", flt: SessionFilter = SessionFilter(),
                  workers: int | None = None) -> tuple["Replay | None", "Calibration | None"]:
    """Every preset guard replayed over the filtered sessions, and the latest stored calibration (or a fresh one when
    ``loopscope calibrate`` never ran)."""
    from analyzer.results import Replay

    from analyzer.calibrate.recommend import calibration_for_report
    from analyzer.guards.policies import resolve
    from analyzer.guards.replay import replay_store

    result = replay_store(con, resolve(["all"]), flt, workers=workers)
    replay = Replay(result.sessions) if result.sessions.height else None
    return replay, calibration_for_report(con, flt)


def write_report(con: "duckdb.DuckDBPyConnection", out: Path, flt: SessionFilter = SessionFilter(),
                 single_file: bool = False, redact: bool = True, workers: int | None = None,
                 progress: Progress | None = None) -> "ReportResult":
    """The report of the sessions ``flt`` selects, with every preset's replay and the latest calibration. The
    result's ``seconds`` covers everything this did: the replay and calibration as well as the rendering."""
    from reports.render import render_report

    from analyzer.reporting import ReportData

    t0 = time.perf_counter()
    replay, calibration = report_inputs(con, flt, workers)
    result = render_report(ReportData(con, flt), out, replay=replay, calibration=calibration,
                           single_file=single_file, redact=redact, progress=progress)
    result.seconds = time.perf_counter() - t0
    return result


@dataclass
class AnalyzeResult:
    index: Path
    stages: list[tuple[str, str]] = field(default_factory=list)  # (stage, one-line outcome)
    seconds: float = 0.0


def analyze(
    paths: Sequence[Path] | None,
    db: Path,
    out: Path,
    flt: SessionFilter = SessionFilter(),
    single_file: bool = False,
    redact: bool = True,
    workers: int | None = None,
    full_results: bool | None = None,
    stage_progress: StageProgress | None = None,
    on_stage: Callable[[str, str], None] | None = None,
) -> AnalyzeResult:
    """Ingest ``paths`` into ``db``, scan what changed, calibrate the default base policy, write the report to
    ``out``. Each stage reports a one-line outcome through ``on_stage``; ``stage_progress(stage)`` gives a progress
    callback for that stage (or None)."""
    from analyzer.calibrate.recommend import DEFAULT_BASE, calibrate_store
    from analyzer.ingest.pipeline import ingest
    from analyzer.scan.run import scan
    from analyzer.store import db as store

    t0 = time.perf_counter()
    stages: list[tuple[str, str]] = []

    def done(stage: str, text: str) -> None:
        stages.append((stage, text))
        if on_stage:
            on_stage(stage, text)

    def progress(stage: str) -> Progress | None:
        return stage_progress(stage) if stage_progress else None

    s = ingest(paths, db, workers=workers, progress=progress("ingest"), full_results=full_results)
    done("ingest", f"{s.files_ingested:,} files ingested, {s.files_unchanged:,} unchanged, {len(s.skipped):,} "
                   f"skipped; {s.sessions:,} sessions, {s.calls:,} calls, {s.errors:,} unreadable lines"
                   + "".join(f"\n  {line}" for line in s.skipped_lines())
                   + "".join(f"\n  note: {note}" for note in s.notes))
    sc = scan(db, workers=workers, progress=progress("scan"))
    done("scan", f"{sc.scanned:,} sessions scanned ({sc.unchanged:,} unchanged), {sc.findings:,} loop episodes")
    con = store.connect(db)
    try:
        try:
            done("calibrate", calibrate_store(con, DEFAULT_BASE, flt, workers=workers).headline())
        except UsageError as exc:  # e.g. the filters match no scanned session: report what there is
            done("calibrate", f"skipped: {exc}")
        r = write_report(con, out, flt, single_file, redact, workers, progress("report"))
    finally:
        con.close()
    done("report", f"{len(r.files):,} files written")
    return AnalyzeResult(index=r.index, stages=stages, seconds=time.perf_counter() - t0)
